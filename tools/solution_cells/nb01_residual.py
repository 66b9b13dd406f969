"""Exercise 1 — the residual sublayer connection, AddNorm, in its Post-LN and Pre-LN forms."""

from . import answer, code, markdown, solution, tests

CELLS = [
    markdown(r"""
    # Exercise 1 · The residual connection: write `AddNorm`

    Every sublayer of a Transformer — self-attention, cross-attention, the feed-forward network — is wrapped in the
    same connection: a **residual** (the sublayer's input is added back to its output) and a **layer normalization**.
    The 2017 paper normalizes *after* the addition (**Post-LN**); GPT-2 and almost every model since normalize the
    sublayer's *input* instead (**Pre-LN**). In this exercise you write that connection, in both forms.

    Read first: [Chapter 1 — Residual connections](../../chapters/01_residual_connections.md) (on the course
    website: *Chapters → Residual connections*). It explains why the identity path matters and measures what
    happens without it.

    ## What you implement

    `AddNorm(d_model, dropout=0.0, norm_first=False)`, an `nn.Module` called as `add_norm(x, sublayer)`:

    | `norm_first` | name | `add_norm(x, F)` returns |
    |---|---|---|
    | `False` (default) | Post-LN (Vaswani et al. 2017) | `LN(x + Dropout(F(x)))` |
    | `True` | Pre-LN (GPT-2; Xiong et al. 2020) | `x + Dropout(F(LN(x)))` |

    - `x` is a tensor of shape `(batch, seq, d_model)` (any leading shape works); `sublayer` is any function from
      that shape to the same shape — in the tests a small `nn.Linear`, a `FeedForward`, or a plain `lambda`.
    - It returns a tensor of the same shape as `x`, and calls `sublayer` exactly once.
    - Use `LayerNorm` from `addnorm` (imported below), created **once, in `__init__`**, so that its weight γ and
      bias β are parameters of your module and get trained.
    - Use `nn.Dropout(dropout)` on the sublayer's output only, before the addition.

    ## How it is graded

    Four test cells (6 points) check your code: the shapes and parameters (1), Post-LN (2), Pre-LN (2), dropout
    and gradients (1). What you see are the **visible tests**; when your notebook is graded, **hidden tests** in the
    same cells check more cases. A written question at the end (2 points) is graded by a person.

    Run the cells from the top (*Run → Run All Cells*, or Shift-Enter cell by cell). A test cell that finishes
    without an error has passed; a failing one stops with a message that says what is wrong.
    """),
    code(r"""
    import torch
    from torch import nn

    from addnorm import FeedForward, LayerNorm   # given: the normalization itself, and a sublayer to try

    torch.manual_seed(0)
    """),
    markdown(r"""
    ## Your implementation

    Complete `__init__` and `forward`. Keep the class name and the signatures: the tests call exactly these.
    """),
    solution("add_norm", r'''
    class AddNorm(nn.Module):
        """The sublayer connection: Post-LN  LN(x + Dropout(F(x)))  or  Pre-LN  x + Dropout(F(LN(x)))."""

        def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False) -> None:
            super().__init__()
            ### BEGIN SOLUTION
            self.norm_first = norm_first
            self.norm = LayerNorm(d_model)        # γ and β: trained with the rest of the model
            self.dropout = nn.Dropout(dropout)    # on the sublayer's output, before the addition
            ### END SOLUTION

        def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
            """x: (batch, seq, d_model); sublayer maps (batch, seq, d_model) to the same shape."""
            ### BEGIN SOLUTION
            if self.norm_first:
                return x + self.dropout(sublayer(self.norm(x)))    # Pre-LN: the stream itself is never normalized
            return self.norm(x + self.dropout(sublayer(x)))        # Post-LN: normalize after the addition
            ### END SOLUTION
    '''),
    markdown(r"""
    Try it: wrap a feed-forward network. The output has the shape of the input.
    """),
    code(r"""
    add_norm = AddNorm(d_model=16)
    x = torch.randn(2, 5, 16)                         # (batch, seq, d_model)
    print(add_norm(x, FeedForward(16, 64)).shape)     # expected: torch.Size([2, 5, 16])
    """),
    markdown(r"""
    ## Tests

    ### Shapes and parameters (1 point)
    """),
    tests("test_shapes_and_parameters", 1, r'''
    import torch
    from torch import nn

    torch.manual_seed(0)
    for norm_first in (False, True):
        block = AddNorm(16, norm_first=norm_first)
        x = torch.randn(3, 7, 16)
        out = block(x, nn.Linear(16, 16))
        assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
            f"AddNorm(16, norm_first={norm_first}) must return a tensor of the input's shape (3, 7, 16), "
            f"got {getattr(out, 'shape', type(out).__name__)}")
        n_params = sum(p.numel() for p in block.parameters())
        assert n_params == 2 * 16, (
            f"AddNorm(16) should own exactly one LayerNorm's parameters, γ and β (2 × 16 = 32 numbers), but its "
            f"parameters() hold {n_params}. Create the LayerNorm once, in __init__ (self.norm = LayerNorm(d_model)): "
            f"a LayerNorm created inside forward is new at every call and never trained.")
        calls = []

        def counting_sublayer(h):
            calls.append(tuple(h.shape))
            return 0.5 * h

        block(x, counting_sublayer)
        assert len(calls) == 1, f"forward must call the sublayer exactly once; it was called {len(calls)} times"
    ### BEGIN HIDDEN TESTS
    import addnorm

    block = AddNorm(5)
    assert not isinstance(block, addnorm.AddNorm) and not any(isinstance(m, addnorm.AddNorm) for m in block.modules()), (
        "Your AddNorm reuses addnorm.AddNorm, the library's version of the answer: write the connection yourself")
    out = block(torch.randn(4, 5), lambda h: 0 * h)
    assert out.shape == (4, 5), "AddNorm must work for any leading shape (..., d_model), e.g. a 2-D (tokens, d_model) input"
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### Post-LN: `norm_first=False` (2 points)
    """),
    tests("test_post_ln", 2, r'''
    import torch
    import torch.nn.functional as F
    from torch import nn


    def _ln(t):
        """LayerNorm with γ = 1 and β = 0, its parameters at initialization."""
        return F.layer_norm(t, t.shape[-1:], eps=1e-5)


    def _matches(out, value):
        return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out, value, atol=1e-4, rtol=1e-4)


    def _check_post_ln(block, x, f):
        with torch.no_grad():
            out = block(x, f)
            assert not _matches(out, x + f(_ln(x))), (
                "With norm_first=False your AddNorm computes x + F(LN(x)): that is Pre-LN, the two forms are swapped. "
                "Post-LN (the 2017 paper) normalizes after the addition: LN(x + F(x)).")
            assert not _matches(out, _ln(f(x))), (
                "Your Post-LN output is LN(F(x)): the residual is forgotten. Add the input back before normalizing: LN(x + F(x)).")
            assert not _matches(out, x + f(x)), (
                "Your Post-LN output is x + F(x), never normalized: apply the LayerNorm after the addition, LN(x + F(x)).")
            assert not _matches(out, _ln(x) + f(x)), (
                "Your Post-LN output is LN(x) + F(x): only the input is normalized. Normalize the sum: LN(x + F(x)).")
            expected = _ln(x + f(x))
            assert _matches(out, expected), (
                f"AddNorm(norm_first=False) should compute LN(x + F(x)); the largest difference from it is "
                f"{(out - expected).abs().max().item():.3g}")


    torch.manual_seed(1)
    block = AddNorm(16).eval()                     # norm_first=False by default: Post-LN
    _check_post_ln(block, torch.randn(4, 6, 16) * 2 + 1, nn.Linear(16, 16))
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(11)
    block = AddNorm(10, norm_first=False).eval()
    _check_post_ln(block, torch.randn(2, 3, 4, 10) * 3 - 1, lambda h: torch.relu(h) * 2 - 0.5)
    # after training, γ and β are no longer 1 and 0: the output must use the block's own LayerNorm parameters
    weights = [p for name, p in block.named_parameters() if name.endswith("weight")]
    biases = [p for name, p in block.named_parameters() if name.endswith("bias")]
    assert len(weights) == 1 and len(biases) == 1, "expected one LayerNorm, with one weight (γ) and one bias (β)"
    with torch.no_grad():
        weights[0].copy_(torch.linspace(0.5, 2.0, 10))
        biases[0].copy_(torch.linspace(-1.0, 1.0, 10))
        x = torch.randn(5, 10)
        f = nn.Linear(10, 10)
        expected = F.layer_norm(x + f(x), (10,), weights[0], biases[0], eps=1e-5)
        assert _matches(block(x, f), expected), (
            "Once γ and β are trained (≠ 1 and 0), your Post-LN output is not γ·normalize(x + F(x)) + β: "
            "normalize with the LayerNorm your module owns (self.norm), not a fresh one or a functional call")
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### Pre-LN: `norm_first=True` (2 points)
    """),
    tests("test_pre_ln", 2, r'''
    import torch
    import torch.nn.functional as F
    from torch import nn


    def _ln(t):
        """LayerNorm with γ = 1 and β = 0, its parameters at initialization."""
        return F.layer_norm(t, t.shape[-1:], eps=1e-5)


    def _matches(out, value):
        return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out, value, atol=1e-4, rtol=1e-4)


    def _check_pre_ln(block, x, f):
        with torch.no_grad():
            out = block(x, f)
            assert not _matches(out, _ln(x + f(x))), (
                "With norm_first=True your AddNorm computes LN(x + F(x)): that is Post-LN, the two forms are swapped. "
                "Pre-LN normalizes the sublayer's input and adds to the un-normalized stream: x + F(LN(x)).")
            assert not _matches(out, f(_ln(x))), (
                "Your Pre-LN output is F(LN(x)): the residual is forgotten. Add the input back: x + F(LN(x)).")
            assert not _matches(out, _ln(x + f(_ln(x)))), (
                "Your Pre-LN output is LN(x + F(LN(x))): the sum is normalized too. In Pre-LN the residual stream "
                "itself is never normalized: x + F(LN(x)).")
            expected = x + f(_ln(x))
            assert _matches(out, expected), (
                f"AddNorm(norm_first=True) should compute x + F(LN(x)); the largest difference from it is "
                f"{(out - expected).abs().max().item():.3g}")


    torch.manual_seed(2)
    block = AddNorm(16, norm_first=True).eval()
    _check_pre_ln(block, torch.randn(4, 6, 16) * 2 + 1, nn.Linear(16, 16))
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(12)
    block = AddNorm(10, norm_first=True).eval()
    _check_pre_ln(block, torch.randn(2, 3, 4, 10) * 3 - 1, lambda h: torch.tanh(h) * 2 + 0.5)
    # the identity path: with a sublayer that outputs zeros, a Pre-LN block returns its input exactly
    x = torch.randn(3, 5, 10) * 4 + 2
    with torch.no_grad():
        out = block(x, lambda h: torch.zeros_like(h))
    assert torch.allclose(out, x, atol=1e-6), (
        "With a sublayer that outputs zeros, a Pre-LN block must return x unchanged (x + 0): the residual "
        "stream is an identity path. Yours changes it — is the residual forgotten, or the output normalized?")
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### Dropout and gradients (1 point)

    Dropout is active in training mode (`block.train()`) and off in evaluation mode (`block.eval()`); `nn.Dropout`
    does this for you. Gradients must reach the input and the LayerNorm's γ and β.
    """),
    tests("test_dropout_and_gradients", 1, r'''
    import torch
    from torch import nn

    torch.manual_seed(3)
    for norm_first in (False, True):
        block = AddNorm(8, dropout=0.5, norm_first=norm_first)
        f = nn.Linear(8, 8)
        x = torch.randn(4, 6, 8)
        block.eval()
        assert torch.equal(block(x, f), block(x, f)), (
            f"AddNorm(dropout=0.5, norm_first={norm_first}) gives different outputs for the same input in eval mode: "
            "dropout must be off at evaluation. Use nn.Dropout (it knows train/eval), not F.dropout(..., training=True).")
        block.train()
        x = x.clone().requires_grad_()
        out = block(x, f)
        (out * torch.randn_like(out)).sum().backward()
        assert x.grad is not None and torch.isfinite(x.grad).all(), "no gradient reached the input x: keep everything in torch operations"
        missing = [name for name, p in block.named_parameters() if p.grad is None]
        assert not missing, f"no gradient reached the LayerNorm parameters {missing}: is the norm you own the one you apply?"
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(13)
    x = torch.randn(4, 6, 8) * 3 + 1
    for norm_first in (False, True):
        block = AddNorm(8, dropout=0.5, norm_first=norm_first)
        zero = lambda h: torch.zeros_like(h)
        expected = x if norm_first else torch.nn.functional.layer_norm(x, (8,), eps=1e-5)
        with torch.no_grad():
            assert torch.allclose(block.eval()(x, zero), expected, atol=1e-5), (
                f"With norm_first={norm_first} and a sublayer that outputs zeros, AddNorm should return "
                f"{'x' if norm_first else 'LN(x)'}; yours does not, even with dropout off — see the "
                f"{'Pre-LN' if norm_first else 'Post-LN'} test above.")
            assert torch.allclose(block.train()(x, zero), expected, atol=1e-5), (
                f"With norm_first={norm_first}, dropout also hits the residual path: with a zero sublayer the output "
                f"changed. Apply dropout to the sublayer's output only, before the addition: "
                f"{'x + Dropout(F(LN(x)))' if norm_first else 'LN(x + Dropout(F(x)))'}.")
            f = nn.Linear(8, 8)
            assert not torch.equal(block(x, f), block(x, f)), (
                f"AddNorm(dropout=0.5, norm_first={norm_first}) in training mode gives identical outputs twice: "
                "the dropout is never applied. Apply self.dropout to the sublayer's output.")
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ## Written question (2 points, graded by a person)

    The cell below stacks 24 of your `AddNorm` blocks around random feed-forward sublayers (no training) and prints
    the size — the root mean square — of the residual stream after blocks 1, 6, 12 and 24, once for Post-LN and once
    for Pre-LN. Run it.

    **Question.** Why does the Post-LN stream stay at the same size, while the Pre-LN stream grows with depth? What
    must a Pre-LN stack add after its last block, and why? Answer in 3–6 sentences in the cell below the output.
    """),
    code(r"""
    torch.manual_seed(0)
    d_model, depth = 64, 24
    sublayers = [FeedForward(d_model, 4 * d_model) for _ in range(depth)]
    x0 = torch.randn(8, 10, d_model)
    for norm_first in (False, True):
        blocks = [AddNorm(d_model, norm_first=norm_first) for _ in range(depth)]
        x, sizes = x0, []
        with torch.no_grad():
            for block, sublayer in zip(blocks, sublayers):
                x = block(x, sublayer)
                sizes.append(x.pow(2).mean().sqrt().item())
        name = "Pre-LN " if norm_first else "Post-LN"
        print(f"{name}  RMS after blocks 1, 6, 12, 24:", "  ".join(f"{sizes[i]:.2f}" for i in (0, 5, 11, 23)))
    """),
    answer("answer_stream_size", 2, r"""
    **Model answer.** Post-LN normalizes after every addition, so each block's output has mean 0 and variance 1 per
    token (γ = 1, β = 0 at initialization): its RMS is 1 at any depth. Pre-LN normalizes only the copy of the stream
    that enters the sublayer; the stream itself is x + F₁ + F₂ + … , a sum of updates that are roughly independent,
    so its variance grows roughly linearly with depth (RMS ≈ √(1 + c·depth)). Each new update is then small compared
    with the stream (the top layers' gradients shrink too, Xiong et al. 2020). Because nothing normalizes the stream,
    a Pre-LN stack needs a final LayerNorm after its last block, before the output layer (GPT-2's `ln_f`).

    **Marking (2 points).** 1 point: Post-LN normalizes after the addition, so the stream is re-scaled at every
    block. 1 point: in Pre-LN the stream is an un-normalized running sum, it grows with depth, and a final LayerNorm
    is needed before the output.
    """),
]
