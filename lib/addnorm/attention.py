"""Scaled dot-product attention and multi-head attention (Vaswani et al. 2017).

Masks follow torch.nn: a boolean True marks a position that may NOT be attended to
(padding in a key-padding mask, the future in a causal mask).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_key_padding_mask


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(n, n) boolean mask, True above the diagonal: position i may not attend to any j > i."""
    if n < 1:
        raise ValueError(f"causal_mask: expected a sequence length of at least 1, got {n}")
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(diagonal=1)


def check_attention_mask(mask: torch.Tensor, q_len: int, k_len: int) -> None:
    """Raise unless mask is boolean and broadcasts to (..., q_len, k_len)."""
    if mask.dtype != torch.bool:
        raise ValueError(f"attention mask: expected a boolean tensor (True = blocked), got dtype {mask.dtype}")
    if mask.dim() < 2 or mask.shape[-2] not in (1, q_len) or mask.shape[-1] != k_len:
        raise ValueError(
            f"attention mask: expected shape (..., {q_len}, {k_len}) = (..., queries, keys), "
            f"got shape {tuple(mask.shape)}"
        )


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d_k) v, written out; returns (output, attention weights).

    q: (..., q_len, d_k), k: (..., k_len, d_k), v: (..., k_len, d_v); mask broadcasts to (..., q_len, k_len).
    """
    if mask is not None:
        check_attention_mask(mask, q.shape[-2], k.shape[-2])
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])   # (..., q_len, k_len)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights                                  # (..., q_len, d_v), (..., q_len, k_len)


def combine_masks(
    key_padding_mask: torch.Tensor | None, attn_mask: torch.Tensor | None, batch: int, q_len: int, k_len: int
) -> torch.Tensor | None:
    """One boolean mask (True = blocked) from a (batch, k_len) padding mask and a (q_len, k_len) attention mask."""
    mask = None
    if key_padding_mask is not None:
        check_key_padding_mask(key_padding_mask, batch, k_len, "MultiHeadAttention")
        mask = key_padding_mask[:, None, None, :]                 # (batch, 1, 1, k_len): the same for every head
    if attn_mask is not None:
        check_attention_mask(attn_mask, q_len, k_len)
        mask = attn_mask if mask is None else mask | attn_mask    # broadcasts to (batch, 1, q_len, k_len)
    return mask


class MultiHeadAttention(nn.Module):
    """h attention heads on d_model/h-wide projections, concatenated and projected by W^O."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(
                f"MultiHeadAttention: d_model must be divisible by num_heads; "
                f"got d_model={d_model}, num_heads={num_heads}"
            )
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)   # W^O
        self.dropout = dropout                        # on the attention weights, while training

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) → (batch, heads, seq, d_head)."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.num_heads, self.d_head).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, heads, seq, d_head) → (batch, seq, d_model): the heads concatenated."""
        batch, _, seq, _ = x.shape
        return x.transpose(1, 2).reshape(batch, seq, self.d_model)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """softmax(q kᵀ / √d_head) v for every head (batch, heads, seq, d_head), with dropout on the weights.

        This is scaled_dot_product_attention above, computed by PyTorch's fused kernel (where True means
        "may attend", hence ~mask). Variants override this step: RoPE (variants.rope) rotates q and k first.
        """
        p = self.dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask, dropout_p=p)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend from query (batch, q_len, d_model) to key/value (batch, k_len, d_model).

        key_padding_mask: (batch, k_len), True marks padding. attn_mask: (q_len, k_len), True = blocked.
        """
        q = self.split_heads(self.q_proj(query))                          # (batch, heads, q_len, d_head)
        k = self.split_heads(self.k_proj(key))                            # (batch, heads, k_len, d_head)
        v = self.split_heads(self.v_proj(value))                          # (batch, heads, k_len, d_head)
        mask = combine_masks(key_padding_mask, attn_mask, query.shape[0], query.shape[1], key.shape[1])
        return self.out_proj(self.merge_heads(self.attend(q, k, v, mask)))  # (batch, q_len, d_model)
