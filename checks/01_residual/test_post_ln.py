import torch
import torch.nn.functional as F

# [inputs]
torch.manual_seed(SEED + 11)
x4 = torch.randn(2, 3, 4, 10) * 3 - 1
x2 = torch.randn(5, 10)
weight2, bias2 = torch.randn(10, 10) / 3, torch.randn(10) / 3
# "trained" γ and β: the k-th norm of the block gets gamma + k and beta - k
gamma, beta = torch.linspace(0.5, 2.0, 10), torch.linspace(-1.0, 1.0, 10)
# [observe]
with torch.no_grad():
    again = _run("AddNorm(norm_first=False)(x, sublayer)", block, x, f.f)
    x_again = x.clone()
    block10 = AddNorm(10, norm_first=False).eval()
    out4 = _run("AddNorm(norm_first=False)(x, sublayer)", block10, x4, lambda h: torch.relu(h) * 2 - 0.5)
    x4_after = x4.clone()
    norms = [m for m in block10.modules() if isinstance(getattr(m, "weight", None), torch.Tensor) and m.weight.dim() == 1]
    for k, norm_k in enumerate(norms):
        norm_k.weight.copy_(gamma + k)
        norm_k.bias.copy_(beta - k)
    n_norms = len(norms)
    trained_out = block10(x2, _linear(weight2, bias2))
# [check]
def _check_post_ln(out, x, x_after, f):
    """`out` = AddNorm(norm_first=False)(x, f) at γ = 1, β = 0; `x_after`: x after the call."""
    _unchanged(x, x_after, "the input x")
    assert not _matches(out, x + f(_ln(x))), (
        "With norm_first=False your AddNorm computes x + F(LN(x)): that is Pre-LN, the two forms are swapped. "
        "Post-LN (the 2017 paper) normalizes after the addition: LN(x + F(x)).")
    assert not _matches(out, _ln(f(x))), (
        "Your Post-LN output is LN(F(x)): the residual is forgotten. Add the input back before normalizing: LN(x + F(x)).")
    assert not _matches(out, x + f(x)), (
        "Your Post-LN output is x + F(x), never normalized: apply the LayerNorm after the addition, LN(x + F(x)).")
    assert not _matches(out, _ln(x) + f(x)), (
        "Your Post-LN output is LN(x) + F(x): only the input is normalized. Normalize the sum: LN(x + F(x)).")
    expected = _ln(x + f(x))
    assert _matches(out, expected), (
        f"AddNorm(norm_first=False) should compute LN(x + F(x)), calling the sublayer once on x itself; yours "
        f"differs by up to {(out - expected).abs().max().item():.3g}. Compute it as self.norm(x + "
        f"self.dropout(sublayer(x))).")


_check_post_ln(again, x, x_again, lambda h: F.linear(h, weight, bias))
_check_post_ln(out4, x4, x4_after, lambda h: torch.relu(h) * 2 - 0.5)
# after training, γ and β are no longer 1 and 0: the output must use the block's own LayerNorm parameters
assert n_norms, "Your AddNorm owns no LayerNorm: create one in __init__ (self.norm = LayerNorm(d_model))"
assert any(_matches(trained_out, F.layer_norm(x2 + F.linear(x2, weight2, bias2), (10,), w, b, eps=1e-5))
           for w, b in _trained(n_norms, gamma, beta)), (
    "Once γ and β are trained (≠ 1 and 0), your Post-LN output is not γ·normalize(x + F(x)) + β: "
    "normalize with the LayerNorm your module owns (self.norm), not a fresh one or a functional call")
