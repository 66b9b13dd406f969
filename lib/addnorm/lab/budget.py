"""The budget study: how the map's depth verdicts move with the training budget (`make budget`).

The 300-step map (`addnorm.lab.sweep`) shows Post-LN stuck from 6 layers on and the stack without residuals from
2 or 3. A verdict about depth needs a budget at which the answer has stopped changing, so the study trains those
cells ten times as long, 3,000 steps, and measures each at 300, 1,000 and 3,000 steps (`checkpoints`): one run
gives three budgets' verdicts. `tools/sweep.py --budget` writes `data/postln_budget.json`; `verdict` names what a
measurement shows, by the thresholds below.
"""

from __future__ import annotations

from .sweep import held_out_batch
from .sweep_file import Sweep, load_sweep

# The budget study (`make budget`): the cells that fail the 300-step map, trained ten times as long and measured
# at three budgets. Post-LN without and with warm-ups of fixed length (100 and 400 steps: the same schedule
# whatever the budget) at the depths where the map shows it stuck, at the learning rates where shallow Post-LN
# trains and one below (deep stacks want smaller steps); the stack without residuals at the depths where the map
# shows it stuck, at its best learning rate and the ones either side. About an hour on 2 cores.
BUDGET_GRID: dict = dict(groups=[
    dict(variants=["post_ln", "post_ln_warmup", "post_ln_warmup400"], depths=[6, 12, 24],
         lrs=[3e-4, 1e-3, 3e-3], seeds=[0, 1]),
    dict(variants=["no_residual"], depths=[2, 3, 6], lrs=[1e-3, 3e-3, 1e-2], seeds=[0, 1]),
])
BUDGET_SETTINGS: dict = dict(steps=3000, checkpoints=(300, 1000, 3000))
QUICK_BUDGET_GRID: dict = dict(groups=[dict(variants=["post_ln", "post_ln_warmup400"], depths=[1], lrs=[1e-3],
                                            seeds=[0]),
                                       dict(variants=["no_residual"], depths=[2], lrs=[3e-3], seeds=[0])])
QUICK_BUDGET_SETTINGS: dict = dict(steps=12, checkpoints=(4, 8, 12), eval_examples=64, curve_every=2)

# Verdicts, by stated thresholds (held-out token accuracy; chance is 0.10 on 10 symbols).
TRAINS_AT = 0.9          # trains: accuracy ≥ 0.9
PLATEAU_BAND = 0.05      # plateau: within 0.05 of the position-blind level (each sequence's mode everywhere)

def position_blind_accuracy(settings: dict) -> float:
    """The best held-out accuracy without positions: predict each sequence's most frequent token everywhere."""
    tokens, labels = held_out_batch(settings)
    return (tokens.mode(dim=1).values[:, None] == labels).float().mean().item()


def verdict(accuracy: float, diverged: bool, position_blind: float) -> str:
    """'diverges' (a non-finite loss), 'trains' (≥ TRAINS_AT), 'plateau' (within PLATEAU_BAND of the
    position-blind level), else 'between' (above the plateau, below TRAINS_AT) or 'below' (under the plateau)."""
    if diverged:
        return "diverges"
    if accuracy >= TRAINS_AT:
        return "trains"
    if abs(accuracy - position_blind) <= PLATEAU_BAND:
        return "plateau"
    return "between" if accuracy > position_blind else "below"



def load_budget(path) -> Sweep:
    """Read the budget study's results file (the same form as the map's, each result with its checkpoints)."""
    return load_sweep(path)
