"""Trace one forward pass with hooks: which submodules ran, in what order, on which shapes.

The chapters print these traces as tables, so a shape table is *measured* on a real pass,
never typed by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import nn


@dataclass
class Call:
    """One finished forward call of a submodule: its name, class, input shapes and output shape."""

    name: str
    kind: str
    inputs: list[tuple[int, ...]]
    output: tuple[int, ...] | None


def _shape(x: Any) -> tuple[int, ...] | None:
    return tuple(x.shape) if torch.is_tensor(x) else None


def format_shape(shape: tuple[int, ...] | None) -> str:
    """(2, 6, 32) → "(2,6,32)" (compact, so table cells do not wrap); None → "—"."""
    return "—" if shape is None else "(" + ",".join(str(s) for s in shape) + ")"


def trace_calls(
    model: nn.Module,
    *args: Any,
    include: Sequence[str] | None = None,
    skip: tuple[type, ...] = (nn.Dropout,),
    **kwargs: Any,
) -> tuple[Any, list[Call]]:
    """Run model(*args, **kwargs) with a forward hook on every submodule; return (output, calls).

    Calls are listed in the order they *finished* (a sublayer finishes before the Add & Norm
    around it). include: keep only these submodule names; skip: drop these module types.
    """
    calls: list[Call] = []
    handles = []

    def hook_for(name: str):
        def hook(module: nn.Module, inputs: tuple, output: Any) -> None:
            shapes = [s for s in (_shape(a) for a in inputs) if s is not None]
            calls.append(Call(name, type(module).__name__, shapes, _shape(output)))
        return hook

    for name, module in model.named_modules():
        if name == "" or isinstance(module, skip) or (include is not None and name not in include):
            continue
        handles.append(module.register_forward_hook(hook_for(name)))
    try:
        with torch.no_grad():
            output = model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return output, calls


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (display it with IPython.display.Markdown)."""
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
