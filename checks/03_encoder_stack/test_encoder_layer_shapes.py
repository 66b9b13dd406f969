import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 10)
x_other, x_single = torch.randn(3, 5, 24), torch.randn(1, 1, 24)
# for each form (Post-LN, Pre-LN): the test's weights, an input, and other inputs the same layer is called on later
shape_cases = [_with_others(_layer_case(24, 3, 40, torch.randn(3, 5, 24)), [
    (torch.randn(1, 1, 24), None), (torch.randn(2, 9, 24), _padding(2, 9)), (torch.randn(3, 5, 24), None)])
    for _ in range(2)]
# [observe]
def _called_again(layer, pairs):
    """The same layer's outputs on each (input, padding mask) pair, None where it raised."""
    outs = []
    for x_again, mask_again in pairs:
        try:
            outs.append(layer(x_again.clone(), src_key_padding_mask=mask_again))
        except Exception:
            outs.append(None)
    return outs


other_layer = EncoderLayer(24, 3, 40, norm_first=True)
library_layer = isinstance(other_layer, addnorm.EncoderLayer)
out_other = _run("EncoderLayer(24, 3, 40, norm_first=True)(x) with x of shape (3, 5, 24)", other_layer, x_other)
out_single = _run("EncoderLayer(24, 3, 40, norm_first=True)(x) with x of shape (1, 1, 24), a single token",
                  other_layer, x_single)
shape_runs = []
for shape_first, shape_case in zip((False, True), shape_cases):
    shape_layer = EncoderLayer(24, 3, 40, norm_first=shape_first).eval()
    _load_sublayers(shape_layer, shape_case["attn"], shape_case["ffn"])
    shape_x = shape_case["x"].clone()
    with torch.no_grad():
        shape_plain = _run("Your encoder layer", shape_layer, shape_x)
        # the same layer again: the same input, then other sizes and a padding mask
        shape_calls = _called_again(shape_layer, [(shape_case["x"], None)] + shape_case["others"])
        shape_biased = _give_norms(shape_layer, shape_case["gammas"], shape_case["betas"])
        shape_trained = _run("Your encoder layer", shape_layer, shape_case["x"].clone())
    shape_runs.append(((shape_plain, shape_x, shape_biased, shape_trained), shape_calls))
del shape_case, shape_layer                    # the test's own data: not an observation
# [check]
assert not library_layer, (
    "Your EncoderLayer is (a subclass of) addnorm.EncoderLayer, the library's version: write it yourself")
assert isinstance(out_other, torch.Tensor) and tuple(out_other.shape) == (3, 5, 24), (
    "EncoderLayer(24, 3, 40) must work for other sizes too")
assert isinstance(out_single, torch.Tensor) and tuple(out_single.shape) == (1, 1, 24), (
    "EncoderLayer must work for a single token")
# the layer's values on the test's weights (its two LayerNorms each with its own γ and β), and again, at other sizes
assert isinstance(shape_runs, list) and len(shape_runs) == 2, DIFFERS[False]
for norm_first, case, (run, calls) in zip((False, True), shape_cases, shape_runs, strict=True):
    _check_layer(case, run, norm_first)
    _check_calls(case, calls, norm_first)
