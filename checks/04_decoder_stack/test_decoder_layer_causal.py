import torch

# [inputs]
torch.manual_seed(SEED + 11)
# for each form (Post-LN, Pre-LN): the test's own weights for the layer's sublayers, a target and a memory, then
# other targets and memories (other lengths) the same layer is called on
causal_cases = [_with_others(_layer_case(16, 4, 32, torch.randn(2, 6, 16), torch.randn(2, 5, 16)), [
    (torch.randn(2, 3, 16), torch.randn(2, 5, 16)), (torch.randn(1, 9, 16), torch.randn(1, 2, 16)),
    (torch.randn(2, 6, 16), torch.randn(2, 5, 16))]) for _ in range(2)]
# [observe]
def _called_again(layer, pairs):
    """The same layer's outputs on each (target, memory) pair, None where it raised."""
    outs = []
    for x_again, memory_again in pairs:
        try:
            outs.append(layer(x_again.clone(), memory_again.clone()))
        except Exception:
            outs.append(None)
    return outs


causal_runs = []
for causal_first, causal_case in zip((False, True), causal_cases):
    causal_layer = DecoderLayer(16, 4, 32, norm_first=causal_first).eval()
    _load_sublayers(causal_layer, causal_case["attn"], causal_case["cross"], causal_case["ffn"])
    with torch.no_grad():
        causal_out = _run("Your decoder layer", causal_layer, causal_case["x"].clone(), causal_case["memory"].clone(),
                          hint=_SHAPES)
        # the same layer again: the same target and memory, then other lengths
        causal_calls = _called_again(causal_layer, [(causal_case["x"], causal_case["memory"])] + causal_case["others"])
    causal_runs.append((causal_out, causal_calls))
del causal_case, causal_layer                  # the test's own data: not an observation
# [check]
assert isinstance(causal_runs, list) and len(causal_runs) == 2, CAUSAL_DIFFERS
for norm_first, case, (out, calls) in zip((False, True), causal_cases, causal_runs, strict=True):
    _check_causal(case, out, norm_first)
    _check_calls(case, calls, norm_first)
