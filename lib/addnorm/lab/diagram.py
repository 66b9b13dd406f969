"""A data-flow diagram of an encoder–decoder Transformer, drawn from the model itself.

`trace` runs one forward pass with hooks (`addnorm.tracing.trace_calls`) and records, for every stage the tokens pass through,
the module's name, its class and the shape it returned, in the order the calls finished.
`draw_transformer` lays those stages out as the familiar two-column picture. Nothing is typed by
hand: change the model (depth, Pre-LN, width) and the figure changes with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ..residual import AddNorm
from .tracing import trace_calls
from ..transformer import Transformer


@dataclass
class Stage:
    """One module call seen during the traced forward pass."""

    name: str            # e.g. "decoder.layers.1.cross_attn"
    kind: str            # class name, with "Post-LN"/"Pre-LN" for an AddNorm
    shape: tuple         # the shape of its output


def _stage_names(model: Transformer) -> list[str]:
    """The modules worth drawing: embeddings, each layer's sublayers, final norms, the output projection."""
    names = ["src_embed", "tgt_embed", "generator"]
    for stack_name, stack in (("encoder", model.encoder), ("decoder", model.decoder)):
        for i, layer in enumerate(stack.layers):
            names += [f"{stack_name}.layers.{i}.{child}" for child, _ in layer.named_children()]
        if stack.norm is not None:
            names.append(f"{stack_name}.norm")
    return names


def trace(model: Transformer, src: torch.Tensor, tgt: torch.Tensor) -> list[Stage]:
    """Run model(src, tgt) once (eval mode, no gradients) and return the stages in the order they finished.

    The first two stages are the inputs themselves: "src" and "tgt", token ids of shape (batch, seq).
    """
    model.eval()
    _, calls = trace_calls(model, src, tgt, include=_stage_names(model))
    stages = [Stage("src", "token ids", tuple(src.shape)), Stage("tgt", "token ids", tuple(tgt.shape))]
    for call in calls:
        module = model.get_submodule(call.name)
        kind = call.kind
        if isinstance(module, AddNorm):
            kind += ", Pre-LN" if module.norm_first else ", Post-LN"
        stages.append(Stage(call.name, kind, call.output))
    return stages


def _box(ax: plt.Axes, x: float, y: float, w: float, h: float, text: str, colour: str, size: float = 7.5) -> None:
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.004,rounding_size=0.008",
                                facecolor=colour, edgecolor="black", linewidth=0.7))
    ax.text(x, y, text, ha="center", va="center", fontsize=size)


def _arrow(ax: plt.Axes, start: tuple[float, float], end: tuple[float, float], **kwargs) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=8, linewidth=0.8, **kwargs))


COLOURS = {"Embedding": "#fde0c5", "MultiHeadAttention": "#cfe3f6", "FeedForward": "#d7efd2",
           "AddNorm": "#eeeeee", "LayerNorm": "#eeeeee", "Linear": "#f6d2e0"}


def draw_transformer(ax: plt.Axes, stages: list[Stage], fontsize: float = 7.5) -> plt.Axes:
    """Draw traced stages as two columns (encoder left, decoder right), bottom to top, with shapes.

    Grey arcs are the residual connections: each AddNorm adds the input of its sublayer back in.
    Gold arrows carry the encoder's final output (the memory) to every decoder cross-attention.
    """
    columns = {"encoder": [s for s in stages if s.name.startswith(("src", "encoder"))],
               "decoder": [s for s in stages if s.name.startswith(("tgt", "decoder", "generator"))]}
    rows = max(len(c) for c in columns.values()) + 1
    step = 1.0 / rows
    width, height = 0.36, step * 0.70
    x_of = {"encoder": 0.26, "decoder": 0.74}
    memory_y = None
    cross_targets = []
    for column, column_stages in columns.items():
        x = x_of[column]
        side = -1 if column == "encoder" else 1          # residual arcs on the outer side of each column
        ys = []
        for row, stage in enumerate(column_stages):
            y = step * (row + 0.5)
            base_kind = stage.kind.split(",")[0]
            if stage.name in ("src", "tgt"):
                label = ("source" if stage.name == "src" else "target (shifted right)") + f" token ids  {stage.shape}"
            else:
                label = f"{stage.name}  ({stage.kind})\n→ {stage.shape}"
            _box(ax, x, y, width, height, label, COLOURS.get(base_kind, "white"), fontsize)
            if ys:
                _arrow(ax, (x, ys[-1] + height / 2), (x, y - height / 2))
            if base_kind == "AddNorm" and len(ys) >= 2:   # x (two stages down) skips the sublayer
                edge = x + side * width / 2
                _arrow(ax, (edge, ys[-2]), (edge, y), color="0.45",
                       connectionstyle=f"arc3,rad={0.6 * side}")
            ys.append(y)
            if stage.name.endswith("cross_attn"):
                cross_targets.append(y)
        previous_y = ys[-1]
        if column == "encoder":
            memory_y = previous_y + step
            _box(ax, x, memory_y, width, height, f"memory (encoder output)\n→ {column_stages[-1].shape}",
                 "#fff7b3", fontsize)
            _arrow(ax, (x, previous_y + height / 2), (x, memory_y - height / 2))
        else:
            top = previous_y + step
            _box(ax, x, top, width, height, "softmax → next-token probabilities", "white", fontsize)
            _arrow(ax, (x, previous_y + height / 2), (x, top - height / 2))
    for y in cross_targets:   # the same memory feeds the keys and values of every cross-attention
        _arrow(ax, (x_of["encoder"] + width / 2, memory_y), (x_of["decoder"] - width / 2, y),
               color="#b8860b", connectionstyle="arc3,rad=-0.1")
    ax.legend(handles=[Line2D([], [], color="0.45", label="residual: the sublayer's input added back"),
                       Line2D([], [], color="#b8860b", label="memory → keys and values of cross-attention")],
              loc="upper left", fontsize=fontsize, frameon=False)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    return ax
