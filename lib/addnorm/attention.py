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


def _check_mask(mask: torch.Tensor, q_len: int, k_len: int) -> None:
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
        _check_mask(mask, q.shape[-2], k.shape[-2])
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])   # (..., q_len, k_len)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights                                  # (..., q_len, d_v), (..., q_len, k_len)


class MultiHeadAttention(nn.Module):
    """h attention heads on d_model/h-wide projections, concatenated and projected by W^O.

    Set `record_weights = True` to keep the last attention weights in `self.weights`
    (batch, heads, q_len, k_len); otherwise a fused kernel computes the same function.
    """

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
        self.dropout = dropout
        self.record_weights = False
        self.weights: torch.Tensor | None = None

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape                                          # (batch, seq, d_model)
        return x.view(batch, seq, self.num_heads, self.d_head).transpose(1, 2)  # (batch, heads, seq, d_head)

    def _keys_values(self, key: torch.Tensor, value: torch.Tensor, cache: dict | None, static: bool):
        """Project keys and values; with a cache, reuse (static) or extend (incremental) the stored ones."""
        if cache is not None and static and "k" in cache:
            return cache["k"], cache["v"]
        k, v = self._split_heads(self.k_proj(key)), self._split_heads(self.v_proj(value))
        if cache is not None:
            if not static and "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        return k, v

    def encode_positions(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries and keys as they enter the dot product: unchanged here; RoPE rotates them (addnorm.rope)."""
        return q, k

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        attn_mask: torch.Tensor | None = None,
        cache: dict | None = None,
        static_kv: bool = False,
    ) -> torch.Tensor:
        """Attend from query (batch, q_len, d_model) to key/value (batch, k_len, d_model).

        key_padding_mask: (batch, k_len), True marks padding. attn_mask: (q_len, k_len), True = blocked.
        cache: a dict that keeps projected keys/values between calls (incremental decoding);
        static_kv=True computes them once (cross-attention to a fixed memory).
        """
        batch, q_len, _ = query.shape
        q = self._split_heads(self.q_proj(query))                         # (batch, heads, q_len, d_head)
        k, v = self._keys_values(key, value, cache, static_kv)            # (batch, heads, k_len, d_head)
        q, k = self.encode_positions(q, k)
        k_len = k.shape[2]
        mask = None
        if key_padding_mask is not None:
            check_key_padding_mask(key_padding_mask, batch, k_len, "MultiHeadAttention")
            mask = key_padding_mask[:, None, None, :]                      # (batch, 1, 1, k_len)
        if attn_mask is not None:
            _check_mask(attn_mask, q_len, k_len)
            mask = attn_mask if mask is None else mask | attn_mask
        p = self.dropout if self.training else 0.0
        if self.record_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask)
            self.weights = weights.detach()
            out = F.dropout(weights, p) @ v if p > 0 else out
        else:   # the same function, computed by PyTorch's fused kernel (True there means "may attend")
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask, dropout_p=p)
        out = out.transpose(1, 2).reshape(batch, q_len, self.d_model)     # concatenate the heads
        return self.out_proj(out)
