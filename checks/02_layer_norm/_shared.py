"""Exercise 2's hidden helpers, run in the judge: the LayerNorm formula in float64, with the options that reproduce
the common mistakes, and the comparison the checks use."""
import torch


def _reference(x, eps=1e-5, correction=0, dims=(-1,), eps_inside=True):
    """The formula in float64 at γ = 1, β = 0; the options reproduce the common mistakes."""
    x = x.double()
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, correction=correction)
    denominator = (var + eps).sqrt() if eps_inside else var.sqrt() + eps
    return ((x - mean) / denominator).float()


def _matches(out, value, atol=1e-4):
    return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out.float(), value, atol=atol, rtol=1e-4)
