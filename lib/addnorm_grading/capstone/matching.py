"""Whose parameter is whose: the learner's modules matched to addnorm's by the order the forward pass applies them.

Learners name their norms as they like (norm1, norms[0], ln_attn), so names say nothing; the order in which one
probe forward pass first uses each module's parameters does (seen by a TorchFunctionMode, so a module called through
.forward, or whose weights go to a functional, counts too). Within one module, a norm's scale is told from its
shift by their initial values (ones and zeros), whatever they are called.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves


class Mismatch(ValueError):
    """The two models' parameters cannot be paired: a different number of them, or of different shapes."""


class _FirstUses(TorchFunctionMode):
    """Records the order in which torch functions first receive each of `params` (however the module is called:
    through __call__, through .forward, or its weights handed to a functional)."""

    def __init__(self, params: list[nn.Parameter]) -> None:
        super().__init__()
        self.wanted, self.order = {id(p) for p in params}, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        for leaf in tree_leaves((args, kwargs or {})):
            if isinstance(leaf, torch.Tensor) and id(leaf) in self.wanted and id(leaf) not in self.order:
                self.order.append(id(leaf))
        return func(*args, **(kwargs or {}))


def application_order(model: nn.Module, run: Callable[[nn.Module], object]) -> list[nn.Module]:
    """The modules that own parameters, in the order `run(model)` first uses one of their parameters (each once)."""
    owner = {id(p): module for module in model.modules() for p in module.parameters(recurse=False)}
    uses = _FirstUses(list(model.parameters()))
    with torch.no_grad(), uses:
        run(model)
    order = []
    for key in uses.order:
        if owner[key] not in order:
            order.append(owner[key])
    return order


def own_parameters(module: nn.Module) -> list[nn.Parameter]:
    """A module's own parameters; a norm's two vectors as (scale, shift), told apart by their values at creation."""
    params = list(module.parameters(recurse=False))
    if len(params) == 2 and all(p.dim() == 1 for p in params):
        ones = [p for p in params if torch.all(p == 1)]
        zeros = [p for p in params if torch.all(p == 0)]
        if len(ones) == 1 and len(zeros) == 1:
            return [ones[0], zeros[0]]
    return params


def pairs(source: nn.Module, target: nn.Module, run: Callable[[nn.Module], object]) -> list[tuple[nn.Parameter, nn.Parameter]]:
    """(source parameter, target parameter) pairs; raises Mismatch when the two cannot be paired."""
    ours, theirs = application_order(source, run), application_order(target, run)
    our_params = [p for m in ours for p in own_parameters(m)]
    their_params = [p for m in theirs for p in own_parameters(m)]
    unused = sum(1 for p in target.parameters()) - len(their_params)
    if unused:
        raise Mismatch(f"{unused} of its parameter tensors are never used in the forward pass")
    if len(our_params) != len(their_params):
        raise Mismatch(f"its forward pass uses {len(their_params)} parameter tensors, addnorm's uses {len(our_params)}")
    for k, (a, b) in enumerate(zip(our_params, their_params)):
        if a.shape != b.shape:
            raise Mismatch(f"parameter {k + 1} in the order of use has shape {tuple(b.shape)}, addnorm's {tuple(a.shape)}")
    return list(zip(our_params, their_params))


def copy_weights(source: nn.Module, target: nn.Module, run: Callable[[nn.Module], object]) -> list[tuple]:
    """Give `target` the weights of `source`, paired by order of use; return the pairs (for comparing gradients)."""
    matched = pairs(source, target, run)
    with torch.no_grad():
        for a, b in matched:
            b.copy_(a)
    return matched


def trained_looking(model: nn.Module, seed: int) -> nn.Module:
    """Move every parameter off its initial value, as training does (γ ≠ 1, β ≠ 0), so a skipped part shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=generator))
    return model
