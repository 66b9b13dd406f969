import torch

# [observe]
hidden_masks = [causal_mask(n) for n in (1, 2, 9)]
# [check]
for n, hidden_mask in zip((1, 2, 9), hidden_masks, strict=True):
    _check_mask(hidden_mask, torch.ones(n, n, dtype=torch.bool).triu(diagonal=1))
