"""Look inside a model with hooks: per-layer outputs, gradient norms, activation scale, attention weights."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention


@contextmanager
def capture_outputs(modules: Sequence[nn.Module]) -> Iterator[list[torch.Tensor]]:
    """Within the block, every forward of modules[i] stores its output (detached) at position i of the list.

    Example: `with capture_outputs(model.encoder.layers) as outs: model(x)` → one tensor per layer.
    A module listed twice (a stack built as `[layer] * N` shares one module) holds its *last* output everywhere.
    """
    outputs: list[torch.Tensor | None] = [None] * len(modules)

    def hook_for(i: int):
        def hook(module, args, output):
            outputs[i] = output.detach()
        return hook

    handles = [m.register_forward_hook(hook_for(i)) for i, m in enumerate(modules)]
    try:
        yield outputs
    finally:
        for h in handles:
            h.remove()


@contextmanager
def capture_inputs(modules: Sequence[nn.Module]) -> Iterator[list[tuple]]:
    """Like capture_outputs, but stores each module's positional inputs (a tuple; keyword arguments are not kept)."""
    inputs: list[tuple | None] = [None] * len(modules)

    def hook_for(i: int):
        def hook(module, args):
            inputs[i] = tuple(a.detach() if torch.is_tensor(a) else a for a in args)
        return hook

    handles = [m.register_forward_pre_hook(hook_for(i)) for i, m in enumerate(modules)]
    try:
        yield inputs
    finally:
        for h in handles:
            h.remove()


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, MultiHeadAttention]]:
    """Within the block, every MultiHeadAttention in model keeps its last weights in `.weights`
    (batch, heads, q_len, k_len); yields {module name: module}."""
    modules = {name: m for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)}
    for m in modules.values():
        m.record_weights = True
    try:
        yield modules
    finally:
        for m in modules.values():
            m.record_weights = False


def gradient_norms(layers: Sequence[nn.Module]) -> list[float]:
    """The L2 norm of all parameter gradients of each layer (call after loss.backward())."""
    norms = []
    for layer in layers:
        grads = [p.grad.flatten() for p in layer.parameters() if p.grad is not None]
        norms.append(torch.cat(grads).norm().item() if grads else 0.0)
    return norms


def rms(x: torch.Tensor) -> float:
    """Root mean square of all entries: the typical size of an activation."""
    return x.pow(2).mean().sqrt().item()


def mean_token_similarity(h: torch.Tensor) -> float:
    """Mean cosine similarity between distinct tokens of the same sequence, averaged over the batch.

    h: (batch, seq, d_model). Near 1 means every token points the same way (rank collapse).
    """
    unit = F.normalize(h, dim=-1)
    sims = unit @ unit.transpose(1, 2)                              # (batch, seq, seq)
    seq = h.shape[1]
    off_diagonal = sims.sum(dim=(1, 2)) - sims.diagonal(dim1=1, dim2=2).sum(dim=1)
    return (off_diagonal / (seq * (seq - 1))).mean().item()


def cosine_to(h: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean cosine similarity between each token of h and the same token of reference (same shapes)."""
    return F.cosine_similarity(h, reference, dim=-1).mean().item()
