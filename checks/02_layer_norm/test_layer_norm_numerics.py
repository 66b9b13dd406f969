import torch

# [inputs]
torch.manual_seed(SEED + 22)
ordinary = torch.randn(4, 16) * 2 + 1
# a large mean: E[x²] − E[x]² cancels catastrophically in float32; subtracting μ first does not
big = torch.randn(4, 64) + 1000.0
# features that barely vary: σ ≈ 1e-3, so σ² ≈ 1e-6 is smaller than ε = 1e-5
tiny = torch.randn(4, 16) * 1e-3
# [observe]
with _NoBuiltinNorm():
    ordinary_out = _run("LayerNorm(16)(x)", LayerNorm(16), ordinary, hint=_HINT)
with _NoBuiltinNorm():
    big_out = _run("LayerNorm(64)(x)", LayerNorm(64), big, hint=_HINT)
ln16 = LayerNorm(16)
with _NoBuiltinNorm():
    tiny_out = _run("ln(x)", ln16, tiny, hint=_HINT)
with _NoBuiltinNorm():
    eps_out = _run("LayerNorm(16, eps=1e-2)(x)", LayerNorm(16, eps=1e-2), tiny, hint=_HINT)
# [check]
assert torch.allclose(ordinary_out, _reference(ordinary), atol=1e-4), (
    "Your LayerNorm is already wrong on ordinary inputs: fix what the values test above reports first")
assert torch.isfinite(big_out).all() and torch.allclose(big_out, _reference(big), atol=1e-2, rtol=1e-2), (
    "For tokens with a large mean (1000 ± 1) your output is wrong: computing σ² as mean(x²) − μ² loses all "
    "precision in float32 (1e6 − 1e6). Subtract the mean first, then average the squares: ((x − μ)²).mean().")
assert not torch.allclose(tiny_out, _reference(tiny, eps_inside=False), atol=1e-3, rtol=1e-3), (
    "ε is outside the square root: you compute (x − μ) / (σ + ε). LayerNorm uses (x − μ) / √(σ² + ε); the two "
    "differ when σ² is not much larger than ε (here σ ≈ 1e-3, and your output is about 3 times too large).")
assert torch.allclose(tiny_out, _reference(tiny), atol=1e-3, rtol=1e-3), (
    "For tokens whose features barely vary (σ ≈ 1e-3) your output differs from (x − μ) / √(σ² + ε): "
    "is ε added to the variance, inside the square root?")
assert torch.allclose(eps_out, _reference(tiny, eps=1e-2), atol=1e-3, rtol=1e-3), (
    "LayerNorm(16, eps=1e-2) gives the result of another ε: use the eps passed to __init__ (self.eps)")
