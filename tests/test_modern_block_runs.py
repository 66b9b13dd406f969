"""Chapter 7's committed runs: the generator (tools/modern_block_runs.py) on a tiny setting is deterministic and
writes the file's shape, and the chapter's live check fails, naming the command, on a file that lies."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from addnorm.lab import modern_runs, modern_runs_file

ROOT = Path(__file__).resolve().parent.parent
# Tiny models, a few steps; solved = 0 stops every run at its first check, so each "solves" at eval_every steps.
TINY = dict(d_model=16, heads=2, d_ff=32, max_steps=6, eval_every=3, eval_examples=16, seeds=[0], solved=0.0)


def generate(tmp_path: Path, name: str, workers: int = 1) -> dict:
    out = tmp_path / name
    subprocess.run([sys.executable, str(ROOT / "tools" / "modern_block_runs.py"), "--out", str(out),
                    "--workers", str(workers), "--settings", json.dumps(TINY)], check=True, cwd=ROOT,
                   capture_output=True, text=True)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    return generate(tmp_path_factory.mktemp("runs"), "a.json")


def test_generator_is_deterministic(tiny, tmp_path):
    again = generate(tmp_path, "b.json", workers=2)           # other workers, same runs
    assert again["runs"] == tiny["runs"]


def test_file_shape(tiny):
    meta, runs = tiny["meta"], tiny["runs"]
    for key in ("torch", "cpu", "code_sha256", "settings", "reproduce", "git_commit", "python", "numpy"):
        assert meta[key], key
    assert meta["settings"] == {**modern_runs.SETTINGS, **TINY}
    assert [(r["task"], r["model"], r["seed"]) for r in runs] == [
        (t, m, s) for t in modern_runs.TASKS for m in modern_runs.MODELS for s in TINY["seeds"]]
    for r in runs:
        assert r["steps"] == TINY["eval_every"] == r["steps_trained"] == r["checks"][-1][0]
        assert r["checks"][0][0] == 0 and 0 <= r["exact"] <= 1 and 0 <= r["token_accuracy"] <= 1
        assert r["exact"] == r["exact_read"]


def test_the_chapter_file_has_every_run():
    runs = modern_runs_file.course_runs()
    assert len(runs.records) == len(modern_runs.TASKS) * len(modern_runs.MODELS) * len(runs.settings["seeds"])
    assert runs.settings == modern_runs.SETTINGS       # the file was written with the settings the code has now


def test_check_passes_on_the_true_file_and_fails_on_a_tampered_one(tiny):
    key = ("copy", "modern block", 0)
    runs = modern_runs_file.Runs(tiny)
    records = {}
    models = modern_runs_file.rerun_against_file(runs, [key], records=records)
    assert set(models) == set(records) == {key}
    assert records[key]["steps"] == runs[key]["steps"] and records[key]["exact"] == records[key]["exact_read"]
    lied = copy.deepcopy(tiny)
    next(r for r in lied["runs"] if (r["task"], r["model"], r["seed"]) == key)["steps"] = 3 * TINY["eval_every"] + 1
    with pytest.raises(AssertionError, match="tools/modern_block_runs.py"):
        modern_runs_file.rerun_against_file(modern_runs_file.Runs(lied), [key])
    never = copy.deepcopy(tiny)
    next(r for r in never["runs"] if (r["task"], r["model"], r["seed"]) == key)["steps"] = None
    with pytest.raises(AssertionError, match="no longer say what the code gives"):
        modern_runs_file.rerun_against_file(modern_runs_file.Runs(never), [key])
