"""Variants of the reference model used by the chapters' experiments (not part of the standard Transformer)."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from .positional import sinusoidal_encoding


def add_positions_every_layer(encoder_layers: nn.ModuleList, d_model: int, max_len: int = 512) -> list[RemovableHandle]:
    """Add the sinusoidal encoding again to the input of every layer after the first (forward pre-hooks).

    The embedding already adds it before layer 1; with these hooks layers 2…N also receive
    x + PE, as the Universal Transformer's timing signal does (Dehghani et al. 2018).
    Returns the hook handles: call `.remove()` on each to restore the once-only model.
    """
    table = sinusoidal_encoding(max_len, d_model)                   # (max_len, d_model)

    def add_pe(module: nn.Module, args: tuple) -> tuple:
        x = args[0]                                                  # (batch, seq, d_model)
        return (x + table[: x.shape[1]].to(x.device),) + tuple(args[1:])

    return [layer.register_forward_pre_hook(add_pe) for layer in list(encoder_layers)[1:]]


@torch.no_grad()
def linear_probe_accuracy(
    train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor, ridge: float = 1e-3
) -> float:
    """Fit a linear classifier by ridge-regularized least squares on one-hot labels; return its test accuracy.

    train_x: (n, d) features, train_y: (n,) integer labels; the same for the test split.
    """
    num_classes = int(max(train_y.max(), test_y.max())) + 1
    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    a = torch.cat([(train_x - mean) / std, torch.ones(len(train_x), 1)], dim=1).double()   # (n, d+1)
    b = nn.functional.one_hot(train_y, num_classes).double()                                # (n, classes)
    w = torch.linalg.solve(a.T @ a + ridge * len(a) * torch.eye(a.shape[1], dtype=a.dtype), a.T @ b)
    t = torch.cat([(test_x - mean) / std, torch.ones(len(test_x), 1)], dim=1).double()
    return ((t @ w).argmax(dim=1) == test_y).double().mean().item()
