"""The sweep's results file: `load_sweep` reads what `tools/sweep.py` writes, `Sweep` answers questions about it,
and `differences` says on which deterministic fields two results of one cell differ."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .sweep import DETERMINISTIC_FIELDS, run_cell


@dataclass
class Sweep:
    """A results file: `meta` (how it was made: command, commit, settings, grid, times) and `results`."""

    meta: dict
    results: list[dict] = field(default_factory=list)

    def cell(self, variant: str, depth: int, lr: float, seed: int) -> dict:
        """The stored result of one cell (KeyError if the file does not have it)."""
        for r in self.results:
            if (r["variant"], r["depth"], r["seed"]) == (variant, depth, seed) and math.isclose(r["lr"], lr):
                return r
        raise KeyError(f"no result for variant={variant!r}, depth={depth}, lr={lr:g}, seed={seed}")

    def rerun(self, variant: str, depth: int, lr: float, seed: int) -> dict:
        """Run one cell again with the file's settings (compare with `differences(rerun, sweep.cell(...))`)."""
        return run_cell(variant, depth, lr, seed, **self.meta["settings"])

    def table(self, variant: str, key: str = "accuracy") -> np.ndarray:
        """Array (depths, lrs, seeds) of one result field for one variant, in the order of meta['grid']; NaN for None."""
        g = self.meta["grid"]
        out = np.full((len(g["depths"]), len(g["lrs"]), len(g["seeds"])), np.nan)
        for i, d in enumerate(g["depths"]):
            for j, lr in enumerate(g["lrs"]):
                for k, s in enumerate(g["seeds"]):
                    value = self.cell(variant, d, lr, s)[key]
                    out[i, j, k] = np.nan if value is None else float(value)
        return out


def differences(a: dict, b: dict) -> list[str]:
    """The deterministic fields on which two results of the same cell differ ([] if they agree bit for bit)."""
    return [f for f in (*DETERMINISTIC_FIELDS, "checkpoints") if a.get(f) != b.get(f)]


def load_sweep(path: str | Path) -> Sweep:
    """Read a results file written by tools/sweep.py (`make sweep`)."""
    data = json.loads(Path(path).read_text())
    return Sweep(meta=data["meta"], results=data["results"])
