"""Experiment helpers that several chapters share: the toy encoder and its gradients at initialization."""

from __future__ import annotations

import torch

from .models import SequenceTagger
from .probes import gradient_norms
from .train import seed_everything, tagging_loss


def toy_tagger(vocab_size: int, depth: int, **knobs) -> SequenceTagger:
    """The chapters' toy encoder: d_model 64, 4 heads, d_ff 128, `depth` layers; knobs go to SequenceTagger."""
    return SequenceTagger(vocab_size, d_model=64, num_heads=4, num_layers=depth, d_ff=128, **knobs)


def grad_norms_at_init(task: str, vocab_size: int, seq_len: int, depth: int, seed: int = 0, batch_size: int = 32,
                       dtype: torch.dtype = torch.float32, **knobs) -> list[float]:
    """Per-layer gradient norms of a fresh toy encoder after one backward pass of the task's loss (nothing trained)."""
    seed_everything(seed)
    model = toy_tagger(vocab_size, depth, **knobs).to(dtype)
    loss_fn = tagging_loss(task, batch_size, seq_len, vocab_size)
    loss_fn(model, torch.Generator().manual_seed(seed)).backward()
    return gradient_norms(model.encoder.layers)
