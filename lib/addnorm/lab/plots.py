"""The figures the chapters draw, each with labelled axes. Every function draws on a given Axes and returns it."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch


def figure(ncols: int = 1, nrows: int = 1, width: float = 5.0, height: float = 3.6):
    """A (fig, axes) pair sized for the book: `width` × `height` inches per panel."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained")
    return fig, axes.ravel() if axes.size > 1 else axes[0, 0]


def per_layer(
    ax: plt.Axes,
    series: Mapping[str, Sequence[float]],
    ylabel: str,
    log: bool = False,
    title: str | None = None,
) -> plt.Axes:
    """One line per named series over layers 1…L."""
    for name, values in series.items():
        ax.plot(np.arange(1, len(values) + 1), values, marker="o", markersize=3, label=name)
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small")
    return ax


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Moving average over `window` steps (shorter at the start)."""
    values = np.asarray(values, dtype=float)
    if window <= 1 or len(values) == 0:
        return values
    cumulative = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    return (cumulative[1:] - cumulative[np.maximum(np.arange(1, len(values) + 1) - window, 0)]) / counts


def loss_curves(
    ax: plt.Axes,
    runs: Mapping[str, Sequence[Sequence[float]]],
    ylabel: str = "training loss",
    window: int = 10,
    title: str | None = None,
    log: bool = False,
) -> plt.Axes:
    """For each named setting, its seeds' smoothed loss curves: the median as a line, min–max as a band."""
    for name, curves in runs.items():
        length = min(len(c) for c in curves)
        stacked = np.stack([smooth(c[:length], window) for c in curves])     # (seeds, steps)
        steps = np.arange(1, length + 1)
        line, = ax.plot(steps, np.median(stacked, axis=0), label=f"{name} ({len(curves)} seeds)")
        ax.fill_between(steps, stacked.min(axis=0), stacked.max(axis=0), color=line.get_color(), alpha=0.2)
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small")
    return ax


def heatmap(
    ax: plt.Axes,
    matrix: torch.Tensor | np.ndarray,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    xticklabels: Sequence[str] | None = None,
    yticklabels: Sequence[str] | None = None,
    colorbar_label: str | None = None,
    cmap: str = "viridis",
    **imshow_kwargs,
) -> plt.Axes:
    """A matrix as an image (row i at the top), with labelled axes and an optional colour bar."""
    data = matrix.detach().cpu().numpy() if torch.is_tensor(matrix) else np.asarray(matrix)
    image = ax.imshow(data, cmap=cmap, aspect="auto", **imshow_kwargs)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if xticklabels is not None:
        ax.set_xticks(range(len(xticklabels)), xticklabels, fontsize="small")
    if yticklabels is not None:
        ax.set_yticks(range(len(yticklabels)), yticklabels, fontsize="small")
    if title:
        ax.set_title(title)
    if colorbar_label is not None:
        ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    return ax
