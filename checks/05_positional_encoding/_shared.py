import torch


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
