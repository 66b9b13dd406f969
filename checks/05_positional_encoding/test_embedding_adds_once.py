import torch
from torch import nn

# [inputs]
sevens = torch.full((1, max_len), 7)
# an Embedding of a size drawn from the course's secret, with the test's token table in self.tokens: its whole output
# against the formula in float64, at two lengths and twice on the same tokens (one instance); then one SGD step on
# every parameter the module holds (through a parent module, as a training loop finds them), with an upstream
# gradient `once_probe`: the token table must move by the reference gradient and the encoding not at all
torch.manual_seed(SEED + 16)
once_vocab, once_d, once_len = int(torch.randint(10, 50, ())), 2 * int(torch.randint(2, 17, ())), int(torch.randint(12, 40, ()))
once_table = torch.randn(once_vocab, once_d)
once_short = torch.randint(0, once_vocab, (3, int(torch.randint(2, once_len // 2, ()))))
once_full = torch.randint(0, once_vocab, (2, once_len))
once_probe = torch.randn(2, once_len, once_d)
once_lr = 0.25
# [observe]
def _embedded(module, tokens):
    """module(tokens), or None when it raises (a module that keeps something from its first call fails at another length)."""
    try:
        return module(tokens)
    except Exception:
        return None


with torch.no_grad():
    full_length = _embedded(emb, sevens)
once_emb = Embedding(once_vocab, once_d, once_len)
with torch.no_grad():
    once_emb.tokens.weight.copy_(once_table)
    once_runs = (once_emb(once_short), _embedded(once_emb, once_full), _embedded(once_emb, once_short))
once_holder = nn.ModuleList([once_emb])
once_step = torch.optim.SGD(once_holder.parameters(), lr=once_lr)
once_out = _embedded(once_emb, once_full)
if isinstance(once_out, torch.Tensor) and once_out.requires_grad:   # else nothing moves: the check says why
    (once_out * once_probe).sum().backward()
    once_step.step()
with torch.no_grad():
    once_trained = (_embedded(once_emb, once_short), _embedded(once_emb, once_full))
del once_emb, once_holder, once_step, once_out                  # not data: not observations
# [check]
right = _encoding(max_len, d_model)                    # the right table: a wrong sinusoidal_encoding costs here too
expected = (right[1:10] - right[:1]).expand_as(moved)
assert torch.allclose(moved, expected, atol=1e-4), (
    "The same token at positions p and 0 should differ by PE[p] − PE[0], the rows of the sinusoidal table; yours "
    "do not. If sinusoidal_encoding fails its tests, fix it first: your Embedding uses it.")
# a sequence as long as max_len uses every row of the table, each once
assert isinstance(full_length, torch.Tensor) and tuple(full_length.shape) == (1, max_len, d_model), (
    "Embedding must map (1, max_len) token ids to (1, max_len, d_model) vectors, at every call of the same module "
    "(keep nothing from an earlier call)")
full_length = full_length.double()
assert torch.allclose(full_length[:, 1:] - full_length[:, :1], (right[1:] - right[:1])[None], atol=1e-4), (
    "For a sequence of length max_len the positions are wrong: position p must get row p of the table, for every "
    "p < max_len")
# the whole output, against the formula, on the test's token table
once_pe = _encoding(once_len, once_d)
once_scale = once_d ** 0.5
once_reference = lambda table, tokens, pe: table.double()[tokens] * once_scale + pe[: tokens.shape[1]]
assert isinstance(once_runs, tuple) and len(once_runs) == 3 and all(
    isinstance(out, torch.Tensor) and tuple(out.shape) == (*tokens.shape, once_d)
    for out, tokens in zip(once_runs, (once_short, once_full, once_short))), (
    "Embedding must map (batch, seq) token ids to (batch, seq, d_model) vectors at every call of the same module, "
    "for every seq <= max_len (keep nothing from an earlier call)")
assert torch.equal(once_runs[0], once_runs[2]), (
    "Your Embedding gives different outputs for the same tokens at two calls: it has no dropout and keeps nothing "
    "from an earlier call")
for out, tokens in ((once_runs[0], once_short), (once_runs[1], once_full)):
    out = out.double()
    assert not torch.allclose(out, once_reference(once_table, tokens, 2 * once_pe), atol=1e-4, rtol=1e-5), (
        "The positional encoding is added twice: add it exactly once")
    assert not torch.allclose(out, once_reference(once_table, tokens, 0 * once_pe), atol=1e-4, rtol=1e-5), (
        "No positional encoding is added: add the encoding of positions 0 … seq−1 to the scaled token embeddings")
    assert torch.allclose(out, once_reference(once_table, tokens, once_pe), atol=1e-4, rtol=1e-5), (
        "Your Embedding's output differs from self.tokens(tokens) · √d_model + PE[0 … seq−1] by more than 1e-4, for a "
        "size the notebook does not show (the token table is the test's, put into self.tokens): add rows 0 … seq−1 "
        "of the table, once, at every length")
# one SGD step: the reference gradient of sum(output · probe) moves the token rows; the encoding is fixed
once_gradient = torch.zeros(once_vocab, once_d, dtype=torch.float64).index_add_(
    0, once_full.reshape(-1), once_probe.double().reshape(-1, once_d) * once_scale)
once_moved = once_table.double() - once_lr * once_gradient
once_pe_trained = once_pe.clone()
once_pe_trained[:once_len] -= once_lr * once_probe.double().sum(0)
assert isinstance(once_trained, tuple) and len(once_trained) == 2 and all(
    isinstance(out, torch.Tensor) and tuple(out.shape) == (*tokens.shape, once_d)
    for out, tokens in zip(once_trained, (once_short, once_full))), (
    "After a training step, Embedding must still map (batch, seq) token ids to (batch, seq, d_model) vectors")
for out, tokens in ((once_trained[0], once_short), (once_trained[1], once_full)):
    out = out.double()
    assert not torch.allclose(out, once_reference(once_moved, tokens, once_pe_trained), atol=1e-3, rtol=1e-4), (
        "Your positional encoding is a trained parameter: one training step changed it. The sinusoidal encoding is "
        "fixed: store it with self.register_buffer(...), not nn.Parameter.")
    assert not torch.allclose(out, once_reference(once_table, tokens, once_pe), atol=1e-3, rtol=1e-4), (
        "One training step did not change your Embedding's output: the token table gets no gradient. Use "
        "self.tokens(tokens) as it is (no .detach(), no torch.no_grad() in forward).")
    assert torch.allclose(out, once_reference(once_moved, tokens, once_pe), atol=1e-3, rtol=1e-4), (
        "After one training step your Embedding's output is not what the gradient of self.tokens(tokens) · √d_model "
        "+ PE predicts: the token table must get exactly the gradient of that formula, and the encoding none. Use "
        "self.tokens(tokens) as it is, scaled, plus a fixed table (self.register_buffer(...)).")
