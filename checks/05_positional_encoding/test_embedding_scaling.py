import math

import torch

# [inputs]
# sizes, token tables and tokens drawn from the course's secret; each Embedding is called at two lengths and twice on
# the same tokens (one instance: nothing may be kept from its first call), in training mode and in eval mode
torch.manual_seed(SEED + 15)
cases = []
for _ in range(2):
    v, d = int(torch.randint(12, 60, ())), 2 * int(torch.randint(2, 33, ()))
    m = int(torch.randint(8, 40, ()))
    lengths = (int(torch.randint(1, m // 2 + 1, ())), m)
    pairs = []
    for s in lengths:
        lead = torch.randint(0, v, (s,))
        pairs.append(torch.stack([lead, (lead + torch.randint(1, v, (s,))) % v]))     # differ everywhere
    cases.append(dict(vocab_size=v, d_model=d, max_len=m, table=torch.randn(v, d), short=pairs[0], full=pairs[1]))
# [observe]
def _embedded(module, tokens):
    """module(tokens), or None when it raises (a module that keeps something from its first call fails at another length)."""
    try:
        return module(tokens)
    except Exception:
        return None


scaling_runs = []
for case in cases:
    case_emb = Embedding(case["vocab_size"], case["d_model"], case["max_len"])
    with torch.no_grad():
        case_emb.tokens.weight.copy_(case["table"])
        trained_mode = (case_emb(case["short"]), _embedded(case_emb, case["full"]), _embedded(case_emb, case["short"]))
        case_emb.eval()
        eval_mode = (_embedded(case_emb, case["full"]), _embedded(case_emb, case["short"]))
    scaling_runs.append(trained_mode + eval_mode)
del case_emb                                          # not data: not an observation
# [check]
assert isinstance(scaling_runs, list) and len(scaling_runs) == len(cases), "Embedding must be called once per case"
for case, runs in zip(cases, scaling_runs, strict=True):
    short_out, full_out, short_again, full_eval, short_eval = runs
    for out, tokens in ((short_out, case["short"]), (full_out, case["full"]), (short_again, case["short"]),
                        (full_eval, case["full"]), (short_eval, case["short"])):
        assert isinstance(out, torch.Tensor) and tuple(out.shape) == (*tokens.shape, case["d_model"]), (
            "Embedding must map (batch, seq) token ids to (batch, seq, d_model) vectors, for every seq <= max_len and "
            "at every call of the same module (keep nothing from an earlier call)")
    assert torch.equal(short_out, short_again), (
        "Your Embedding gives different outputs for the same tokens (the module is in training mode): a dropout "
        "is at work, or something kept from an earlier call. This exercise's Embedding has none: return "
        "self.tokens(tokens) · √d_model + the encoding.")
    assert torch.allclose(full_eval, full_out, atol=1e-6) and torch.allclose(short_eval, short_out, atol=1e-6), (
        "Your Embedding computes something else in eval mode than in training mode, or keeps something from an "
        "earlier call: it has no dropout and no state, the same tokens give the same vectors")
    for out, tokens in ((short_out, case["short"]), (full_out, case["full"])):
        looked_up = case["table"][tokens].double()
        difference = (out[0] - out[1]).double()               # = (E[a] - E[b]) · scale: the positions cancel
        token_difference = looked_up[0] - looked_up[1]
        close = lambda scale: torch.allclose(difference, token_difference * scale, atol=1e-4, rtol=1e-4)
        assert not close(1.0), (
            "The token embeddings are not scaled: multiply them by √d_model before adding the positional encoding, "
            "self.tokens(tokens) * math.sqrt(d_model)")
        assert not close(case["d_model"]), "You scale by d_model: the factor is its square root, √d_model"
        assert not close(1 / math.sqrt(case["d_model"])), "You divide by √d_model: the embeddings are multiplied by it"
        assert close(math.sqrt(case["d_model"])), (
            "Two different tokens at the same position should differ by (E[a] − E[b]) · √d_model, where E is "
            "self.tokens, for every size and length: look the tokens up in self.tokens (the table the test put "
            "there) and multiply by math.sqrt(d_model)")
