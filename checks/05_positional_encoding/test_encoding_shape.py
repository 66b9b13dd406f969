import torch

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
# [check]
assert not is_library, "sinusoidal_encoding is addnorm's, the library's version of the answer: write it yourself"
assert isinstance(one_pair, torch.Tensor) and tuple(one_pair.shape) == (1, 2), (
    "sinusoidal_encoding(1, 2) must work: one position, one sin/cos pair")
assert isinstance(long_table, torch.Tensor) and torch.isfinite(long_table).all(), (
    "the table must be finite for long sequences too")
