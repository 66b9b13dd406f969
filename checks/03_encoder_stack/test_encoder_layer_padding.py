import torch

# [inputs]
torch.manual_seed(SEED + 13)
# the test's own weights for each layer (Post-LN, then Pre-LN), and an input for it; `mask` is the visible test's;
# then other inputs and other masks the same layer is called on
padding_cases = [_with_others(_layer_case(16, 4, 32, torch.randn(2, 6, 16)), [
    (torch.randn(3, 8, 16), _padding(3, 8)), (torch.randn(2, 6, 16), None), (torch.randn(2, 6, 16), _padding(2, 6))],
    mask) for _ in range(2)]
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


padding_runs = []
for first, case in zip((False, True), padding_cases):
    case_layer = EncoderLayer(16, 4, 32, norm_first=first).eval()
    _load_sublayers(case_layer, case["attn"], case["ffn"])
    case_x = case["x"].clone()
    with torch.no_grad():
        plain = _run("Your encoder layer", case_layer, case_x, src_key_padding_mask=mask)
        calls = _called_again(case_layer, [(case["x"], mask)] + case["others"])
        biased = _give_norms(case_layer, case["gammas"], case["betas"])
        trained = _run("Your encoder layer", case_layer, case["x"].clone(), src_key_padding_mask=mask)
    padding_runs.append(((plain, case_x, biased, trained), calls))
del case, case_layer                           # the test's own data: not an observation
# [check]
assert isinstance(padding_runs, list) and len(padding_runs) == 2, NO_MASK
for norm_first, case, (run, calls) in zip((False, True), padding_cases, padding_runs, strict=True):
    _check_layer(case, run, norm_first, mask)
    _check_calls(case, calls, norm_first)
