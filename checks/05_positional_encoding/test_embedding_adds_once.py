import torch
from torch import nn

# [inputs]
sevens = torch.full((1, max_len), 7)
# [observe]
n_params = sum(p.numel() for p in emb.parameters())
learned_table = any(isinstance(m, nn.Embedding) and m.num_embeddings == max_len for m in emb.modules())
with torch.no_grad():
    full_length = emb(sevens)
# [check]
right = _encoding(max_len, d_model)                    # the right table: a wrong sinusoidal_encoding costs here too
expected = (right[1:10] - right[:1]).expand_as(moved)
assert torch.allclose(moved, expected, atol=1e-4), (
    "The same token at positions p and 0 should differ by PE[p] − PE[0], the rows of the sinusoidal table; yours "
    f"differ from that by up to {(moved - expected).abs().max().item():.3g}. If sinusoidal_encoding fails its "
    "tests, fix it first: your Embedding uses it.")
assert n_params == vocab_size * d_model, (
    f"Your Embedding has {n_params - vocab_size * d_model} trainable numbers besides the token table: the "
    "sinusoidal encoding is fixed. Store it with self.register_buffer(...), not nn.Parameter.")
assert not learned_table, (
    "You use a learned position table (nn.Embedding(max_len, d_model)): this exercise asks for the fixed sinusoidal one")
# a sequence as long as max_len uses every row of the table, each once
assert isinstance(full_length, torch.Tensor) and tuple(full_length.shape) == (1, max_len, d_model), (
    f"Embedding must map (1, {max_len}) to (1, {max_len}, {d_model}), got {getattr(full_length, 'shape', type(full_length).__name__)}")
full_length = full_length.double()
assert torch.allclose(full_length[:, 1:] - full_length[:, :1], (right[1:] - right[:1])[None], atol=1e-4), (
    "For a sequence of length max_len the positions are wrong: position p must get row p of the table, for every "
    "p < max_len")
