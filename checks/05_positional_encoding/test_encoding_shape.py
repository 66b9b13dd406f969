import torch

# [inputs]
# tables of shapes drawn from the course's secret: the shape, the dtype and the first row, on sizes the notebook never shows
torch.manual_seed(SEED + 10)
shape_cases = [(int(torch.randint(1, 80, ())), 2 * int(torch.randint(1, 40, ()))) for _ in range(3)]
# [observe]
import addnorm


# [shared helpers: _withhold]
def _withhold(functions, message):
    """From here on, calling any of `functions` — however it was imported or wrapped — fails with `message`.

    These are the library's (or torch's) own versions of what this exercise asks you to write; their code is
    replaced, so a class that delegates to them fails here, with the message, instead of passing unnoticed.
    """
    scope = {}
    exec(f"def _withheld(*args, **kwargs):\n    raise AssertionError({message!r})", scope)
    for function in functions:
        function.__code__ = scope["_withheld"].__code__
# [end of shared helpers]


_withhold([addnorm.sinusoidal_encoding, addnorm.Embedding.forward],
          "Your code calls addnorm's sinusoidal_encoding or Embedding, the library's version of what this exercise "
          "asks you to write: compute the table from the formula with torch.sin and torch.cos (or math), and add "
          "it in your own Embedding.forward.")
is_library = sinusoidal_encoding is addnorm.sinusoidal_encoding
one_pair = sinusoidal_encoding(1, 2)
long_table = sinusoidal_encoding(1000, 64)
shape_tables = [sinusoidal_encoding(case_len, case_d) for case_len, case_d in shape_cases]
# [check]
assert not is_library, "sinusoidal_encoding is addnorm's, the library's version of the answer: write it yourself"
assert isinstance(one_pair, torch.Tensor) and tuple(one_pair.shape) == (1, 2), (
    "sinusoidal_encoding(1, 2) must work: one position, one sin/cos pair")
assert isinstance(long_table, torch.Tensor) and torch.isfinite(long_table).all(), (
    "the table must be finite for long sequences too")
assert isinstance(shape_tables, list) and len(shape_tables) == len(shape_cases), (
    "sinusoidal_encoding must return one table per call")
for table, (case_len, case_d) in zip(shape_tables, shape_cases, strict=True):
    assert isinstance(table, torch.Tensor) and tuple(table.shape) == (case_len, case_d), (
        "sinusoidal_encoding(max_len, d_model) must be a (max_len, d_model) tensor for every size, not only (10, 8): "
        "one row per position 0 … max_len − 1, one column per dimension")
    assert table.dtype == torch.float32, "return a float32 tensor (the model's dtype), for every size"
    assert torch.isfinite(table).all(), "the table must be finite for every size"
    first_row = torch.tensor([0.0, 1.0] * (case_d // 2))
    assert not (case_d > 2 and torch.allclose(table[0], first_row.flip(0), atol=1e-6)), (
        "Row 0 is [1, 0, 1, 0, …]: sin and cos are swapped. Even columns hold sin, odd columns cos, so position 0 "
        "is [sin 0, cos 0, …] = [0, 1, 0, 1, …].")
    assert torch.allclose(table[0], first_row, atol=1e-6), (
        "Row 0 is the encoding of position 0: [sin 0, cos 0, …] = [0, 1, 0, 1, …], for every d_model; yours is not, "
        "for a size the notebook does not show")
