"""Input checks shared by the modules: each raises a ValueError saying what was expected and what was given."""

from __future__ import annotations

import torch


def check_last_dim(x: torch.Tensor, expected: int, what: str) -> None:
    """Raise unless x is at least 1-D with last dimension `expected`."""
    if x.dim() == 0 or x.shape[-1] != expected:
        raise ValueError(
            f"{what}: expected a tensor whose last dimension is {expected} (d_model), "
            f"got shape {tuple(x.shape)}"
        )


def check_batch_first(x: torch.Tensor, d_model: int, what: str) -> None:
    """Raise unless x has shape (batch, seq, d_model)."""
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(
            f"{what}: expected a batch-first tensor of shape (batch, seq, {d_model}), "
            f"got shape {tuple(x.shape)}"
        )


def check_key_padding_mask(mask: torch.Tensor | None, batch: int, seq: int, what: str) -> None:
    """Raise unless mask is None or a boolean (batch, seq) tensor (True marks padding)."""
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise ValueError(f"{what}: expected a boolean mask (True marks padding), got dtype {mask.dtype}")
    if tuple(mask.shape) != (batch, seq):
        raise ValueError(
            f"{what}: expected a key-padding mask of shape (batch, seq) = ({batch}, {seq}), "
            f"got shape {tuple(mask.shape)}"
        )
