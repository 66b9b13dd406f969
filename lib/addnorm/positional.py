"""Sinusoidal positional encoding, and the input embedding that adds it exactly once.

PE[p, 2i] = sin(p / 10000^(2i/d_model)),  PE[p, 2i+1] = cos(p / 10000^(2i/d_model))  (Vaswani et al. 2017)

Learned position tables (BERT, GPT-2) and no positions at all are in addnorm.variants.positions.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The (max_len, d_model) table of sinusoidal position encodings: sin in even columns, cos in odd."""
    if d_model < 2 or d_model % 2 != 0:
        raise ValueError(
            f"sinusoidal_encoding: d_model must be even (each frequency fills a sin and a cos column), got {d_model}"
        )
    if max_len < 1:
        raise ValueError(f"sinusoidal_encoding: expected max_len >= 1, got {max_len}")
    position = torch.arange(max_len, dtype=torch.float64)[:, None]          # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)                # (d_model/2,)
    angle = position / 10000.0 ** (two_i / d_model)                         # (max_len, d_model/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class Embedding(nn.Module):
    """Token embedding scaled by √d_model, plus the sinusoidal positional encoding — added here, once, at the input."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int = 512, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.register_buffer("position_table", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def positions(self, seq_len: int, offset: int = 0) -> torch.Tensor:
        """The (seq_len, d_model) encodings of positions offset … offset+seq_len−1."""
        if offset + seq_len > self.max_len:
            raise ValueError(
                f"Embedding: a sequence of length {offset + seq_len} is longer than max_len={self.max_len}"
            )
        return self.position_table[offset : offset + seq_len]

    def forward(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """(batch, seq) token ids → (batch, seq, d_model) vectors; offset shifts the positions (one-token decoding)."""
        if tokens.dim() != 2:
            raise ValueError(f"Embedding: expected token ids of shape (batch, seq), got shape {tuple(tokens.shape)}")
        x = self.tokens(tokens) * math.sqrt(self.d_model)          # (batch, seq, d_model)
        x = x + self.positions(tokens.shape[1], offset)             # (seq, d_model) broadcasts over the batch
        return self.dropout(x)
