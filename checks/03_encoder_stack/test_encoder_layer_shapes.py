import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 10)
x_other, x_single = torch.randn(3, 5, 24), torch.randn(1, 1, 24)
# [observe]
other_layer = EncoderLayer(24, 3, 40, norm_first=True)
library_layer = isinstance(other_layer, addnorm.EncoderLayer)
out_other = _run("EncoderLayer(24, 3, 40, norm_first=True)(x) with x of shape (3, 5, 24)", other_layer, x_other)
out_single = _run("EncoderLayer(24, 3, 40, norm_first=True)(x) with x of shape (1, 1, 24), a single token",
                  other_layer, x_single)
# [check]
assert not library_layer, (
    "Your EncoderLayer is (a subclass of) addnorm.EncoderLayer, the library's version: write it yourself")
assert isinstance(out_other, torch.Tensor) and tuple(out_other.shape) == (3, 5, 24), (
    "EncoderLayer(24, 3, 40) must work for other sizes too")
assert isinstance(out_single, torch.Tensor) and tuple(out_single.shape) == (1, 1, 24), (
    "EncoderLayer must work for a single token")
