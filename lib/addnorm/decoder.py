"""The decoder: N independent copies of one layer, each masked self-attention → Add & Norm →
cross-attention to the encoder's output → Add & Norm → FFN → Add & Norm."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_batch_first
from .attention import MultiHeadAttention, causal_mask
from .feedforward import FeedForward
from .residual import AddNorm, clones


class DecoderLayer(nn.Module):
    """One decoder layer: three sublayers, each wrapped in an AddNorm. Its self-attention is always causal."""

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
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.add_norm_1 = AddNorm(d_model, dropout, norm_first)
        self.add_norm_2 = AddNorm(d_model, dropout, norm_first)
        self.add_norm_3 = AddNorm(d_model, dropout, norm_first)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: (batch, tgt_len, d_model), memory: (batch, src_len, d_model) → (batch, tgt_len, d_model)."""
        check_batch_first(x, self.d_model, "DecoderLayer (target)")
        check_batch_first(memory, self.d_model, "DecoderLayer (memory)")
        future = causal_mask(x.shape[1], x.device)                  # (tgt_len, tgt_len): no peeking ahead
        x = self.add_norm_1(x, lambda h: self.self_attn(
            h, h, h, key_padding_mask=tgt_key_padding_mask, attn_mask=future))
        x = self.add_norm_2(x, lambda h: self.cross_attn(
            h, memory, memory, key_padding_mask=memory_key_padding_mask))   # queries from x, keys/values from memory
        return self.add_norm_3(x, self.feed_forward)


class Decoder(nn.Module):
    """A stack of num_layers deep copies of `layer`, then `norm` once if given; every layer attends to the same memory."""

    def __init__(self, layer: nn.Module, num_layers: int, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = clones(layer, num_layers)
        self.norm = norm

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(batch, tgt_len, d_model) → (batch, tgt_len, d_model)."""
        for layer in self.layers:
            x = layer(x, memory, tgt_key_padding_mask, memory_key_padding_mask)
        return x if self.norm is None else self.norm(x)
