"""Look inside a model with hooks: per-layer outputs, gradient norms, activation scale, attention weights, linear probes."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention, combine_masks, scaled_dot_product_attention
from ..variants.rope import RotaryMultiHeadAttention, rotate


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


def attention_weights(attn: MultiHeadAttention, query: torch.Tensor, key: torch.Tensor,
                      key_padding_mask: torch.Tensor | None = None,
                      attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The (batch, heads, q_len, k_len) weights softmax(q kᵀ/√d_head) that attn computes for these inputs."""
    # F.linear with the projections' weights, not attn.q_proj(...): other hooks on the projections do not fire twice
    q = attn.split_heads(F.linear(query, attn.q_proj.weight, attn.q_proj.bias))
    k = attn.split_heads(F.linear(key, attn.k_proj.weight, attn.k_proj.bias))
    if isinstance(attn, RotaryMultiHeadAttention):                 # RoPE rotates q and k before the scores
        q, k = rotate(q, base=attn.base), rotate(k, base=attn.base)
    mask = combine_masks(key_padding_mask, attn_mask, query.shape[0], query.shape[1], key.shape[1])
    _, weights = scaled_dot_product_attention(q, k, k, mask)   # (the values do not change the weights)
    return weights


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, torch.Tensor]]:
    """Within the block, every forward of a MultiHeadAttention in model stores its attention weights
    (batch, heads, q_len, k_len), recomputed from its inputs by a hook; yields {module name: weights}."""
    weights: dict[str, torch.Tensor] = {}

    def hook_for(name: str):
        def hook(module, args, kwargs, output):
            query, key = args[0], args[1]
            masks = dict(zip(("key_padding_mask", "attn_mask"), args[3:]), **kwargs)
            with torch.no_grad():
                weights[name] = attention_weights(module, query, key, masks.get("key_padding_mask"),
                                                  masks.get("attn_mask"))
        return hook

    handles = [m.register_forward_hook(hook_for(name), with_kwargs=True)
               for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)]
    try:
        yield weights
    finally:
        for h in handles:
            h.remove()


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
