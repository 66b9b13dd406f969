import torch

# [inputs]
torch.manual_seed(SEED + 12)
# d = 4: Bessel's correction changes the scale by √(4/3)
x4 = torch.randn(3, 6, 4) * 5 - 2
# other shapes: a 2-D (tokens, d_model) input and a single token (d_model,), then the first shape again with other
# values (one instance: nothing may be kept from its first call)
shapes_in = [torch.randn(5, 8) * 3 + 1, torch.randn(8) * 2, torch.randn(5, 8) * 0.5 - 2]
# a batch: a token's output must not depend on the other tokens in it
batch = torch.randn(4, 5, 8) * 2 + 1
shapes_hint = ("Take the statistics over the last axis (dim=-1), not a fixed axis such as dim=2: the input can "
               "have any number of leading axes.")
# [observe]
with _NoBuiltinNorm():
    out4 = _run("LayerNorm(4) on an input of shape (3, 6, 4)", LayerNorm(4), x4,
                hint="Normalize over the last axis, dim=-1, whatever the number of axes.")
x4_after = x4.clone()
ln8 = LayerNorm(8)
with _NoBuiltinNorm():
    shapes_out = [_run("LayerNorm(8) on a 2-D input (tokens, d_model)", ln8, shapes_in[0], hint=shapes_hint)]
with _NoBuiltinNorm():
    shapes_out.append(_run("LayerNorm(8) on a single token (d_model,)", ln8, shapes_in[1], hint=shapes_hint))
with _NoBuiltinNorm():
    shapes_out.append(_run("LayerNorm(8) called again on a 2-D input", ln8, shapes_in[2], hint=shapes_hint))
with _NoBuiltinNorm():
    together, alone = ln8(batch), ln8(batch[:1, :1])
del ln8                                                        # not data: not an observation
# [check]
_WRONG_AXES = {
    (0,): "You normalize over the wrong axis: over the batch axis (dim 0), as BatchNorm does. LayerNorm takes μ and "
          "σ² over the features of each token, the last axis: dim=-1, keepdim=True.",
    (-2,): "You normalize over the wrong axis: over the sequence axis (dim -2). LayerNorm takes μ and σ² over the "
           "features of each token, the last axis: dim=-1, keepdim=True.",
    "all": "You normalize over the wrong axis: over all the elements at once. LayerNorm takes μ and σ² over the "
           "features of each token, the last axis: dim=-1, keepdim=True.",
}


def _check_values(out, x, x_after):
    """`out` = LayerNorm(d)(x) at γ = 1, β = 0; `x_after`: x after the call."""
    assert torch.equal(x, x_after), (
        "Your code changed the input x in place (an in-place operation such as x += …, x.sub_(…) or x[...] = …): "
        "the caller's tensor is corrupted. Compute a new tensor instead (x = x + …).")
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
        "LayerNorm must return a tensor of the input's shape, for every input of shape (..., d_model)")
    bessel = _matches(out, _reference(x, correction=1)) or _matches(out, _reference(x, correction=1, eps_inside=False))
    assert not bessel, (
        "Your variance divides by d − 1 (Bessel's correction: torch.var and torch.std default to it); LayerNorm "
        "uses the biased variance, dividing by d: x.var(dim=-1, unbiased=False), or ((x - μ)**2).mean(dim=-1). "
        "(If you wrote x.std() + ε, as the Annotated Transformer does, also move ε inside the root: √(σ² + ε).)")
    for dims, message in _WRONG_AXES.items():
        assert not _matches(out, _reference(x, dims=tuple(range(x.dim())) if dims == "all" else dims)), message
    assert _judge_float32_values(out), (
        "LayerNorm returns float64 numbers for a float32 input: return the input's dtype (computing in float64 is "
        "fine, then cast back with .to(x.dtype)), as torch.nn.LayerNorm does.")
    assert _matches(out, _reference(x)), (
        "LayerNorm(x) should be (x − μ) / √(σ² + ε) (with γ = 1, β = 0 as initialized); yours differs by more than "
        "1e-4 on an input the notebook does not show. Check: μ and σ² over the last axis (dim=-1, keepdim=True), σ² "
        "biased (divide by d), ε inside the square root.")


_check_values(y, x, x_after)                  # the visible test's input, checked against the formula
_check_values(out4, x4, x4_after)
assert isinstance(shapes_out, list) and len(shapes_out) == len(shapes_in), "LayerNorm must return one output per call"
for x_shaped, out_shaped in zip(shapes_in, shapes_out, strict=True):
    assert _matches(out_shaped, _reference(x_shaped)), (
        "LayerNorm must normalize any input of shape (..., d_model) over its last axis, at every call of the same "
        "module: yours fails for a 2-D input or a single token, or at a second call (keep nothing from an earlier "
        "call)")
assert _matches(alone, _reference(batch[:1, :1])) and isinstance(together, torch.Tensor) and _matches(together[:1, :1], alone), (
    "You normalize over the wrong axis: a token's output changes with the other tokens in the batch. "
    "LayerNorm's statistics are over the features of one token (dim=-1), never across tokens.")
