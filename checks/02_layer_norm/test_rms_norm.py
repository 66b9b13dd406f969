import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 14)
tiny = torch.randn(3, 16) * 1e-3
rows = torch.randn(5, 16) * 2 + 3
gamma_rms = torch.rand(16) * 3 - 1                 # "trained" γ
# [observe]
rms_classes = [(c.__module__, c.__qualname__) for c in type(rms16).__mro__]
with _NoBuiltinNorm():
    tiny_out = _run("RMSNorm(16, eps=1e-5)(x)", RMSNorm(16, eps=1e-5), tiny, hint=_HINT)
with _NoBuiltinNorm():
    rows_out = _run("RMSNorm(16) on an input of shape (5, 16)", rms16, rows,
                    hint="Take the mean square over the last axis, dim=-1, whatever the number of axes.")
with torch.no_grad():
    rms16.weight.copy_(gamma_rms)
with _NoBuiltinNorm():
    scaled_out = _run("RMSNorm(16)(x) with a trained γ", rms16, x, hint=_HINT)
# [check]
def _rms_reference(x, eps=1e-6, subtract_mean=False, eps_inside=True):
    """The formula in float64 at γ = 1, and its mean-subtracting and ε-outside versions."""
    x = x.double()
    if subtract_mean:
        x = x - x.mean(dim=-1, keepdim=True)
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)
    return (x / ((mean_square + eps).sqrt() if eps_inside else mean_square.sqrt() + eps)).float()


assert not torch.allclose(y, _rms_reference(x, subtract_mean=True), atol=1e-4), (
    "Your RMSNorm subtracts the mean: that is LayerNorm. RMSNorm divides x itself by its root mean square: "
    "x / √(mean(x²) + ε) · γ")
expected = _rms_reference(x)
assert torch.allclose(y, expected, atol=1e-4), (
    f"RMSNorm(x) should be x / √(mean(x²) + ε) over the last axis; the largest difference is "
    f"{(y - expected).abs().max().item():.3g}")
library = {(cls.__module__, cls.__qualname__) for cls in (addnorm.RMSNorm, addnorm.LayerNorm)}
assert not library & set(rms_classes), (
    "Your RMSNorm is (a subclass of) addnorm.RMSNorm, the library's version of the answer: write it yourself")
assert not torch.allclose(tiny_out, _rms_reference(tiny, eps=1e-5, eps_inside=False), atol=1e-3, rtol=1e-3), (
    "ε is outside the square root: RMSNorm uses x / √(mean(x²) + ε), not x / (√mean(x²) + ε)")
assert torch.allclose(tiny_out, _rms_reference(tiny, eps=1e-5), atol=1e-3, rtol=1e-3), (
    "For small inputs (RMS ≈ 1e-3) with eps=1e-5 your RMSNorm is wrong: add self.eps inside the square root")
assert torch.allclose(rows_out, _rms_reference(rows), atol=1e-4), "RMSNorm must work for any input of shape (..., d_model)"
assert torch.allclose(scaled_out, _rms_reference(x) * gamma_rms, atol=1e-4), (
    "With γ ≠ 1 your RMSNorm ignores it: multiply by self.weight")
