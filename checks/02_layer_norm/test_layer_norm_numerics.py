import torch

# [inputs]
torch.manual_seed(SEED + 22)
ordinary = torch.randn(4, 16) * 2 + 1
# a large mean: E[x²] − E[x]² cancels catastrophically in float32; subtracting μ first does not
big = torch.randn(4, 64) + 1000.0
# features that barely vary: σ ≈ 1e-3, so σ² ≈ 1e-6 is smaller than ε = 1e-5
tiny = torch.randn(4, 16) * 1e-3
# ε through the values: tokens whose variance is close to the default ε (1e-5), then, on the same instance at another
# shape, tokens whose variance is close to an ε drawn from the course's secret and passed to the constructor
near_default = torch.randn(2, 3, 16) * 3e-3 + torch.randn(2, 3, 1)
drawn_eps = float(10 ** (-3.5 + 1.5 * torch.rand(())))                  # between 3e-4 and 1e-2
near_drawn = torch.randn(5, 12) * drawn_eps ** 0.5 + torch.randn(5, 1)
near_drawn_too = torch.randn(3, 2, 12) * drawn_eps ** 0.5
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
with _NoBuiltinNorm():
    near_default_out = _run("ln(x)", ln16, near_default, hint=_HINT)
drawn_ln = LayerNorm(12, eps=drawn_eps)
with _NoBuiltinNorm():
    drawn_out = (_run("LayerNorm(d_model, eps=eps)(x)", drawn_ln, near_drawn, hint=_HINT),
                 _run("LayerNorm(d_model, eps=eps)(x)", drawn_ln, near_drawn_too, hint=_HINT))
del drawn_ln                                                   # not data: not an observation
# [check]
assert _matches(ordinary_out, _reference(ordinary)), (
    "Your LayerNorm is already wrong on ordinary inputs: fix what the values test above reports first")
assert _judge_float32_values(ordinary_out), (
    "LayerNorm returns float64 numbers for a float32 input: return the input's dtype (computing in float64 is fine, "
    "then cast back with .to(x.dtype)), as torch.nn.LayerNorm does.")
assert (isinstance(big_out, torch.Tensor) and torch.isfinite(big_out).all()
        and _matches(big_out, _reference(big), atol=1e-2)), (
    "For tokens with a large mean (1000 ± 1) your output is wrong: computing σ² as mean(x²) − μ² loses all "
    "precision in float32 (1e6 − 1e6). Subtract the mean first, then average the squares: ((x − μ)²).mean().")
assert not _judge_close(tiny_out, _reference(tiny, eps_inside=False), atol=1e-3, rtol=1e-3), (
    "ε is outside the square root: you compute (x − μ) / (σ + ε). LayerNorm uses (x − μ) / √(σ² + ε); the two "
    "differ when σ² is not much larger than ε (here σ ≈ 1e-3, and your output is about 3 times too large).")
assert _judge_close(tiny_out, _reference(tiny), atol=1e-3, rtol=1e-3), (
    "For tokens whose features barely vary (σ ≈ 1e-3) your output differs from (x − μ) / √(σ² + ε): "
    "is ε added to the variance, inside the square root?")
assert _judge_close(eps_out, _reference(tiny, eps=1e-2), atol=1e-3, rtol=1e-3), (
    "LayerNorm(16, eps=1e-2) gives the result of another ε: use the eps passed to __init__ (self.eps)")
assert _judge_close(near_default_out, _reference(near_default), atol=1e-3, rtol=1e-3), (
    "For tokens whose variance is close to ε your LayerNorm(16) gives the result of another ε than the default "
    "1e-5, or of another input at a second call of the same module: default eps=1e-5, add self.eps inside the "
    "square root, and keep nothing from an earlier call")
assert isinstance(drawn_out, tuple) and len(drawn_out) == 2 and all(
    _judge_close(out, _reference(x, eps=drawn_eps), atol=1e-3, rtol=1e-3)
    for out, x in zip(drawn_out, (near_drawn, near_drawn_too))), (
    "LayerNorm(d_model, eps=…) with an ε the notebook does not show gives the result of another ε (on tokens whose "
    "variance is close to that ε, at two shapes): store the eps passed to __init__ and add self.eps in forward, "
    "not a number written there")
