"""Layer normalization written from its formula, and RMSNorm.

LayerNorm(z) = γ · (z − μ) / √(σ² + ε) + β, with μ and the *biased* variance σ² taken over
the features of one token (the last axis) — Ba, Kiros & Hinton (2016).
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_last_dim


class LayerNorm(nn.Module):
    """Normalize each token over its d_model features, then scale by `weight` (γ) and shift by `bias` (β)."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))   # γ
        self.bias = nn.Parameter(torch.zeros(d_model))    # β

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_model) → (..., d_model), every token normalized on its own."""
        check_last_dim(x, self.d_model, "LayerNorm")
        mean = x.mean(dim=-1, keepdim=True)                            # (..., 1)
        centered = x - mean                                            # subtract first: accurate for a large mean
        variance = (centered * centered).mean(dim=-1, keepdim=True)    # biased: divide by d, not d − 1
        return centered / torch.sqrt(variance + self.eps) * self.weight + self.bias   # ε inside the root

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


class RMSNorm(nn.Module):
    """Scale each token by the reciprocal of its root mean square; no mean subtraction, no β (Zhang & Sennrich 2019)."""

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))   # γ

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_model) → (..., d_model)."""
        check_last_dim(x, self.d_model, "RMSNorm")
        mean_square = (x * x).mean(dim=-1, keepdim=True)
        return x / torch.sqrt(mean_square + self.eps) * self.weight

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"
