import torch

# [inputs]
# tables of shapes drawn from the course's secret (one with a single sin/cos pair, one long), compared entry by entry
# with the formula in float64; the rotation property at an offset drawn the same way
torch.manual_seed(SEED + 11)
shapes = [(int(torch.randint(20, 140, ())), 2 * int(torch.randint(4, 40, ()))),
          (int(torch.randint(2, 12, ())), 2),
          (int(torch.randint(200, 600, ())), 2 * int(torch.randint(16, 48, ()))),
          (int(torch.randint(2, 9, ())), 2 * int(torch.randint(2, 7, ())))]
rotation_shape = (int(torch.randint(30, 60, ())), 2 * int(torch.randint(2, 9, ())))
rotation_offset = int(torch.randint(1, 10, ()))
# [observe]
tables = [sinusoidal_encoding(max_len, d_model) for max_len, d_model in shapes]
rotation_table = sinusoidal_encoding(*rotation_shape)
# [check]
_MISTAKES = {
    "swapped": "sin and cos are swapped: the even columns 2i hold sin(p·ω_i) and the odd columns 2i+1 hold cos(p·ω_i).",
    "concatenated": "the columns are not interleaved: you put all the sines first and all the cosines after "
                    "([sin | cos]); the paper interleaves them, column 2i = sin, column 2i+1 = cos (pe[:, 0::2], pe[:, 1::2]).",
    "swapped_concatenated": "the columns are [cos | sin]: not interleaved, and sin and cos swapped. Column 2i is "
                            "sin(p·ω_i), column 2i+1 is cos(p·ω_i).",
    "i_over_d": "the frequencies are wrong: the exponent is 2i/d_model, where 2i is the even column index "
                "(0, 2, 4, …), not i/d_model.",
    "from_one": "the positions start at 1: the first row is position 0, so it must be [0, 1, 0, 1, …].",
}


def _check_encoding(pe, max_len, d_model):
    assert isinstance(pe, torch.Tensor) and tuple(pe.shape) == (max_len, d_model), (
        "sinusoidal_encoding(max_len, d_model) must be a (max_len, d_model) tensor for every size")
    assert pe.dtype == torch.float32, "return a float32 tensor (the model's dtype)"
    expected = _encoding(max_len, d_model)
    for variant, mistake in _MISTAKES.items():
        wrong = _encoding(max_len, d_model, variant)
        if torch.allclose(wrong, expected, atol=1e-4):      # e.g. with d_model = 2, [sin | cos] is interleaved
            continue
        assert not torch.allclose(pe.double(), wrong, atol=1e-4), mistake
    assert torch.allclose(pe.double(), expected, atol=1e-4), (
        "For a size the notebook does not show, your table differs from PE[p, 2i] = sin(p / 10000^(2i/d)), "
        "PE[p, 2i+1] = cos(p / 10000^(2i/d)) by more than 1e-4")


assert isinstance(tables, list) and len(tables) == len(shapes), "sinusoidal_encoding must return one table per call"
for table, (max_len, d_model) in zip(tables, shapes, strict=True):
    _check_encoding(table, max_len, d_model)
# the property the paper chose sinusoids for: PE[p + k] is a fixed rotation of PE[p], the same for every p
assert isinstance(rotation_table, torch.Tensor) and tuple(rotation_table.shape) == rotation_shape, (
    "sinusoidal_encoding(max_len, d_model) must be a (max_len, d_model) tensor for every size")
rotation = rotation_table.double()
dots = [(rotation[p] * rotation[p + rotation_offset]).sum().item() for p in range(0, rotation_shape[0] - 10, 3)]
assert max(dots) - min(dots) < 1e-4, "PE[p]·PE[p+k] should not depend on p (each sin/cos pair rotates with the position)"
