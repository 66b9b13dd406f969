import torch

# [inputs]
torch.manual_seed(SEED + 11)
# the test's own weights for the layer's sublayers, a target and a memory
causal_case = _layer_case(16, 4, 32, torch.randn(1, 6, 16), torch.randn(1, 5, 16))
first_changed = causal_case["x"].clone()
first_changed[:, 0] = torch.randn(16)                             # a new token at position 0
memory_end_changed = causal_case["memory"].clone()
memory_end_changed[:, -1] = torch.randn(16) * 3                  # new content at the last source position
# [observe]
causal_layer = DecoderLayer(16, 4, 32).eval()
_load_sublayers(causal_layer, causal_case["attn"], causal_case["cross"], causal_case["ffn"])
with torch.no_grad():
    causal_out = _run("Your decoder layer", causal_layer, causal_case["x"].clone(), causal_case["memory"].clone(),
                      hint=_SHAPES)
    causal_first = causal_layer(first_changed, causal_case["memory"].clone())
    causal_memory_end = causal_layer(causal_case["x"].clone(), memory_end_changed)
# [check]
assert not torch.allclose(causal_out[:, 1:], causal_first[:, 1:], atol=1e-5), (
    "Later positions ignore position 0: your mask blocks the past too (or is inverted). Position i must see "
    "every position j <= i.")
assert not torch.allclose(causal_out[:, 0], causal_memory_end[:, 0], atol=1e-5), (
    "Target position 0 ignores the last source position: the causal mask belongs to the self-attention only; "
    "cross-attention sees the whole memory (call self.cross_attn(h, memory, memory) without attn_mask).")
