import torch

# [inputs]
torch.manual_seed(SEED + 12)
# a block of a size drawn from the course's secret: its values against the formula in float64 with its LayerNorm as
# created (γ = 1, β = 0), its identity path, then with the test's trained-looking γ and β loaded, at another shape
judge_pre_d = int(torch.randint(6, 25, ()))
judge_pre_x4 = torch.randn(2, 3, 4, judge_pre_d) * 3 - 1
judge_pre_stream = torch.randn(3, 5, judge_pre_d) * 4 + 2
judge_pre_x2 = torch.randn(5, judge_pre_d) * 2
judge_pre_weight, judge_pre_bias = torch.randn(judge_pre_d, judge_pre_d) / 3, torch.randn(judge_pre_d) / 3
judge_pre_gamma, judge_pre_beta = 1 + 0.5 * torch.randn(judge_pre_d), 0.5 * torch.randn(judge_pre_d)
# [observe]
# [shared helpers: _judge_norms]
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
# [end of shared helpers]


with torch.no_grad():
    judge_pre_again = _run("AddNorm(norm_first=True)(x, sublayer)", block, x, f.f)      # the visible block, called again
    judge_pre_x_again = x.clone()
    judge_pre_block = AddNorm(judge_pre_d, norm_first=True).eval()
    judge_pre_plain = _run("AddNorm(norm_first=True)(x, sublayer)", judge_pre_block, judge_pre_x4,
                           lambda h: torch.tanh(h) * 2 + 0.5)
    judge_pre_x4_after = judge_pre_x4.clone()
    judge_pre_identity = _run("AddNorm(norm_first=True)(x, sublayer)", judge_pre_block, judge_pre_stream,
                              torch.zeros_like)
    judge_pre_owns = len(_judge_norms(judge_pre_block, judge_pre_gamma, judge_pre_beta)) > 0
    judge_pre_trained = _run("AddNorm(norm_first=True)(x, sublayer)", judge_pre_block, judge_pre_x2,
                             _linear(judge_pre_weight, judge_pre_bias))
del judge_pre_block                                  # not data: not an observation
# [check]
assert isinstance(judge_pre_x_again, torch.Tensor) and torch.equal(judge_pre_x_again, x), JUDGE_IN_PLACE
_judge_check_connection(judge_pre_again, x, _judge_linear(weight, bias), True)
assert isinstance(judge_pre_x4_after, torch.Tensor) and torch.equal(judge_pre_x4_after, judge_pre_x4), JUDGE_IN_PLACE
_judge_check_connection(judge_pre_plain, judge_pre_x4, lambda h: torch.tanh(h) * 2 + 0.5, True)
# the identity path: with a sublayer that outputs zeros, a Pre-LN block returns its input exactly
assert _judge_close(judge_pre_identity, judge_pre_stream, atol=1e-6), (
    "With a sublayer that outputs zeros, a Pre-LN block must return x unchanged (x + 0): the residual "
    "stream is an identity path. Yours changes it — is the residual forgotten, or the output normalized?")
# trained γ and β: the sublayer must see the block's own LayerNorm, with its parameters
_judge_check_connection(judge_pre_trained, judge_pre_x2, _judge_linear(judge_pre_weight, judge_pre_bias), True,
                        judge_pre_gamma, judge_pre_beta, judge_pre_owns is True)
