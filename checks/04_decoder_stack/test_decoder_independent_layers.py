import torch

# [observe]
# changing one layer's weights must leave the others alone
with torch.no_grad():
    k_before = [m.cross_attn.k_proj.weight.clone() for m in decoder.layers]
    decoder.layers[0].cross_attn.k_proj.weight.add_(1.0)
    k_after = [m.cross_attn.k_proj.weight.clone() for m in decoder.layers]
# [check]
assert len(k_before) == len(k_after) and all(torch.equal(a, b) for a, b in zip(k_after[1:], k_before[1:], strict=True)), (
    "Updating layer 0's weights changed another layer's weights: the layers share storage. Use copy.deepcopy(layer).")
