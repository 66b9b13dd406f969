import addnorm
import torch

# [check]
# the held-out split decoded by addnorm.greedy_decode with your trained weights (a model that learned to copy its
# input, the target not shifted right, is named by the visible check: its loss on the next tokens stays high)
trained_model = addnorm.Transformer(task.vocab_size, task.vocab_size, **model_config)
assert {name: tuple(t.shape) for name, t in trained_weights.items()} == {
    name: tuple(t.shape) for name, t in trained_model.state_dict().items()}, (
    "The weights of your trained model do not fit addnorm.Transformer (the names and shapes of the state_dict): "
    "keep WholeTransformer's __init__ as given and write only forward")
trained_model.load_state_dict(trained_weights)
accuracy = _reference_exact_match(trained_model, task)
assert accuracy >= 0.8, (
    f"Your trained model reverses only {accuracy:.1%} of the held-out sequences exactly (its weights decoded greedily "
    f"by addnorm.greedy_decode); a correct model reaches about 99 % with this recipe. Check the forward and loss tests.")
