import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 10)
tokens = torch.randn(4, 5)
# [observe]
flat_block = AddNorm(5)
classes = [(c.__module__, c.__qualname__) for m in flat_block.modules() for c in type(m).__mro__]
flat_out = _run("AddNorm(5)(x, sublayer) with a 2-D x of shape (4, 5)", flat_block, tokens, lambda h: 0 * h,
                hint="AddNorm must work for any leading shape (..., d_model), e.g. a 2-D (tokens, d_model) input.")
# [check]
assert (addnorm.AddNorm.__module__, addnorm.AddNorm.__qualname__) not in classes, (
    "Your AddNorm reuses addnorm.AddNorm, the library's version of the answer: write the connection yourself")
assert isinstance(flat_out, torch.Tensor) and tuple(flat_out.shape) == (4, 5), (
    "AddNorm must work for any leading shape (..., d_model), e.g. a 2-D (tokens, d_model) input")
