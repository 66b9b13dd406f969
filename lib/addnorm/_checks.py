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


def check_same_shape(x: torch.Tensor, update: torch.Tensor, what: str) -> None:
    """Raise unless a residual's input x and its sublayer's output have the same shape (so they can be added)."""
    if update.shape != x.shape:
        raise ValueError(
            f"{what}: the residual adds the sublayer's output to its input, so their shapes must "
            f"match; got input {tuple(x.shape)} and sublayer output {tuple(update.shape)} "
            f"(use a projection shortcut W_s·x when the widths differ: addnorm.variants.shortcut)"
        )
