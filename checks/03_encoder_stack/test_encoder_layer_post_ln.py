import torch
import torch.nn.functional as F

# [inputs]
torch.manual_seed(SEED + 11)
# the test's own weights for the layer's sublayers, and trained-looking γ and β for its LayerNorms
post_cases = [_layer_case(32, 4, 64, x), _layer_case(24, 2, 48, torch.randn(3, 9, 24))]
x_zero = torch.randn(2, 5, 24) * 3 + 1
zero_weights = _constant_weights(24, 2, 48)                    # every weight of the sublayers zero: they output zeros
torch.manual_seed(SEED + 21)
x_unit = F.layer_norm(torch.randn(4, 8, 64), (64,))            # normalized already: LN(x_unit) ≈ x_unit
p_post = 0.3
# one sublayer at a time outputs BIG everywhere, the other zeros
big_weights = [_constant_weights(64, 4, 64, name, BIG) for name in SUBLAYERS]
# [observe]
layer_runs = []
for case in post_cases:
    case_layer = EncoderLayer(case["d_model"], case["num_heads"], case["d_ff"], norm_first=False).eval()
    _load_sublayers(case_layer, case["attn"], case["ffn"])
    case_x = case["x"].clone()
    with torch.no_grad():
        plain = _run("Your encoder layer", case_layer, case_x)
        biased = _give_norms(case_layer, case["gammas"], case["betas"])
        trained = _run("Your encoder layer", case_layer, case["x"].clone())
    layer_runs.append((plain, case_x, biased, trained))
del case                                       # the test's own data: not an observation
zero_layer = EncoderLayer(24, 2, 48, norm_first=False).eval()
_load_sublayers(zero_layer, *zero_weights)
with torch.no_grad():
    zero_out = _run("Your encoder layer", zero_layer, x_zero.clone())
dropout_runs = []
for attn_weights, ffn_weights in big_weights:
    dropout_layer = EncoderLayer(64, 4, 64, dropout=p_post, norm_first=False).train()
    _load_sublayers(dropout_layer, attn_weights, ffn_weights)
    with torch.no_grad():
        dropout_runs.append(_run("Your Post-LN layer in training mode", dropout_layer, x_unit.clone()))
del attn_weights, ffn_weights
# [check]
for case, run in zip(post_cases, layer_runs, strict=True):
    _check_layer(case, run, norm_first=False)
# with every weight of the sublayers set to zero, both sublayers output zeros: Post-LN must return LN(x)
assert isinstance(zero_out, torch.Tensor) and zero_out.shape == x_zero.shape, NOT_A_TENSOR
assert zero_out.abs().max() > 1e-3, (
    "With sublayers that output zeros your Post-LN layer outputs zeros: the residual is forgotten, so the "
    "input never reaches the output. Post-LN is LN(x + Sublayer(x)).")
assert torch.allclose(zero_out, F.layer_norm(x_zero, (24,), eps=1e-5), atol=1e-4), (
    "With sublayers that output zeros a Post-LN layer must return LN(x) (normalizing twice changes nothing)")
# training mode: dropout on each sublayer's output, at the rate given
for name, out_dropped in zip(SUBLAYERS, dropout_runs, strict=True):
    _check_dropout(out_dropped, x_unit, False, p_post, name)
