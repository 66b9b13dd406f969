import torch
import torch.nn.functional as F

# [inputs]
torch.manual_seed(SEED + 13)
judge_wide = torch.randn(4, 6, 8) * 3 + 1
judge_zero_weight, judge_zero_bias = torch.randn(8, 8) / 3, torch.randn(8) / 3
torch.manual_seed(SEED + 23)
# normalized already: LN(judge_unit) ≈ judge_unit
judge_unit = F.layer_norm(torch.randn(32, 64), (64,))
# a sublayer that outputs JUDGE_BIG everywhere: what is dropped, and how the rest is scaled, shows in the output
judge_grid = [(False, 0.3), (False, 0.6), (True, 0.3), (True, 0.6)]
# gradients by value: a block of a size drawn from the course's secret, in eval mode, the test's γ and β in its
# LayerNorm, the test's sublayer; the gradients of (output · upstream).sum() for x, the sublayer's input and weights,
# γ and β, against the formula's in float64
torch.manual_seed(SEED + 33)
judge_grad_d = int(torch.randint(6, 25, ()))
judge_grad_x = torch.randn(3, 5, judge_grad_d) * 2 + 0.5
judge_grad_weight, judge_grad_bias = torch.randn(judge_grad_d, judge_grad_d) / 3, torch.randn(judge_grad_d) / 3
judge_grad_gamma, judge_grad_beta = 1 + 0.5 * torch.randn(judge_grad_d), 0.5 * torch.randn(judge_grad_d)
judge_grad_upstream = torch.randn(3, 5, judge_grad_d)
# [observe]
# [shared helpers: _judge_norms, _judge_gradient_run]
def _judge_norms(block, gamma, beta, most=8):
    """Exercise 1: give the block's LayerNorm-like modules (a 1-D weight of γ's size, at most `most`) the test's γ and
    β (β where it has one), and return them. Which modules the block shows only says where to load the values: the
    checks verify by the output that the norm it applies got them."""
    norms = []
    with torch.no_grad():
        for module in block.modules():
            weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
            if len(norms) < most and isinstance(weight, torch.Tensor) and tuple(weight.shape) == tuple(gamma.shape):
                weight.copy_(gamma)
                if isinstance(bias, torch.Tensor) and tuple(bias.shape) == tuple(beta.shape):
                    bias.copy_(beta)
                norms.append(module)
    return norms


def _judge_gradient_run(block, norms, x, weight, bias, upstream):
    """Exercise 1: the block on a copy of x that requires a gradient, around the sublayer h ↦ (h + probe) Wᵀ + b
    (probe: a zero leaf, whose gradient is the one that reaches the sublayer's input), and (output · upstream).sum()
    backpropagated: (output, [x's, the probe's, W's and b's gradients], [(γ's, β's gradient) of each of `norms`]), or
    None when the block raises."""
    linear = _linear(weight, bias)
    probe = torch.zeros(x.shape, requires_grad=True)
    x_leaf = x.clone().requires_grad_()
    try:
        out = block(x_leaf, lambda h: linear(h + probe))
        if isinstance(out, torch.Tensor) and out.requires_grad:
            (out * upstream).sum().backward()
    except Exception:
        return None
    norm_grads = []
    for norm in norms:
        bias_ = getattr(norm, "bias", None)
        norm_grads.append((norm.weight.grad, bias_.grad if isinstance(bias_, torch.Tensor) else None))
    return out, [x_leaf.grad, probe.grad, linear.weight.grad, linear.bias.grad], norm_grads
# [end of shared helpers]


judge_zero_runs = []
for judge_zero_first in (False, True):
    judge_zero_block = AddNorm(8, dropout=0.5, norm_first=judge_zero_first)
    judge_zero_linear = _linear(judge_zero_weight, judge_zero_bias)
    with torch.no_grad():
        judge_zero_runs.append((judge_zero_block.eval()(judge_wide, lambda h: torch.zeros_like(h)),
                                judge_zero_block.train()(judge_wide, lambda h: torch.zeros_like(h)),
                                judge_zero_block(judge_wide, judge_zero_linear),
                                judge_zero_block(judge_wide, judge_zero_linear)))
judge_dropout_runs = []
for judge_dropout_first, judge_p in judge_grid:
    judge_dropout_block = AddNorm(64, dropout=judge_p, norm_first=judge_dropout_first).train()
    judge_recorder = _Recorder(lambda h: torch.full_like(h, 1000.0))
    with torch.no_grad():
        judge_dropout_out = _run("AddNorm(64, dropout=p) in training mode", judge_dropout_block, judge_unit,
                                 judge_recorder)
    judge_dropout_runs.append((judge_dropout_out, judge_recorder.inputs))
judge_grad_runs = []
for judge_grad_first in (False, True):
    judge_grad_block = AddNorm(judge_grad_d, dropout=0.3, norm_first=judge_grad_first).eval()
    judge_grad_norms = _judge_norms(judge_grad_block, judge_grad_gamma, judge_grad_beta)
    judge_grad_runs.append(_judge_gradient_run(judge_grad_block, judge_grad_norms, judge_grad_x, judge_grad_weight,
                                               judge_grad_bias, judge_grad_upstream))
del judge_zero_block, judge_zero_linear, judge_dropout_block, judge_recorder, judge_grad_block, judge_grad_norms
# [check]
assert isinstance(judge_zero_runs, list) and len(judge_zero_runs) == 2, JUDGE_NOT_A_TENSOR
for judge_first, judge_zero_run in zip((False, True), judge_zero_runs, strict=True):
    assert isinstance(judge_zero_run, tuple) and len(judge_zero_run) == 4, JUDGE_NOT_A_TENSOR
    judge_evaluated, judge_trained, judge_first_out, judge_second_out = judge_zero_run
    judge_expected = judge_wide if judge_first else _judge_ln(judge_wide)
    assert _judge_close(judge_evaluated, judge_expected, atol=1e-5), JUDGE_DROPOUT_ZERO_EVAL[judge_first]
    assert _judge_close(judge_trained, judge_expected, atol=1e-5), JUDGE_DROPOUT_RESIDUAL[judge_first]
    assert isinstance(judge_first_out, torch.Tensor) and isinstance(judge_second_out, torch.Tensor) and not (
        judge_first_out.shape == judge_second_out.shape and torch.equal(judge_first_out, judge_second_out)), (
        JUDGE_DROPOUT_NEVER)
assert isinstance(judge_dropout_runs, list) and len(judge_dropout_runs) == len(judge_grid), JUDGE_NOT_A_TENSOR
for (judge_first, judge_rate), judge_dropout_run in zip(judge_grid, judge_dropout_runs, strict=True):
    assert isinstance(judge_dropout_run, tuple) and len(judge_dropout_run) == 2, JUDGE_NOT_A_TENSOR
    _judge_check_dropout(judge_first, judge_rate, judge_dropout_run[0], judge_dropout_run[1], judge_unit)
# the gradients, by value: of the input, of the sublayer's input and weights, of the LayerNorm's γ and β
assert isinstance(judge_grad_runs, list) and len(judge_grad_runs) == 2, JUDGE_GRAD_INPUT
for judge_first, judge_grad_run in zip((False, True), judge_grad_runs, strict=True):
    _judge_check_gradients(judge_grad_run, judge_grad_x, judge_grad_weight, judge_grad_bias, judge_grad_gamma,
                           judge_grad_beta, judge_first, judge_grad_upstream)
