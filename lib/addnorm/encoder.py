"""The encoder: N independent copies of one layer, each self-attention → Add & Norm → FFN → Add & Norm."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_batch_first
from .attention import MultiHeadAttention
from .feedforward import FeedForward
from .residual import AddNorm, clones


class EncoderLayer(nn.Module):
    """One encoder layer: two sublayers (self-attention, feed-forward), each wrapped in an AddNorm."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.add_norm_1 = AddNorm(d_model, dropout, norm_first)
        self.add_norm_2 = AddNorm(d_model, dropout, norm_first)

    def forward(self, x: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, seq, d_model) → (batch, seq, d_model); padded keys (True in the mask) are ignored."""
        check_batch_first(x, self.d_model, "EncoderLayer")
        x = self.add_norm_1(x, lambda h: self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask))
        return self.add_norm_2(x, self.feed_forward)


class Encoder(nn.Module):
    """A stack of num_layers deep copies of `layer` (independent weights), then `norm` once if given.

    The output of layer k is the input of layer k+1, with nothing in between. A Pre-LN stack is
    built with norm=LayerNorm(d_model), since its last sublayer's output is never normalized.
    """

    def __init__(self, layer: nn.Module, num_layers: int, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = clones(layer, num_layers)
        self.norm = norm

    def forward(self, x: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, src_len, d_model) → (batch, src_len, d_model)."""
        for layer in self.layers:
            x = layer(x, src_key_padding_mask)
        return x if self.norm is None else self.norm(x)
