"""A residual block whose sublayer changes the width: the projection shortcut of He et al. (2016).

y = F(x) + W_s·x, where W_s maps d_in → d_out. When d_in == d_out the identity shortcut y = F(x) + x
needs no parameters, which is why every sublayer of a Transformer keeps the width d_model.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_last_dim


class ProjectionShortcut(nn.Module):
    """y = sublayer(x) + W_s·x for a sublayer mapping d_in features to d_out features (He et al. 2016, eq. 2)."""

    def __init__(self, sublayer: nn.Module, d_in: int, d_out: int, bias: bool = False) -> None:
        super().__init__()
        self.d_in, self.d_out = d_in, d_out
        self.sublayer = sublayer
        # W_s: a learned d_in → d_out projection; the identity when the widths already match.
        self.projection = nn.Identity() if d_in == d_out else nn.Linear(d_in, d_out, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_in) → (..., d_out)."""
        check_last_dim(x, self.d_in, "ProjectionShortcut")
        update = self.sublayer(x)                                   # (..., d_out)
        if update.shape[-1] != self.d_out:
            raise ValueError(
                f"ProjectionShortcut: expected the sublayer to return {self.d_out} features, "
                f"got shape {tuple(update.shape)}"
            )
        return update + self.projection(x)                          # (..., d_out)

    def extra_repr(self) -> str:
        return f"d_in={self.d_in}, d_out={self.d_out}"
