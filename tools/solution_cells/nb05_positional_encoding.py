"""Exercise 5 — the sinusoidal positional encoding, and the embedding that scales by √d_model and adds it once."""

from . import answer, code, markdown, solution, tests, with_snippet

# The encoding in float64, and the common wrong versions of it. Pasted into the test cells that need it.
REFERENCE = r'''
def _encoding(max_len, d_model, variant="right"):
    """The sinusoidal table in float64; `variant` reproduces a common mistake."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None] + (1 if variant == "from_one" else 0)
    i = torch.arange(d_model // 2, dtype=torch.float64)
    exponent = i / d_model if variant == "i_over_d" else 2 * i / d_model
    angle = position / 10000.0 ** exponent                               # (max_len, d_model / 2)
    sin, cos = torch.sin(angle), torch.cos(angle)
    if variant == "swapped":
        sin, cos = cos, sin
    if variant in ("concatenated", "swapped_concatenated"):
        halves = (sin, cos) if variant == "concatenated" else (cos, sin)
        return torch.cat(halves, dim=1)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = sin, cos
    return pe


_MISTAKES = {
    "swapped": "sin and cos are swapped: the even columns 2i hold sin(p·ω_i) and the odd columns 2i+1 hold cos(p·ω_i)",
    "concatenated": "the columns are not interleaved: you put all the sines first and all the cosines after "
                    "([sin | cos]); the paper interleaves them, column 2i = sin, column 2i+1 = cos (pe[:, 0::2], pe[:, 1::2])",
    "swapped_concatenated": "the columns are [cos | sin]: not interleaved, and sin and cos swapped. Column 2i is "
                            "sin(p·ω_i), column 2i+1 is cos(p·ω_i)",
    "i_over_d": "the frequencies are wrong: the exponent is 2i/d_model, where 2i is the even column index "
                "(0, 2, 4, …), not i/d_model",
    "from_one": "the positions start at 1: the first row is position 0, so it must be [0, 1, 0, 1, …]",
}


def _check_encoding(max_len, d_model):
    pe = sinusoidal_encoding(max_len, d_model)
    assert isinstance(pe, torch.Tensor) and tuple(pe.shape) == (max_len, d_model), (
        f"sinusoidal_encoding({max_len}, {d_model}) must be a ({max_len}, {d_model}) tensor, "
        f"got {getattr(pe, 'shape', type(pe).__name__)}")
    assert pe.dtype == torch.float32, f"return a float32 tensor (the model's dtype), got {pe.dtype}"
    expected = _encoding(max_len, d_model)
    for variant, mistake in _MISTAKES.items():
        wrong = _encoding(max_len, d_model, variant)
        if torch.allclose(wrong, expected, atol=1e-4):      # e.g. with d_model = 2, [sin | cos] is interleaved
            continue
        assert not torch.allclose(pe.double(), wrong, atol=1e-4), (
            f"sinusoidal_encoding({max_len}, {d_model}): {mistake}.")
    assert torch.allclose(pe.double(), expected, atol=1e-4), (
        f"sinusoidal_encoding({max_len}, {d_model}) differs from PE[p, 2i] = sin(p / 10000^(2i/d)), "
        f"PE[p, 2i+1] = cos(p / 10000^(2i/d)) by up to {(pe.double() - expected).abs().max().item():.3g}")
'''.strip("\n")


def _with_reference(text: str) -> str:
    """Insert the shared helpers where a test cell says {REFERENCE}."""
    return with_snippet(text, "REFERENCE", REFERENCE)


CELLS = [
    markdown(r"""
    # Exercise 5 · Positional encoding, added once

    Attention is blind to order: permute the tokens of an encoder's input and its outputs are permuted the same way.
    The Transformer therefore adds a **positional encoding** to each token's embedding — once, at the bottom of the
    stack — and the residual connections carry it up through every layer. The 2017 paper uses fixed sinusoids:

    $$PE_{(p,\,2i)} = \sin\!\left(\frac{p}{10000^{2i/d_\text{model}}}\right), \qquad
    PE_{(p,\,2i+1)} = \cos\!\left(\frac{p}{10000^{2i/d_\text{model}}}\right),$$

    for position $p$ and column pairs $i = 0, 1, \dots, d_\text{model}/2 - 1$: even columns hold sines, odd columns
    cosines, each pair at its own frequency. The token embeddings are multiplied by $\sqrt{d_\text{model}}$ before
    the encoding is added.

    Read first: [Chapter 5 — Positional encoding, added once](../../chapters/05_positional_encoding.md) (on the course website:
    *Chapters → Positional encoding, added once*).

    ## What you implement

    1. `sinusoidal_encoding(max_len, d_model)`: the `(max_len, d_model)` float32 table above (`d_model` even); row
       `p` is the encoding of position `p = 0, 1, …, max_len − 1`.
    2. `Embedding(vocab_size, d_model, max_len)`, an `nn.Module` with `forward(tokens)`:
       - `tokens`: integer ids of shape `(batch, seq)` with `seq <= max_len`; returns `(batch, seq, d_model)`;
       - the token table is given (`self.tokens = nn.Embedding(vocab_size, d_model)`); multiply the looked-up
         vectors by `√d_model`, then add the encodings of positions `0 … seq − 1`, **once**;
       - the sinusoidal table is fixed, not learned: store it with `self.register_buffer(...)`, not as an
         `nn.Parameter`.

    ## How it is graded

    Four test cells (7 points): the table's shape and first row (1), its values (2), the embedding's scaling (2), the
    encoding added once (2). **Hidden tests** in the same cells check more cases when your notebook is graded. A
    written question at the end (2 points) is graded by a person. A test cell that finishes without an error has
    passed.
    """),
    code(r"""
    import math

    import torch
    from torch import nn

    torch.manual_seed(0)
    """),
    markdown(r"""
    ## Your implementation: `sinusoidal_encoding`
    """),
    solution("sinusoidal_encoding", r'''
    def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
        """The (max_len, d_model) table: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d))."""
        ### BEGIN SOLUTION
        position = torch.arange(max_len, dtype=torch.float64)[:, None]          # (max_len, 1)
        two_i = torch.arange(0, d_model, 2, dtype=torch.float64)                # (d_model/2,): 0, 2, 4, …
        angle = position / 10000.0 ** (two_i / d_model)                         # (max_len, d_model/2)
        pe = torch.empty(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)                                          # even columns: sin
        pe[:, 1::2] = torch.cos(angle)                                          # odd columns: cos
        return pe.float()
        ### END SOLUTION
    '''),
    code(r"""
    print(sinusoidal_encoding(4, 6))     # row 0 is [0, 1, 0, 1, 0, 1]: sin 0 = 0, cos 0 = 1
    """),
    markdown(r"""
    ## Your implementation: `Embedding`
    """),
    solution("embedding", r'''
    class Embedding(nn.Module):
        """Token embedding scaled by √d_model, plus the sinusoidal encoding of each position — added once."""

        def __init__(self, vocab_size: int, d_model: int, max_len: int = 512) -> None:
            super().__init__()
            self.d_model = d_model
            self.tokens = nn.Embedding(vocab_size, d_model)     # given: the learned token table
            ### BEGIN SOLUTION
            self.register_buffer("position_table", sinusoidal_encoding(max_len, d_model), persistent=False)
            ### END SOLUTION

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            """(batch, seq) token ids -> (batch, seq, d_model) vectors."""
            ### BEGIN SOLUTION
            x = self.tokens(tokens) * math.sqrt(self.d_model)   # (batch, seq, d_model)
            return x + self.position_table[: tokens.shape[1]]   # (seq, d_model) broadcasts over the batch
            ### END SOLUTION
    '''),
    markdown(r"""
    Try it: ten tokens of a vocabulary of 100, in a 16-wide model.
    """),
    code(r"""
    embedding = Embedding(vocab_size=100, d_model=16, max_len=32)
    tokens = torch.randint(0, 100, (2, 10))        # (batch, seq)
    print(embedding(tokens).shape)                  # expected: torch.Size([2, 10, 16])
    """),
    markdown(r"""
    ## Tests

    ### `sinusoidal_encoding`: shape and first row (1 point)
    """),
    tests("test_encoding_shape", 1, r'''
    import torch

    pe = sinusoidal_encoding(10, 8)
    assert isinstance(pe, torch.Tensor) and tuple(pe.shape) == (10, 8), (
        f"sinusoidal_encoding(10, 8) must be a (max_len, d_model) = (10, 8) tensor, got {getattr(pe, 'shape', type(pe).__name__)}")
    assert pe.dtype == torch.float32, f"return a float32 tensor, got {pe.dtype}"
    first = torch.tensor([0.0, 1.0] * 4)
    assert not torch.allclose(pe[0], torch.tensor([1.0, 0.0] * 4), atol=1e-6), (
        "Row 0 is [1, 0, 1, 0, …]: sin and cos are swapped. Even columns hold sin, odd columns cos, so position 0 "
        "is [sin 0, cos 0, …] = [0, 1, 0, 1, …].")
    assert not torch.allclose(pe[0], torch.tensor([0.0] * 4 + [1.0] * 4), atol=1e-6), (
        "Row 0 is [0, 0, 0, 0, 1, 1, 1, 1]: the sines and cosines are not interleaved. Put sin in the even columns "
        "(pe[:, 0::2]) and cos in the odd columns (pe[:, 1::2]).")
    assert torch.allclose(pe[0], first, atol=1e-6), (
        f"Row 0 is the encoding of position 0: [sin 0, cos 0, …] = [0, 1, 0, 1, …]; yours is {pe[0].tolist()}")
    ### BEGIN HIDDEN TESTS
    import addnorm

    assert sinusoidal_encoding is not addnorm.sinusoidal_encoding, (
        "sinusoidal_encoding is addnorm's, the library's version of the answer: write it yourself")
    assert tuple(sinusoidal_encoding(1, 2).shape) == (1, 2), "sinusoidal_encoding(1, 2) must work: one position, one sin/cos pair"
    assert torch.isfinite(sinusoidal_encoding(1000, 64)).all(), "the table must be finite for long sequences too"
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### `sinusoidal_encoding`: values (2 points)

    Your table is compared with the formula. If it does not match, the message says which common mistake it matches.
    """),
    tests("test_encoding_values", 2, _with_reference(r'''
    import torch

    {REFERENCE}


    _check_encoding(50, 16)
    ### BEGIN HIDDEN TESTS
    for max_len, d_model in ((7, 2), (128, 64), (3, 10)):
        _check_encoding(max_len, d_model)
    # the property the paper chose sinusoids for: PE[p + k] is a fixed rotation of PE[p], the same for every p
    pe = sinusoidal_encoding(40, 8).double()
    dots = [(pe[p] * pe[p + 5]).sum().item() for p in range(0, 30, 7)]
    assert max(dots) - min(dots) < 1e-4, "PE[p]·PE[p+5] should not depend on p (each sin/cos pair rotates with the position)"
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ### `Embedding`: scaling by √d_model (2 points)
    """),
    tests("test_embedding_scaling", 2, r'''
    import math

    import torch


    def _check_scaling(vocab_size, d_model, max_len, seq):
        """Two sequences with different tokens at every position: the position part cancels in their difference."""
        emb = Embedding(vocab_size, d_model, max_len)
        tokens = torch.stack([torch.randperm(vocab_size)[:seq], torch.randperm(vocab_size)[:seq]])   # (2, seq)
        with torch.no_grad():
            out = emb(tokens)
            assert isinstance(out, torch.Tensor) and tuple(out.shape) == (2, seq, d_model), (
                f"Embedding must map (batch, seq) = (2, {seq}) to (batch, seq, d_model) = (2, {seq}, {d_model}), "
                f"got {getattr(out, 'shape', type(out).__name__)}")
            looked_up = emb.tokens(tokens).double()
            difference = (out[0] - out[1]).double()                       # = (E[a] - E[b]) · scale
            token_difference = looked_up[0] - looked_up[1]
            close = lambda scale: torch.allclose(difference, token_difference * scale, atol=1e-4, rtol=1e-4)
            assert not close(1.0), (
                "The token embeddings are not scaled: multiply them by √d_model before adding the positional encoding, "
                "self.tokens(tokens) * math.sqrt(d_model)")
            assert not close(d_model), "You scale by d_model: the factor is its square root, √d_model"
            assert not close(1 / math.sqrt(d_model)), "You divide by √d_model: the embeddings are multiplied by it"
            assert close(math.sqrt(d_model)), (
                "Two different tokens at the same position should differ by (E[a] − E[b]) · √d_model, where E is "
                "self.tokens: look the tokens up in self.tokens and multiply by math.sqrt(d_model)")


    torch.manual_seed(5)
    _check_scaling(vocab_size=20, d_model=16, max_len=12, seq=5)
    ### BEGIN HIDDEN TESTS
    torch.manual_seed(15)
    _check_scaling(vocab_size=50, d_model=64, max_len=30, seq=30)
    _check_scaling(vocab_size=7, d_model=4, max_len=9, seq=1)
    ### END HIDDEN TESTS
    '''),
    markdown(r"""
    ### `Embedding`: the encoding added once (2 points)

    The output minus the scaled token embedding must be exactly the encoding of each position — once, not twice,
    not zero — and the encoding must be fixed, not a trained parameter.
    """),
    tests("test_embedding_adds_once", 2, _with_reference(r'''
    import math

    import torch
    from torch import nn

    {REFERENCE}

    torch.manual_seed(6)
    vocab_size, d_model, max_len = 30, 8, 16
    emb = Embedding(vocab_size, d_model, max_len)
    same = torch.full((2, 10), 3)                          # one token, repeated at positions 0 … 9
    with torch.no_grad():
        out = emb(same).double()
    pe = _encoding(max_len, d_model)
    moved = out[:, 1:] - out[:, :1]                        # the same token: only the position part can differ
    expected = (pe[1:10] - pe[:1]).expand_as(moved)
    assert not torch.allclose(moved, torch.zeros_like(moved), atol=1e-4), (
        "No positional encoding is added: the same token gets the same vector at every position. Add the encoding "
        "of positions 0 … seq−1 to the scaled token embeddings.")
    assert not torch.allclose(moved, 2 * expected, atol=1e-4), "The positional encoding is added twice: add it exactly once"
    assert not torch.allclose(moved, math.sqrt(d_model) * expected, atol=1e-4), (
        "You scale the positional encoding too: multiply only the token embeddings by √d_model, then add the "
        "encoding — emb · √d_model + PE, not (emb + PE) · √d_model")
    assert torch.allclose(moved, expected, atol=1e-4), (
        "The same token at positions p and 0 should differ by PE[p] − PE[0], the rows of sinusoidal_encoding(max_len, "
        f"d_model); yours differ from that by up to {(moved - expected).abs().max().item():.3g}. Add rows 0 … seq−1 "
        "of the table (and if sinusoidal_encoding fails its tests, fix it first: your Embedding uses it).")
    ### BEGIN HIDDEN TESTS
    n_params = sum(p.numel() for p in emb.parameters())
    assert n_params == vocab_size * d_model, (
        f"Your Embedding has {n_params - vocab_size * d_model} trainable numbers besides the token table: the "
        "sinusoidal encoding is fixed. Store it with self.register_buffer(...), not nn.Parameter.")
    assert not any(isinstance(m, nn.Embedding) and m.num_embeddings == max_len for m in emb.modules()), (
        "You use a learned position table (nn.Embedding(max_len, d_model)): this exercise asks for the fixed sinusoidal one")
    # a sequence as long as max_len uses every row of the table, each once
    with torch.no_grad():
        out = emb(torch.full((1, max_len), 7)).double()
    assert torch.allclose(out[:, 1:] - out[:, :1], (pe[1:] - pe[:1])[None], atol=1e-4), (
        "For a sequence of length max_len the positions are wrong: position p must get row p of the table, for every "
        "p < max_len")
    ### END HIDDEN TESTS
    ''')),
    markdown(r"""
    ## Written question (2 points, graded by a person)

    The cell below measures the size (root mean square) of the two parts of your embedding's output: the scaled
    token vectors and the positional encoding. It does so twice — with `nn.Embedding`'s default initialization
    (entries of size ≈ 1) and with entries of size $1/\sqrt{d_\text{model}}$, as in models that share the input
    embedding with the output layer. Run it.

    **Question.** What does the factor √d_model do to the balance between "which token" and "which position" in each
    case, and what would happen to that balance without it? Then: why is it enough to add the encoding once, at the
    input, for every layer of a deep stack to have access to the positions? Answer in 3–6 sentences below the output.
    """),
    code(r"""
    torch.manual_seed(0)
    d_model, max_len = 64, 50
    emb = Embedding(vocab_size=1000, d_model=d_model, max_len=max_len)
    tokens = torch.randint(0, 1000, (8, max_len))
    rms = lambda t: t.pow(2).mean().sqrt().item()
    for init in ("default N(0, 1)", "N(0, 1/d_model)"):
        if init != "default N(0, 1)":
            nn.init.normal_(emb.tokens.weight, std=d_model ** -0.5)
        with torch.no_grad():
            token_part = emb.tokens(tokens) * math.sqrt(d_model)
            position_part = emb(tokens) - token_part
        print(f"{init:>16}: RMS of the scaled token part {rms(token_part):5.2f}, of the position part "
              f"{rms(position_part):4.2f}, of the token part without scaling {rms(token_part) / math.sqrt(d_model):4.2f}")
    """),
    answer("answer_scaling", 2, r"""
    **Model answer.** The sinusoidal encoding has a fixed size (every sin/cos pair has norm 1, so its RMS is ≈ 0.71
    whatever d_model). With the default N(0, 1) table, the scaled tokens (RMS ≈ 8 for d_model = 64) dominate the
    position part by about 11 : 1 (unscaled it would be ≈ 1.4 : 1); with a table of size 1/√d_model, as when the input
    embedding is tied to the output layer, the unscaled tokens (RMS ≈ 0.13) would be drowned by the positions, and
    the factor √d_model brings them back to RMS ≈ 1, comparable to the encoding. So √d_model sets the relative weight
    of token identity and position; without it, with small embeddings, position would swamp meaning. Adding the
    encoding once is enough because each sublayer *adds* its output to the residual stream: the input, and with it
    the position signal, is carried up unchanged through every layer's identity path, so every layer can read it
    (relative schemes such as RoPE or ALiBi instead act inside every attention layer).

    **Marking (2 points).** 1 point: √d_model balances the token part against the fixed-size encoding (reads the
    numbers; without it small embeddings are dominated by position). 1 point: the residual stream carries the input
    (and the position) to every layer, so adding it once suffices.
    """),
]
