import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 10)
mask_sizes = sorted(int(n) for n in torch.randint(2, 13, (3,))) + [1]     # target lengths the test asks for
# the mask at work: an attention of the test's weights, on queries of each length, given your mask
mask_weights = _state(addnorm.MultiHeadAttention(16, 4))
mask_queries = [torch.randn(2, n, 16) for n in mask_sizes]
# [observe]
def _masked_attention(weights, queries, masks):
    """addnorm's attention, with the test's weights, on each query given each mask (None where it raised)."""
    attention = addnorm.MultiHeadAttention(16, 4).eval()
    attention.load_state_dict(weights)
    outs = []
    for q, m in zip(queries, masks):
        try:
            with torch.no_grad():
                outs.append(attention(q, q, q, attn_mask=m))
        except Exception:
            outs.append(None)
    return outs


hidden_masks = [causal_mask(n) for n in mask_sizes]
masked_outs = _masked_attention(mask_weights, mask_queries, hidden_masks)
# [check]
assert isinstance(hidden_masks, list) and len(hidden_masks) == len(mask_sizes), MASK_WRONG
for n, hidden_mask in zip(mask_sizes, hidden_masks, strict=True):
    _check_hidden_mask(hidden_mask, n)
assert isinstance(masked_outs, list) and len(masked_outs) == len(mask_sizes), MASK_DTYPE
for n, q, out in zip(mask_sizes, mask_queries, masked_outs, strict=True):
    _check_mask_at_work(mask_weights, q, out)
