"""The committed file of chapter 7's runs (data/modern_block_runs.json), and the check of the file against the code.

- `make_file(settings, workers)`: every run (`addnorm.lab.modern_runs`) with the meta that says how and where it was
  made (the generator, `tools/modern_block_runs.py`).
- `course_runs()` reads the file.
- `rerun_against_file(runs, keys)` trains a few runs again and fails, naming the command that regenerates the file,
  unless each solves in the file's number of steps to within `tolerance_steps`.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .modern_runs import MODELS, REFRESH_COMMAND, RUNS_FILE, TASKS, run, run_all
from .sweep_maps import book_root, code_sha256, cpu_model


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


def rerun_against_file(runs: Runs, keys: list[tuple[str, str, int]], tolerance_steps: int | None = None,
                       records: dict | None = None) -> dict[tuple[str, str, int], nn.Module]:
    """Train each (task, model, seed) again with the file's settings, print it next to the file's record, and fail
    unless it solves its task, as in the file, in the same number of steps to within `tolerance_steps` (default:
    one check, `eval_every`), and its answers generated right are those read right. Returns the trained models;
    the new records (as in the file) are put into `records` when it is given, so a caller can assert on them."""
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
        if records is not None:
            records[key] = new
    print(f"compared with the file ({runs.meta['torch']} on {runs.meta['cpu']!r}; now {torch.__version__} on "
          f"{cpu_model()!r}): the same steps to solve to within {tolerance}")
    return models
