"""A short, seeded training loop with a progress bar, optional warm-up, and the losses it returns."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from .tasks import BOS, EOS, PAD, Seq2SeqData, in_place_batch
from ..transformer import Transformer
from ..variants.kv_cache import cached_greedy_decode

LossFn = Callable[[nn.Module, torch.Generator], torch.Tensor]


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch; return a torch.Generator seeded the same way (for the data)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    # Tiny values (a stack without residuals) are otherwise "denormal" and slow CPUs down by 10-100×.
    torch.set_flush_denormal(True)
    return torch.Generator().manual_seed(seed)


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Learning-rate multiplier: rises linearly from 1/warmup_steps to 1 over warmup_steps, then stays at 1."""
    return 1.0 if warmup_steps <= 0 else min(1.0, (step + 1) / warmup_steps)


@dataclass
class History:
    """What a training run returns: the loss at every step, and whether it diverged (a NaN or inf loss)."""

    losses: list[float] = field(default_factory=list)
    diverged: bool = False

    def steps_to(self, target: float, window: int = 10) -> int | None:
        """The first step at which the moving average of the loss (over `window` steps) is ≤ target, or None."""
        for end in range(window, len(self.losses) + 1):
            if sum(self.losses[end - window : end]) / window <= target:
                return end
        return None

    def final(self, window: int = 20) -> float:
        """The mean loss over the last `window` steps (inf if the run diverged)."""
        return math.inf if self.diverged else float(np.mean(self.losses[-window:]))


def train(
    model: nn.Module,
    loss_fn: LossFn,
    steps: int,
    lr: float = 1e-3,
    warmup_steps: int = 0,
    betas: tuple[float, float] = (0.9, 0.98),
    seed: int = 0,
    progress: bool | None = None,
    desc: str = "training",
    after_step: Callable[[int, nn.Module], bool | None] | None = None,
) -> History:
    """Train with Adam for `steps` steps; loss_fn(model, generator) returns the loss on a fresh batch.

    The data generator is seeded with `seed`, so two runs with the same model initialization and
    seed are identical. Stops early, marking the history diverged, if the loss becomes NaN or inf.
    after_step(steps_done, model), if given, is called after every step (to measure the model part-way; it
    must leave the model in training mode and not touch the data generator); if it returns True, training
    stops there.
    """
    generator = torch.Generator().manual_seed(seed)
    torch.set_flush_denormal(True)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=betas)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_factor(step, warmup_steps))
    history = History()
    model.train()
    switch = {} if progress is None else {"disable": not progress}    # None: tqdm decides (TQDM_DISABLE=1 hides it)
    for _ in tqdm(range(steps), desc=desc, leave=False, **switch):
        loss = loss_fn(model, generator)
        if not torch.isfinite(loss):
            history.diverged = True
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        history.losses.append(loss.item())
        if after_step is not None and after_step(len(history.losses), model):
            break
    model.eval()
    return history


def tagging_loss(task: str, batch_size: int, seq_len: int, vocab_size: int) -> LossFn:
    """Cross-entropy of an encoder-only model (e.g. SequenceTagger) on fresh in-place batches of `task`."""

    def loss_fn(model: nn.Module, generator: torch.Generator) -> torch.Tensor:
        x, y = in_place_batch(task, batch_size, seq_len, vocab_size, generator)
        logits = model(x)                                           # (batch, seq, vocab)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    return loss_fn


@torch.no_grad()
def tagging_accuracy(
    model: nn.Module, task: str, seq_len: int, vocab_size: int, num_examples: int = 512, seed: int = 10_000
) -> float:
    """Fraction of positions labelled correctly on fresh held-out batches (a different seed from training)."""
    model.eval()
    x, y = in_place_batch(task, num_examples, seq_len, vocab_size, torch.Generator().manual_seed(seed))
    return (model(x).argmax(dim=-1) == y).float().mean().item()


def seq2seq_loss(data: Seq2SeqData, batch_size: int) -> LossFn:
    """Teacher-forced cross-entropy of a Transformer on random training batches (padding ignored)."""

    def loss_fn(model: nn.Module, generator: torch.Generator) -> torch.Tensor:
        batch = data.sample(batch_size, generator)
        logits = model(batch.src, batch.tgt_in, batch.src_padding_mask, batch.tgt_padding_mask)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1), ignore_index=PAD)

    return loss_fn


@torch.no_grad()
def exact_match(model: Transformer, data: Seq2SeqData, bos: int = BOS, eos: int = EOS) -> float:
    """Fraction of held-out sequences that greedy decoding reproduces exactly (up to and including EOS)."""
    model.eval()
    batch = data.held_out_batch()
    out = cached_greedy_decode(model, batch.src, batch.tgt_out.shape[1], bos, eos, batch.src_padding_mask)
    predicted = out[:, 1:]                                          # drop BOS
    correct = 0
    for pred, target in zip(predicted.tolist(), batch.tgt_out.tolist()):
        target = target[: target.index(eos) + 1]
        correct += pred[: len(target)] == target
    return correct / len(predicted)
