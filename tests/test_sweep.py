"""The depth × learning-rate sweep (tools/sweep.py, addnorm.lab.sweep): one cell is reproducible, the results
file says how it was made and covers the whole grid. Fast: a few seconds."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from addnorm.lab.sweep import GRID, QUICK_GRID, RESULT_FIELDS, VARIANTS, cells, run_cell
from addnorm.lab.sweep_file import differences, load_sweep
from addnorm.lab.sweep_maps import cpu_model

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "depth_lr_sweep.json"
TINY = dict(steps=6, eval_examples=32, curve_every=2)
PROVENANCE = ("command", "git_commit", "code_sha256", "seeds", "grid", "settings", "torch", "threads", "workers",
              "started_at", "finished_at", "run_time_s", "cells_wall_time_s")


SWEEP_TOOL = ROOT / "tools" / "sweep.py"              # what `make sweep` runs


def test_run_cell_is_reproducible_and_returns_every_field():
    torch.set_num_threads(2)                      # run_cell uses one thread whatever the caller set
    first = run_cell("post_ln_warmup", 2, 3e-3, 0, **TINY)
    again = run_cell("post_ln_warmup", 2, 3e-3, 0, **TINY)
    other_seed = run_cell("post_ln_warmup", 2, 3e-3, 1, **TINY)
    assert torch.get_num_threads() == 2           # and restores the caller's setting
    assert set(first) == set(RESULT_FIELDS)
    assert differences(first, again) == []
    assert differences(first, other_seed) != []
    assert first["steps"] == TINY["steps"] and first["threads"] == 1
    assert len(first["losses"]) == TINY["steps"] // TINY["curve_every"]
    assert 0.0 <= first["accuracy"] <= 1.0 and not first["diverged"]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_trains_a_step(variant):
    result = run_cell(variant, 1, 1e-3, 0, steps=2, eval_examples=8)
    assert result["steps"] == 2 and math.isfinite(result["losses"][0])


def test_run_cell_rejects_unknown_names():
    with pytest.raises(ValueError, match="variant"):
        run_cell("post-ln", 1, 1e-3, 0)
    with pytest.raises(ValueError, match="settings"):
        run_cell("post_ln", 1, 1e-3, 0, step=3)


def check_results_file(content: dict, grid: dict) -> None:
    """The provenance fields are there, the grid is the expected one, and every cell appears exactly once."""
    meta, results = content["meta"], content["results"]
    missing = [k for k in PROVENANCE if meta.get(k) in (None, "")]
    assert not missing, f"results file lacks {missing}"
    assert meta["grid"] == json.loads(json.dumps(grid))
    assert meta["seeds"] == sorted({c[3] for c in cells(grid)})
    keys = [(r["variant"], r["depth"], r["lr"], r["seed"]) for r in results]
    assert sorted(keys) == sorted(cells(grid)), "the results do not cover the grid exactly once"
    assert all(set(RESULT_FIELDS) <= set(r) for r in results)


def test_quick_sweep_writes_results_with_provenance(tmp_path):
    out = tmp_path / "quick.json"
    run = subprocess.run([sys.executable, str(SWEEP_TOOL), "--quick", "--workers", "1", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    content = json.loads(out.read_text())
    check_results_file(content, QUICK_GRID)
    assert content["meta"]["command"].endswith(f"--quick --workers 1 --out {out}")
    assert not out.with_suffix(".partial.jsonl").exists()
    sweep = load_sweep(out)
    cell = sweep.cell("pre_ln", 2, 1e-3, 0)
    assert differences(sweep.rerun("pre_ln", 2, 1e-3, 0), cell) == []
    assert sweep.table("pre_ln").shape == (2, 1, 1)


# ---- the committed results file, data/depth_lr_sweep.json (chapters 1 and 2 draw their maps from it) ----------

def test_results_file_has_provenance_and_the_full_grid():
    assert DATA.is_file(), f"{DATA.relative_to(ROOT)} is missing: it is committed (made by `make sweep`)"
    content = json.loads(DATA.read_text())
    check_results_file(content, GRID)
    meta = content["meta"]
    assert meta["command"] == "make sweep"
    assert meta["run_time_s"] > 0 and meta["cells_cpu_time_s"] > 0
    assert set(meta["variants"]) == set(GRID["variants"])


def test_a_cell_of_the_results_file_reproduces():
    assert DATA.is_file(), f"{DATA.relative_to(ROOT)} is missing: it is committed (made by `make sweep`)"
    sweep = load_sweep(DATA)
    cell = ("pre_ln", 2, 3e-3, 0)                  # a cell chapter 1 makes a claim of, about a second
    again, stored = sweep.rerun(*cell), sweep.cell(*cell)
    if (sweep.meta["torch"], sweep.meta["cpu"]) == (torch.__version__, cpu_model()):
        assert differences(again, stored) == []    # same PyTorch and CPU: bit for bit
    else:                                          # elsewhere: the same result within a tolerance
        assert abs(again["accuracy"] - stored["accuracy"]) <= 0.05
        assert again["diverged"] == stored["diverged"] and again["steps"] == stored["steps"]


def test_the_chapters_find_the_committed_file_and_draw_one_map_per_variant(monkeypatch, tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from addnorm.lab import sweep_maps

    monkeypatch.chdir(tmp_path)                    # outside the book: found above the addnorm package
    sweep = sweep_maps.course_sweep()
    assert sweep.meta == load_sweep(DATA).meta
    accuracy = sweep_maps.worse_seed_accuracy(sweep)
    grid = sweep.meta["grid"]
    assert accuracy["pre_ln"].shape == (len(grid["depths"]), len(grid["lrs"]))
    assert (accuracy["pre_ln"] == sweep.table("pre_ln").min(axis=-1)).all()
    fig = sweep_maps.draw_maps(sweep, ["no_residual", "pre_ln", "rezero"], ncols=2, threshold=0.9,
                               position_blind=0.3)
    maps = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in maps] == [VARIANTS[v].label for v in ("no_residual", "pre_ln", "rezero")]
    outlined = int((accuracy["pre_ln"] >= 0.9).sum())
    assert len(maps[1].patches) == outlined > 0 and len(maps[0].patches) == 0


def test_a_file_that_no_longer_matches_the_code_fails_the_rerun_check():
    from addnorm.lab import sweep_maps

    sweep = load_sweep(DATA)
    cell = ("pre_ln", 2, 3e-3, 0)
    sweep_maps.rerun_against_file(sweep, [cell], threshold=0.9)
    sweep.cell(*cell)["losses"][0] += 1e-6        # the last bits moved: no claim of the chapter changes
    sweep_maps.rerun_against_file(sweep, [cell], threshold=0.9)
    sweep.cell(*cell)["accuracy"] = -1.0           # as if the file had been made by other code
    with pytest.raises(AssertionError, match="make sweep"):
        sweep_maps.rerun_against_file(sweep, [cell], threshold=0.9)
    (now, stored), = sweep_maps.rerun_at_the_edge(sweep, [cell], threshold=0.9).values()   # shown, not asserted
    assert stored == -1.0 and now >= 0.9


# ---- the budget study (addnorm.lab.budget, `make budget`): one long run measured at several budgets ------------

def test_a_checkpoint_of_a_longer_run_is_the_shorter_run():
    """Measuring part-way changes nothing: the model after 6 of 10 steps is the model of a 6-step run."""
    short = run_cell("post_ln_warmup", 2, 3e-3, 0, **TINY)
    longer = run_cell("post_ln_warmup", 2, 3e-3, 0, **{**TINY, "steps": 10, "checkpoints": (3, 6, 10)})
    assert [c["steps"] for c in longer["checkpoints"]] == [3, 6, 10]
    assert longer["checkpoints"][1]["accuracy"] == short["accuracy"]
    assert longer["checkpoints"][2]["accuracy"] == longer["accuracy"]
    assert "checkpoints" not in short


def test_a_variant_with_its_own_warmup_length_differs_from_the_default_one():
    a = run_cell("post_ln_warmup", 2, 3e-3, 0, **TINY)
    b = run_cell("post_ln_warmup400", 2, 3e-3, 0, **TINY)
    assert a["losses"][0] == b["losses"][0] and a["losses"][1:] != b["losses"][1:]   # same start, smaller steps


def test_train_stops_when_after_step_says_so():
    from addnorm.lab.experiments import toy_tagger
    from addnorm.lab.train import seed_everything, tagging_loss, train

    seen = []
    seed_everything(0)
    history = train(toy_tagger(10, 1), tagging_loss("reverse", 4, 8, 10), 20, progress=False,
                    after_step=lambda step, model: seen.append((step, model.training)) or step == 5)
    assert len(history.losses) == 5 and seen == [(s, True) for s in range(1, 6)]


def test_verdicts_follow_the_stated_thresholds():
    from addnorm.lab.budget import PLATEAU_BAND, TRAINS_AT, verdict

    blind = 0.29
    assert verdict(TRAINS_AT, False, blind) == "trains" and verdict(TRAINS_AT - 1e-6, False, blind) == "between"
    assert verdict(blind + PLATEAU_BAND, False, blind) == "plateau" and verdict(blind - 0.04, False, blind) == "plateau"
    assert verdict(0.10, False, blind) == "chance" and verdict(0.19, False, blind) == "below"
    assert verdict(0.99, True, blind) == "diverges" and verdict(None, True, blind) == "diverges"


@pytest.mark.parametrize("task", ["reverse", "sort", "copy"])
@pytest.mark.parametrize("seq_len, vocab_size", [(4, 3), (5, 3), (3, 4)])
def test_the_blind_posterior_is_the_best_any_function_of_own_token_and_multiset_can_do(task, seq_len, vocab_size):
    """Over every sequence of a small setting, the best predictor that sees only (the position's token, the sequence's
    multiset) is right as often as the posterior's best guess: what a model blind to positions can at best do."""
    import itertools
    from collections import Counter, defaultdict

    from addnorm.lab.budget import blind_posterior
    from addnorm.lab.tasks import apply_task

    sequences = list(itertools.product(range(vocab_size), repeat=seq_len))
    labels_seen: dict[tuple, Counter] = defaultdict(Counter)
    for x in sequences:
        y = apply_task(task, list(x))
        for t in range(seq_len):
            labels_seen[x[t], tuple(sorted(x))][y[t]] += 1
    best = sum(max(c.values()) for c in labels_seen.values()) / (len(sequences) * seq_len)
    posterior = blind_posterior(torch.tensor(sequences), task, vocab_size)
    assert torch.allclose(posterior.sum(dim=-1), torch.ones(len(sequences), seq_len, dtype=posterior.dtype))
    assert posterior.max(dim=-1).values.mean().item() == pytest.approx(best, abs=1e-12)


def test_the_position_blind_level_counts_the_other_tokens_not_the_own_one():
    """The reversal of 8 tokens asks each position for another position's token: the best blind guess is the mode of
    the other 7 tokens (ties split), which scores more than the whole sequence's mode everywhere."""
    from addnorm.lab.budget import position_blind_accuracy
    from addnorm.lab.sweep import SETTINGS, held_out_batch

    tokens, labels = held_out_batch(SETTINGS)
    own = torch.nn.functional.one_hot(tokens, SETTINGS["vocab_size"])
    others = own.sum(dim=1, keepdim=True) - own                          # (batch, seq, vocab): the other 7 tokens
    tied = others == others.max(dim=-1, keepdim=True).values
    by_hand = (tied.gather(-1, labels[..., None]).squeeze(-1) / tied.sum(dim=-1)).float().mean().item()
    level = position_blind_accuracy(SETTINGS)
    mode_everywhere = (tokens.mode(dim=1).values[:, None] == labels).float().mean().item()
    assert level == pytest.approx(by_hand, abs=1e-6) and level > mode_everywhere + 0.01
    assert 0.30 < level < 0.33                                           # 0.314 on the held-out batch


def test_quick_budget_study_writes_checkpoints_and_the_position_blind_level(tmp_path):
    out = tmp_path / "budget.json"
    run = subprocess.run([sys.executable, str(SWEEP_TOOL), "--budget", "--quick", "--workers", "1", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    content = json.loads(out.read_text())
    from addnorm.lab.budget import QUICK_BUDGET_GRID, QUICK_BUDGET_SETTINGS

    check_results_file(content, QUICK_BUDGET_GRID)
    assert 0.2 < content["meta"]["position_blind"] < 0.4
    assert content["meta"]["variants"]["post_ln_warmup400"]["warmup_steps"] == 400
    for result in content["results"]:
        assert [c["steps"] for c in result["checkpoints"]] == list(QUICK_BUDGET_SETTINGS["checkpoints"])


def test_the_committed_budget_study_has_provenance_and_its_whole_grid():
    from addnorm.lab.budget import BUDGET_FILE, BUDGET_GRID, BUDGET_SETTINGS, position_blind_accuracy, verdicts

    path = ROOT / BUDGET_FILE
    assert path.is_file(), f"{BUDGET_FILE} is missing: it is committed (made by `make budget`)"
    content = json.loads(path.read_text())
    check_results_file(content, BUDGET_GRID)
    meta = content["meta"]
    assert meta["command"] == "make budget" and meta["settings"]["steps"] == BUDGET_SETTINGS["steps"]
    assert meta["settings"]["checkpoints"] == list(BUDGET_SETTINGS["checkpoints"])
    found = verdicts(load_sweep(path))
    assert len(found) == len(cells(BUDGET_GRID)) and all(len(v) == 3 for v in found.values())
    # the level its verdicts are read against is the library's, for the file's settings
    assert meta["position_blind"] == pytest.approx(position_blind_accuracy(meta["settings"]), abs=1e-9)
    # and it is the plateau's ceiling: Post-LN at 6 layers after 300 steps, stalled before it uses positions, sits
    # just under it, none of its 18 runs more than 0.01 above (the sequence's mode everywhere, 0.29, was 0.03 below)
    stalled = [r["checkpoints"][0]["accuracy"] for r in content["results"] if r["depth"] == 6
               and r["variant"].startswith("post_ln")]
    assert len(stalled) == 18 and all(-0.025 < a - meta["position_blind"] < 0.01 for a in stalled)
