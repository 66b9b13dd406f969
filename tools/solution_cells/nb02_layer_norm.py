"""Exercise 2 — LayerNorm from its formula (no built-in), and RMSNorm."""

from . import answer, code, markdown, solution, tests, with_snippet

# Shared by the test cells: the built-in normalizations fail inside this block, with a message saying why.
# (Each test cell carries its own copy, so a cell runs on its own and a learner can read what it checks.)
NO_BUILTIN = r'''
class _NoBuiltinNorm(TorchFunctionMode):
    """Inside `with _NoBuiltinNorm():` a call to torch's own layer_norm or rms_norm fails, saying so."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("layer_norm", "native_layer_norm", "rms_norm"):
            raise AssertionError(
                f"Your code calls torch's built-in {name} (through nn.LayerNorm, F.layer_norm, torch.{name} or "
                f"nn.RMSNorm). This exercise asks you to write the normalization yourself, from its formula, "
                f"with tensor operations: mean, subtraction, pow, sqrt.")
        return func(*args, **(kwargs or {}))
'''.strip("\n")


def _with_guard(text: str) -> str:
    """Insert the shared helpers where a test cell says {NO_BUILTIN}."""
    return with_snippet(text, "NO_BUILTIN", NO_BUILTIN)


CELLS = [
    markdown(r"""
    # Exercise 2 · Layer normalization and RMSNorm

    Layer normalization re-centres and re-scales **each token on its own**: over the `d_model` features of one
    position, never across the batch or the sequence. With the mean μ and the *biased* variance σ² of a token's
    features,

    $$\mathrm{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta,
    \qquad \mu = \frac{1}{d}\sum_{i=1}^{d} x_i, \qquad \sigma^2 = \frac{1}{d}\sum_{i=1}^{d} (x_i - \mu)^2 .$$

    RMSNorm (Zhang & Sennrich 2019), used by T5 and LLaMA, drops the mean and β:
    $\mathrm{RMSNorm}(x) = \gamma \odot x / \sqrt{\tfrac{1}{d}\sum_i x_i^2 + \varepsilon}$.

    Read first: [Chapter 2 — Layer normalization](../../chapters/02_layer_normalization.md) (on the course
    website: *Chapters → Layer normalization*).

    ## What you implement

    - `LayerNorm(d_model, eps=1e-5)`: an `nn.Module` with two parameters, `weight` (γ, initialized to ones) and
      `bias` (β, zeros), both of shape `(d_model,)`. `forward(x)` takes `x` of shape `(..., d_model)` — e.g.
      `(batch, seq, d_model)` — and returns the same shape. It must match `torch.nn.LayerNorm` to float32 precision.
    - `RMSNorm(d_model, eps=1e-6)`: one parameter, `weight` (γ, ones, shape `(d_model,)`), no bias; same shapes.

    Write them with tensor operations (`mean`, `pow`, `sqrt`, …). **Do not** use `nn.LayerNorm`, `F.layer_norm`,
    `torch.layer_norm` or `nn.RMSNorm`: the tests detect them and fail, saying so.

    ## How it is graded

    Five test cells (9 points): LayerNorm's parameters (1), its values (3), its numerics — ε and extreme inputs (2),
    γ, β and gradients (1), RMSNorm (2). **Hidden tests** in the same cells check more cases when your notebook is
    graded. A written question at the end (2 points) is graded by a person. A test cell that finishes without an
    error has passed.
    """),
    code(r"""
    import torch
    from torch import nn

    torch.manual_seed(0)
    """),
    markdown(r"""
    ## Your implementation: `LayerNorm`
    """),
    solution("layer_norm", r'''
    class LayerNorm(nn.Module):
        """LayerNorm(x) = γ · (x − μ) / √(σ² + ε) + β over the last axis, with the biased variance σ²."""

        def __init__(self, d_model: int, eps: float = 1e-5) -> None:
            super().__init__()
            self.d_model = d_model
            self.eps = eps
            ### BEGIN SOLUTION
            self.weight = nn.Parameter(torch.ones(d_model))    # γ
            self.bias = nn.Parameter(torch.zeros(d_model))     # β
            ### END SOLUTION

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            """x: (..., d_model) -> (..., d_model), each token normalized over its own features."""
            ### BEGIN SOLUTION
            mean = x.mean(dim=-1, keepdim=True)                       # μ: one per token, (..., 1)
            centered = x - mean                                       # subtract first: exact even for a large mean
            variance = centered.pow(2).mean(dim=-1, keepdim=True)     # σ²: biased, divide by d (not d − 1)
            return centered / torch.sqrt(variance + self.eps) * self.weight + self.bias
            ### END SOLUTION
    '''),
    markdown(r"""
    Try it: each token of the output has mean ≈ 0 and standard deviation ≈ 1.
    """),
    code(r"""
    x = torch.randn(2, 3, 8) * 5 + 10        # (batch, seq, d_model)
    y = LayerNorm(8)(x)
    print("means:", y.mean(dim=-1).detach().numpy().round(4) + 0.0)          # + 0.0 turns -0.0 into 0.0
    print("standard deviations:", y.std(dim=-1, unbiased=False).detach().numpy().round(4))
    """),
    markdown(r"""
    ## Your implementation: `RMSNorm`
    """),
    solution("rms_norm", r'''
    class RMSNorm(nn.Module):
        """RMSNorm(x) = γ · x / √(mean(x²) + ε) over the last axis: no mean subtraction, no β."""

        def __init__(self, d_model: int, eps: float = 1e-6) -> None:
            super().__init__()
            self.d_model = d_model
            self.eps = eps
            ### BEGIN SOLUTION
            self.weight = nn.Parameter(torch.ones(d_model))    # γ
            ### END SOLUTION

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            """x: (..., d_model) -> (..., d_model)."""
            ### BEGIN SOLUTION
            mean_square = x.pow(2).mean(dim=-1, keepdim=True)         # (..., 1)
            return x / torch.sqrt(mean_square + self.eps) * self.weight
            ### END SOLUTION
    '''),
    markdown(r"""
    ## Tests

    ### `LayerNorm`: parameters (1 point)
    """),
    tests("test_layer_norm_parameters", 1, r'''
    import inspect

    import torch
    from torch import nn

    ln = LayerNorm(6)
    assert not any(isinstance(m, nn.LayerNorm) for m in ln.modules()), (
        "Your LayerNorm contains an nn.LayerNorm, the built-in this exercise asks you to write: "
        "create the parameters weight and bias yourself and compute the normalization from its formula")
    params = dict(ln.named_parameters())
    assert set(params) == {"weight", "bias"}, (
        f"LayerNorm should have exactly two parameters, named weight (γ) and bias (β); it has {sorted(params)}. "
        "Create them in __init__ with nn.Parameter.")
    assert tuple(ln.weight.shape) == (6,) and torch.equal(ln.weight.detach(), torch.ones(6)), (
        "weight (γ) must start as ones, of shape (d_model,)")
    assert tuple(ln.bias.shape) == (6,) and torch.equal(ln.bias.detach(), torch.zeros(6)), (
        "bias (β) must start as zeros, of shape (d_model,)")
    assert inspect.signature(LayerNorm).parameters["eps"].default == 1e-5, "the default eps must be 1e-5, as in torch.nn.LayerNorm"
    ### BEGIN HIDDEN TESTS
    import addnorm

    assert not isinstance(ln, (addnorm.LayerNorm, addnorm.RMSNorm)), (
        "Your LayerNorm is (a subclass of) addnorm.LayerNorm, the library's version of the answer: write it yourself")
    assert ln.weight.requires_grad and ln.bias.requires_grad, "weight and bias must be trainable (requires_grad=True)"
    assert tuple(LayerNorm(3).weight.shape) == (3,), "the parameters' shape must follow d_model"
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### `LayerNorm`: values (3 points)

    Your output is compared with the formula on a batch of tokens. If it does not match, the message says which
    common mistake it matches.
    """),
    tests("test_layer_norm_values", 3, _with_guard(r'''
    import torch
    from torch import nn
    from torch.overrides import TorchFunctionMode

    {NO_BUILTIN}


    def _reference(x, eps=1e-5, correction=0, dims=(-1,), eps_inside=True):
        """The formula in float64; the options reproduce the common mistakes."""
        x = x.double()
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True, correction=correction)
        denominator = (var + eps).sqrt() if eps_inside else var.sqrt() + eps
        return ((x - mean) / denominator).float()


    def _matches(out, value, atol=1e-4):
        return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out.float(), value, atol=atol, rtol=1e-4)


    def _check_values(ln, x):
        with _NoBuiltinNorm():
            out = ln(x)
        assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
            f"LayerNorm must return a tensor of the input's shape {tuple(x.shape)}, got {getattr(out, 'shape', type(out).__name__)}")
        bessel = _matches(out, _reference(x, correction=1)) or _matches(out, _reference(x, correction=1, eps_inside=False))
        assert not bessel, (
            "Your variance divides by d − 1 (Bessel's correction: torch.var and torch.std default to it); LayerNorm "
            "uses the biased variance, dividing by d: x.var(dim=-1, unbiased=False), or ((x - μ)**2).mean(dim=-1). "
            "(If you wrote x.std() + ε, as the Annotated Transformer does, also move ε inside the root: √(σ² + ε).)")
        for dims, where in (((0,), "the batch axis (dim 0), as BatchNorm does"), ((-2,), "the sequence axis (dim -2)"),
                            (tuple(range(x.dim())), "all the elements at once")):
            assert not _matches(out, _reference(x, dims=dims)), (
                f"You normalize over the wrong axis: over {where}. LayerNorm takes μ and σ² over the features of "
                f"each token, the last axis: dim=-1, keepdim=True.")
        expected = _reference(x)
        assert _matches(out, expected), (
            f"LayerNorm(x) should be (x − μ) / √(σ² + ε) (with γ = 1, β = 0 as initialized); the largest difference "
            f"is {(out.float() - expected).abs().max().item():.3g}. Check: μ and σ² over the last axis (dim=-1, "
            f"keepdim=True), σ² biased (divide by d), ε inside the square root.")


    torch.manual_seed(2)
    ln = LayerNorm(16)
    _check_values(ln, torch.randn(4, 5, 16) * 2 + 3)          # (batch, seq, d_model)
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(12)
    # d = 4: Bessel's correction changes the scale by √(4/3)
    _check_values(LayerNorm(4), torch.randn(3, 6, 4) * 5 - 2)
    # other shapes: a 2-D (tokens, d_model) input and a single token (d_model,)
    ln = LayerNorm(8)
    for x in (torch.randn(5, 8) * 3 + 1, torch.randn(8) * 2):
        with _NoBuiltinNorm():
            out = ln(x)
        assert _matches(out, _reference(x)), (
            f"LayerNorm must normalize any input of shape (..., d_model) over its last axis; it fails for shape {tuple(x.shape)}")
    # a token's output must not depend on the other tokens in the batch
    x = torch.randn(4, 5, 8) * 2 + 1
    with _NoBuiltinNorm():
        together, alone = ln(x), ln(x[:1, :1])
    assert _matches(together[:1, :1], alone), (
        "You normalize over the wrong axis: a token's output changes with the other tokens in the batch. "
        "LayerNorm's statistics are over the features of one token (dim=-1), never across tokens.")
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ### `LayerNorm`: numerics (2 points)

    A constant token has variance 0: ε keeps the division finite. The hidden tests also try tokens whose features
    barely vary (where the place of ε matters) and tokens with a large mean.
    """),
    tests("test_layer_norm_numerics", 2, _with_guard(r'''
    import torch
    from torch.overrides import TorchFunctionMode

    {NO_BUILTIN}


    def _reference(x, eps=1e-5, eps_inside=True):
        x = x.double()
        centered = x - x.mean(dim=-1, keepdim=True)
        var = centered.pow(2).mean(dim=-1, keepdim=True)
        return (centered / ((var + eps).sqrt() if eps_inside else var.sqrt() + eps)).float()


    ln = LayerNorm(8)
    constant = torch.full((2, 3, 8), 3.0)
    with _NoBuiltinNorm():
        out = ln(constant)
    assert torch.isfinite(out).all(), (
        "A constant token (variance 0) gives NaN or inf: add ε to the variance before taking the square root, √(σ² + ε)")
    assert torch.allclose(out, torch.zeros_like(out), atol=1e-4), (
        "For a constant token x − μ = 0, so LayerNorm must return β (zeros at initialization)")
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(22)
    ordinary = torch.randn(4, 16) * 2 + 1
    with _NoBuiltinNorm():
        out = LayerNorm(16)(ordinary)
    assert torch.allclose(out, _reference(ordinary), atol=1e-4), (
        "Your LayerNorm is already wrong on ordinary inputs: fix what the values test above reports first")
    # a large mean: E[x²] − E[x]² cancels catastrophically in float32; subtracting μ first does not
    big = torch.randn(4, 64) + 1000.0
    with _NoBuiltinNorm():
        out = LayerNorm(64)(big)
    assert torch.isfinite(out).all() and torch.allclose(out, _reference(big), atol=1e-2, rtol=1e-2), (
        "For tokens with a large mean (1000 ± 1) your output is wrong: computing σ² as mean(x²) − μ² loses all "
        "precision in float32 (1e6 − 1e6). Subtract the mean first, then average the squares: ((x − μ)²).mean().")
    # features that barely vary: σ ≈ 1e-3, so σ² ≈ 1e-6 is smaller than ε = 1e-5
    tiny = torch.randn(4, 16) * 1e-3
    ln = LayerNorm(16)
    with _NoBuiltinNorm():
        out = ln(tiny)
    assert not torch.allclose(out, _reference(tiny, eps_inside=False), atol=1e-3, rtol=1e-3), (
        "ε is outside the square root: you compute (x − μ) / (σ + ε). LayerNorm uses (x − μ) / √(σ² + ε); the two "
        "differ when σ² is not much larger than ε (here σ ≈ 1e-3, and your output is about 3 times too large).")
    assert torch.allclose(out, _reference(tiny), atol=1e-3, rtol=1e-3), (
        "For tokens whose features barely vary (σ ≈ 1e-3) your output differs from (x − μ) / √(σ² + ε): "
        "is ε added to the variance, inside the square root?")
    with _NoBuiltinNorm():
        out = LayerNorm(16, eps=1e-2)(tiny)
    assert torch.allclose(out, _reference(tiny, eps=1e-2), atol=1e-3, rtol=1e-3), (
        "LayerNorm(16, eps=1e-2) gives the result of another ε: use the eps passed to __init__ (self.eps)")
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ### `LayerNorm`: γ, β and gradients (1 point)

    After training, γ and β are no longer ones and zeros; the output must use them. Gradients must flow back to the
    input and to both parameters, exactly as through the formula.
    """),
    tests("test_layer_norm_affine_and_gradients", 1, _with_guard(r'''
    import torch
    from torch.overrides import TorchFunctionMode

    {NO_BUILTIN}

    torch.manual_seed(3)
    ln = LayerNorm(8)
    x = torch.randn(3, 8) * 2 + 1
    with _NoBuiltinNorm():
        out = ln(x)
    centered = x - x.mean(dim=-1, keepdim=True)
    assert torch.allclose(out, centered / (centered.pow(2).mean(dim=-1, keepdim=True) + 1e-5).sqrt(), atol=1e-4), (
        "Your LayerNorm is wrong even with γ = 1 and β = 0: fix what the values test above reports first")
    with torch.no_grad():
        ln.weight.copy_(torch.linspace(0.5, 2.0, 8))
        ln.bias.copy_(torch.linspace(-1.0, 1.0, 8))
    x = x.clone().requires_grad_()
    with _NoBuiltinNorm():
        out = ln(x)
    assert isinstance(out, torch.Tensor) and out.requires_grad, (
        "The output does not require a gradient: compute it with torch operations on x (no .item(), .numpy() "
        "or torch.no_grad), so that training can back-propagate through it")
    x64 = x.detach().double().requires_grad_()
    w64, b64 = ln.weight.detach().double(), ln.bias.detach().double()
    centered = x64 - x64.mean(dim=-1, keepdim=True)
    expected = centered / (centered.pow(2).mean(dim=-1, keepdim=True) + 1e-5).sqrt() * w64 + b64
    assert torch.allclose(out.double(), expected, atol=1e-4), (
        "With γ ≠ 1 and β ≠ 0 your output is not γ · normalized + β: multiply by self.weight and add self.bias")
    probe = torch.randn(3, 8)
    (out * probe).sum().backward()
    (expected * probe.double()).sum().backward()
    assert ln.weight.grad is not None and ln.bias.grad is not None, "no gradient reached weight and bias"
    assert x.grad is not None and torch.allclose(x.grad.double(), x64.grad, atol=1e-4), (
        "The gradient with respect to x differs from the formula's: did you .detach() μ or σ², or treat them as "
        "constants? Gradients must flow through the mean and the variance too.")
    ''')),
    markdown(r"""
    ### `RMSNorm` (2 points)
    """),
    tests("test_rms_norm", 2, _with_guard(r'''
    import inspect

    import torch
    from torch.overrides import TorchFunctionMode

    {NO_BUILTIN}


    def _reference(x, eps=1e-6, subtract_mean=False, eps_inside=True):
        x = x.double()
        if subtract_mean:
            x = x - x.mean(dim=-1, keepdim=True)
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)
        return (x / ((mean_square + eps).sqrt() if eps_inside else mean_square.sqrt() + eps)).float()


    rms = RMSNorm(16)
    params = dict(rms.named_parameters())
    assert set(params) == {"weight"}, (
        f"RMSNorm has one parameter, weight (γ), and no bias β (Zhang & Sennrich 2019); yours has {sorted(params)}")
    assert tuple(rms.weight.shape) == (16,) and torch.equal(rms.weight.detach(), torch.ones(16)), (
        "weight (γ) must start as ones, of shape (d_model,)")
    assert inspect.signature(RMSNorm).parameters["eps"].default == 1e-6, "the default eps of RMSNorm must be 1e-6"
    torch.manual_seed(4)
    x = torch.randn(4, 5, 16) * 2 + 3
    with _NoBuiltinNorm():
        out = rms(x)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, f"RMSNorm must return the input's shape {tuple(x.shape)}"
    assert not torch.allclose(out, _reference(x, subtract_mean=True), atol=1e-4), (
        "Your RMSNorm subtracts the mean: that is LayerNorm. RMSNorm divides x itself by its root mean square: "
        "x / √(mean(x²) + ε) · γ")
    expected = _reference(x)
    assert torch.allclose(out, expected, atol=1e-4), (
        f"RMSNorm(x) should be x / √(mean(x²) + ε) over the last axis; the largest difference is "
        f"{(out - expected).abs().max().item():.3g}")
    ### BEGIN HIDDEN TESTS
    import addnorm

    assert not isinstance(rms, (addnorm.RMSNorm, addnorm.LayerNorm)), (
        "Your RMSNorm is (a subclass of) addnorm.RMSNorm, the library's version of the answer: write it yourself")
    torch.manual_seed(14)
    tiny = torch.randn(3, 16) * 1e-3
    with _NoBuiltinNorm():
        out = RMSNorm(16, eps=1e-5)(tiny)
    assert not torch.allclose(out, _reference(tiny, eps=1e-5, eps_inside=False), atol=1e-3, rtol=1e-3), (
        "ε is outside the square root: RMSNorm uses x / √(mean(x²) + ε), not x / (√mean(x²) + ε)")
    assert torch.allclose(out, _reference(tiny, eps=1e-5), atol=1e-3, rtol=1e-3), (
        "For small inputs (RMS ≈ 1e-3) with eps=1e-5 your RMSNorm is wrong: add self.eps inside the square root")
    with torch.no_grad():
        rms.weight.copy_(torch.linspace(-1.0, 2.0, 16))
    with _NoBuiltinNorm():
        out = rms(x)
    assert torch.allclose(out, _reference(x) * rms.weight.detach(), atol=1e-4), (
        "With γ ≠ 1 your RMSNorm ignores it: multiply by self.weight")
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ## Written question (2 points, graded by a person)

    The cell below normalizes the same sentence three times: alone, in a batch with another sentence, and in a batch
    with a padded sequence (all zeros). It prints the first three features of the sentence's first token after your
    `LayerNorm` and after `nn.BatchNorm1d` (in training mode, which normalizes each feature with statistics of the
    whole batch). Run it.

    **Question.** Why does your LayerNorm give the same numbers in all three cases, while BatchNorm's change? Why does
    this matter for variable-length, padded text — and for a model that translates one sentence at a time? Answer in
    3–6 sentences in the cell below the output.
    """),
    code(r"""
    torch.manual_seed(0)
    d_model = 8
    layer_norm, batch_norm = LayerNorm(d_model), nn.BatchNorm1d(d_model)
    sentence = torch.randn(1, 5, d_model)
    batches = {
        "alone": sentence,
        "with another sentence": torch.cat([sentence, torch.randn(1, 5, d_model) * 3 + 2]),
        "with a padded sequence": torch.cat([sentence, torch.zeros(1, 5, d_model)]),
    }
    with torch.no_grad():
        for name, batch in batches.items():
            ln_out = layer_norm(batch)[0, 0, :3]
            bn_out = batch_norm(batch.reshape(-1, d_model)).reshape(batch.shape)[0, 0, :3]   # (batch·seq, features)
            print(f"{name:>24}   LayerNorm: {ln_out.numpy().round(3)}   BatchNorm: {bn_out.numpy().round(3)}")
    """),
    answer("answer_batch_independence", 2, r"""
    **Model answer.** LayerNorm computes μ and σ² over the features of one token, so a token's output depends on
    that token alone: adding other sentences or padding to the batch cannot change it. BatchNorm normalizes each
    feature with the mean and variance over the whole batch (and here all positions), so its output for the same
    token moves with whatever else is in the batch — another sentence, or rows of padding zeros that drag the mean
    and variance. For text, batches mix sentences of different lengths and padding, and their statistics fluctuate
    strongly (Shen et al. 2020); at inference a single sentence would have to rely on running averages that do not
    match. LayerNorm behaves the same in training and inference, for any batch size, including one.

    **Marking (2 points).** 1 point: statistics per token (LayerNorm) versus per feature across the batch
    (BatchNorm), hence batch-(in)dependence. 1 point: the consequence for padding / variable lengths / batch size 1
    or inference.
    """),
]
