import torch

# [inputs]
torch.manual_seed(SEED + 12)
# the layer cases (the test's own weights, trained-looking γ and β), sublayers that output zeros, dropout in training
layer_cases, zero_case, dropout_case = _form_inputs(False, x, memory)
# [observe]
layer_runs = []
for case in layer_cases:
    case_layer = DecoderLayer(case["d_model"], case["num_heads"], case["d_ff"], norm_first=False).eval()
    _load_sublayers(case_layer, case["attn"], case["cross"], case["ffn"])
    case_x, case_memory = case["x"].clone(), case["memory"].clone()
    with torch.no_grad():
        plain = _run("Your decoder layer", case_layer, case_x, case_memory, hint=_SHAPES)
        biased = _give_norms(case_layer, case["gammas"], case["betas"])
        trained = _run("Your decoder layer", case_layer, case["x"].clone(), case["memory"].clone(), hint=_SHAPES)
    layer_runs.append((plain, case_x, case_memory, biased, trained))
try:                                           # your causal_mask: named when the layer is wrong and it is too
    own_masks = [causal_mask(case["x"].shape[1]) for case in layer_cases]
except Exception:
    own_masks = []
del case                                       # the test's own data: not an observation
zero_layer = DecoderLayer(24, 3, 40, norm_first=False).eval()
_load_sublayers(zero_layer, *zero_case["weights"])
with torch.no_grad():
    zero_out = _run("Your decoder layer", zero_layer, zero_case["x"].clone(), zero_case["memory"].clone(), hint=_SHAPES)
dropout_runs = []
for weights in dropout_case["weights"]:
    dropout_layer = DecoderLayer(64, 4, 64, dropout=dropout_case["p"], norm_first=False).train()
    _load_sublayers(dropout_layer, *weights)
    with torch.no_grad():
        dropout_runs.append(_run("Your Post-LN layer in training mode", dropout_layer, dropout_case["x"].clone(),
                                 dropout_case["memory"].clone()))
del weights
# [check]
_same_input(x, x_in, X_IN_PLACE)
_same_input(memory, memory_in, MEMORY_IN_PLACE)
_check_form(False, layer_cases, layer_runs, own_masks, zero_case, zero_out, dropout_case, dropout_runs)
