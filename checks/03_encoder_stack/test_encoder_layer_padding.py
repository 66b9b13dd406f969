import torch

# [inputs]
torch.manual_seed(SEED + 13)
# the test's own weights for each layer (Post-LN, then Pre-LN), and an input for it; `mask` is the visible test's
padding_cases = [_layer_case(16, 4, 32, torch.randn(2, 6, 16)) for _ in range(2)]
# [observe]
padding_runs = []
for first, case in zip((False, True), padding_cases):
    case_layer = EncoderLayer(16, 4, 32, norm_first=first).eval()
    _load_sublayers(case_layer, case["attn"], case["ffn"])
    case_x = case["x"].clone()
    with torch.no_grad():
        plain = _run("Your encoder layer", case_layer, case_x, src_key_padding_mask=mask)
        biased = _give_norms(case_layer, case["gammas"], case["betas"])
        trained = _run("Your encoder layer", case_layer, case["x"].clone(), src_key_padding_mask=mask)
    padding_runs.append((plain, case_x, biased, trained))
del case                                       # the test's own data: not an observation
# [check]
for norm_first, case, run in zip((False, True), padding_cases, padding_runs, strict=True):
    _check_layer(case, run, norm_first, mask)
