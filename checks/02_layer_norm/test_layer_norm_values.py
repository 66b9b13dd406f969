import torch

# [inputs]
torch.manual_seed(SEED + 12)
# d = 4: Bessel's correction changes the scale by √(4/3)
x4 = torch.randn(3, 6, 4) * 5 - 2
# other shapes: a 2-D (tokens, d_model) input and a single token (d_model,)
shapes_in = [torch.randn(5, 8) * 3 + 1, torch.randn(8) * 2]
# a batch: a token's output must not depend on the other tokens in it
batch = torch.randn(4, 5, 8) * 2 + 1
# [observe]
with _NoBuiltinNorm():
    out4 = _run(f"LayerNorm on an input of shape {tuple(x4.shape)}", LayerNorm(4), x4,
                hint="Normalize over the last axis, dim=-1, whatever the number of axes.")
x4_after = x4.clone()
ln8 = LayerNorm(8)
shapes_out = []
for x_shaped in shapes_in:
    with _NoBuiltinNorm():
        shapes_out.append(_run(f"LayerNorm(8) on an input of shape {tuple(x_shaped.shape)}", ln8, x_shaped,
                               hint="Take μ and σ² over the last axis, dim=-1 (not a fixed axis such as dim=2): the "
                                    "input can have any number of leading axes."))
with _NoBuiltinNorm():
    together, alone = ln8(batch), ln8(batch[:1, :1])
# [check]
def _check_values(out, x, x_after):
    """`out` = LayerNorm(d)(x) at γ = 1, β = 0; `x_after`: x after the call."""
    _unchanged(x, x_after, "the input x")
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
        f"LayerNorm must return a tensor of the input's shape {tuple(x.shape)}, got {getattr(out, 'shape', type(out).__name__)}")
    bessel = _matches(out, _reference(x, correction=1)) or _matches(out, _reference(x, correction=1, eps_inside=False))
    assert not bessel, (
        "Your variance divides by d − 1 (Bessel's correction: torch.var and torch.std default to it); LayerNorm "
        "uses the biased variance, dividing by d: x.var(dim=-1, unbiased=False), or ((x - μ)**2).mean(dim=-1). "
        "(If you wrote x.std() + ε, as the Annotated Transformer does, also move ε inside the root: √(σ² + ε).)")
    for dims, where in (((0,), "the batch axis (dim 0), as BatchNorm does"), ((-2,), "the sequence axis (dim -2)"),
                        (tuple(range(x.dim())), "all the elements at once")):
        assert not _matches(out, _reference(x, dims=dims)), (
            f"You normalize over the wrong axis: over {where}. LayerNorm takes μ and σ² over the features of "
            f"each token, the last axis: dim=-1, keepdim=True.")
    assert out.dtype == x.dtype, (
        f"LayerNorm returns {out.dtype} for a {x.dtype} input: return the input's dtype (computing in float64 is "
        f"fine, then cast back with .to(x.dtype)), as torch.nn.LayerNorm does.")
    expected = _reference(x)
    assert _matches(out, expected), (
        f"LayerNorm(x) should be (x − μ) / √(σ² + ε) (with γ = 1, β = 0 as initialized); the largest difference "
        f"is {(out.float() - expected).abs().max().item():.3g}. Check: μ and σ² over the last axis (dim=-1, "
        f"keepdim=True), σ² biased (divide by d), ε inside the square root.")


_check_values(y, x, x_after)                  # the visible test's input, checked against the formula
_check_values(out4, x4, x4_after)
for x_shaped, out_shaped in zip(shapes_in, shapes_out, strict=True):
    assert _matches(out_shaped, _reference(x_shaped)), (
        f"LayerNorm must normalize any input of shape (..., d_model) over its last axis; it fails for shape "
        f"{tuple(x_shaped.shape)}")
assert isinstance(together, torch.Tensor) and _matches(together[:1, :1], alone), (
    "You normalize over the wrong axis: a token's output changes with the other tokens in the batch. "
    "LayerNorm's statistics are over the features of one token (dim=-1), never across tokens.")
