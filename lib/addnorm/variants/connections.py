"""Sublayer connections for experiments: AddNorm with a part removed or replaced.

Each is called like AddNorm, as `connection(x, F)`, and raises the same ValueError when F changes the shape.

| class | computes | used to show |
|---|---|---|
| `ResidualOnly` | x + Dropout(F(x)) | a residual stream with no normalization grows with depth |
| `ReZero` | x + α·Dropout(F(x)), α a learned scalar that starts at 0 | training deep stacks without LN (Bachlechner et al. 2020) |
| `NoResidual` | LN(Dropout(F(x))) (Post-LN) or Dropout(F(LN(x))) (Pre-LN) | what the identity path is for |
| `Plain` | Dropout(F(x)) | neither: a plain deep network |
| `AddRMSNorm` | AddNorm with RMSNorm in place of LayerNorm | T5 and LLaMA's normalization |

`replace_connections(model, kind)` swaps every AddNorm of a model for one of these.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_same_shape
from ..norm import RMSNorm
from ..residual import AddNorm, Sublayer


class ResidualOnly(nn.Module):
    """x + Dropout(F(x)): the residual connection with no normalization."""

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False) -> None:
        super().__init__()
        self.d_model = d_model
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        """x: (..., d_model) → x + Dropout(F(x))."""
        update = self.dropout(sublayer(x))
        check_same_shape(x, update, type(self).__name__)
        return x + update


class ReZero(ResidualOnly):
    """x + α·Dropout(F(x)) with a learned scalar α initialized to 0: every block starts as the identity."""

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False) -> None:
        super().__init__(d_model, dropout)
        self.alpha = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        """x: (..., d_model) → x + α·Dropout(F(x))."""
        return super().forward(x, lambda h: self.alpha * sublayer(h))


class NoResidual(AddNorm):
    """AddNorm without the addition: LN(Dropout(F(x))) when Post-LN, Dropout(F(LN(x))) when Pre-LN."""

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        """x: (..., d_model) → the sublayer's output, normalized before or after; x itself is not added."""
        update = self.dropout(sublayer(self.norm(x) if self.norm_first else x))
        check_same_shape(x, update, type(self).__name__)
        return update if self.norm_first else self.norm(update)


class Plain(ResidualOnly):
    """Dropout(F(x)): no residual and no normalization — each layer simply feeds the next."""

    def forward(self, x: torch.Tensor, sublayer: Sublayer) -> torch.Tensor:
        """x: (..., d_model) → Dropout(F(x))."""
        update = self.dropout(sublayer(x))
        check_same_shape(x, update, type(self).__name__)
        return update


class AddRMSNorm(AddNorm):
    """AddNorm with RMSNorm (no mean subtraction, no β) in place of LayerNorm."""

    def __init__(self, d_model: int, dropout: float = 0.0, norm_first: bool = False) -> None:
        super().__init__(d_model, dropout, norm_first)
        self.norm = RMSNorm(d_model)


CONNECTIONS: dict[str, type[nn.Module]] = {
    "add_norm": AddNorm, "residual_only": ResidualOnly, "rezero": ReZero,
    "no_residual": NoResidual, "plain": Plain, "rms": AddRMSNorm,
}


def replace_connections(model: nn.Module, kind: str) -> nn.Module:
    """Replace every AddNorm in model (in place) by the connection named kind, with the same width, dropout and order."""
    if kind not in CONNECTIONS:
        raise ValueError(f"replace_connections: expected one of {sorted(CONNECTIONS)}, got {kind!r}")
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, AddNorm):
                setattr(parent, name, CONNECTIONS[kind](child.d_model, child.dropout.p, child.norm_first))
    return model
