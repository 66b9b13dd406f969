import torch

# [inputs]
torch.manual_seed(SEED + 11)
# a block of a size drawn from the course's secret: its values against the formula in float64 with its LayerNorm as
# created (γ = 1, β = 0), then with the test's trained-looking γ and β (≠ 1 and 0) loaded into it, at another shape
judge_post_d = int(torch.randint(6, 25, ()))
judge_post_x4 = torch.randn(2, 3, 4, judge_post_d) * 3 - 1
judge_post_x2 = torch.randn(5, judge_post_d)
judge_post_weight, judge_post_bias = torch.randn(judge_post_d, judge_post_d) / 3, torch.randn(judge_post_d) / 3
judge_post_gamma, judge_post_beta = 1 + 0.5 * torch.randn(judge_post_d), 0.5 * torch.randn(judge_post_d)
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
    judge_post_again = _run("AddNorm(norm_first=False)(x, sublayer)", block, x, f.f)   # the visible block, called again
    judge_post_x_again = x.clone()
    judge_post_block = AddNorm(judge_post_d, norm_first=False).eval()
    judge_post_plain = _run("AddNorm(norm_first=False)(x, sublayer)", judge_post_block, judge_post_x4,
                            lambda h: torch.relu(h) * 2 - 0.5)
    judge_post_x4_after = judge_post_x4.clone()
    judge_post_owns = len(_judge_norms(judge_post_block, judge_post_gamma, judge_post_beta)) > 0
    judge_post_trained = _run("AddNorm(norm_first=False)(x, sublayer)", judge_post_block, judge_post_x2,
                              _linear(judge_post_weight, judge_post_bias))
del judge_post_block                                 # not data: not an observation
# [check]
assert isinstance(judge_post_x_again, torch.Tensor) and torch.equal(judge_post_x_again, x), JUDGE_IN_PLACE
_judge_check_connection(judge_post_again, x, _judge_linear(weight, bias), False)
assert isinstance(judge_post_x4_after, torch.Tensor) and torch.equal(judge_post_x4_after, judge_post_x4), JUDGE_IN_PLACE
_judge_check_connection(judge_post_plain, judge_post_x4, lambda h: torch.relu(h) * 2 - 0.5, False)
# after training, γ and β are no longer 1 and 0: the output must use the block's own LayerNorm, with them
_judge_check_connection(judge_post_trained, judge_post_x2, _judge_linear(judge_post_weight, judge_post_bias), False,
                        judge_post_gamma, judge_post_beta, judge_post_owns is True)
