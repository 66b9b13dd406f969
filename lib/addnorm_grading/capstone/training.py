"""Chapter 6's reversal task, trained: the learner's model and the reference on the same seed, data and budget.

The sequences all have the same length: the exercises' encoder and decoder take no padding masks, so no batch has
padding. The recipe is exercise 6's: Adam, a linear warm-up to 3·10⁻³, then a tenth of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from addnorm.transformer import greedy_search
from addnorm.lab.tasks import BOS, EOS, PAD, make_seq2seq_data
from addnorm.lab.train import seed_everything, train
from addnorm_grading.capstone.learner import short

TASK = dict(task="reverse", num_symbols=10, min_len=5, max_len=5, num_train=4000, num_held_out=200, seed=0)


@dataclass(frozen=True)
class Budget:
    steps: int            # at the learning rate lr (after the warm-up's first steps)
    decay_steps: int      # then at lr / 10
    batch: int = 64
    lr: float = 3e-3
    warmup: int = 50


# full: the learner's run; quick: the reduced budget of the bisection's retrainings and of the tests (a correct
# model reaches 100 % exact match with either, on this task and seed)
BUDGETS = {"full": Budget(500, 100), "quick": Budget(300, 60)}
BISECTION = BUDGETS["quick"]


@dataclass
class Run:
    losses: list[float] = field(default_factory=list)
    exact_match: float = 0.0
    finite: bool = True
    error: str = ""

    def behind(self, reference: "Run") -> bool:
        """Clearly behind the reference: a non-finite loss, an error, or 10 points of exact match or more."""
        return not self.finite or bool(self.error) or self.exact_match <= reference.exact_match - 0.10


def task():
    return make_seq2seq_data(**TASK)


def teacher_forcing_loss(model, batch) -> torch.Tensor:
    logits = model(batch.src, batch.tgt_in)                        # (batch, tgt_len, vocab)
    return F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD)


@torch.no_grad()
def exact_match(model, data) -> float:
    """The fraction of held-out sequences that greedy decoding reverses exactly (then EOS)."""
    model.eval()
    batch = data.held_out_batch()
    memory = model.encode(batch.src)
    decoded = greedy_search(lambda prefix: model.decode(prefix, memory)[:, -1], len(batch.src),
                            batch.tgt_out.shape[1], BOS, EOS)
    correct = 0
    for output, target in zip(decoded[:, 1:].tolist(), batch.tgt_out.tolist()):
        target = target[: target.index(EOS) + 1]
        correct += output[: len(target)] == target
    return correct / len(batch.src)


def run(model, data, budget: Budget, seed: int = 0) -> Run:
    """Train `model` with the recipe and measure it; whatever the model does, a Run (an error is recorded)."""
    result = Run()
    try:
        seed_everything(seed)
        loss_fn = lambda m, generator: teacher_forcing_loss(m, data.sample(budget.batch, generator))
        first = train(model, loss_fn, budget.steps, lr=budget.lr, warmup_steps=budget.warmup, seed=seed, progress=False)
        second = first if first.diverged else train(model, loss_fn, budget.decay_steps, lr=budget.lr / 10,
                                                    seed=seed + 100, progress=False)
        result.losses = first.losses + (second.losses if second is not first else [])
        result.finite = not (first.diverged or second.diverged) and all(math.isfinite(x) for x in result.losses)
        result.exact_match = exact_match(model, data) if result.finite else 0.0
    except Exception as error:
        result.error, result.finite = short(error), False
    return result
