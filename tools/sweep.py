"""The depth × learning-rate sweep of chapters 1 and 2: writes data/depth_lr_sweep.json.

    make sweep                              the full grid (addnorm.lab.sweep.GRID), 2 worker processes
    make budget                             the budget study (BUDGET_GRID, 3,000 steps measured at 300, 1,000
                                            and 3,000): python tools/sweep.py --budget, data/postln_budget.json
    python tools/sweep.py --estimate        time short runs at each depth, print the estimated run time, stop
    python tools/sweep.py --quick --out F   a tiny grid with a few steps (a smoke test)
    python tools/sweep.py --only pre_ln --depth 12 --lr 3e-3 --seed 0
                                            re-run one cell and compare it, field by field, with the file

Each cell trains the toy encoder with one thread (`addnorm.lab.sweep.run_cell`); the worker processes run
cells side by side, one per core. Every finished cell is appended at once to <out>.partial.jsonl, so an
interrupted sweep loses nothing: run the same command again and it skips the cells already there
(--fresh starts over). When the grid is complete the results file is written, with how it was made
(command, git commit, code hash, settings, grid, seeds, versions, threads, start/end time, run time), and
the partial file is removed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from addnorm.lab.budget import (BUDGET_GRID, BUDGET_SETTINGS, QUICK_BUDGET_GRID, QUICK_BUDGET_SETTINGS,
                                position_blind_accuracy)
from addnorm.lab.sweep import GRID, QUICK_GRID, QUICK_SETTINGS, RESULT_FIELDS, SETTINGS, VARIANTS, cells, run_cell
from addnorm.lab.sweep_file import differences, load_sweep
from addnorm.lab.sweep_maps import code_sha256, cpu_model  # what the chapters compare against

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "depth_lr_sweep.json"
BUDGET_OUT = ROOT / "data" / "postln_budget.json"
CALIBRATION_STEPS = (10, 40)     # two short runs per depth: fixed cost + cost per step


def now() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.rstrip("\n")
    except (OSError, subprocess.CalledProcessError):
        return ""


def command(argv: list[str]) -> str:
    """What was typed: `make sweep` (`make budget`) when make ran this script with no other arguments, else the
    python command."""
    script = os.path.relpath(Path(__file__).resolve(), ROOT)
    if os.environ.get("MAKELEVEL") and argv in ([], ["--budget"]):
        return "make budget" if argv else "make sweep"
    return shlex.join(["python", script, *argv])


def provenance(argv: list[str], workers: int) -> dict:
    """How this session was run: command, code, versions, machine."""
    commit, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain")
    return dict(
        command=command(argv), argv=[sys.executable, *sys.argv], cwd=str(ROOT),
        git_commit=commit + ("-dirty" if dirty else ""), git_dirty_files=dirty.splitlines(),
        code_sha256=code_sha256(ROOT),
        torch=torch.__version__, numpy=np.__version__, python=platform.python_version(),
        platform=platform.platform(), cpu=cpu_model(), cpu_count=os.cpu_count(),
        threads_per_worker=SETTINGS["threads"], workers=workers, flush_denormal=True,
        load_average_at_start=list(os.getloadavg()),
    )


# ---- timing: choose the grid so the sweep fits in about an hour ------------------------------------------

def calibrate(depths: list[int], settings: dict) -> dict[int, dict]:
    """Per depth, the estimated seconds of one full cell: CPU time (≈ a quiet machine) and wall time (now)."""
    torch.set_num_threads(settings["threads"])
    run_cell("pre_ln", min(depths), 1e-3, 0, **{**settings, "steps": 2})      # imports, first-call costs
    per_depth = {}
    for depth in depths:
        a, b = (run_cell("pre_ln", depth, 1e-3, 0, **{**settings, "steps": s}) for s in CALIBRATION_STEPS)
        scale = (settings["steps"] - CALIBRATION_STEPS[0]) / (CALIBRATION_STEPS[1] - CALIBRATION_STEPS[0])
        per_depth[depth] = {k: round(a[k] + (b[k] - a[k]) * scale, 2) for k in ("cpu_time_s", "wall_time_s")}
    return per_depth


def estimate(grid: dict, per_depth: dict[int, dict], workers: int) -> dict:
    """Estimated run time of the grid with `workers` processes, from the per-depth cell times."""
    total = {k: sum(per_depth[c[1]][k] for c in cells(grid)) / max(workers, 1) for k in ("cpu_time_s", "wall_time_s")}
    return dict(per_cell_by_depth={str(d): t for d, t in per_depth.items()}, workers=workers,
                cells=len(cells(grid)), quiet_machine_s=round(total["cpu_time_s"]),
                machine_as_loaded_now_s=round(total["wall_time_s"]))


def print_estimate(est: dict) -> None:
    print(f"{'depth':>5}  {'s/cell quiet (CPU)':>18}  {'s/cell now (wall)':>17}")
    for d, t in est["per_cell_by_depth"].items():
        print(f"{d:>5}  {t['cpu_time_s']:>18.1f}  {t['wall_time_s']:>17.1f}")
    print(f"{est['cells']} cells on {est['workers']} workers: about {est['quiet_machine_s'] / 60:.0f} min on a "
          f"quiet machine, {est['machine_as_loaded_now_s'] / 60:.0f} min at the machine's present load",
          flush=True)


# ---- the sweep: workers, incremental writes, resume -----------------------------------------------------

_SETTINGS: dict = {}


def _init_worker(settings: dict) -> None:
    _SETTINGS.update(settings)
    torch.set_num_threads(settings["threads"])


def _run(cell: tuple) -> dict:
    return run_cell(*cell, **_SETTINGS)


def read_partial(path: Path) -> tuple[dict | None, list[dict], list[dict], list[dict]]:
    """(config, session starts, session ends, results) of a partial file; a torn line (a crash mid-write) is skipped."""
    config, starts, ends, results = None, [], [], []
    if not path.exists():
        return config, starts, ends, results
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = record.pop("kind")
        if kind == "config":
            config = record
        elif kind == "session":
            starts.append(record)
        elif kind == "session_end":
            ends.append(record)
        else:
            results.append(record)
    return config, starts, ends, results


def append(path: Path, record: dict) -> None:
    """Append one JSON line and flush it to disk (after a newline, if a crash left a torn last line)."""
    torn = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    with path.open("a") as f:
        f.write(("\n" if torn else "") + json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def depths(grid: dict) -> list[int]:
    return sorted({c[1] for c in cells(grid)})


def key(r: dict) -> tuple:
    return r["variant"], r["depth"], float(r["lr"]), r["seed"]


def sweep(grid: dict, settings: dict, out: Path, workers: int, argv: list[str], fresh: bool) -> dict:
    """Run every cell of grid not yet in <out>.partial.jsonl, then write out; return the file's content."""
    partial = out.with_suffix(".partial.jsonl")
    config = dict(settings=settings, grid=grid)
    if fresh and partial.exists():
        partial.unlink()
    old_config, _, _, done = read_partial(partial)
    if old_config is not None and old_config != json.loads(json.dumps(config)):
        sys.exit(f"{partial} was made with another grid or other settings: remove it or pass --fresh")
    out.parent.mkdir(parents=True, exist_ok=True)
    if old_config is None:
        append(partial, dict(kind="config", **config))
    finished = {key(r) for r in done}
    todo = [c for c in cells(grid) if key(dict(zip(("variant", "depth", "lr", "seed"), c))) not in finished]
    todo.sort(key=lambda c: -c[1])          # deepest first: the long cells do not end up alone at the end
    print(f"{len(cells(grid))} cells, {len(finished)} already in {partial.name}, {len(todo)} to run", flush=True)

    session = dict(started_at=now(), **provenance(argv, workers))
    cost = {d: 1.0 + d for d in depths(grid)}           # relative cost of a cell, refined by the calibration
    if todo:
        per_depth = calibrate(depths(grid), settings)
        cost = {d: max(t["cpu_time_s"], 1e-3) for d, t in per_depth.items()}
        est = estimate(grid, per_depth, workers)
        share = sum(cost[c[1]] for c in todo) / sum(cost[c[1]] for c in cells(grid))
        est["cells"] = len(todo)
        est["quiet_machine_s"] = round(est["quiet_machine_s"] * share)
        est["machine_as_loaded_now_s"] = round(est["machine_as_loaded_now_s"] * share)
        print_estimate(est)
        session["estimate"] = est
    append(partial, dict(kind="session", **session))
    session_index = len(read_partial(partial)[1]) - 1      # sessions started so far, this one included
    started = time.perf_counter()
    total_cost, done_cost = sum(cost[c[1]] for c in todo), 0.0

    def record(result: dict, i: int) -> None:
        nonlocal done_cost
        append(partial, dict(kind="result", session=session_index, finished_at=now(), **result))
        elapsed = time.perf_counter() - started
        done_cost += cost[result["depth"]]
        left = elapsed * (total_cost - done_cost) / done_cost    # deepest cells run first: weigh by their cost
        print(f"[{i}/{len(todo)}] {result['variant']:>16} depth {result['depth']:>2} lr {result['lr']:<6g} "
              f"seed {result['seed']}: accuracy {result['accuracy']:.3f}"
              f"{' diverged' if result['diverged'] else ''}  {result['wall_time_s']:.1f} s"
              f"  (elapsed {elapsed / 60:.1f} min, about {left / 60:.0f} min left)", flush=True)

    if workers <= 1:
        _init_worker(settings)
        for i, cell in enumerate(todo, 1):
            record(_run(cell), i)
    else:
        with mp.get_context("spawn").Pool(workers, _init_worker, (settings,)) as pool:
            for i, result in enumerate(pool.imap_unordered(_run, todo, chunksize=1), 1):
                record(result, i)
            pool.close()
            pool.join()
    append(partial, dict(kind="session_end", ended=session_index, finished_at=now(),
                         load_average_at_end=list(os.getloadavg())))
    return finish(partial, out, grid, settings)


def finish(partial: Path, out: Path, grid: dict, settings: dict) -> dict:
    """Write the results file from a complete partial file, then remove the partial file."""
    _, starts, end_records, results = read_partial(partial)
    ends = {s["ended"]: s for s in end_records}
    by_key = {key(r): r for r in results}
    missing = [c for c in cells(grid) if (c[0], c[1], float(c[2]), c[3]) not in by_key]
    if missing:
        sys.exit(f"{len(missing)} cells missing from {partial}, e.g. {missing[0]}: run the sweep again to resume")

    def seconds(a: str, b: str) -> float:
        return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()

    sessions = []
    for i, s in enumerate(starts):
        mine = [r for r in results if r["session"] == i]
        end = ends.get(i, {}).get("finished_at") or max((r["finished_at"] for r in mine), default=s["started_at"])
        sessions.append(dict(s, finished_at=end, run_time_s=seconds(s["started_at"], end), cells=len(mine),
                             load_average_at_end=ends.get(i, {}).get("load_average_at_end")))
    last = sessions[-1]
    ordered = [{**{k: r[k] for k in (*RESULT_FIELDS, "checkpoints") if k in r}, "finished_at": r["finished_at"]}
               for r in (by_key[(c[0], c[1], float(c[2]), c[3])] for c in cells(grid))]
    budget = bool(settings.get("checkpoints"))
    meta = dict(
        what=("Budget study: the cells that fail the 300-step map, trained for longer and measured at several "
              "budgets (issue 22)" if budget else
              "Depth × learning-rate sweep of sublayer connections on the toy reversal task (issue 13, item 1)"),
        command=last["command"],
        reproduce="make budget  (or: python tools/sweep.py --budget)" if budget else
                  "make sweep  (or: python tools/sweep.py)",
        git_commit=last["git_commit"], git_dirty_files=last["git_dirty_files"], code_sha256=last["code_sha256"],
        same_code_in_every_session=len({s["code_sha256"] for s in sessions}) == 1,
        torch=last["torch"], numpy=last["numpy"], python=last["python"], platform=last["platform"],
        cpu=last["cpu"], cpu_count=last["cpu_count"], threads=settings["threads"], workers=last["workers"],
        seeds=sorted({c[3] for c in cells(grid)}), grid=grid, settings=settings,
        variants={v: variant_record(v, settings) for v in sorted({c[0] for c in cells(grid)})},
        model=dict(d_model=64, num_heads=4, d_ff=128, init="xavier", dropout=0.0, optimizer="Adam"),
        started_at=sessions[0]["started_at"], finished_at=last["finished_at"],
        run_time_s=round(sum(s["run_time_s"] for s in sessions)),
        cells_wall_time_s=round(sum(r["wall_time_s"] for r in ordered)),
        cells_cpu_time_s=round(sum(r["cpu_time_s"] for r in ordered)),
        estimate=next((s["estimate"] for s in sessions if "estimate" in s), None),
        sessions=[{k: s.get(k) for k in ("started_at", "finished_at", "run_time_s", "cells", "git_commit",
                                          "load_average_at_start", "load_average_at_end")} for s in sessions],
        fields={"accuracy": "held-out token accuracy", "eval_loss": "held-out cross-entropy (null: not finite)",
                "final_loss": "mean training loss over the last 20 steps (null: diverged)",
                "diverged": "training loss became NaN/inf; training stopped", "steps": "steps trained",
                "losses": f"training loss every {settings['curve_every']} steps, from step 0 (6 digits)",
                "wall_time_s": "seconds for the cell on the machine as loaded", "cpu_time_s": "CPU seconds",
                "threads": "torch threads"},
    )
    if budget:
        meta["position_blind"] = position_blind_accuracy(settings)
        meta["fields"]["checkpoints"] = ("held-out accuracy and cross-entropy after each of settings.checkpoints "
                                         "steps (diverged: the loss became non-finite before that step)")
    tmp = out.with_suffix(".tmp")
    # meta readable, one line per cell: a small file whose diffs show which cells changed
    tmp.write_text('{"meta": ' + json.dumps(meta, indent=1) + ',\n"results": [\n'
                   + ",\n".join(json.dumps(r) for r in ordered) + "\n]}\n")
    tmp.replace(out)
    partial.unlink()
    print(f"wrote {out} ({len(ordered)} cells, run time {meta['run_time_s'] / 60:.1f} min)", flush=True)
    return dict(meta=meta, results=ordered)


def variant_record(name: str, settings: dict) -> dict:
    v = VARIANTS[name]
    record = dict(label=v.label, knobs=v.knobs, warmup=v.warmup, about=v.about)
    if v.warmup:
        record["warmup_steps"] = settings["warmup_steps"] if v.warmup_steps is None else v.warmup_steps
    return record


def only(args: argparse.Namespace) -> int:
    """Re-run one cell with the file's settings; compare it with the file's result (exit 1 if they differ)."""
    stored, settings = None, dict(SETTINGS)
    if args.out.exists():
        data = load_sweep(args.out)
        settings = data.meta["settings"]
        try:
            stored = data.cell(args.only, args.depth, args.lr, args.seed)
        except KeyError:
            pass
    result = run_cell(args.only, args.depth, args.lr, args.seed, **settings)
    print(json.dumps({k: v for k, v in result.items() if k != "losses"}))
    if stored is None:
        print(f"(no stored result for this cell in {args.out})")
        return 0
    diff = differences(result, stored)
    if diff:
        print("DIFFERS from the file in: " + ", ".join(f"{f} ({result[f]!r} vs {stored[f]!r})" for f in diff
                                                           if f != "losses") + (" losses" if "losses" in diff else ""))
        return 1
    print(f"identical to the file's result, bit for bit ({args.out.name})")
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help=f"results file (default {OUT.relative_to(ROOT)}; --quick: a temp file)")
    p.add_argument("--workers", type=int, default=2, help="worker processes, one per core (default 2; 1: no pool)")
    p.add_argument("--quick", action="store_true", help="a tiny grid with few steps, for tests")
    p.add_argument("--budget", action="store_true",
                   help=f"the budget study (default out {BUDGET_OUT.relative_to(ROOT)})")
    p.add_argument("--estimate", action="store_true", help="time the grid's depths, print the estimate, stop")
    p.add_argument("--fresh", action="store_true", help="ignore an existing partial file and start over")
    p.add_argument("--only", choices=sorted(VARIANTS), help="re-run one cell (with --depth, --lr, --seed)")
    p.add_argument("--depth", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--seed", type=int)
    args = p.parse_args(argv)
    if args.only and None in (args.depth, args.lr, args.seed):
        p.error("--only needs --depth, --lr and --seed")
    if args.out is None:
        name = "postln_budget" if args.budget else "depth_lr_sweep"
        args.out = (Path(os.environ.get("TMPDIR", "/tmp")) / f"{name}_quick.json" if args.quick
                    else BUDGET_OUT if args.budget else OUT)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.only:
        return only(args)
    grid, overrides = {(False, False): (GRID, {}), (True, False): (QUICK_GRID, QUICK_SETTINGS),
                       (False, True): (BUDGET_GRID, BUDGET_SETTINGS),
                       (True, True): (QUICK_BUDGET_GRID, {**QUICK_SETTINGS, **QUICK_BUDGET_SETTINGS})}[
        (args.quick, args.budget)]
    settings = json.loads(json.dumps({**SETTINGS, **overrides}))     # as stored (tuples become lists)
    if args.estimate:
        print_estimate(estimate(grid, calibrate(depths(grid), settings), args.workers))
        return 0
    sweep(grid, settings, args.out, args.workers, argv, args.fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
