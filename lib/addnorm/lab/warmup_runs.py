"""Chapter 2's warm-up and RAdam runs, made once into a committed file and checked against the code.

The chapter trains a 3-layer Post-LN / Pre-LN toy encoder at learning rate 10⁻² with and without warm-up, with
RAdam, and with Adam whose moments are collected first: ten runs, too slow to repeat at every book build.
`tools/warmup_runs.py` runs them with `run` and writes `data/warmup_runs.json` (`make_file`); the chapter reads
it (`course_warmup_runs`) and trains one run again with `rerun_against_file`, which fails, naming the command
that refreshes the file, when the code no longer gives what the file says.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .experiments import toy_tagger
from .sweep_maps import book_root
from .train import seed_everything, tagging_accuracy, tagging_loss, train

WARMUP_FILE = Path("data") / "warmup_runs.json"       # relative to the book's folder
REFRESH_COMMAND = "python tools/warmup_runs.py"       # the one command that writes WARMUP_FILE anew
ACCURACY_TOLERANCE = 0.05                             # how far a re-run's held-out accuracy may move from the file's
LOSS_TOLERANCE = 0.05                                 # ... and its final loss (mean of the last 20 steps)
LEARNED = 0.9                                         # held-out token accuracy that counts as "learns the task"

# The chapter's setting: the reversal task (8 tokens, 10 symbols, batch 32), 3 layers, lr 10⁻², 200 steps.
SETTINGS: dict = dict(task="reverse", vocab_size=10, seq_len=8, batch_size=32, depth=3, lr=1e-2, steps=200,
                      warmup_steps=50, moment_steps=100, betas=(0.9, 0.98), seeds=(0, 1), threads=1)
TINY_SETTINGS: dict = dict(SETTINGS, depth=1, steps=6, warmup_steps=2, moment_steps=2, seeds=(0,))

# name: (placement, optimizer, warm-up?, moment-only steps?), in the chapter's order
RUNS: dict[str, dict] = {
    "Post-LN, no warm-up": dict(norm_first=False, optimizer="Adam", warmup=False, moments_first=False),
    "Post-LN, warm-up 50": dict(norm_first=False, optimizer="Adam", warmup=True, moments_first=False),
    "Pre-LN, no warm-up": dict(norm_first=True, optimizer="Adam", warmup=False, moments_first=False),
    "Post-LN, RAdam, no warm-up": dict(norm_first=False, optimizer="RAdam", warmup=False, moments_first=False),
    "Post-LN, Adam, moments first": dict(norm_first=False, optimizer="Adam", warmup=False, moments_first=True),
}


def train_with(model: nn.Module, optimizer_cls, steps: int, lr: float, seed: int, loss_fn,
               moment_steps: int = 0, betas: tuple[float, float] = (0.9, 0.98)) -> list[float]:
    """`train` without warm-up, for any torch optimizer; the first `moment_steps` steps run at lr 0
    (the optimizer's statistics are updated, the parameters are not). Returns the losses of the rest."""
    generator = torch.Generator().manual_seed(seed)            # the same data as train()
    optimizer = optimizer_cls(model.parameters(), lr=lr, betas=betas)
    losses = []
    model.train()
    for step in range(moment_steps + steps):
        for group in optimizer.param_groups:
            group["lr"] = 0.0 if step < moment_steps else lr
        loss = loss_fn(model, generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step >= moment_steps:
            losses.append(loss.item())
    model.eval()
    return losses


def run(name: str, seed: int, settings: dict = SETTINGS) -> dict:
    """Train one of RUNS with one seed: {name, seed, losses (every step), diverged, accuracy (held out)}."""
    spec, s = RUNS[name], settings
    threads = torch.get_num_threads()
    torch.set_num_threads(s["threads"])
    try:
        seed_everything(seed)
        model = toy_tagger(s["vocab_size"], s["depth"], norm_first=spec["norm_first"])
        loss_fn = tagging_loss(s["task"], s["batch_size"], s["seq_len"], s["vocab_size"])
        if spec["optimizer"] == "Adam" and not spec["moments_first"]:
            history = train(model, loss_fn, s["steps"], lr=s["lr"], betas=tuple(s["betas"]), seed=seed,
                            warmup_steps=s["warmup_steps"] if spec["warmup"] else 0, progress=False)
            losses, diverged = history.losses, history.diverged
        else:
            losses = train_with(model, getattr(torch.optim, spec["optimizer"]), s["steps"], s["lr"], seed, loss_fn,
                                moment_steps=s["moment_steps"] if spec["moments_first"] else 0,
                                betas=tuple(s["betas"]))
            diverged = not all(np.isfinite(losses))
        accuracy = tagging_accuracy(model, s["task"], s["seq_len"], s["vocab_size"])
    finally:
        torch.set_num_threads(threads)
    return dict(name=name, seed=seed, losses=losses, diverged=diverged, accuracy=accuracy)


def make_file(settings: dict = SETTINGS) -> dict:
    """Every run of RUNS with every seed, and how they were made (the content of data/warmup_runs.json)."""
    import time

    from .sweep_maps import cpu_model
    start = time.perf_counter()
    results = [run(name, seed, settings) for name in RUNS for seed in settings["seeds"]]
    meta = dict(what="Chapter 2's warm-up and RAdam runs (3-layer toy encoder, reversal task, lr 1e-2)",
                command=REFRESH_COMMAND, settings=json.loads(json.dumps(settings)), runs=RUNS,
                torch=torch.__version__, numpy=np.__version__, cpu=cpu_model(), threads=settings["threads"],
                run_time_s=round(time.perf_counter() - start, 1))
    return dict(meta=meta, results=results)


def course_warmup_runs() -> dict:
    """The runs committed with the course (data/warmup_runs.json)."""
    return json.loads((book_root() / WARMUP_FILE).read_text())


def stored(content: dict, name: str, seed: int) -> dict:
    """The file's result of one run (KeyError if it does not have it)."""
    for r in content["results"]:
        if (r["name"], r["seed"]) == (name, seed):
            return r
    raise KeyError(f"{WARMUP_FILE} has no run {name!r} with seed {seed}")


def verdict(accuracy: float, position_blind: float) -> str:
    """'learns' (≥ LEARNED), 'stalls' (below the position-blind level), else 'between'."""
    return "learns" if accuracy >= LEARNED else "stalls" if accuracy < position_blind else "between"


def rerun_against_file(content: dict, name: str, seed: int, position_blind: float,
                       accuracy_tolerance: float = ACCURACY_TOLERANCE, loss_tolerance: float = LOSS_TOLERANCE) -> dict:
    """Train one run of the file again with the file's settings, print it beside the file's, and fail unless it
    keeps its verdict, its accuracy within `accuracy_tolerance` and its final loss (mean of the last 20 steps)
    within `loss_tolerance` of the file's. Whether every loss is identical is printed, not required. Returns the
    new result."""
    from .sweep_maps import cpu_model
    meta, then = content["meta"], stored(content, name, seed)
    now = run(name, seed, meta["settings"])
    final = {k: float(np.mean(r["losses"][-20:])) for k, r in (("now", now), ("then", then))}
    verdicts = {k: verdict(r["accuracy"], position_blind) for k, r in (("now", now), ("then", then))}
    same = now["losses"] == then["losses"] and now["accuracy"] == then["accuracy"]
    print(f"{name}, seed {seed}: accuracy {now['accuracy']:.4f} now, {then['accuracy']:.4f} in the file "
          f"({verdicts['now']} now, {verdicts['then']} in the file); final loss {final['now']:.4f} now, "
          f"{final['then']:.4f} in the file; " + ("every loss identical" if same else "the losses differ"))
    assert (verdicts["now"] == verdicts["then"] and now["diverged"] == then["diverged"]
            and abs(now["accuracy"] - then["accuracy"]) <= accuracy_tolerance
            and abs(final["now"] - final["then"]) <= loss_tolerance), (
        f"{WARMUP_FILE} no longer says what the code gives for {name!r}, seed {seed} (accuracy "
        f"{now['accuracy']:.4f} now, {then['accuracy']:.4f} in the file; final loss {final['now']:.4f} now, "
        f"{final['then']:.4f} in the file). Refresh it with `{REFRESH_COMMAND}`, re-read what the chapter says of "
        "the runs, and commit it.")
    print(f"compared with the file (torch {meta['torch']} on {meta['cpu']!r}; now {torch.__version__} on "
          f"{cpu_model()!r}): the same verdict, the accuracy within {accuracy_tolerance:g} and the final loss "
          f"within {loss_tolerance:g}")
    return now
