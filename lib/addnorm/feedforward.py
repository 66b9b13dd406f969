"""The position-wise feed-forward network: the same two-layer MLP applied to every token."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """Linear(d_model → d_ff), activation, dropout, Linear(d_ff → d_model)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"FeedForward: expected activation 'relu' or 'gelu', got {activation!r}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)    # expand: d_ff is 4 × d_model in the 2017 paper
        self.linear2 = nn.Linear(d_ff, d_model)    # project back, so the residual can add
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = ACTIVATIONS[self.activation](self.linear1(x))   # (batch, seq, d_ff)
        return self.linear2(self.dropout(hidden))                # (batch, seq, d_model)
