"""Exercise 3 — an encoder layer (two sublayers, each in residual + LayerNorm) and a stack of independent copies."""

from . import answer, code, markdown, solution, tests, with_snippet

# What an encoder layer built from the learner's own attention and feed-forward modules must compute; the
# options reproduce the common mistakes. Pasted into the test cells that need it.
REFERENCE = r'''
def _reference(layer, x, mask=None, norm_first=False, residual=(True, True)):
    """The encoder layer's formula with the learner's self_attn and feed_forward, LayerNorms at γ = 1, β = 0."""
    ln = lambda t: F.layer_norm(t, t.shape[-1:], eps=1e-5)
    sublayers = (lambda h: layer.self_attn(h, h, h, key_padding_mask=mask), layer.feed_forward)
    for f, keep in zip(sublayers, residual):
        if norm_first:
            x = (x if keep else 0) + f(ln(x))
        else:
            x = ln((x if keep else 0) + f(x))
    return x


def _matches(out, value, atol=1e-4):
    return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out, value, atol=atol, rtol=1e-4)


def _check_layer(layer, x, norm_first, mask=None):
    """Compare layer(x) with the formula; name the mistake when the output matches a known wrong variant."""
    form, other = ("Pre-LN", "Post-LN") if norm_first else ("Post-LN", "Pre-LN")
    with torch.no_grad():
        out = layer(x, src_key_padding_mask=mask)
        assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
            f"EncoderLayer must return a tensor of the input's shape {tuple(x.shape)}, got {getattr(out, 'shape', type(out).__name__)}")
        assert not _matches(out, _reference(layer, x, mask, not norm_first)), (
            f"With norm_first={norm_first} your layer computes {other}: the two forms are swapped. Post-LN: "
            f"x = LN(x + Sublayer(x)); Pre-LN: x = x + Sublayer(LN(x)).")
        for residual, which in (((False, False), "both sublayers"), ((False, True), "the self-attention sublayer"),
                                ((True, False), "the feed-forward sublayer")):
            assert not _matches(out, _reference(layer, x, mask, norm_first, residual)), (
                f"The residual is forgotten around {which}: each sublayer's input must be added to its output "
                f"({'x + Sublayer(LN(x))' if norm_first else 'LN(x + Sublayer(x))'}).")
        if mask is not None:
            assert not _matches(out, _reference(layer, x, None, norm_first)), (
                "Your layer ignores src_key_padding_mask: pass it to the self-attention, "
                "self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask)")
        expected = _reference(layer, x, mask, norm_first)
        assert _matches(out, expected), (
            f"Your {form} encoder layer differs from "
            f"{'x = x + SelfAttn(LN₁(x)); x + FFN(LN₂(x))' if norm_first else 'x = LN₁(x + SelfAttn(x)); LN₂(x + FFN(x))'}"
            f" by up to {(out - expected).abs().max().item():.3g}. Use self.self_attn(h, h, h, key_padding_mask=...) "
            f"and self.feed_forward(h), one LayerNorm per sublayer.")
'''.strip("\n")


def _with_reference(text: str) -> str:
    """Insert the shared helpers where a test cell says {REFERENCE}."""
    return with_snippet(text, "REFERENCE", REFERENCE)


CELLS = [
    markdown(r"""
    # Exercise 3 · Stacking encoder layers

    An encoder layer is two sublayers — multi-head self-attention, then a position-wise feed-forward network — each
    wrapped in a residual connection and a LayerNorm. The encoder is `N` such layers, the output of layer *k* being
    the input of layer *k + 1*, with nothing in between. The layers have the same *structure* but independent
    *weights*: `N` separate copies, not one layer used `N` times.

    Read first: [Chapter 3 — Stacking N encoder layers](../../chapters/03_encoder_stack.md) (on the course website:
    *Chapters → Stacking N encoder layers*).

    ## What you implement

    1. `EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=False)` with
       `forward(x, src_key_padding_mask=None)`:
       - `x`: `(batch, seq, d_model)`; `src_key_padding_mask`: `None` or a boolean `(batch, seq)` tensor, `True` at
         padding positions (the `torch.nn` convention); returns `(batch, seq, d_model)`.
       - The attention and the feed-forward network are given (`self.self_attn`, `self.feed_forward`, from
         `addnorm`): call them as `self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask)` and
         `self.feed_forward(h)`. You add one `LayerNorm` per sublayer (from `addnorm`), dropout on each sublayer's
         output, and the two residual connections:
         - Post-LN (`norm_first=False`, the 2017 paper): `x = LN₁(x + SelfAttn(x))`, then `LN₂(x + FFN(x))`;
         - Pre-LN (`norm_first=True`): `x = x + SelfAttn(LN₁(x))`, then `x + FFN(LN₂(x))`.
    2. `Encoder(layer, num_layers)` with `forward(x, src_key_padding_mask=None)`: `num_layers` **independent copies**
       of `layer` (use `copy.deepcopy`), stored in `self.layers`, an `nn.ModuleList`; `forward` passes `x` through
       them in order, giving every layer the padding mask.

    ## How it is graded

    Six test cells (10 points): the layer's shapes and parameters (1), Post-LN (2), Pre-LN (2), the padding mask (1),
    the stack (2), independent layers (2). **Hidden tests** in the same cells check more cases when your notebook is
    graded. A written question at the end (2 points) is graded by a person. A test cell that finishes without an
    error has passed.
    """),
    code(r"""
    import copy

    import torch
    from torch import nn

    from addnorm import FeedForward, LayerNorm, MultiHeadAttention   # given: the parts not under study

    torch.manual_seed(0)
    """),
    markdown(r"""
    ## Your implementation: `EncoderLayer`
    """),
    solution("encoder_layer", r'''
    class EncoderLayer(nn.Module):
        """One encoder layer: self-attention and a feed-forward network, each wrapped in residual + LayerNorm."""

        def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False) -> None:
            super().__init__()
            self.norm_first = norm_first
            self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)    # given
            self.feed_forward = FeedForward(d_model, d_ff, dropout)             # given
            ### BEGIN SOLUTION
            self.norm1 = LayerNorm(d_model)
            self.norm2 = LayerNorm(d_model)
            self.dropout = nn.Dropout(dropout)
            ### END SOLUTION

        def forward(self, x: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
            """x: (batch, seq, d_model); src_key_padding_mask: (batch, seq), True at padding -> (batch, seq, d_model)."""
            ### BEGIN SOLUTION
            def attend(h):
                return self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask)

            if self.norm_first:                                                   # Pre-LN
                x = x + self.dropout(attend(self.norm1(x)))
                return x + self.dropout(self.feed_forward(self.norm2(x)))
            x = self.norm1(x + self.dropout(attend(x)))                           # Post-LN
            return self.norm2(x + self.dropout(self.feed_forward(x)))
            ### END SOLUTION
    '''),
    markdown(r"""
    ## Your implementation: `Encoder`
    """),
    solution("encoder", r'''
    class Encoder(nn.Module):
        """num_layers independent copies of `layer`, applied one after the other."""

        def __init__(self, layer: nn.Module, num_layers: int) -> None:
            super().__init__()
            ### BEGIN SOLUTION
            self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
            ### END SOLUTION

        def forward(self, x: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
            """(batch, seq, d_model) -> (batch, seq, d_model): layer k's output is layer k+1's input."""
            ### BEGIN SOLUTION
            for layer in self.layers:
                x = layer(x, src_key_padding_mask=src_key_padding_mask)
            return x
            ### END SOLUTION
    '''),
    markdown(r"""
    Try it: a 6-layer encoder keeps the shape `(batch, seq, d_model)`.
    """),
    code(r"""
    encoder = Encoder(EncoderLayer(d_model=32, num_heads=4, d_ff=64), num_layers=6)
    x = torch.randn(2, 7, 32)
    print(encoder(x).shape)                                        # expected: torch.Size([2, 7, 32])
    print(sum(p.numel() for p in encoder.parameters()), "parameters")
    """),
    markdown(r"""
    ## Tests

    ### `EncoderLayer`: shapes and parameters (1 point)
    """),
    tests("test_encoder_layer_shapes", 1, r'''
    import torch

    torch.manual_seed(0)
    for norm_first in (False, True):
        layer = EncoderLayer(32, 4, 64, norm_first=norm_first)
        x = torch.randn(2, 7, 32)
        out = layer(x)
        assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
            f"EncoderLayer(norm_first={norm_first}) must return a tensor of shape (batch, seq, d_model) = (2, 7, 32), "
            f"got {getattr(out, 'shape', type(out).__name__)}")
        given = sum(p.numel() for m in (layer.self_attn, layer.feed_forward) for p in m.parameters())
        extra = sum(p.numel() for p in layer.parameters()) - given
        assert extra == 2 * 2 * 32, (
            f"Besides the attention and the feed-forward network, an encoder layer owns two LayerNorms (γ and β "
            f"each: 2 × 2 × 32 = 128 numbers); yours owns {extra}. Create one LayerNorm per sublayer in __init__.")
    ### BEGIN HIDDEN TESTS
    import addnorm

    layer = EncoderLayer(24, 3, 40, norm_first=True)
    assert not isinstance(layer, addnorm.EncoderLayer), (
        "Your EncoderLayer is (a subclass of) addnorm.EncoderLayer, the library's version: write it yourself")
    assert layer(torch.randn(3, 5, 24)).shape == (3, 5, 24), "EncoderLayer(24, 3, 40) must work for other sizes too"
    assert layer(torch.randn(1, 1, 24)).shape == (1, 1, 24), "EncoderLayer must work for a single token"
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### `EncoderLayer`: Post-LN (2 points)

    Your layer is compared with the formula computed from its own `self_attn` and `feed_forward`.
    """),
    tests("test_encoder_layer_post_ln", 2, _with_reference(r'''
    import torch
    import torch.nn.functional as F

    {REFERENCE}


    torch.manual_seed(1)
    layer = EncoderLayer(32, 4, 64).eval()             # norm_first=False by default: Post-LN
    _check_layer(layer, torch.randn(2, 7, 32) * 2 + 1, norm_first=False)
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(11)
    layer = EncoderLayer(24, 2, 48, norm_first=False).eval()
    _check_layer(layer, torch.randn(3, 9, 24), norm_first=False)
    # with every weight of the sublayers set to zero, both sublayers output zeros: Post-LN must return LN(x)
    with torch.no_grad():
        for p in list(layer.self_attn.parameters()) + list(layer.feed_forward.parameters()):
            p.zero_()
        x = torch.randn(2, 5, 24) * 3 + 1
        out = layer(x)
    assert out.abs().max() > 1e-3, (
        "With sublayers that output zeros your Post-LN layer outputs zeros: the residual is forgotten, so the "
        "input never reaches the output. Post-LN is LN(x + Sublayer(x)).")
    assert torch.allclose(out, F.layer_norm(x, (24,), eps=1e-5), atol=1e-4), (
        "With sublayers that output zeros a Post-LN layer must return LN(x) (normalizing twice changes nothing)")
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ### `EncoderLayer`: Pre-LN (2 points)
    """),
    tests("test_encoder_layer_pre_ln", 2, _with_reference(r'''
    import torch
    import torch.nn.functional as F

    {REFERENCE}


    torch.manual_seed(2)
    layer = EncoderLayer(32, 4, 64, norm_first=True).eval()
    _check_layer(layer, torch.randn(2, 7, 32) * 2 + 1, norm_first=True)
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(12)
    layer = EncoderLayer(24, 2, 48, norm_first=True).eval()
    _check_layer(layer, torch.randn(3, 9, 24), norm_first=True)
    # the identity path: with sublayers that output zeros, a Pre-LN layer returns its input exactly
    with torch.no_grad():
        for p in list(layer.self_attn.parameters()) + list(layer.feed_forward.parameters()):
            p.zero_()
        x = torch.randn(2, 5, 24) * 3 + 1
        out = layer(x)
    assert torch.allclose(out, x, atol=1e-5), (
        "With sublayers that output zeros a Pre-LN layer must return x unchanged: the residual stream is an "
        "identity path. Yours changes it: is a residual forgotten, or the stream itself normalized?")
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ### `EncoderLayer`: the padding mask (1 point)

    Padding positions hold no token. With the mask, changing what is stored at a padding position must not change
    the output at any real position.
    """),
    tests("test_encoder_layer_padding", 1, _with_reference(r'''
    import torch
    import torch.nn.functional as F

    {REFERENCE}


    torch.manual_seed(3)
    mask = torch.tensor([[False, False, False, False, True, True],      # sequence 0: 4 tokens, 2 padding
                         [False, False, False, False, False, False]])   # sequence 1: 6 tokens
    for norm_first in (False, True):
        layer = EncoderLayer(16, 2, 32, norm_first=norm_first).eval()
        x = torch.randn(2, 6, 16)
        changed = x.clone()
        changed[0, 4:] = torch.randn(2, 16) * 5                          # new content at the padding positions
        with torch.no_grad():
            out, out_changed = layer(x, src_key_padding_mask=mask), layer(changed, src_key_padding_mask=mask)
        assert torch.allclose(out[0, :4], out_changed[0, :4], atol=1e-5), (
            f"EncoderLayer(norm_first={norm_first}): the real tokens' outputs changed when only padding changed. "
            "Pass the mask to the attention: self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask).")
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(13)
    for norm_first in (False, True):
        layer = EncoderLayer(16, 4, 32, norm_first=norm_first).eval()
        _check_layer(layer, torch.randn(2, 6, 16), norm_first, mask)
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ### `Encoder`: the stack (2 points)

    The output of layer *k* is the input of layer *k + 1*; the encoder adds nothing else.
    """),
    tests("test_encoder_stack", 2, r'''
    import torch
    from torch import nn

    torch.manual_seed(4)
    layer = EncoderLayer(16, 2, 32)
    encoder = Encoder(layer, 3).eval()
    assert isinstance(getattr(encoder, "layers", None), nn.ModuleList), (
        "Keep the copies in self.layers, an nn.ModuleList (a plain Python list hides their parameters from the optimizer)")
    assert len(encoder.layers) == 3, f"Encoder(layer, 3) must hold 3 layers, it holds {len(encoder.layers)}"
    assert all(isinstance(m, EncoderLayer) for m in encoder.layers), "every element of self.layers must be an EncoderLayer (a copy of layer)"
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        out = encoder(x)
        chained = x
        for m in encoder.layers:
            chained = m(chained)
        last_only = encoder.layers[-1](x)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, f"Encoder must return the input's shape {tuple(x.shape)}"
    assert not torch.allclose(out, last_only, atol=1e-5), (
        "Your encoder gives every layer the original input x: only the last layer's work survives. Chain them: "
        "x = layer(x, ...) inside the loop, so that layer k's output is layer k+1's input.")
    assert torch.allclose(out, chained, atol=1e-5), (
        "Encoder(x) must equal layers[2](layers[1](layers[0](x))), with nothing else in between or after")
    ### BEGIN HIDDEN TESTS
    import addnorm

    assert not isinstance(encoder, addnorm.Encoder), "Your Encoder is (a subclass of) addnorm.Encoder: write it yourself"
    torch.manual_seed(14)
    for num_layers in (1, 6):
        encoder = Encoder(EncoderLayer(16, 4, 32, norm_first=True), num_layers).eval()
        assert len(encoder.layers) == num_layers, f"Encoder(layer, {num_layers}) must hold {num_layers} layers"
    # every copy starts with the weights of `layer`
    for copy_ in encoder.layers:
        for (name, a), b in zip(copy_.state_dict().items(), encoder.layers[0].state_dict().values()):
            assert torch.equal(a, b), f"every layer of the stack must start as a copy of `layer`; {name} differs"
    # the padding mask reaches every layer: padding content must not reach the real tokens through the stack
    mask = torch.tensor([[False, False, False, True], [False, False, False, False]])
    x = torch.randn(2, 4, 16)
    changed = x.clone()
    changed[0, 3] = torch.randn(16) * 5
    with torch.no_grad():
        out, out_changed = encoder(x, src_key_padding_mask=mask), encoder(changed, src_key_padding_mask=mask)
    assert torch.allclose(out[0, :3], out_changed[0, :3], atol=1e-5), (
        "Through the whole encoder, padding leaks into the real tokens: pass src_key_padding_mask to every layer")
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### `Encoder`: independent layers (2 points)

    `nn.ModuleList([layer] * num_layers)` holds the *same* layer object `num_layers` times: one set of weights,
    used again and again. The stack needs `num_layers` separate copies.
    """),
    tests("test_encoder_independent_layers", 2, r'''
    import torch

    layer = EncoderLayer(16, 2, 32)
    encoder = Encoder(layer, 4)
    distinct = len({id(m) for m in encoder.layers})
    assert distinct == 4, (
        f"Your 4 layers are only {distinct} distinct object(s): [layer] * num_layers puts the same layer in the list "
        f"again and again, so all of them share one set of weights. Make independent copies: copy.deepcopy(layer).")
    per_layer = sum(p.numel() for p in layer.parameters())
    total = sum(p.numel() for p in encoder.parameters())
    assert total == 4 * per_layer, (
        f"A 4-layer encoder should have 4 × {per_layer} = {4 * per_layer} parameters, yours has {total}: "
        f"some weights are shared between layers")
    ### BEGIN HIDDEN TESTS
    params = [{id(p) for p in m.parameters()} for m in encoder.layers]
    assert all(not (params[i] & params[j]) for i in range(4) for j in range(i + 1, 4)), (
        "Two of your layers share a parameter tensor: copy the whole layer with copy.deepcopy(layer)")
    # changing one layer's weights must leave the others alone
    with torch.no_grad():
        before = [m.self_attn.q_proj.weight.clone() for m in encoder.layers]
        encoder.layers[0].self_attn.q_proj.weight.add_(1.0)
    assert all(torch.equal(m.self_attn.q_proj.weight, b) for m, b in zip(list(encoder.layers)[1:], before[1:])), (
        "Updating layer 0's weights changed another layer's weights: the layers share storage. Use copy.deepcopy(layer).")
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ## Written question (2 points, graded by a person)

    The cell below builds your 6-layer `Encoder` and, next to it, `nn.ModuleList([layer] * 6)`. It counts their
    parameters, takes one optimizer step on each (the same input, the same loss) and reports how many of the six
    layers end up with different weights from one another. Run it.

    **Question.** Explain the two parameter counts and the number of distinct layers after the step. Is
    `[layer] * 6` a 6-layer encoder? What does `copy.deepcopy` change? (ALBERT shares one layer's weights across its
    stack *on purpose*: what does such a model give up, and what does it gain?) Answer in 3–6 sentences below the
    output.
    """),
    code(r"""
    torch.manual_seed(0)
    layer = EncoderLayer(d_model=32, num_heads=4, d_ff=64)
    stacks = {"Encoder(layer, 6)": Encoder(layer, 6).layers, "[layer] * 6": nn.ModuleList([layer] * 6)}
    x, target = torch.randn(4, 7, 32), torch.randn(4, 7, 32)
    for name, layers in stacks.items():
        optimizer = torch.optim.SGD(layers.parameters(), lr=0.1)
        h = x
        for m in layers:
            h = m(h)
        (h - target).pow(2).mean().backward()
        optimizer.step()
        flat = [torch.cat([p.detach().flatten() for p in m.parameters()]) for m in layers]
        distinct = sum(all(not torch.equal(f, g) for g in flat[:i]) for i, f in enumerate(flat))
        count = sum(p.numel() for p in layers.parameters())
        print(f"{name:>18}: {count:6d} parameters, {distinct} distinct layer(s) after one step")
    """),
    answer("answer_shared_weights", 2, r"""
    **Model answer.** `Encoder(layer, 6)` holds six deep copies, each with its own weights, so it has six times the
    parameters of one layer; after one step each copy has received its own gradient, so all six differ. `[layer] * 6`
    is one layer object listed six times: `parameters()` yields its weights once (one layer's count), the gradients
    of its six uses add up into the same tensors, and after the step the "six layers" are still identical — it is one
    layer applied six times, not a 6-layer encoder. `copy.deepcopy` makes new tensors for every copy, so each layer
    can learn a different function (probing finds a tendency for lower layers to carry more syntax and higher
    ones more semantics, Tenney et al. 2019). ALBERT
    shares weights deliberately: it saves parameters and memory (a fraction of BERT's size) but gives up capacity per
    depth, and it still pays the full compute of every layer.

    **Marking (2 points).** 1 point: copies = independent weights (6× parameters, layers diverge after training);
    `[layer] * 6` = one set of weights whose gradients accumulate, layers stay identical. 1 point: what deepcopy
    does / the trade-off of deliberate sharing (fewer parameters, same compute, less capacity).
    """),
]
