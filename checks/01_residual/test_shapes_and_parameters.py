import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 10)
judge_tokens = torch.randn(4, 5)
# a block of a size drawn from the course's secret, in eval mode, with the test's γ and β in its LayerNorm and the
# test's sublayer: its values against the formula in float64 (either form), at several leading shapes and again on its
# first input (one instance: nothing may be kept from an earlier call); each call gets a sublayer whose k-th call
# returns k · F(h)
judge_shape_d = int(torch.randint(6, 25, ()))
judge_shape_weight, judge_shape_bias = torch.randn(judge_shape_d, judge_shape_d) / 3, torch.randn(judge_shape_d) / 3
judge_shape_gamma, judge_shape_beta = 1 + 0.5 * torch.randn(judge_shape_d), 0.5 * torch.randn(judge_shape_d)
judge_shape_inputs = [torch.randn(3, 7, judge_shape_d) * 2 + 1, torch.randn(3, 7, judge_shape_d) * 3 - 1,
                      torch.randn(5, judge_shape_d) * 2, torch.randn(2, 3, 4, judge_shape_d) + 0.5]
# [observe]
# [shared helpers: _judge_norms, _judge_called, _judge_counted]
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


def _judge_called(block, x, sublayer):
    """Exercise 1: block(x, sublayer), or None when it raises (a block that keeps something from an earlier call may
    fail at another shape)."""
    try:
        return block(x, sublayer)
    except Exception:
        return None


def _judge_counted(f):
    """Exercise 1: a sublayer whose k-th call returns k · f(h), so that a block calling it more than once shows in its
    output."""
    calls = []

    def _judge_counted_sublayer(h):
        calls.append(None)
        return f(h) * len(calls)

    return _judge_counted_sublayer
# [end of shared helpers]


judge_flat_block = AddNorm(5)
judge_classes = [(c.__module__, c.__qualname__) for m in judge_flat_block.modules() for c in type(m).__mro__]
judge_flat_out = _run("AddNorm(5)(x, sublayer) with a 2-D x of shape (4, 5)", judge_flat_block, judge_tokens,
                      lambda h: 0 * h,
                      hint="AddNorm must work for any leading shape (..., d_model), e.g. a 2-D (tokens, d_model) input.")
judge_shape_runs = []
for judge_shape_first in (False, True):
    judge_shape_block = AddNorm(judge_shape_d, norm_first=judge_shape_first).eval()
    judge_shape_owns = len(_judge_norms(judge_shape_block, judge_shape_gamma, judge_shape_beta)) > 0
    with torch.no_grad():
        judge_shape_runs.append(([_judge_called(judge_shape_block, judge_x,
                                                _judge_counted(_linear(judge_shape_weight, judge_shape_bias)))
                                  for judge_x in judge_shape_inputs + judge_shape_inputs[:1]], judge_shape_owns))
del judge_flat_block, judge_shape_block              # not data: not observations
# [check]
# which classes the block is made of: what the kernel says, advice only (it names the library when the values fail)
judge_library = isinstance(judge_classes, list) and (addnorm.AddNorm.__module__, addnorm.AddNorm.__qualname__) in [
    tuple(judge_item) for judge_item in judge_classes if isinstance(judge_item, (list, tuple))]
assert isinstance(judge_flat_out, torch.Tensor) and tuple(judge_flat_out.shape) == (4, 5), (
    "AddNorm must work for any leading shape (..., d_model), e.g. a 2-D (tokens, d_model) input")
# a sublayer that outputs zeros: LN(x) (or x, the other form: which form is the Post-LN test's business)
_judge_check_any_form(judge_flat_out, judge_tokens, lambda h: 0 * h, False)
assert isinstance(judge_shape_runs, list) and len(judge_shape_runs) == 2, JUDGE_STATE
judge_f = _judge_linear(judge_shape_weight, judge_shape_bias)
for judge_first, (judge_outs, judge_owns) in zip((False, True), judge_shape_runs, strict=True):
    assert isinstance(judge_outs, list) and len(judge_outs) == len(judge_shape_inputs) + 1, JUDGE_STATE
    assert not judge_library or any(_judge_close(judge_outs[0], _judge_formula(
        judge_shape_inputs[0], judge_f, judge_form, judge_shape_gamma, judge_shape_beta))
        for judge_form in (False, True)), JUDGE_LIBRARY
    # either form counts here (the Post-LN and Pre-LN tests check which); later calls must give that form again
    judge_form = _judge_check_any_form(judge_outs[0], judge_shape_inputs[0], judge_f, judge_first, judge_shape_gamma,
                                       judge_shape_beta, judge_owns is True)
    for judge_x, judge_out in zip(judge_shape_inputs[1:] + judge_shape_inputs[:1], judge_outs[1:], strict=True):
        assert _judge_close(judge_out, _judge_formula(judge_x, judge_f, judge_form, judge_shape_gamma,
                                                      judge_shape_beta)), JUDGE_STATE
