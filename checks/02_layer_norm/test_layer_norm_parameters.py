import torch
from torch import nn

# [inputs]
# The parameters, through what they do (the kernel's report of names, values, a signature or requires_grad is advice
# only): a new LayerNorm of a size drawn from the course's secret, on tokens whose variance is close to ε = 1e-5 (so
# that γ = 1, β = 0 and the default ε show in the values); then one SGD step on every parameter a parent module finds
# (as a training loop finds them), with an upstream gradient `param_probe`; then the same module at another shape:
# the output must be what the reference gradients of γ and β predict.
torch.manual_seed(SEED + 11)
param_d = int(torch.randint(5, 40, ()))
param_near = torch.randn(3, param_d) * 3e-3 + torch.randn(3, 1) * 0.1      # σ² ≈ 1e-5 ≈ ε
param_ordinary = torch.randn(2, 4, param_d) * 2 + 1
param_probe = torch.randn(2, 4, param_d)
param_after = torch.randn(5, param_d) * 1.5 - 0.5
param_lr = 0.1
# [observe]
def _judge_param_call(module, x):
    """module(x), or None when it raises (the checks then say what was expected)."""
    try:
        return module(x)
    except Exception:
        return None


param_ln = LayerNorm(param_d)
param_trainable = [getattr(param_ln, "weight", None) is not None and param_ln.weight.requires_grad,
                   getattr(param_ln, "bias", None) is not None and param_ln.bias.requires_grad]
with torch.no_grad(), _NoBuiltinNorm():
    param_fresh = _judge_param_call(param_ln, param_near)
param_holder = nn.ModuleList([param_ln])
with _NoBuiltinNorm():
    param_out = _judge_param_call(param_ln, param_ordinary)
if isinstance(param_out, torch.Tensor) and param_out.requires_grad:   # else nothing moves: the check says why
    (param_out * param_probe).sum().backward()
    with torch.no_grad():
        for param_p in param_holder.parameters():                    # one SGD step, as torch.optim.SGD takes it
            if param_p.grad is not None:
                param_p -= param_lr * param_p.grad
with torch.no_grad(), _NoBuiltinNorm():
    param_trained = _judge_param_call(param_ln, param_after)
del param_ln, param_holder, param_out                                # not data: not observations
param_p = None
# [check]
param_expected = _judge_layer_norm64(param_near.double(), 1.0, 0.0, 1e-5)
assert isinstance(param_fresh, torch.Tensor) and tuple(param_fresh.shape) == tuple(param_near.shape), (
    "A new LayerNorm(d_model) must work for every d_model, not only the notebook's sizes, and return the input's "
    "shape: weight and bias of shape (d_model,), the statistics over the last axis (dim=-1)")
if not _judge_close(param_fresh, param_expected):
    for param_eps in (1e-6, 1e-7, 1e-8, 0.0, 1e-4, 1e-3):
        assert not _judge_close(param_fresh, _judge_layer_norm64(param_near.double(), 1.0, 0.0, param_eps)), (
            "A new LayerNorm(d_model) uses another ε than 1e-5 by default: on tokens whose variance is close to ε "
            "the result shows it. The default must be eps=1e-5, as in torch.nn.LayerNorm, and forward must add "
            "self.eps.")
    assert False, (
        "A new LayerNorm(d_model), for a size the notebook does not show, does not give (x − μ) / √(σ² + ε) with "
        "γ = 1, β = 0 and ε = 1e-5 (the parameters are checked through what they do): if the values or numerics "
        "test below fails too, fix what it reports first; else weight (γ) must start as ones and bias (β) as zeros, "
        "of shape (d_model,)")
param_gx, param_gw, param_gb = _judge_layer_norm_grads(param_ordinary, torch.ones(param_d), torch.zeros(param_d),
                                                       param_probe)
param_untrained = _judge_layer_norm64(param_after.double(), 1.0, 0.0)
param_predicted = _judge_layer_norm64(param_after.double(), 1 - param_lr * param_gw, -param_lr * param_gb)
assert isinstance(param_trained, torch.Tensor) and tuple(param_trained.shape) == tuple(param_after.shape), (
    "After a training step, the same LayerNorm called at another shape must still return the input's shape (keep "
    "nothing from an earlier call)")
assert not _judge_close(param_trained, param_untrained), (
    "weight and bias must be trainable (requires_grad=True): one training step changed neither"
    if param_trainable != [True, True] else
    "One training step (an optimizer over the module's parameters()) did not change your LayerNorm: γ and β must be "
    "nn.Parameter attributes, found by .parameters(), that forward uses as they are (no .detach(), no torch.no_grad())")
assert not _judge_close(param_trained, _judge_layer_norm64(param_after.double(), 1 - param_lr * param_gw, 0.0), atol=1e-3), (
    "One training step changed γ but not β: bias must be an nn.Parameter that forward adds as it is")
assert not _judge_close(param_trained, _judge_layer_norm64(param_after.double(), 1.0, -param_lr * param_gb), atol=1e-3), (
    "One training step changed β but not γ: weight must be an nn.Parameter that forward multiplies by as it is")
assert _judge_close(param_trained, param_predicted, atol=1e-3), (
    "After one training step your LayerNorm's output is not what the gradients of γ · (x − μ) / √(σ² + ε) + β "
    "predict (an optimizer over the module's parameters(), then a call at another shape): γ and β must get exactly "
    "the formula's gradients, and nothing may be kept from an earlier call")
