import torch
from torch import nn

# [inputs]
torch.manual_seed(SEED + 14)
tiny = torch.randn(3, 16) * 1e-3
rows = torch.randn(5, 16) * 2 + 3
gamma_rms = torch.rand(16) * 3 - 1                 # "trained" γ
# ε through the values (the kernel's report of a signature is advice only), at a size drawn from the course's secret:
# a new RMSNorm(d) on tokens whose mean square is close to the default ε = 1e-6; an RMSNorm(d, eps=…) with an ε drawn
# the same way, on tokens whose mean square is close to it, at two shapes (one instance)
rms_d = int(torch.randint(5, 40, ()))
rms_near_default = torch.randn(4, rms_d) * 1e-3                    # mean square ≈ 1e-6 ≈ ε
rms_eps = float(10 ** (-4 + 2 * torch.rand(())))                  # between 1e-4 and 1e-2
rms_near_drawn = torch.randn(3, 2, rms_d) * rms_eps ** 0.5
rms_near_drawn_too = torch.randn(6, rms_d) * rms_eps ** 0.5
# one SGD step on every parameter a parent module finds, with an upstream gradient `rms_probe`, then a call at another
# shape: the output must be what the reference gradient of γ predicts (and a bias β, which RMSNorm has not, would move)
rms_step_x = torch.randn(2, 4, rms_d) * 2 + 1
rms_probe = torch.randn(2, 4, rms_d)
rms_after = torch.randn(3, rms_d) * 1.5 - 0.5
rms_lr = 0.1
# [observe]
def _judge_rms_call(module, x):
    """module(x), or None when it raises (the checks then say what was expected)."""
    try:
        return module(x)
    except Exception:
        return None


with _NoBuiltinNorm():
    tiny_out = _run("RMSNorm(16, eps=1e-5)(x)", RMSNorm(16, eps=1e-5), tiny, hint=_HINT)
with _NoBuiltinNorm():
    rows_out = _run("RMSNorm(16) on an input of shape (5, 16)", rms16, rows,
                    hint="Take the mean square over the last axis, dim=-1, whatever the number of axes.")
with torch.no_grad():
    rms16.weight.copy_(gamma_rms)
with _NoBuiltinNorm():
    scaled_out = _run("RMSNorm(16)(x) with a trained γ", rms16, x, hint=_HINT)
rms_fresh = RMSNorm(rms_d)
with torch.no_grad(), _NoBuiltinNorm():
    rms_default_out = _judge_rms_call(rms_fresh, rms_near_default)
rms_holder = nn.ModuleList([rms_fresh])
rms_leaf = rms_step_x.clone().requires_grad_()
with _NoBuiltinNorm():
    rms_step_out = _judge_rms_call(rms_fresh, rms_leaf)
if isinstance(rms_step_out, torch.Tensor) and rms_step_out.requires_grad:   # else nothing moves: the check says why
    (rms_step_out * rms_probe).sum().backward()
    with torch.no_grad():
        for rms_p in rms_holder.parameters():                               # one SGD step, as torch.optim.SGD takes it
            if rms_p.grad is not None:
                rms_p -= rms_lr * rms_p.grad
rms_x_grad = rms_leaf.grad
with torch.no_grad(), _NoBuiltinNorm():
    rms_trained = _judge_rms_call(rms_fresh, rms_after)
rms_eps_module = RMSNorm(rms_d, eps=rms_eps)
with torch.no_grad(), _NoBuiltinNorm():
    rms_eps_out = (_judge_rms_call(rms_eps_module, rms_near_drawn), _judge_rms_call(rms_eps_module, rms_near_drawn_too))
del rms_fresh, rms_holder, rms_step_out, rms_eps_module                     # not data: not observations
rms_p = None
# [check]
def _rms_reference(x, eps=1e-6, subtract_mean=False, eps_inside=True):
    """The formula in float64 at γ = 1, and its mean-subtracting and ε-outside versions."""
    x = x.double()
    if subtract_mean:
        x = x - x.mean(dim=-1, keepdim=True)
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)
    return x / ((mean_square + eps).sqrt() if eps_inside else mean_square.sqrt() + eps)


assert not _judge_close(y, _rms_reference(x, subtract_mean=True), rtol=1e-5), (
    "Your RMSNorm subtracts the mean: that is LayerNorm. RMSNorm divides x itself by its root mean square: "
    "x / √(mean(x²) + ε) · γ")
assert _judge_close(y, _rms_reference(x), rtol=1e-5), (
    "RMSNorm(x) should be x / √(mean(x²) + ε) over the last axis; yours differs by more than 1e-4")
assert _judge_float32_values(y), (
    "RMSNorm returns float64 numbers for a float32 input: return the input's dtype (computing in float64 is fine, "
    "then cast back with .to(x.dtype)).")
assert not _judge_close(tiny_out, _rms_reference(tiny, eps=1e-5, eps_inside=False), atol=1e-3, rtol=1e-3), (
    "ε is outside the square root: RMSNorm uses x / √(mean(x²) + ε), not x / (√mean(x²) + ε)")
assert _judge_close(tiny_out, _rms_reference(tiny, eps=1e-5), atol=1e-3, rtol=1e-3), (
    "For small inputs (RMS ≈ 1e-3) with eps=1e-5 your RMSNorm is wrong: add self.eps inside the square root")
assert _judge_close(rows_out, _rms_reference(rows), rtol=1e-5), (
    "RMSNorm must work for any input of shape (..., d_model), at every call of the same module (keep nothing from "
    "an earlier call)")
assert _judge_close(scaled_out, _rms_reference(x) * gamma_rms.double(), rtol=1e-5), (
    "With γ ≠ 1 your RMSNorm ignores it: multiply by self.weight")
# the default ε, through the values
assert isinstance(rms_default_out, torch.Tensor) and tuple(rms_default_out.shape) == tuple(rms_near_default.shape), (
    "RMSNorm(d_model) must work for every d_model, not only the notebook's sizes: weight of shape (d_model,), and an "
    "output of the input's shape")
if not _judge_close(rms_default_out, _rms_reference(rms_near_default), atol=1e-3, rtol=1e-3):
    for rms_wrong_eps in (1e-5, 1e-8, 0.0, 1e-7, 1e-4):
        assert not _judge_close(rms_default_out, _rms_reference(rms_near_default, eps=rms_wrong_eps), atol=1e-3, rtol=1e-3), (
            "A new RMSNorm(d_model) uses another ε than 1e-6 by default: on tokens whose mean square is close to ε "
            "the result shows it. The default must be eps=1e-6, and forward must add self.eps (not a number "
            "written there).")
    assert False, (
        "A new RMSNorm(d_model), for a size the notebook does not show, does not give x / √(mean(x²) + ε) with γ = 1 "
        "and ε = 1e-6: weight (γ) must start as ones, of shape (d_model,)")
# an ε passed to the constructor, through the values
assert isinstance(rms_eps_out, tuple) and len(rms_eps_out) == 2 and all(
    _judge_close(out, _rms_reference(near, eps=rms_eps), atol=1e-3, rtol=1e-3)
    for out, near in zip(rms_eps_out, (rms_near_drawn, rms_near_drawn_too))), (
    "RMSNorm(d_model, eps=…) with an ε the notebook does not show gives the result of another ε (on tokens whose "
    "mean square is close to that ε, at two shapes): store the eps passed to __init__ and add self.eps in forward, "
    "not a number written there")
# one training step: γ by its reference gradient, no β; and the gradient of x by value
rms_gx, rms_gw = _judge_rms_norm_grads(rms_step_x, torch.ones(rms_d), rms_probe)
rms_predicted = _judge_rms_norm64(rms_after.double(), 1 - rms_lr * rms_gw)
assert _judge_close(rms_x_grad, rms_gx), (
    "The gradient of RMSNorm with respect to x differs from the formula's: did you .detach() the mean square, or "
    "compute it outside autograd? Gradients must flow through it too.")
assert isinstance(rms_trained, torch.Tensor) and tuple(rms_trained.shape) == tuple(rms_after.shape), (
    "After a training step, the same RMSNorm called at another shape must still return the input's shape (keep "
    "nothing from an earlier call)")
assert not _judge_close(rms_trained, _judge_rms_norm64(rms_after.double(), 1.0), atol=1e-3), (
    "One training step (an optimizer over the module's parameters()) did not change your RMSNorm: γ must be an "
    "nn.Parameter, found by .parameters(), that forward uses as it is (no .detach(), no torch.no_grad())")
assert not _judge_close(rms_trained, rms_predicted - rms_lr * rms_probe.double().sum(dim=(0, 1)), atol=1e-3), (
    "Your RMSNorm adds a trained bias β: RMSNorm has one parameter, weight (γ), and no bias (Zhang & Sennrich 2019)")
assert _judge_close(rms_trained, rms_predicted, atol=1e-3), (
    "After one training step your RMSNorm's output is not what the gradient of γ · x / √(mean(x²) + ε) predicts (an "
    "optimizer over the module's parameters(), then a call at another shape): γ must get exactly the formula's "
    "gradient, RMSNorm has no other parameter, and nothing may be kept from an earlier call")
