"""The depth × learning-rate sweep: where each sublayer connection trains, and where it does not.

One *cell* of the sweep trains the chapters' toy encoder (`experiments.toy_tagger`: d_model 64, 4 heads,
d_ff 128) with one connection variant, at one depth, one learning rate and one seed, on the in-place
reversal task of chapters 1 and 2 (8 tokens, 10 symbols, batch 32, Adam betas (0.9, 0.98)), for a fixed
step budget, then measures it on held-out batches.

- `run_cell(variant, depth, lr, seed)` runs one cell and returns a flat dict (see `RESULT_FIELDS`).
  With the same addnorm, PyTorch, thread count (one, set here) and CPU it is identical bit for bit on
  every run — which is how a chapter re-runs a slice of the sweep and checks it against the file.
- `addnorm.lab.sweep_file.load_sweep(path)` reads the results file that `tools/sweep.py` (`make sweep`)
  writes: `data/depth_lr_sweep.json`, the results together with how they were made.
- With `checkpoints` set, a cell also measures the model part-way: the budget study of `addnorm.lab.budget`.

The whole grid takes about an hour on a 2-core machine, too long for a book build: the chapters draw
their maps from the file.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F

from .experiments import toy_tagger
from .tasks import in_place_batch
from .train import seed_everything, tagging_loss, train


@dataclass(frozen=True)
class Variant:
    """A connection variant: a label for figures, SequenceTagger knobs, and whether it warms up."""

    label: str
    knobs: dict
    warmup: bool = False
    about: str = ""
    warmup_steps: int | None = None      # a warm-up of its own length (None: SETTINGS["warmup_steps"])


# Keys are what `tools/sweep.py --only` takes and what the results file stores.
VARIANTS: dict[str, Variant] = {
    "no_residual": Variant("no residual (Pre-LN)", dict(residual=False, norm_first=True),
                           about="F(LN(x)) and a final LN, no identity path; the no-residual stack chapter 1 trains"),
    "no_residual_post": Variant("no residual (Post-LN)", dict(residual=False, norm_first=False),
                                about="LN(F(x)), no identity path"),
    "post_ln": Variant("Post-LN", dict(norm_first=False), about="LN(x + F(x)), the 2017 placement"),
    "post_ln_warmup": Variant("Post-LN + warm-up 100", dict(norm_first=False), warmup=True,
                              about="LN(x + F(x)) with a linear learning-rate warm-up"),
    "post_ln_warmup400": Variant("Post-LN + warm-up 400", dict(norm_first=False), warmup=True, warmup_steps=400,
                                 about="LN(x + F(x)) with a 400-step linear learning-rate warm-up"),
    "pre_ln": Variant("Pre-LN", dict(norm_first=True), about="x + F(LN(x)) and a final LN (GPT-2 onwards)"),
    "rezero": Variant("ReZero", dict(norm="rezero"), about="x + α·F(x), α a learned scalar starting at 0, no LN"),
    "no_norm": Variant("residual, no norm", dict(norm="none"), about="x + F(x), no normalization at all"),
}

# The training and evaluation settings every cell shares (chapters 1 and 2's toy task).
SETTINGS: dict = dict(
    task="reverse", vocab_size=10, seq_len=8, batch_size=32, steps=300, betas=(0.9, 0.98),
    warmup_steps=100,            # used by the variants with warmup=True only
    eval_examples=512, eval_seed=10_000,   # held-out batch: a seed the training data never uses
    curve_every=10,              # keep the training loss every this many steps
    checkpoints=(),              # also measure the model after these many steps (the budget study)
    threads=1,
)

# The grid of `make sweep`: the six variants of issue 13, depths 2 to 24, learning rates over two decades,
# two seeds — 300 cells, about 15 minutes of two cores' CPU time (an hour when the machine is shared).
GRID: dict = dict(
    variants=["no_residual", "post_ln", "post_ln_warmup", "pre_ln", "rezero", "no_norm"],
    depths=[2, 3, 6, 12, 24],
    lrs=[1e-4, 3e-4, 1e-3, 3e-3, 1e-2],
    seeds=[0, 1],
)

# `tools/sweep.py --quick`: a tiny grid with a few steps, a smoke test of the whole sweep in seconds.
QUICK_GRID: dict = dict(variants=["post_ln", "pre_ln"], depths=[1, 2], lrs=[1e-3], seeds=[0])
QUICK_SETTINGS: dict = dict(steps=10, eval_examples=64, curve_every=2)

RESULT_FIELDS = (
    "variant", "depth", "lr", "seed",     # the cell
    "accuracy",        # held-out token accuracy (eval_examples fresh sequences)
    "eval_loss",       # held-out cross-entropy (None if not finite)
    "final_loss",      # mean training loss over the last 20 steps (None if diverged)
    "diverged",        # the training loss became NaN or inf (training stopped there)
    "steps",           # steps actually trained (< the budget if diverged)
    "losses",          # training loss every `curve_every` steps (6 significant digits)
    "wall_time_s",     # seconds for this cell (training + evaluation), on a possibly busy machine
    "cpu_time_s",      # CPU seconds of the process for this cell (≈ wall time on a quiet machine, one thread)
    "threads",         # torch intra-op threads the cell ran with
)
# The fields that depend only on the code, the settings and the seed (not on the machine's load).
DETERMINISTIC_FIELDS = tuple(f for f in RESULT_FIELDS if f not in ("wall_time_s", "cpu_time_s", "threads"))


@contextmanager
def _threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def held_out_batch(settings: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out (tokens, labels) every cell is measured on: a seed the training data never uses."""
    s = {**SETTINGS, **settings}
    return in_place_batch(s["task"], s["eval_examples"], s["seq_len"], s["vocab_size"],
                          torch.Generator().manual_seed(s["eval_seed"]))


def _measure(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(accuracy, cross-entropy) of the model on (x, y), in eval mode; the model's mode is restored."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits = model(x)                                       # (examples, seq, vocab)
        accuracy = (logits.argmax(dim=-1) == y).float().mean().item()
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    model.train(was_training)
    return accuracy, loss


def run_cell(variant: str, depth: int, lr: float, seed: int, **overrides) -> dict:
    """Train one cell of the sweep and measure it; returns a dict with the keys of RESULT_FIELDS.

    overrides replace entries of SETTINGS (e.g. steps=5 for a test); the results file records the
    settings it was made with, and re-running a cell of it needs the same ones.
    """
    if variant not in VARIANTS:
        raise ValueError(f"run_cell: expected variant in {sorted(VARIANTS)}, got {variant!r}")
    unknown = set(overrides) - set(SETTINGS)
    if unknown:
        raise ValueError(f"run_cell: unknown settings {sorted(unknown)}; expected some of {sorted(SETTINGS)}")
    s = {**SETTINGS, **overrides}
    v = VARIANTS[variant]
    warmup = (s["warmup_steps"] if v.warmup_steps is None else v.warmup_steps) if v.warmup else 0
    checkpoints = sorted(int(c) for c in s["checkpoints"])
    start, cpu_start = time.perf_counter(), time.process_time()
    with _threads(s["threads"]):
        x, y = held_out_batch(s)
        measured: list[dict] = []

        def after_step(step: int, model: torch.nn.Module) -> None:
            if step in checkpoints:
                accuracy, loss = _measure(model, x, y)
                measured.append(dict(steps=step, accuracy=accuracy, eval_loss=_finite(loss), diverged=False))

        seed_everything(seed)
        model = toy_tagger(s["vocab_size"], depth, **v.knobs)
        history = train(model, tagging_loss(s["task"], s["batch_size"], s["seq_len"], s["vocab_size"]),
                        s["steps"], lr=lr, warmup_steps=warmup, betas=tuple(s["betas"]), seed=seed, progress=False,
                        after_step=after_step if checkpoints else None)
        accuracy, eval_loss = _measure(model, x, y)
        threads = torch.get_num_threads()
    for step in checkpoints[len(measured):]:        # the budgets a diverged run did not reach
        measured.append(dict(steps=step, accuracy=None, eval_loss=None, diverged=True))
    extra = dict(checkpoints=measured) if checkpoints else {}
    return dict(
        variant=variant, depth=depth, lr=lr, seed=seed,
        accuracy=accuracy, eval_loss=_finite(eval_loss), final_loss=_finite(history.final()),
        diverged=history.diverged, steps=len(history.losses),
        losses=[_finite(float(f"{x:.6g}")) for x in history.losses[:: s["curve_every"]]],   # 6 digits: a small file
        wall_time_s=round(time.perf_counter() - start, 3), cpu_time_s=round(time.process_time() - cpu_start, 3),
        threads=threads, **extra,
    )


def cells(grid: dict) -> list[tuple[str, int, float, int]]:
    """Every (variant, depth, lr, seed) of a grid, in a fixed order (a grid of groups: each group's in turn)."""
    if "groups" in grid:
        return [c for group in grid["groups"] for c in cells(group)]
    return [(v, d, lr, s) for v in grid["variants"] for d in grid["depths"] for lr in grid["lrs"]
            for s in grid["seeds"]]
