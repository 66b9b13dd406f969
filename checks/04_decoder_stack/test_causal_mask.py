import torch

# [inputs]
torch.manual_seed(SEED + 10)
mask_sizes = [1] + sorted(int(n) for n in torch.randint(2, 13, (3,)))     # target lengths the test asks for
# [observe]
hidden_masks = [causal_mask(n) for n in mask_sizes]
# [check]
assert isinstance(hidden_masks, list) and len(hidden_masks) == len(mask_sizes), MASK_WRONG
for n, hidden_mask in zip(mask_sizes, hidden_masks, strict=True):
    _check_hidden_mask(hidden_mask, n)
