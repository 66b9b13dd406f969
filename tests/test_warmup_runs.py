"""Chapter 2's warm-up and RAdam runs (tools/warmup_runs.py, addnorm.lab.warmup_runs): the generator is
deterministic, its file has the shape the chapter reads, the committed file covers every run, and the chapter's
re-run check fails on a file that no longer matches the code. Fast: a tiny setting (1 layer, 6 steps)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from addnorm.lab import warmup_runs
from addnorm.lab.experiments import toy_tagger
from addnorm.lab.train import seed_everything, tagging_loss, train
from addnorm.lab.warmup_runs import RUNS, SETTINGS, TINY_SETTINGS, make_file, rerun_against_file, run, stored

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "warmup_runs.py"
DATA = ROOT / "data" / "warmup_runs.json"
POSITION_BLIND = 0.3           # about the chapter's level; the tiny runs stay far below it


@pytest.fixture(scope="module")
def tiny() -> dict:
    return make_file(TINY_SETTINGS)


def test_the_generator_is_deterministic(tiny):
    again = make_file(TINY_SETTINGS)
    assert tiny["results"] == again["results"]
    other_seed = run("Post-LN, no warm-up", 1, TINY_SETTINGS)
    assert other_seed["losses"] != stored(tiny, "Post-LN, no warm-up", 0)["losses"]


def test_the_file_has_every_run_and_says_how_it_was_made(tiny):
    meta, results = tiny["meta"], tiny["results"]
    for key in ("command", "settings", "runs", "torch", "cpu", "threads", "run_time_s"):
        assert meta.get(key) not in (None, ""), key
    assert meta["torch"] == torch.__version__
    assert sorted((r["name"], r["seed"]) for r in results) == sorted(
        (name, seed) for name in RUNS for seed in TINY_SETTINGS["seeds"])
    for r in results:
        assert set(r) == {"name", "seed", "losses", "diverged", "accuracy"}
        assert len(r["losses"]) == TINY_SETTINGS["steps"] and not r["diverged"] and 0 <= r["accuracy"] <= 1
    json.loads(json.dumps(tiny))                   # it is JSON as it stands


def test_train_with_adam_and_no_moment_steps_is_train():
    """What the chapter says of `train_with`: with torch.optim.Adam and no moment-only steps it reproduces
    `train` exactly."""
    s = TINY_SETTINGS
    loss_fn = tagging_loss(s["task"], s["batch_size"], s["seq_len"], s["vocab_size"])
    seed_everything(0)
    by_train = train(toy_tagger(s["vocab_size"], 1), loss_fn, 5, lr=1e-2, seed=0, progress=False).losses
    seed_everything(0)
    by_train_with = warmup_runs.train_with(toy_tagger(s["vocab_size"], 1), torch.optim.Adam, 5, 1e-2, 0, loss_fn)
    assert by_train == by_train_with


def test_the_check_passes_on_the_file_it_was_made_from(tiny, capsys):
    rerun_against_file(tiny, "Pre-LN, no warm-up", 0, POSITION_BLIND)
    assert "every loss identical" in capsys.readouterr().out


@pytest.mark.parametrize("field, value", [("accuracy", 0.95), ("losses", None)])
def test_the_check_fails_on_a_tampered_file_and_says_how_to_refresh_it(tiny, field, value):
    tampered = copy.deepcopy(tiny)
    result = stored(tampered, "Pre-LN, no warm-up", 0)
    result[field] = value if value is not None else [x + 1.0 for x in result["losses"]]
    with pytest.raises(AssertionError, match="python tools/warmup_runs.py"):
        rerun_against_file(tampered, "Pre-LN, no warm-up", 0, POSITION_BLIND)


def test_the_tool_writes_the_tiny_file(tmp_path):
    out = tmp_path / "tiny.json"
    done = subprocess.run([sys.executable, str(TOOL), "--tiny", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    content = json.loads(out.read_text())
    assert content["meta"]["settings"]["steps"] == TINY_SETTINGS["steps"] and len(content["results"]) == len(RUNS)


def test_the_committed_file_covers_every_run_of_the_chapter():
    content = json.loads(DATA.read_text())
    assert content["meta"]["settings"] == json.loads(json.dumps(SETTINGS))
    assert sorted((r["name"], r["seed"]) for r in content["results"]) == sorted(
        (name, seed) for name in RUNS for seed in SETTINGS["seeds"])
    assert all(len(r["losses"]) == SETTINGS["steps"] for r in content["results"])
