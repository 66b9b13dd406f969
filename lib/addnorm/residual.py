"""The sublayer connection — "Add & Norm" — in its Post-LN and Pre-LN forms.

Post-LN (Vaswani et al. 2017):  LN(x + Dropout(F(x)))
Pre-LN  (GPT-2, Xiong et al. 2020):  x + Dropout(F(LN(x)))
"""

from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn

from .norm import make_norm

Sublayer = Callable[[torch.Tensor], torch.Tensor]


class AddNorm(nn.Module):
    """Wrap a sublayer F with a residual connection and a normalization: call as `add_norm(x, F)`.

    norm_first=False is Post-LN, True is Pre-LN. residual=False drops the `x +` (for experiments).
    norm picks the normalization: "layer" (default), "rms", "none", or "rezero" — no normalization
    and `x + α·F(x)` with a learned scalar α that starts at 0 (Bachlechner et al. 2020).
    """

    def __init__(
        self,
        d_model: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        residual: bool = True,
        norm: str = "layer",
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if norm not in ("layer", "rms", "none", "rezero"):
            raise ValueError(f"AddNorm: expected norm 'layer', 'rms', 'none' or 'rezero', got {norm!r}")
        self.d_model = d_model
        self.norm_first = norm_first
        self.residual = residual
        self.norm = make_norm("none" if norm == "rezero" else norm, d_model, eps)
        self.alpha = nn.Parameter(torch.zeros(1)) if norm == "rezero" else None
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        inner = self.norm(x) if self.norm_first else x
        update = self.dropout(sublayer(inner))
        if update.shape != x.shape:
            raise ValueError(
                f"AddNorm: the residual adds the sublayer's output to its input, so their shapes must "
                f"match; got input {tuple(x.shape)} and sublayer output {tuple(update.shape)} "
                f"(use a projection shortcut W_s·x when the widths differ)"
            )
        if self.alpha is not None:
            update = self.alpha * update
        out = x + update if self.residual else update
        return out if self.norm_first else self.norm(out)

    def extra_repr(self) -> str:
        kind = "Pre-LN" if self.norm_first else "Post-LN"
        return f"{self.d_model}, {kind}, residual={self.residual}"


def clones(module: nn.Module, n: int) -> nn.ModuleList:
    """n independent deep copies of module: same structure, separate weights."""

    if n < 1:
        raise ValueError(f"clones: expected at least 1 copy, got {n}")
    return nn.ModuleList(copy.deepcopy(module) for _ in range(n))
