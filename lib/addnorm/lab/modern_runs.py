"""Chapter 7's training runs: the 2017 block, the modern block and the RoPE-only control on the causal copy and
reversal tasks, trained until solved; the committed file of those runs, and the check of the file against the code.

- `sequences`, `answers_read_right`, `generated_accuracy`, `train_until_solved`: the task and the run.
- `run(settings, task, model, seed)` trains one run from its settings; `run_all(settings, workers)` every run.
- `make_file(settings, workers)`: every run with the meta that says how and where it was made (the generator).
- `course_runs()` reads `data/modern_block_runs.json` (written by `tools/modern_block_runs.py`).
- `rerun_against_file(runs, keys)` trains a few runs again and fails, naming the command that regenerates the file,
  unless each solves in the file's number of steps to within `tolerance_steps`.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..variants.modern import gpt_2017, llama_style, matching_swiglu_width
from .sweep_maps import book_root, code_sha256, cpu_model
from .tasks import in_place_batch
from .train import seed_everything, train

RUNS_FILE = Path("data") / "modern_block_runs.json"         # relative to the book's folder
REFRESH_COMMAND = ".venv/bin/python tools/modern_block_runs.py"
MODELS = ("2017 block", "modern block", "2017 block + RoPE")
TASKS = ("copy", "reverse")

# The chapter's settings: 8 symbols 0-9 and a separator (id 10); stop at 95 % of whole answers right.
SETTINGS = dict(n=8, symbols=10, d_model=64, heads=4, layers=2, d_ff=256, batch=32, lr=3e-3, warmup=25,
                max_steps=800, eval_every=50, solved=0.95, eval_examples=256, eval_seed=10_000,
                seeds=[0, 1, 2, 3], threads=1)


def sequences(s: dict, task: str, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Model input (batch, 2N) = x, SEP, answer without its last token; and the answer (batch, N)."""
    n, sep = s["n"], s["symbols"]                                      # the separator's id follows the symbols
    x, answer = in_place_batch(task, batch, n, s["symbols"], generator)   # answer = x copied or reversed
    full = torch.cat([x, torch.full((batch, 1), sep), answer], dim=1)  # (batch, 2N + 1)
    return full[:, :-1], answer


def next_token_loss(s: dict, task: str) -> Callable[[nn.Module, torch.Generator], torch.Tensor]:
    """Cross-entropy of the answer tokens only (the first N symbols are random and cannot be predicted)."""
    def loss_fn(model: nn.Module, generator: torch.Generator) -> torch.Tensor:
        inputs, answer = sequences(s, task, s["batch"], generator)
        logits = model(inputs)[:, s["n"]:]                 # positions SEP … : they predict the answer
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), answer.reshape(-1))
    return loss_fn


def held_out(s: dict, task: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out sequences every check reads (their own seed, never the training generator's)."""
    return sequences(s, task, s["eval_examples"], torch.Generator().manual_seed(s["eval_seed"]))


@torch.no_grad()
def answers_read_right(s: dict, model: nn.Module, task: str) -> float:
    """One pass over the held-out sequences, each answer token predicted from the true tokens before it: the
    fraction of answers right in every token (= of answers generated right, see the chapter)."""
    was_training = model.training
    model.eval()
    inputs, answer = held_out(s, task)
    right = model(inputs)[:, s["n"]:].argmax(dim=-1) == answer        # (examples, N)
    model.train(was_training)
    return right.all(dim=1).float().mean().item()


@torch.no_grad()
def generated_accuracy(s: dict, model: nn.Module, task: str) -> tuple[float, float]:
    """Greedy generation after the separator: (token accuracy, fraction of answers all right)."""
    was_training = model.training
    model.eval()
    inputs, answer = held_out(s, task)
    tokens = inputs[:, :s["n"] + 1]                        # the symbols and the separator
    for _ in range(s["n"]):
        next_token = model(tokens)[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    model.train(was_training)
    right = tokens[:, s["n"] + 1:] == answer
    return right.float().mean().item(), right.all(dim=1).float().mean().item()


def build(s: dict, name: str) -> nn.Module:
    """One of the three models; the modern block's SwiGLU width matches the 2017 block's parameter count."""
    vocab = s["symbols"] + 1
    if name == "2017 block":
        return gpt_2017(vocab, s["d_model"], s["heads"], s["layers"], s["d_ff"], norm_first=False)
    if name == "modern block":
        return llama_style(vocab, s["d_model"], s["heads"], s["layers"], matching_swiglu_width(s["d_model"], s["d_ff"]))
    if name == "2017 block + RoPE":      # the control: the 2017 block with only its positions changed, to RoPE
        return gpt_2017(vocab, s["d_model"], s["heads"], s["layers"], s["d_ff"], rope=True)
    raise ValueError(f"model: expected one of {MODELS}, got {name!r}")


def train_until_solved(s: dict, model: nn.Module, task: str, seed: int) -> dict:
    """Train until `solved` of the answers are right (checked every `eval_every` steps) or `max_steps`."""
    checks = [(0, answers_read_right(s, model, task))]   # (step, whole answers right)

    def check(step: int, model: nn.Module) -> bool:
        if step % s["eval_every"]:
            return False
        checks.append((step, answers_read_right(s, model, task)))
        return checks[-1][1] >= s["solved"]              # True stops the training

    history = train(model, next_token_loss(s, task), s["max_steps"], lr=s["lr"], warmup_steps=s["warmup"],
                    seed=seed, after_step=check, desc=f"{task}, seed {seed}")
    token_accuracy, exact = generated_accuracy(s, model, task)       # generated, one token at a time
    solved = exact >= s["solved"]
    return dict(steps=checks[-1][0] if solved else None, steps_trained=len(history.losses),
                checks=[list(c) for c in checks], token_accuracy=token_accuracy, exact=exact,
                exact_read=checks[-1][1])


def run(s: dict, task: str, name: str, seed: int) -> tuple[dict, nn.Module]:
    """One run from scratch: seed, build, train until solved. (record, trained model)."""
    torch.set_num_threads(s["threads"])
    seed_everything(seed)
    model = build(s, name)
    return dict(task=task, model=name, seed=seed, **train_until_solved(s, model, task, seed)), model


def _run_key(args: tuple) -> dict:
    s, task, name, seed = args
    return run(s, task, name, seed)[0]


def run_all(s: dict, workers: int = 1) -> list[dict]:
    """Every (task, model, seed) of the settings, in that order; `workers` processes side by side."""
    jobs = [(s, task, name, seed) for task in TASKS for name in MODELS for seed in s["seeds"]]
    if workers <= 1:
        return [_run_key(job) for job in jobs]
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return pool.map(_run_key, jobs, chunksize=1)


def make_file(s: dict, workers: int = 1) -> dict:
    """Every run of the settings `s`, with the meta that says how and where they were made."""
    start = time.perf_counter()
    records = run_all(s, workers)
    meta = dict(
        what="Chapter 7: the 2017 block, the modern block and the 2017 block + RoPE on the causal copy and "
             "reversal tasks, trained until solved (steps to solve, checks every eval_every steps)",
        reproduce=REFRESH_COMMAND, code_sha256=code_sha256(book_root()), torch=torch.__version__,
        numpy=np.__version__, python=platform.python_version(), platform=platform.platform(), cpu=cpu_model(),
        cpu_count=os.cpu_count(), workers=workers, run_time_s=round(time.perf_counter() - start, 1),
        tasks=list(TASKS), models=list(MODELS), settings=s,
        fields=dict(steps="steps until solved (a multiple of eval_every), null if not solved within max_steps",
                    steps_trained="training steps taken", checks="[step, whole answers right] at each check",
                    token_accuracy="generated tokens right (greedy, after the separator)",
                    exact="whole answers generated right", exact_read="whole answers right at the last check, "
                    "reading the true answer (the chapter asserts it equals exact)"))
    return dict(meta=meta, runs=records)


class Runs:
    """The committed runs: meta (settings, versions, machine) and one record per (task, model, seed)."""

    def __init__(self, data: dict):
        self.meta, self.records = data["meta"], data["runs"]
        self.settings = self.meta["settings"]
        self._by_key = {(r["task"], r["model"], r["seed"]): r for r in self.records}

    def __getitem__(self, key: tuple[str, str, int]) -> dict:
        return self._by_key[key]

    def steps(self, task: str, name: str) -> list[int | None]:
        """Steps to solve of every seed, in the file's order of seeds."""
        return [self[task, name, seed]["steps"] for seed in self.settings["seeds"]]


def load_runs(path: Path) -> Runs:
    """Read a runs file."""
    return Runs(json.loads(Path(path).read_text()))


def course_runs() -> Runs:
    """The runs committed with the course (data/modern_block_runs.json)."""
    return load_runs(book_root() / RUNS_FILE)


def rerun_against_file(runs: Runs, keys: list[tuple[str, str, int]], tolerance_steps: int | None = None
                       ) -> dict[tuple[str, str, int], nn.Module]:
    """Train each (task, model, seed) again with the file's settings, print it next to the file's record, and fail
    unless it solves its task, as in the file, in the same number of steps to within `tolerance_steps` (default:
    one check, `eval_every`), and its answers generated right are those read right. Returns the trained models."""
    s = runs.settings
    tolerance = s["eval_every"] if tolerance_steps is None else tolerance_steps
    models = {}
    for key in keys:
        new, model = run(s, *key)
        stored = runs[key]
        print(f"{key[0]}, {key[1]}, seed {key[2]}: solved after {new['steps']} steps now, {stored['steps']} in the "
              f"file; whole answers right {new['exact']:.3f} now, {stored['exact']:.3f} in the file")
        same = (new["steps"] is None) == (stored["steps"] is None) and (
            new["steps"] is None or abs(new["steps"] - stored["steps"]) <= tolerance)
        assert same, (
            f"{key}: the committed runs no longer say what the code gives (solved after {new['steps']} steps now, "
            f"{stored['steps']} in the file; tolerance {tolerance} steps). Regenerate {RUNS_FILE} with "
            f"`{REFRESH_COMMAND}` and commit it.")
        assert new["exact"] == new["exact_read"], (key, new["exact"], new["exact_read"])   # generated = read
        models[key] = model
    print(f"compared with the file ({runs.meta['torch']} on {runs.meta['cpu']!r}; now {torch.__version__} on "
          f"{cpu_model()!r}): the same steps to solve to within {tolerance}")
    return models
