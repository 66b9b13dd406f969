import addnorm
import torch

# [inputs]
# a padded batch drawn from the course's secret: your trained model's logits on it must be those of addnorm.Transformer
# with the weights your model reports (so the weights judged are the ones your model computes with); and sources of
# the task drawn the same way, decoded here with those weights
torch.manual_seed(SEED + 26)
probe_src, probe_tgt, probe_src_mask, probe_tgt_mask = _padded_batch(SEED + 26, batch=5, tgt_len=7)
fresh_src, fresh_answers = torch.full((100, 7), PAD), []
for row in range(100):
    fresh_digits = torch.randint(3, 13, (int(torch.randint(3, 7, ())),))
    fresh_src[row, : len(fresh_digits)], fresh_src[row, len(fresh_digits)] = fresh_digits, EOS
    fresh_answers.append(fresh_digits.flip(0).tolist() + [EOS])
# [observe]
trained.eval()
probe_logits = _logits(trained, probe_src, probe_tgt, probe_src_mask, probe_tgt_mask)
# [check]
# the held-out split decoded by addnorm.greedy_decode with your trained weights (a model that learned to copy its
# input, the target not shifted right, is named by the visible check: its loss on the next tokens stays high)
trained_model = addnorm.Transformer(task.vocab_size, task.vocab_size, **model_config)
assert {name: tuple(t.shape) for name, t in trained_weights.items()} == {
    name: tuple(t.shape) for name, t in trained_model.state_dict().items()}, (
    "The weights of your trained model do not fit addnorm.Transformer (the names and shapes of the state_dict): "
    "keep WholeTransformer's __init__ as given and write only forward")
trained_model.load_state_dict(trained_weights)
trained_model.eval()
assert isinstance(probe_logits, torch.Tensor) and probe_logits.shape == (*probe_tgt.shape, task.vocab_size) and (
    probe_logits - _logits(trained_model, probe_src, probe_tgt, probe_src_mask, probe_tgt_mask)).abs().max() < 1e-4, (
    "Your trained model's logits on the hidden test's batch are not those of addnorm.Transformer with the weights it "
    "reports: the training run is judged by those weights, so they must be the ones your forward computes with. "
    "Make the forward tests pass first.")
accuracy = _reference_exact_match(trained_model, task)
assert accuracy >= 0.8, (
    "Your trained model reverses fewer than 80 % of the held-out sequences exactly (its weights decoded greedily "
    "by addnorm.greedy_decode); a correct model reaches about 99 % with this recipe. Check the forward and loss tests.")
with torch.no_grad():
    fresh_out = addnorm.greedy_decode(trained_model, fresh_src, 7, BOS, EOS, fresh_src == PAD)
fresh_accuracy = sum(row[1 : len(answer) + 1] == answer
                     for row, answer in zip(fresh_out.tolist(), fresh_answers)) / len(fresh_answers)
assert fresh_accuracy >= 0.8, (
    "Your trained model reverses fewer than 80 % of the hidden test's sequences exactly (its weights decoded greedily "
    "by addnorm.greedy_decode); a correct model reaches about 99 %. Check the forward and loss tests.")
