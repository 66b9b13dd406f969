import torch

# [observe]
# for every two layers of the stack: whether they hold a parameter in the same memory
shares_storage = [[any(p.data_ptr() == q.data_ptr() for p in a.parameters() for q in b.parameters())
                   for b in encoder.layers] for a in encoder.layers]
# changing one layer's weights must leave the others alone
with torch.no_grad():
    q_before = [m.self_attn.q_proj.weight.clone() for m in encoder.layers]
    encoder.layers[0].self_attn.q_proj.weight.add_(1.0)
    q_after = [m.self_attn.q_proj.weight.clone() for m in encoder.layers]
# [check]
assert all(not shares_storage[i][j] for i in range(len(shares_storage)) for j in range(i + 1, len(shares_storage))), (
    "Two of your layers share a parameter tensor: copy the whole layer with copy.deepcopy(layer)")
assert len(q_before) == len(q_after) and all(torch.equal(a, b) for a, b in zip(q_after[1:], q_before[1:], strict=True)), (
    "Updating layer 0's weights changed another layer's weights: the layers share storage. Use copy.deepcopy(layer).")
