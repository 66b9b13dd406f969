import torch
import torch.nn.functional as F

# [inputs]
torch.manual_seed(SEED + 12)
x4 = torch.randn(2, 3, 4, 10) * 3 - 1
x_stream = torch.randn(3, 5, 10) * 4 + 2
x2 = torch.randn(5, 10) * 2
weight2, bias2 = torch.randn(10, 10) / 3, torch.randn(10) / 3
# "trained" γ and β: the k-th norm of the block gets gamma + k and beta - k
gamma, beta = torch.linspace(0.5, 2.0, 10), torch.linspace(-1.0, 1.0, 10)
# [observe]
with torch.no_grad():
    again = _run("AddNorm(norm_first=True)(x, sublayer)", block, x, f.f)
    x_again = x.clone()
    block10 = AddNorm(10, norm_first=True).eval()
    out4 = _run("AddNorm(norm_first=True)(x, sublayer)", block10, x4, lambda h: torch.tanh(h) * 2 + 0.5)
    x4_after = x4.clone()
    identity = block10(x_stream, lambda h: torch.zeros_like(h))
    norms = [m for m in block10.modules() if isinstance(getattr(m, "weight", None), torch.Tensor) and m.weight.dim() == 1]
    for k, norm_k in enumerate(norms):
        norm_k.weight.copy_(gamma + k)
        norm_k.bias.copy_(beta - k)
    n_norms = len(norms)
    trained_out = block10(x2, _linear(weight2, bias2))
# [check]
def _check_pre_ln(out, x, x_after, f):
    """`out` = AddNorm(norm_first=True)(x, f) at γ = 1, β = 0; `x_after`: x after the call."""
    _unchanged(x, x_after, "the input x")
    assert not _matches(out, _ln(x + f(x))), (
        "With norm_first=True your AddNorm computes LN(x + F(x)): that is Post-LN, the two forms are swapped. "
        "Pre-LN normalizes the sublayer's input and adds to the un-normalized stream: x + F(LN(x)).")
    assert not _matches(out, f(_ln(x))), (
        "Your Pre-LN output is F(LN(x)): the residual is forgotten. Add the input back: x + F(LN(x)).")
    assert not _matches(out, _ln(x + f(_ln(x)))), (
        "Your Pre-LN output is LN(x + F(LN(x))): the sum is normalized too. In Pre-LN the residual stream "
        "itself is never normalized: x + F(LN(x)).")
    assert not _matches(out, _ln(x) + f(_ln(x))), (
        "Your Pre-LN output is LN(x) + F(LN(x)): the residual adds the normalized input. Pre-LN adds the "
        "sublayer's output to x itself, the un-normalized stream: x + F(LN(x)) (keep x; normalize a copy).")
    expected = x + f(_ln(x))
    assert _matches(out, expected), (
        f"AddNorm(norm_first=True) should compute x + F(LN(x)), calling the sublayer once on LN(x); yours "
        f"differs by up to {(out - expected).abs().max().item():.3g}. Compute it as x + "
        f"self.dropout(sublayer(self.norm(x))).")


_check_pre_ln(again, x, x_again, lambda h: F.linear(h, weight, bias))
_check_pre_ln(out4, x4, x4_after, lambda h: torch.tanh(h) * 2 + 0.5)
# the identity path: with a sublayer that outputs zeros, a Pre-LN block returns its input exactly
assert torch.allclose(identity, x_stream, atol=1e-6), (
    "With a sublayer that outputs zeros, a Pre-LN block must return x unchanged (x + 0): the residual "
    "stream is an identity path. Yours changes it — is the residual forgotten, or the output normalized?")
# trained γ and β: the sublayer must see the block's own LayerNorm, with its parameters
assert n_norms, "Your AddNorm owns no LayerNorm: create one in __init__ (self.norm = LayerNorm(d_model))"
assert any(_matches(trained_out, x2 + F.linear(F.layer_norm(x2, (10,), w, b, eps=1e-5), weight2, bias2))
           for w, b in _trained(n_norms, gamma, beta)), (
    "Once γ and β are trained (≠ 1 and 0), your Pre-LN output is not x + F(γ·normalize(x) + β): normalize "
    "the sublayer's input with the LayerNorm your module owns (self.norm), not a fresh one or a functional call")
