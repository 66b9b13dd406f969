import torch

# [inputs]
# a size drawn from the course's secret, "trained" γ and β other than the visible test's, loaded into weight and bias;
# the output and the gradients of x, weight and bias compared by value with the formula's in float64; then the same
# instance at another shape (nothing may be kept from its first call)
torch.manual_seed(SEED + 13)
affine_d = int(torch.randint(6, 33, ()))
x_hidden = torch.randn(2, 3, affine_d) * 2 + 1
gamma_hidden, beta_hidden = torch.rand(affine_d) * 1.5 + 0.5, torch.randn(affine_d)
probe_hidden = torch.randn(2, 3, affine_d)
x_other_shape = torch.randn(7, affine_d) * 0.5 + 2
# [observe]
ln_hidden = LayerNorm(affine_d)
with torch.no_grad():
    ln_hidden.weight.copy_(gamma_hidden)
    ln_hidden.bias.copy_(beta_hidden)
x_hidden_leaf = x_hidden.clone().requires_grad_()
with _NoBuiltinNorm():
    hidden_out = _run("ln(x)", ln_hidden, x_hidden_leaf, hint=_HINT)
if isinstance(hidden_out, torch.Tensor) and hidden_out.requires_grad:
    (hidden_out * probe_hidden).sum().backward()
hidden_grads = (ln_hidden.weight.grad, ln_hidden.bias.grad, x_hidden_leaf.grad)
with torch.no_grad(), _NoBuiltinNorm():
    other_shape_out = _run("ln(x) at another shape", ln_hidden, x_other_shape, hint=_HINT)
del ln_hidden                                                   # not data: not an observation
# [check]
expected = _judge_layer_norm64(x_hidden.double(), gamma_hidden.double(), beta_hidden.double())
assert _judge_close(hidden_out, expected), (
    "With γ ≠ 1 and β ≠ 0 your output is not γ · normalized + β: multiply by self.weight and add self.bias")
hidden_x_grad_ref, hidden_weight_grad_ref, hidden_bias_grad_ref = _judge_layer_norm_grads(
    x_hidden, gamma_hidden, beta_hidden, probe_hidden)
hidden_weight_grad, hidden_bias_grad, hidden_x_grad = (
    hidden_grads if isinstance(hidden_grads, tuple) and len(hidden_grads) == 3 else (None, None, None))
assert _judge_close(hidden_weight_grad, hidden_weight_grad_ref) and _judge_close(hidden_bias_grad, hidden_bias_grad_ref), (
    "γ and β do not get the formula's gradients (none, zero, or others): use self.weight and self.bias in forward as "
    "they are (no .detach(), no .data, no torch.no_grad()), so that training moves them")
assert _judge_close(hidden_x_grad, hidden_x_grad_ref), (
    "The gradient with respect to x differs from the formula's: did you .detach() μ or σ², or treat them as "
    "constants? Gradients must flow through the mean and the variance too.")
assert _judge_close(other_shape_out, _judge_layer_norm64(x_other_shape.double(), gamma_hidden.double(),
                                                         beta_hidden.double())), (
    "The same LayerNorm, called again at another shape, gives another result than γ · (x − μ) / √(σ² + ε) + β: "
    "keep nothing from an earlier call (statistics are computed for each input)")
