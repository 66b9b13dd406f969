"""The sublayer connection — "Add & Norm" — in its Post-LN and Pre-LN forms.

Post-LN (Vaswani et al. 2017):  LN(x + Dropout(F(x)))
Pre-LN  (GPT-2, Xiong et al. 2020):  x + Dropout(F(LN(x)))

Connections without the residual, without the norm, or with ReZero's α live in addnorm.variants.connections.
"""

from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn

from ._checks import check_same_shape
from .norm import LayerNorm

Sublayer = Callable[[torch.Tensor], torch.Tensor]


class AddNorm(nn.Module):
    """Wrap a sublayer F with a residual connection and a LayerNorm: call as `add_norm(x, F)`.

    norm_first=False is Post-LN (the 2017 paper), True is Pre-LN (GPT-2 and most models since).
    """

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False) -> None:
        super().__init__()
        self.d_model = d_model
        self.norm_first = norm_first
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        """x: (..., d_model); sublayer maps that shape to itself."""
        if self.norm_first:
            update = self.dropout(sublayer(self.norm(x)))
            check_same_shape(x, update, type(self).__name__)
            return x + update                                  # the stream itself is never normalized
        update = self.dropout(sublayer(x))
        check_same_shape(x, update, type(self).__name__)
        return self.norm(x + update)                           # normalize after the addition

    def extra_repr(self) -> str:
        return f"{self.d_model}, {'Pre-LN' if self.norm_first else 'Post-LN'}"


def clones(module: nn.Module, n: int) -> nn.ModuleList:
    """n independent deep copies of module: same structure, separate weights."""
    if n < 1:
        raise ValueError(f"clones: expected at least 1 copy, got {n}")
    return nn.ModuleList(copy.deepcopy(module) for _ in range(n))
