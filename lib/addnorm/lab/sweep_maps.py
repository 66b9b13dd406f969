"""The committed sweep as chapters 1 and 2 use it: find the file, draw its maps, check it against the code.

- `course_sweep()` reads `data/depth_lr_sweep.json` (written by `make sweep`) from the book's folder.
- `draw_maps(sweep, variants, ...)`: one depth × learning-rate heatmap per variant, cells that train outlined.
- `rerun_against_file(sweep, cells)` trains a few cells again and checks what the chapters claim of them: the
  same verdict, the accuracy within a tolerance; a failure names the command that refreshes the file.
  `rerun_at_the_edge(sweep, cells)` prints cells at the edge of stability beside the file's, asserting nothing.
- `code_sha256` and `cpu_model` are what `tools/sweep.py` records of the code and the machine.
"""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.patches import Rectangle

from .sweep import VARIANTS
from .sweep_file import Sweep, differences, load_sweep

SWEEP_FILE = Path("data") / "depth_lr_sweep.json"     # relative to the book's folder
REFRESH_COMMAND = "make sweep"                        # the one command that writes SWEEP_FILE anew
ACCURACY_TOLERANCE = 0.05                             # how far a re-run cell's accuracy may move from the file's
CHANCE = 0.1                                          # the toy tasks have 10 symbols


def book_root() -> Path:
    """The folder holding _toc.yml: above the working directory, else above the installed addnorm package."""
    for start in (Path.cwd().resolve(), Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            if (folder / "_toc.yml").is_file():
                return folder
    raise FileNotFoundError("no _toc.yml above the working directory or the addnorm package")


def course_sweep() -> Sweep:
    """The sweep results committed with the course (data/depth_lr_sweep.json)."""
    return load_sweep(book_root() / SWEEP_FILE)


def code_sha256(root: Path) -> str:
    """A hash of every .py file of the addnorm package under `root` (the code that decides the results)."""
    h = hashlib.sha256()
    for path in sorted((root / "lib" / "addnorm").rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cpu_model() -> str:
    """The CPU's model name with its family, model and stepping (from /proc/cpuinfo on Linux): a virtual machine's
    name alone ("AMD EPYC") is shared by processors whose arithmetic differs in the last bits."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/cpuinfo").read_text().split("\n\n")[0].splitlines()
                    if ":" in line)
        info = {key.strip(): value.strip() for key, value in info.items()}
        if "model name" in info:
            return (f"{info['model name']} (family {info.get('cpu family', '?')}, model {info.get('model', '?')}, "
                    f"stepping {info.get('stepping', '?')})")
    except OSError:
        pass
    return platform.processor()


def worse_seed_accuracy(sweep: Sweep) -> dict[str, np.ndarray]:
    """Variant -> array (depths, lrs) of the held-out accuracy of its worse seed."""
    return {v: sweep.table(v, "accuracy").min(axis=-1) for v in sweep.meta["grid"]["variants"]}


def draw_maps(sweep: Sweep, variants: list[str], ncols: int, threshold: float, position_blind: float
              ) -> plt.Figure:
    """One depth × learning-rate heatmap per variant (worse seed's accuracy), cells ≥ threshold outlined in red."""
    depths, lrs = sweep.meta["grid"]["depths"], sweep.meta["grid"]["lrs"]
    accuracy = worse_seed_accuracy(sweep)
    nrows = -(-len(variants) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.9 * ncols + 1.2, 2.7 * nrows + 0.6), squeeze=False,
                             sharex=True, sharey=True, layout="constrained")
    for ax, v in zip(axes.ravel(), variants):
        acc = accuracy[v]
        image = ax.imshow(acc, origin="lower", cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        for (i, j), a in np.ndenumerate(acc):
            ax.text(j, i, f"{a:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if a > 0.55 else "white")
            if a >= threshold:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
        ax.set_title(VARIANTS[v].label, fontsize="medium")
        ax.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs], fontsize="small", rotation=30)
        ax.set_yticks(range(len(depths)), [str(d) for d in depths])
    for ax in axes[-1]:
        ax.set_xlabel("learning rate (Adam)")
    for ax in axes[:, 0]:
        ax.set_ylabel("number of layers")
    for ax in axes.ravel()[len(variants):]:
        ax.set_visible(False)
    bar = fig.colorbar(image, ax=axes, shrink=0.8, label="held-out token accuracy (worse seed)")
    for level, style in ((threshold, dict(color="red", linewidth=2)),
                         (position_blind, dict(color="white", linestyle="--")),
                         (CHANCE, dict(color="white", linestyle=":"))):
        bar.ax.axhline(level, **style)
    bar.set_ticks([CHANCE, position_blind, threshold],
                  labels=["chance", "without positions", f"trains: ≥ {threshold:g}"])
    return fig


def _rerun_and_print(sweep: Sweep, cell: tuple[str, int, float, int]) -> tuple[dict, dict]:
    """Train one cell again with the file's settings and print it next to the file's result: (new, stored)."""
    new, stored = sweep.rerun(*cell), sweep.cell(*cell)
    diff = differences(new, stored)
    print(f"{VARIANTS[cell[0]].label}, {cell[1]} layers, lr {cell[2]:g}, seed {cell[3]}: accuracy "
          f"{new['accuracy']:.4f} now, {stored['accuracy']:.4f} in the file; "
          + ("every field identical" if not diff else f"differs in {', '.join(diff)}"))
    return new, stored


def rerun_at_the_edge(sweep: Sweep, cells: list[tuple[str, int, float, int]],
                      threshold: float) -> dict[tuple[str, int, float, int], tuple[float, float]]:
    """Train each cell again and print it next to the file's result with both verdicts, asserting nothing: for
    cells at the edge of stability, where the CPU's last bits decide where a run ends. {cell: (accuracy now, in
    the file)}."""
    accuracies = {}
    for cell in cells:
        new, stored = _rerun_and_print(sweep, cell)
        print(f"  trains (≥ {threshold:g}): {new['accuracy'] >= threshold} now, "
              f"{stored['accuracy'] >= threshold} in the file")
        accuracies[cell] = new["accuracy"], stored["accuracy"]
    return accuracies


def rerun_against_file(sweep: Sweep, cells: list[tuple[str, int, float, int]], threshold: float,
                       tolerance: float = ACCURACY_TOLERANCE) -> None:
    """Train each (variant, depth, lr, seed) again with the file's settings, print it next to the file's result,
    and fail unless it says what the chapter says of it: the same verdict (accuracy ≥ threshold or not) and an
    accuracy within `tolerance` of the file's. Whether every field is also identical is printed, not required: a
    change of numerics in lib/ (or another PyTorch or CPU) moves the last bits without changing a claim."""
    meta = sweep.meta
    for cell in cells:
        new, stored = _rerun_and_print(sweep, cell)
        same_verdict = (new["accuracy"] >= threshold) == (stored["accuracy"] >= threshold)
        assert same_verdict and abs(new["accuracy"] - stored["accuracy"]) <= tolerance, (
            f"{cell}: the committed sweep no longer says what the code gives (accuracy {new['accuracy']:.4f} now, "
            f"{stored['accuracy']:.4f} in the file; verdict at {threshold}: "
            f"{'the same' if same_verdict else 'changed'}). Refresh {SWEEP_FILE} with `{REFRESH_COMMAND}` "
            "and commit it.")
    print(f"compared with the file ({meta['torch']} on {meta['cpu']!r}; now {torch.__version__} on "
          f"{cpu_model()!r}): the same verdict and the accuracy within {tolerance:g}")


def lr_name(lr: float) -> str:
    """A learning rate as the chapters write it: 1e-3 → '10⁻³', 3e-4 → '3·10⁻⁴'."""
    mantissa, exponent = f"{lr:.0e}".split("e")
    power = "10" + str(int(exponent)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return power if mantissa == "1" else f"{mantissa}·{power}"


def lrs_name(lrs: list[float]) -> str:
    """Learning rates as a list to glue into prose of any edition: '10⁻³', '10⁻³, 3·10⁻³' ('—' for none); no word
    of one language, so the same value reads in the English and the Chinese text."""
    return ", ".join(lr_name(lr) for lr in lrs) if lrs else "—"
