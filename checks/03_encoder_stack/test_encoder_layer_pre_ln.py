import torch
import torch.nn.functional as F

# [inputs]
torch.manual_seed(SEED + 12)
# the test's own weights for the layer's sublayers, and trained-looking γ and β for its LayerNorms
pre_cases = [_layer_case(32, 4, 64, x), _layer_case(24, 2, 48, torch.randn(3, 9, 24))]
x_zero = torch.randn(2, 5, 24) * 3 + 1
zero_weights = _constant_weights(24, 2, 48)                    # every weight of the sublayers zero: they output zeros
torch.manual_seed(SEED + 22)
x_unit = F.layer_norm(torch.randn(4, 8, 64), (64,))            # normalized already: LN(x_unit) ≈ x_unit
p_pre = 0.6
# one sublayer at a time outputs BIG everywhere, the other zeros
big_weights = [_constant_weights(64, 4, 64, name, BIG) for name in SUBLAYERS]
# [observe]
layer_runs = []
for case in pre_cases:
    case_layer = EncoderLayer(case["d_model"], case["num_heads"], case["d_ff"], norm_first=True).eval()
    _load_sublayers(case_layer, case["attn"], case["ffn"])
    case_x = case["x"].clone()
    with torch.no_grad():
        plain = _run("Your encoder layer", case_layer, case_x)
        biased = _give_norms(case_layer, case["gammas"], case["betas"])
        trained = _run("Your encoder layer", case_layer, case["x"].clone())
    layer_runs.append((plain, case_x, biased, trained))
del case                                       # the test's own data: not an observation
zero_layer = EncoderLayer(24, 2, 48, norm_first=True).eval()
_load_sublayers(zero_layer, *zero_weights)
with torch.no_grad():
    zero_out = _run("Your encoder layer", zero_layer, x_zero.clone())
dropout_runs = []
for attn_weights, ffn_weights in big_weights:
    dropout_layer = EncoderLayer(64, 4, 64, dropout=p_pre, norm_first=True).train()
    _load_sublayers(dropout_layer, attn_weights, ffn_weights)
    with torch.no_grad():
        dropout_runs.append(_run("Your Pre-LN layer in training mode", dropout_layer, x_unit.clone()))
del attn_weights, ffn_weights
# [check]
for case, run in zip(pre_cases, layer_runs, strict=True):
    _check_layer(case, run, norm_first=True)
# the identity path: with sublayers that output zeros, a Pre-LN layer returns its input exactly
assert isinstance(zero_out, torch.Tensor) and zero_out.shape == x_zero.shape, NOT_A_TENSOR
assert torch.allclose(zero_out, x_zero, atol=1e-5), (
    "With sublayers that output zeros a Pre-LN layer must return x unchanged: the residual stream is an "
    "identity path. Yours changes it: is a residual forgotten, or the stream itself normalized?")
# training mode: dropout on each sublayer's output, at the rate given
for name, out_dropped in zip(SUBLAYERS, dropout_runs, strict=True):
    _check_dropout(out_dropped, x_unit, True, p_pre, name)
