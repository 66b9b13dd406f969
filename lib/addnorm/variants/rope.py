"""Rotary position embedding, RoPE (Su et al. 2021): position enters inside every attention layer.

Instead of adding a vector to the input once, RoPE rotates each pair of features (2i, 2i+1)
of every query and key by the angle p·θ_i, with θ_i = base^(−2i/d_head) — the frequencies of the sinusoidal
encoding. A rotated query at position m and a rotated key at position n then have the dot
product q·R_{n−m}·k: the attention score depends on the offset n − m, not on m and n.
"""

from __future__ import annotations

import torch
from torch import nn

from ..attention import MultiHeadAttention


def rope_angles(seq_len: int, d_head: int, base: float = 10000.0, offset: int = 0) -> torch.Tensor:
    """(seq_len, d_head/2) rotation angles p·θ_i for positions offset … offset+seq_len−1."""
    if d_head % 2 != 0:
        raise ValueError(f"RoPE: d_head must be even (features are rotated in pairs), got {d_head}")
    position = torch.arange(offset, offset + seq_len, dtype=torch.float64)[:, None]   # (seq, 1)
    theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)      # (d_head/2,)
    return (position * theta).float()                                                # (seq, d_head/2)


def rotate(x: torch.Tensor, offset: int = 0, base: float = 10000.0) -> torch.Tensor:
    """Rotate every feature pair (2i, 2i+1) of x (..., seq, d_head) by the angle position·θ_i."""
    angle = rope_angles(x.shape[-2], x.shape[-1], base, offset).to(x.device)           # (seq, d_head/2)
    cos, sin = angle.cos(), angle.sin()
    even, odd = x[..., 0::2], x[..., 1::2]                                            # (..., seq, d_head/2)
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


class RotaryMultiHeadAttention(MultiHeadAttention):
    """MultiHeadAttention that rotates queries and keys by their positions (RoPE) before the dot product.

    Values are not rotated. Positions count from 0 in every call (no key/value cache).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, base: float = 10000.0) -> None:
        super().__init__(d_model, num_heads, dropout)
        self.base = base

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Rotate q (batch, heads, q_len, d_head) and k by their positions, then attend as usual."""
        return super().attend(rotate(q, base=self.base), rotate(k, base=self.base), v, mask)


def use_rope(model: nn.Module, base: float = 10000.0) -> nn.Module:
    """Replace every `self_attn` MultiHeadAttention in model by a RotaryMultiHeadAttention with the same weights."""
    for module in list(model.modules()):
        attn = getattr(module, "self_attn", None)
        if isinstance(attn, MultiHeadAttention) and not isinstance(attn, RotaryMultiHeadAttention):
            rotary = RotaryMultiHeadAttention(attn.d_model, attn.num_heads, attn.dropout, base)
            rotary.load_state_dict(attn.state_dict())
            module.self_attn = rotary
    return model
