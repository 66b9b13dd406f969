"""Exercise 4 — the causal mask, a decoder layer (three sublayers) and a stack that feeds every layer the memory."""

from . import answer, code, markdown, solution, tests, with_snippet

# What a decoder layer built from the learner's own attention and feed-forward modules must compute; the options
# reproduce the common mistakes. Pasted into the test cells that need it.
REFERENCE = r'''
def _reference(layer, x, memory, norm_first=False, residual=True, causal=True, cross_to_memory=True):
    """The decoder layer's formula with the learner's submodules, LayerNorms at γ = 1, β = 0."""
    ln = lambda t: F.layer_norm(t, t.shape[-1:], eps=1e-5)
    n = x.shape[1]
    future = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1) if causal else None   # True = blocked
    source = (lambda h: memory) if cross_to_memory else (lambda h: h)
    sublayers = (lambda h: layer.self_attn(h, h, h, attn_mask=future),
                 lambda h: layer.cross_attn(h, source(h), source(h)),
                 layer.feed_forward)
    for f in sublayers:
        if norm_first:
            x = (x if residual else 0) + f(ln(x))
        else:
            x = ln((x if residual else 0) + f(x))
    return x


def _matches(out, value, atol=1e-4):
    return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out, value, atol=atol, rtol=1e-4)


def _check_layer(layer, x, memory, norm_first):
    """Compare layer(x, memory) with the formula; name the mistake when the output matches a known wrong variant."""
    form, other = ("Pre-LN", "Post-LN") if norm_first else ("Post-LN", "Pre-LN")
    with torch.no_grad():
        out = layer(x, memory)
        assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
            f"DecoderLayer must return a tensor of the target's shape {tuple(x.shape)}, got {getattr(out, 'shape', type(out).__name__)}")
        assert not _matches(out, _reference(layer, x, memory, norm_first, causal=False)), (
            "Your self-attention has no causal mask: every position sees the future. Pass "
            "attn_mask=causal_mask(tgt_len) to self.self_attn.")
        assert not _matches(out, _reference(layer, x, memory, not norm_first)), (
            f"With norm_first={norm_first} your layer computes {other}: the two forms are swapped. Post-LN: "
            f"x = LN(x + Sublayer(x)); Pre-LN: x = x + Sublayer(LN(x)).")
        assert not _matches(out, _reference(layer, x, memory, norm_first, residual=False)), (
            "The residual connections are forgotten: each sublayer's input must be added to its output.")
        assert not _matches(out, _reference(layer, x, memory, norm_first, cross_to_memory=False)), (
            "Your cross-attention attends to the decoder's own states: its keys and values must be the encoder's "
            "output, self.cross_attn(h, memory, memory).")
        expected = _reference(layer, x, memory, norm_first)
        if not _matches(out, expected):
            n = x.shape[1]
            assert torch.equal(causal_mask(n), torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)), (
                "Your decoder layer is wrong, and so is causal_mask, which it uses: fix what the causal_mask test reports first")
        assert _matches(out, expected), (
            f"Your {form} decoder layer differs from the formula by up to {(out - expected).abs().max().item():.3g}. "
            f"Three sublayers, in order: masked self-attention self.self_attn(h, h, h, attn_mask=causal_mask(n)), "
            f"cross-attention self.cross_attn(h, memory, memory), self.feed_forward(h), each with its own LayerNorm "
            f"and residual.")
'''.strip("\n")


def _with_reference(text: str) -> str:
    """Insert the shared helpers where a test cell says {REFERENCE}."""
    return with_snippet(text, "REFERENCE", REFERENCE)


CELLS = [
    markdown(r"""
    # Exercise 4 · Stacking decoder layers

    A decoder layer has three sublayers, each wrapped in a residual connection and a LayerNorm: **masked**
    self-attention (a position may look at itself and the past, never the future), **cross-attention** whose keys
    and values are the encoder's output (the *memory*), and the feed-forward network. The decoder stacks `N`
    independent copies; **every** layer cross-attends to the **same** memory — the final output of the encoder,
    unchanged — while its own input is the previous decoder layer's output.

    Read first: [Chapter 4 — Stacking N decoder layers](../../chapters/04_decoder_stack.md) (on the course website:
    *Chapters → Stacking N decoder layers*).

    ## What you implement

    1. `causal_mask(n)`: an `(n, n)` **boolean** tensor, `True` where query position `i` may **not** attend to key
       position `j`, i.e. for `j > i` (above the diagonal). This is the `torch.nn` convention that
       `MultiHeadAttention`'s `attn_mask` uses: `True` = blocked.
    2. `DecoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=False)` with `forward(x, memory)`:
       - `x`: the target, `(batch, tgt_len, d_model)`; `memory`: the encoder's output, `(batch, src_len, d_model)`;
         returns `(batch, tgt_len, d_model)`.
       - The attention modules and the feed-forward network are given: call them as
         `self.self_attn(h, h, h, attn_mask=causal_mask(tgt_len))`, `self.cross_attn(h, memory, memory)` (queries
         from the decoder, keys and values from the memory) and `self.feed_forward(h)`. You add three `LayerNorm`s,
         dropout on each sublayer's output, and the residuals — Post-LN `x = LN(x + Sublayer(x))` when
         `norm_first=False`, Pre-LN `x = x + Sublayer(LN(x))` when `norm_first=True`.
    3. `Decoder(layer, num_layers)` with `forward(x, memory)`: `num_layers` independent copies of `layer`
       (`copy.deepcopy`) in `self.layers`, an `nn.ModuleList`; each layer takes the previous layer's output as `x`
       and the same `memory`.

    ## How it is graded

    Six test cells (10 points): `causal_mask` (2), causality of the layer (2), Post-LN values (2), Pre-LN values (1),
    the stack and its memory (2), independent layers (1). **Hidden tests** in the same cells check more cases when
    your notebook is graded. A written question at the end (2 points) is graded by a person. A test cell that
    finishes without an error has passed.
    """),
    code(r"""
    import copy

    import torch
    from torch import nn

    from addnorm import FeedForward, LayerNorm, MultiHeadAttention   # given: the parts not under study

    torch.manual_seed(0)
    """),
    markdown(r"""
    ## Your implementation: `causal_mask`
    """),
    solution("causal_mask", r'''
    def causal_mask(n: int) -> torch.Tensor:
        """(n, n) boolean mask, True where query i may NOT attend to key j (j > i): the torch.nn convention."""
        ### BEGIN SOLUTION
        return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)
        ### END SOLUTION
    '''),
    code(r"""
    print(causal_mask(4))     # True above the diagonal: the future is blocked
    """),
    markdown(r"""
    ## Your implementation: `DecoderLayer`
    """),
    solution("decoder_layer", r'''
    class DecoderLayer(nn.Module):
        """Masked self-attention, cross-attention to the memory, feed-forward: each in residual + LayerNorm."""

        def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False) -> None:
            super().__init__()
            self.norm_first = norm_first
            self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)    # given
            self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)   # given
            self.feed_forward = FeedForward(d_model, d_ff, dropout)             # given
            ### BEGIN SOLUTION
            self.norms = nn.ModuleList(LayerNorm(d_model) for _ in range(3))
            self.dropout = nn.Dropout(dropout)
            ### END SOLUTION

        def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
            """x: (batch, tgt_len, d_model), memory: (batch, src_len, d_model) -> (batch, tgt_len, d_model)."""
            ### BEGIN SOLUTION
            mask = causal_mask(x.shape[1])                                     # (tgt_len, tgt_len)
            sublayers = (
                lambda h: self.self_attn(h, h, h, attn_mask=mask),            # masked self-attention
                lambda h: self.cross_attn(h, memory, memory),                 # queries h; keys, values: the memory
                self.feed_forward,
            )
            for norm, sublayer in zip(self.norms, sublayers):
                if self.norm_first:
                    x = x + self.dropout(sublayer(norm(x)))                   # Pre-LN
                else:
                    x = norm(x + self.dropout(sublayer(x)))                   # Post-LN
            return x
            ### END SOLUTION
    '''),
    markdown(r"""
    ## Your implementation: `Decoder`
    """),
    solution("decoder", r'''
    class Decoder(nn.Module):
        """num_layers independent copies of `layer`; every one cross-attends to the same memory."""

        def __init__(self, layer: nn.Module, num_layers: int) -> None:
            super().__init__()
            ### BEGIN SOLUTION
            self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
            ### END SOLUTION

        def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
            """(batch, tgt_len, d_model), memory (batch, src_len, d_model) -> (batch, tgt_len, d_model)."""
            ### BEGIN SOLUTION
            for layer in self.layers:
                x = layer(x, memory)                   # the same memory for every layer
            return x
            ### END SOLUTION
    '''),
    markdown(r"""
    Try it: a 6-layer decoder over a source of 9 positions and a target of 5.
    """),
    code(r"""
    decoder = Decoder(DecoderLayer(d_model=32, num_heads=4, d_ff=64), num_layers=6)
    memory = torch.randn(2, 9, 32)                 # the encoder's output: (batch, src_len, d_model)
    target = torch.randn(2, 5, 32)                 # (batch, tgt_len, d_model)
    print(decoder(target, memory).shape)           # expected: torch.Size([2, 5, 32])
    """),
    markdown(r"""
    ## Tests

    ### `causal_mask` (2 points)
    """),
    tests("test_causal_mask", 2, r'''
    import torch


    def _check_mask(n):
        expected = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)
        mask = causal_mask(n)
        assert isinstance(mask, torch.Tensor) and tuple(mask.shape) == (n, n), (
            f"causal_mask({n}) must be an ({n}, {n}) tensor, got {getattr(mask, 'shape', type(mask).__name__)}")
        assert mask.dtype == torch.bool, (
            f"causal_mask must return a boolean tensor (True = blocked, the torch.nn convention MultiHeadAttention "
            f"uses), got dtype {mask.dtype}. For a float mask of 0 and -inf, attn_mask would mean something else.")
        if n > 1:
            assert not torch.equal(mask, ~expected), (
                "Your causal mask is inverted: True must mark the positions that may NOT be attended to — the future, "
                "j > i, above the diagonal. Yours blocks the past and the position itself and lets the future through.")
            assert not torch.equal(mask, expected.T), (
                "Your mask blocks the past (below the diagonal) instead of the future: query i must not see keys j > i")
            assert not torch.equal(mask, torch.ones(n, n, dtype=torch.bool).triu(diagonal=0)), (
                "Your mask also blocks the diagonal: a position must be able to attend to itself (triu with diagonal=1)")
        assert torch.equal(mask, expected), f"causal_mask({n}) should be True exactly above the diagonal:\n{expected}"


    _check_mask(4)
    ### BEGIN HIDDEN TESTS
    for n in (1, 2, 9):
        _check_mask(n)
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### `DecoderLayer`: causality (2 points)

    Changing a later target token must not change the outputs at earlier positions.
    """),
    tests("test_decoder_layer_causal", 2, r'''
    import torch

    torch.manual_seed(1)
    for norm_first in (False, True):
        layer = DecoderLayer(16, 2, 32, norm_first=norm_first).eval()
        memory = torch.randn(2, 4, 16)
        x = torch.randn(2, 6, 16)
        later_changed = x.clone()
        later_changed[:, 3:] = torch.randn(2, 3, 16)                      # new tokens at positions 3, 4, 5
        with torch.no_grad():
            out, out_changed = layer(x, memory), layer(later_changed, memory)
        assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
            f"DecoderLayer must return a tensor of the target's shape {tuple(x.shape)}, got {getattr(out, 'shape', type(out).__name__)}")
        assert torch.isfinite(out).all(), (
            "Your decoder layer outputs NaN: some query may attend to no key at all. Is the causal mask inverted "
            "(True must block the future only, so every position can at least see itself)?")
        assert torch.allclose(out[:, :3], out_changed[:, :3], atol=1e-5), (
            f"DecoderLayer(norm_first={norm_first}): positions 0–2 changed when only positions 3–5 changed, so "
            f"information flows from the future. Pass attn_mask=causal_mask(tgt_len) to self.self_attn (and make sure "
            f"causal_mask passes its test); cross-attention must read its keys and values from memory, not from x.")
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(11)
    layer = DecoderLayer(16, 4, 32).eval()
    memory = torch.randn(1, 5, 16)
    x = torch.randn(1, 6, 16)
    with torch.no_grad():
        out = layer(x, memory)
        first_changed = x.clone()
        first_changed[:, 0] = torch.randn(16)
        assert not torch.allclose(out[:, 1:], layer(first_changed, memory)[:, 1:], atol=1e-5), (
            "Later positions ignore position 0: your mask blocks the past too (or is inverted). Position i must see "
            "every position j <= i.")
        memory_end_changed = memory.clone()
        memory_end_changed[:, -1] = torch.randn(16) * 3
        assert not torch.allclose(out[:, 0], layer(x, memory_end_changed)[:, 0], atol=1e-5), (
            "Target position 0 ignores the last source position: the causal mask belongs to the self-attention only; "
            "cross-attention sees the whole memory (call self.cross_attn(h, memory, memory) without attn_mask).")
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### `DecoderLayer`: Post-LN values (2 points)

    Your layer is compared with the formula computed from its own `self_attn`, `cross_attn` and `feed_forward`.
    """),
    tests("test_decoder_layer_post_ln", 2, _with_reference(r'''
    import torch
    import torch.nn.functional as F

    {REFERENCE}


    torch.manual_seed(2)
    layer = DecoderLayer(32, 4, 64).eval()              # norm_first=False by default: Post-LN
    _check_layer(layer, torch.randn(2, 5, 32) * 2 + 1, torch.randn(2, 7, 32), norm_first=False)
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(12)
    layer = DecoderLayer(24, 3, 40, norm_first=False).eval()
    _check_layer(layer, torch.randn(3, 8, 24), torch.randn(3, 3, 24), norm_first=False)
    with torch.no_grad():
        for module in (layer.self_attn, layer.cross_attn, layer.feed_forward):
            for p in module.parameters():
                p.zero_()
        x = torch.randn(2, 4, 24) * 3 + 1
        out = layer(x, torch.randn(2, 5, 24))
    assert out.abs().max() > 1e-3, (
        "With sublayers that output zeros your Post-LN decoder layer outputs zeros: the residual is forgotten.")
    assert torch.allclose(out, F.layer_norm(x, (24,), eps=1e-5), atol=1e-4), (
        "With sublayers that output zeros a Post-LN decoder layer must return LN(x)")
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ### `DecoderLayer`: Pre-LN values (1 point)
    """),
    tests("test_decoder_layer_pre_ln", 1, _with_reference(r'''
    import torch
    import torch.nn.functional as F

    {REFERENCE}


    torch.manual_seed(3)
    layer = DecoderLayer(32, 4, 64, norm_first=True).eval()
    _check_layer(layer, torch.randn(2, 5, 32) * 2 + 1, torch.randn(2, 7, 32), norm_first=True)
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(13)
    layer = DecoderLayer(24, 3, 40, norm_first=True).eval()
    _check_layer(layer, torch.randn(3, 8, 24), torch.randn(3, 3, 24), norm_first=True)
    with torch.no_grad():
        for module in (layer.self_attn, layer.cross_attn, layer.feed_forward):
            for p in module.parameters():
                p.zero_()
        x = torch.randn(2, 4, 24) * 3 + 1
        out = layer(x, torch.randn(2, 5, 24))
    assert torch.allclose(out, x, atol=1e-5), (
        "With sublayers that output zeros a Pre-LN decoder layer must return x unchanged (the identity path); "
        "yours changes it: is a residual forgotten, or the stream itself normalized?")
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ### `Decoder`: the stack and its memory (2 points)

    Every layer must receive the encoder's output, unchanged, as its memory; its `x` is the previous layer's output.
    """),
    tests("test_decoder_stack_memory", 2, r'''
    import torch
    from torch import nn


    def _run_with_spies(decoder, x, memory):
        """Run the decoder, recording what each layer received (x, memory) and returned."""
        seen = []

        def before(module, args, kwargs):
            values = list(args) + [kwargs[k] for k in ("x", "memory") if k in kwargs]
            seen.append({"x": values[0] if values else None, "memory": values[1] if len(values) > 1 else None})

        def after(module, args, kwargs, output):
            seen[-1]["out"] = output

        distinct = {id(m): m for m in decoder.layers}.values()     # (shared layers are the next test's business)
        hooks = [h for m in distinct for h in (m.register_forward_pre_hook(before, with_kwargs=True),
                                                m.register_forward_hook(after, with_kwargs=True))]
        try:
            with torch.no_grad():
                out = decoder(x, memory)
        finally:
            for h in hooks:
                h.remove()
        return out, seen


    torch.manual_seed(4)
    decoder = Decoder(DecoderLayer(16, 2, 32), 3).eval()
    assert isinstance(getattr(decoder, "layers", None), nn.ModuleList), (
        "Keep the copies in self.layers, an nn.ModuleList (a plain Python list hides their parameters from the optimizer)")
    assert len(decoder.layers) == 3, f"Decoder(layer, 3) must hold 3 layers, it holds {len(decoder.layers)}"
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    memory_before = memory.clone()
    out, seen = _run_with_spies(decoder, x, memory)
    assert len(seen) == 3, f"Each of the 3 layers must run exactly once per forward; {len(seen)} calls were made"
    for k, call in enumerate(seen):
        assert call["memory"] is not None and torch.equal(call["memory"], memory_before), (
            f"Decoder layer {k} received something other than the encoder's output as its memory. Every decoder "
            f"layer cross-attends to the same, final encoder output: call layer(x, memory) with the memory you were "
            f"given — not x, and not the previous layer's output.")
    assert torch.equal(memory, memory_before), "The decoder changed the memory tensor in place: leave it untouched"
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, f"Decoder must return the target's shape {tuple(x.shape)}"
    ### BEGIN HIDDEN TESTS
    import addnorm

    assert not isinstance(decoder, addnorm.Decoder) and not isinstance(decoder.layers[0], addnorm.DecoderLayer), (
        "Your Decoder reuses addnorm's Decoder or DecoderLayer, the library's version: write them yourself")
    assert torch.equal(seen[0]["x"], x), "The first decoder layer must receive the target x itself"
    for k in range(1, 3):
        assert torch.equal(seen[k]["x"], seen[k - 1]["out"]), (
            f"Decoder layer {k} did not receive layer {k - 1}'s output as its x: chain them, x = layer(x, memory)")
    assert torch.equal(out, seen[-1]["out"]), "The decoder must return the last layer's output, with nothing after it"
    torch.manual_seed(14)
    for num_layers in (1, 4):
        decoder = Decoder(DecoderLayer(16, 4, 32, norm_first=True), num_layers).eval()
        x, memory = torch.randn(1, 3, 16), torch.randn(1, 2, 16)
        out, seen = _run_with_spies(decoder, x, memory)
        assert len(seen) == num_layers and all(torch.equal(c["memory"], memory) for c in seen), (
            f"Decoder(layer, {num_layers}): every one of the {num_layers} layers must receive the same memory")
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### `Decoder`: independent layers (1 point)
    """),
    tests("test_decoder_independent_layers", 1, r'''
    import torch

    layer = DecoderLayer(16, 2, 32)
    decoder = Decoder(layer, 4)
    distinct = len({id(m) for m in decoder.layers})
    assert distinct == 4, (
        f"Your 4 layers are only {distinct} distinct object(s): [layer] * num_layers puts the same layer in the list "
        f"again and again, so all of them share one set of weights. Make independent copies: copy.deepcopy(layer).")
    per_layer = sum(p.numel() for p in layer.parameters())
    total = sum(p.numel() for p in decoder.parameters())
    assert total == 4 * per_layer, (
        f"A 4-layer decoder should have 4 × {per_layer} = {4 * per_layer} parameters, yours has {total}: "
        f"some weights are shared between layers")
    ### BEGIN HIDDEN TESTS
    with torch.no_grad():
        before = [m.cross_attn.k_proj.weight.clone() for m in decoder.layers]
        decoder.layers[0].cross_attn.k_proj.weight.add_(1.0)
    assert all(torch.equal(m.cross_attn.k_proj.weight, b) for m, b in zip(list(decoder.layers)[1:], before[1:])), (
        "Updating layer 0's weights changed another layer's weights: the layers share storage. Use copy.deepcopy(layer).")
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ## Written question (2 points, graded by a person)

    The cell below runs your decoder layer on a target of 6 positions, then again with only the **last** target
    token changed, and then with only the **first** one changed. For each position it prints whether the output
    changed. Run it.

    **Question.** Explain the two rows. Why is this property what lets a Transformer be trained on a whole target
    sentence in one parallel pass (teacher forcing), and why must generation at inference time still go one token
    at a time? Answer in 3–6 sentences below the output.
    """),
    code(r"""
    torch.manual_seed(0)
    layer = DecoderLayer(d_model=16, num_heads=2, d_ff=32).eval()
    memory, target = torch.randn(1, 4, 16), torch.randn(1, 6, 16)
    with torch.no_grad():
        out = layer(target, memory)
        for which, position in (("last", 5), ("first", 0)):
            changed = target.clone()
            changed[0, position] = torch.randn(16)
            moved = (layer(changed, memory) - out).abs().amax(dim=-1)[0] > 1e-6
            print(f"{which} token changed -> output changed at positions:", [int(p) for p in moved.nonzero()])
    """),
    answer("answer_causality", 2, r"""
    **Model answer.** Changing the last token changes only the output at the last position; changing the first token
    changes the outputs at every position. With the causal mask, position *i* attends only to positions *j ≤ i*, so
    its output is a function of the prefix up to *i* and never of later tokens. During training the whole (shifted)
    target sentence is known, so all positions can be computed at once and each one still only "sees" its own
    prefix — exactly the information it will have when generating; the loss at every position comes from one
    parallel pass (teacher forcing). At inference the next token does not exist until the model has produced it, so
    generation is sequential over positions (each new token needs the previous outputs); a key/value cache avoids
    recomputing the prefix. The layers themselves are always applied one after the other.

    **Marking (2 points).** 1 point: reads the rows correctly — later tokens never affect earlier outputs, earlier
    tokens affect all later ones — because of the causal mask. 1 point: training is parallel over positions with the
    known target; inference is sequential because future tokens are not yet known.
    """),
]
