import torch

# [inputs]
torch.manual_seed(SEED + 13)
x_hidden = torch.randn(2, 3, 8) * 2 + 1
# "trained" γ and β, other than the visible test's
gamma_hidden, beta_hidden = torch.rand(8) * 1.5 + 0.5, torch.randn(8)
probe_hidden = torch.randn(2, 3, 8)
# [observe]
ln_hidden = LayerNorm(8)
with torch.no_grad():
    ln_hidden.weight.copy_(gamma_hidden)
    ln_hidden.bias.copy_(beta_hidden)
x_hidden_leaf = x_hidden.clone().requires_grad_()
with _NoBuiltinNorm():
    hidden_out = _run("ln(x)", ln_hidden, x_hidden_leaf, hint=_HINT)
if isinstance(hidden_out, torch.Tensor) and hidden_out.requires_grad:
    (hidden_out * probe_hidden).sum().backward()
hidden_grads = (ln_hidden.weight.grad, ln_hidden.bias.grad, x_hidden_leaf.grad)
# [check]
x64 = x_hidden.double().requires_grad_()
w64, b64 = gamma_hidden.double(), beta_hidden.double()
centered = x64 - x64.mean(dim=-1, keepdim=True)
expected = centered / (centered.pow(2).mean(dim=-1, keepdim=True) + 1e-5).sqrt() * w64 + b64
assert torch.allclose(hidden_out.double(), expected.detach(), atol=1e-4), (
    "With γ ≠ 1 and β ≠ 0 your output is not γ · normalized + β: multiply by self.weight and add self.bias")
(expected * probe_hidden.double()).sum().backward()
hidden_weight_grad, hidden_bias_grad, hidden_x_grad = hidden_grads
assert hidden_weight_grad is not None and hidden_bias_grad is not None, "no gradient reached weight and bias"
assert hidden_x_grad is not None and torch.allclose(hidden_x_grad.double(), x64.grad, atol=1e-4), (
    "The gradient with respect to x differs from the formula's: did you .detach() μ or σ², or treat them as "
    "constants? Gradients must flow through the mean and the variance too.")
