"""The decoder: N independent copies of one layer, each masked self-attention → Add & Norm →
cross-attention to the encoder's output → Add & Norm → FFN → Add & Norm."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_batch_first
from .attention import MultiHeadAttention
from .feedforward import FeedForward
from .residual import AddNorm, clones


def _causal_mask_after(past: int, new: int, device: torch.device) -> torch.Tensor:
    """(new, past+new) mask: new query i (at position past+i) may not see keys after past+i."""
    return torch.ones(new, past + new, dtype=torch.bool, device=device).triu(diagonal=past + 1)


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
        residual: bool = True,
        norm: str = "layer",
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.add_norm_1 = AddNorm(d_model, dropout, norm_first, residual, norm, eps)
        self.add_norm_2 = AddNorm(d_model, dropout, norm_first, residual, norm, eps)
        self.add_norm_3 = AddNorm(d_model, dropout, norm_first, residual, norm, eps)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        cache: dict | None = None,
    ) -> torch.Tensor:
        """x: (batch, tgt_len, d_model), memory: (batch, src_len, d_model) → (batch, tgt_len, d_model).

        With a cache (a dict, empty at the first step), x holds only the new positions, and the
        keys/values of earlier positions are reused instead of recomputed.
        """
        check_batch_first(x, self.d_model, "DecoderLayer (target)")
        check_batch_first(memory, self.d_model, "DecoderLayer (memory)")
        self_cache = cross_cache = None
        past = 0
        if cache is not None:
            self_cache, cross_cache = cache.setdefault("self", {}), cache.setdefault("cross", {})
            past = self_cache["k"].shape[2] if "k" in self_cache else 0
        mask = _causal_mask_after(past, x.shape[1], x.device)          # (tgt_len, past + tgt_len)
        x = self.add_norm_1(x, lambda h: self.self_attn(
            h, h, h, key_padding_mask=tgt_key_padding_mask, attn_mask=mask, cache=self_cache))
        x = self.add_norm_2(x, lambda h: self.cross_attn(
            h, memory, memory, key_padding_mask=memory_key_padding_mask, cache=cross_cache, static_kv=True))
        return self.add_norm_3(x, self.feed_forward)


class Decoder(nn.Module):
    """A stack of num_layers deep copies of `layer`; every layer cross-attends to the same memory."""

    def __init__(self, layer: nn.Module, num_layers: int, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = clones(layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
        cache: list[dict] | None = None,
    ) -> torch.Tensor:
        """(batch, tgt_len, d_model) → (batch, tgt_len, d_model); cache: one dict per layer, or None."""
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_key_padding_mask, memory_key_padding_mask,
                      cache=None if cache is None else cache[i])
        return x if self.norm is None else self.norm(x)
