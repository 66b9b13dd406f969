import addnorm
import torch

# [observe]
classes = [(c.__module__, c.__qualname__) for c in type(ln).__mro__]
requires_grads = [ln.weight.requires_grad, ln.bias.requires_grad]
weight3 = LayerNorm(3).weight
# [check]
library = {(cls.__module__, cls.__qualname__) for cls in (addnorm.LayerNorm, addnorm.RMSNorm)}
assert not library & set(classes), (
    "Your LayerNorm is (a subclass of) addnorm.LayerNorm, the library's version of the answer: write it yourself")
assert requires_grads == [True, True], "weight and bias must be trainable (requires_grad=True)"
assert isinstance(weight3, torch.Tensor) and tuple(weight3.shape) == (3,), "the parameters' shape must follow d_model"
