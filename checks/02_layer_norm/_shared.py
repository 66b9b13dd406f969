"""Exercise 2's hidden helpers, run in the judge: the LayerNorm and RMSNorm formulas in float64, with the options
that reproduce the common mistakes, and the comparisons the checks use."""
import torch


def _reference(x, eps=1e-5, correction=0, dims=(-1,), eps_inside=True):
    """The formula in float64 at γ = 1, β = 0; the options reproduce the common mistakes."""
    x = x.double()
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, correction=correction)
    denominator = (var + eps).sqrt() if eps_inside else var.sqrt() + eps
    return ((x - mean) / denominator).float()


def _matches(out, value, atol=1e-4):
    return (isinstance(out, torch.Tensor) and out.shape == value.shape and out.dtype in (torch.float32, torch.float64)
            and torch.allclose(out.double(), value.double(), atol=atol, rtol=1e-4))


def _judge_float32_values(out):
    """Whether every number of `out` is a float32 number: a float64 result that was not cast back to the input's
    dtype carries digits float32 has not (seen in the values, whatever dtype the kernel reports)."""
    return (isinstance(out, torch.Tensor) and out.dtype in (torch.float32, torch.float64)
            and torch.equal(out.double(), out.float().double()))


def _judge_layer_norm64(x, weight, bias, eps=1e-5):
    """γ · (x − μ) / √(σ² + ε) + β in float64, differentiable in x, weight and bias (float64 leaves or not)."""
    centered = x - x.mean(dim=-1, keepdim=True)
    return centered / (centered.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt() * weight + bias


def _judge_rms_norm64(x, weight, eps=1e-6):
    """γ · x / √(mean(x²) + ε) in float64, differentiable in x and weight."""
    return x / (x.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt() * weight


def _judge_layer_norm_grads(x, weight, bias, probe, eps=1e-5):
    """The float64 gradients of sum(LayerNorm(x) · probe) with respect to x, weight and bias."""
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, weight, bias))
    (_judge_layer_norm64(x64, w64, b64, eps) * probe.double()).sum().backward()
    return x64.grad, w64.grad, b64.grad


def _judge_rms_norm_grads(x, weight, probe, eps=1e-6):
    """The float64 gradients of sum(RMSNorm(x) · probe) with respect to x and weight."""
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, weight))
    (_judge_rms_norm64(x64, w64, eps) * probe.double()).sum().backward()
    return x64.grad, w64.grad


def _judge_close(out, value, atol=1e-4, rtol=1e-4):
    """`out` is a tensor of value's shape whose numbers are within the tolerance of value's (compared in float64)."""
    return (isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(value.shape)
            and out.dtype in (torch.float32, torch.float64)
            and bool(torch.allclose(out.double(), value.double(), atol=atol, rtol=rtol)))
