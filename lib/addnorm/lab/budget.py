"""The budget study: how the map's depth verdicts move with the training budget (`make budget`).

The 300-step map (`addnorm.lab.sweep`) shows Post-LN stuck from 6 layers on and the stack without residuals from
2 or 3. A verdict about depth needs a budget at which the answer has stopped changing, so the study trains those
cells ten times as long, 3,000 steps, and measures each at 300, 1,000 and 3,000 steps (`checkpoints`): one run
gives three budgets' verdicts. `tools/sweep.py --budget` writes `data/postln_budget.json`; `verdict` names what a
measurement shows, by the thresholds below.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .sweep import SETTINGS, VARIANTS, held_out_batch, run_cell
from .sweep_file import Sweep, load_sweep
from .sweep_maps import ACCURACY_TOLERANCE, book_root

BUDGET_FILE = "data/postln_budget.json"
REFRESH_COMMAND = "make budget"

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
PLATEAU_BAND = 0.05      # plateau: within 0.05 of the position-blind level (`position_blind_accuracy`)
CHANCE = 0.1             # one symbol of ten everywhere: a finite loss, but nothing learned


def blind_posterior(tokens: torch.Tensor, task: str, vocab_size: int) -> torch.Tensor:
    """P(label = b | the token at the position, the sequence's multiset of tokens), (batch, seq, vocab): all that a
    model blind to positions can know at each position, for sequences drawn uniformly as `in_place_batch` draws
    them (every order of a multiset equally likely)."""
    n, length = tokens.shape
    own = F.one_hot(tokens, vocab_size).double()                  # (batch, seq, vocab): the token at the position
    counts = own.sum(dim=1, keepdim=True)                         # (batch, 1, vocab): the multiset
    if task == "copy":                                            # the label is the position's own token
        return own
    if task == "sort":        # the label is the t-th smallest, t unknown and independent of the position's token
        return (counts / length).expand(n, length, vocab_size)
    if task == "reverse":     # the label is the token at seq-1-t: another position, except the middle of an odd length
        middle = length % 2
        others = (counts - own) / max(length - 1, 1)              # a random one of the other tokens
        return (middle * own + (length - middle) * others) / length
    raise ValueError(f"blind_posterior: expected task in ('copy', 'reverse', 'sort'), got {task!r}")


def position_blind_accuracy(settings: dict) -> float:
    """The best held-out accuracy of a model that cannot use positions, on the sequences every run is measured on.

    Attention without positions is permutation-equivariant: its output at a position depends on the token there
    and on the multiset of the sequence's tokens, not on where they sit (a model that has not learned to use its
    positional encoding computes such a function). It still sees its own token. In the reversal task of length 8
    the label at position t is the token at 7 − t, always another position, and the other 7 positions hold the
    other 7 tokens in a random order: the best guess is the most frequent token among the *others* (the
    sequence's multiset less one copy of the position's own token), right with probability (its count)/7.
    Predicting the whole sequence's mode everywhere scores less, because it counts the position's own token,
    which is never the one asked for. This is the Bayes-optimal predictor given (own token, multiset)
    (`blind_posterior`), scored on `held_out_batch(settings)`, a tie among k best guesses counting 1/k: 0.314 on
    the course's 512 held-out sequences (0.317 over every sequence of 8 tokens; the mode everywhere scores 0.292)."""
    s = {**SETTINGS, **settings}
    tokens, labels = held_out_batch(s)
    posterior = blind_posterior(tokens, s["task"], s["vocab_size"])
    best = posterior >= posterior.max(dim=-1, keepdim=True).values - 1e-12          # the tied best guesses
    return (best.gather(-1, labels[..., None]).squeeze(-1) / best.sum(dim=-1)).mean().item()


def verdict(accuracy: float | None, diverged: bool, position_blind: float, chance: float = CHANCE) -> str:
    """What a measurement shows: 'diverges' (the loss became non-finite), 'trains' (accuracy ≥ TRAINS_AT),
    'plateau' (within PLATEAU_BAND of the position-blind level), 'chance' (within PLATEAU_BAND of chance: one
    symbol everywhere), else 'between' (above the plateau: more than a model blind to positions can do, so it uses
    them) or 'below' (between chance and the plateau)."""
    if diverged or accuracy is None:
        return "diverges"
    if accuracy >= TRAINS_AT:
        return "trains"
    if abs(accuracy - position_blind) <= PLATEAU_BAND:
        return "plateau"
    if abs(accuracy - chance) <= PLATEAU_BAND:
        return "chance"
    return "between" if accuracy > position_blind else "below"


def course_budget() -> Sweep:
    """The budget study committed with the course (data/postln_budget.json): the map's file form, each result
    with its `checkpoints`."""
    return load_sweep(book_root() / BUDGET_FILE)


def verdicts(budget: Sweep) -> dict[tuple[str, int, float, int], list[str]]:
    """(variant, depth, lr, seed) -> the verdict at each of the file's checkpoints, in order."""
    blind = budget.meta["position_blind"]
    return {(r["variant"], r["depth"], float(r["lr"]), r["seed"]):
            [verdict(c["accuracy"], c["diverged"], blind) for c in r["checkpoints"]] for r in budget.results}


def rerun_checkpoints(budget: Sweep, cell: tuple[str, int, float, int], steps: int) -> None:
    """Train a cell of the file again for its first `steps` steps (a checkpoint of the file), and fail unless each
    checkpoint on the way keeps its verdict and an accuracy within ACCURACY_TOLERANCE of the file's."""
    settings = dict(budget.meta["settings"])
    stored = budget.cell(*cell)["checkpoints"]
    reached = [c for c in stored if c["steps"] <= steps]
    settings.update(steps=steps, checkpoints=[c["steps"] for c in reached])
    new = run_cell(*cell, **settings)["checkpoints"]
    blind = budget.meta["position_blind"]
    for now, then in zip(new, reached):
        a, b = (verdict(c["accuracy"], c["diverged"], blind) for c in (now, then))
        close = now["diverged"] == then["diverged"] and (now["diverged"] or
                                                         abs(now["accuracy"] - then["accuracy"]) <= ACCURACY_TOLERANCE)
        print(f"{VARIANTS[cell[0]].label}, {cell[1]} layers, lr {cell[2]:g}, seed {cell[3]}, after {now['steps']} "
              f"steps: {a} now ({now['accuracy']:.4f}), {b} in the file ({then['accuracy']:.4f})")
        assert a == b and close, (f"{BUDGET_FILE} no longer matches the code ({cell}, {now['steps']} steps). "
                                  f"Refresh it with `{REFRESH_COMMAND}` and commit it.")


def draw_budget(budget: Sweep, variants: list[str], depths: list[int], ax_row) -> dict[tuple[str, int], list[float]]:
    """For each depth, one panel: held-out accuracy (the worse seed, at the learning rate whose line lies highest)
    against the budget, one line
    per variant, with the thresholds of `verdict` drawn in. Returns the lines drawn: (variant, depth) -> values."""
    blind, steps = budget.meta["position_blind"], budget.meta["settings"]["checkpoints"]
    drawn = {}
    for ax, depth in zip(ax_row, depths):
        for variant in variants:
            runs = [r for r in budget.results if (r["variant"], r["depth"]) == (variant, depth)]
            if not runs:
                continue
            lrs = sorted({float(r["lr"]) for r in runs})
            worse = {lr: [min((0.0 if c["diverged"] else c["accuracy"]) for r in runs if float(r["lr"]) == lr
                              for c in r["checkpoints"] if c["steps"] == s) for s in steps] for lr in lrs}
            best = max(lrs, key=lambda lr: sum(worse[lr]))          # the highest line: trains soonest
            ax.plot(steps, worse[best], marker="o", label=f"{VARIANTS[variant].label} (lr {best:g})")
            drawn[variant, depth] = worse[best]
        ax.axhline(TRAINS_AT, color="tab:red", linestyle=":", linewidth=1)
        ax.axhspan(blind - PLATEAU_BAND, blind + PLATEAU_BAND, color="grey", alpha=0.2, linewidth=0)
        ax.set(xscale="log", xticks=steps, xticklabels=[f"{s:,}" for s in steps], ylim=(0, 1.02),
               title=f"{depth} layers", xlabel="training steps")
        ax.minorticks_off()
    ax_row[0].set_ylabel("held-out token accuracy")
    return drawn


def budget_rows(budget: Sweep, lr_name=lambda lr: f"{lr:g}") -> tuple[list[str], list[list[str]]]:
    """The study as a table: a row per (variant, depth), a column per budget; in each cell, the learning rates
    at which both seeds end with each verdict ("a / b" where the two seeds disagree)."""
    found = verdicts(budget)
    steps = budget.meta["settings"]["checkpoints"]
    rows = []
    for variant, depth in dict.fromkeys((v, d) for v, d, _, _ in found):
        lrs = sorted({lr for v, d, lr, _ in found if (v, d) == (variant, depth)})
        seeds = sorted({s for v, d, _, s in found if (v, d) == (variant, depth)})
        row = [f"{VARIANTS[variant].label}, {depth} layers"]
        for i, _ in enumerate(steps):
            by_verdict: dict[str, list[str]] = {}
            for lr in lrs:
                both = [found[variant, depth, lr, s][i] for s in seeds]
                by_verdict.setdefault(" / ".join(dict.fromkeys(both)), []).append(lr_name(lr))
            row.append("; ".join(f"{name} at {', '.join(at)}" for name, at in by_verdict.items()))
        rows.append(row)
    return ["", *[f"after {s:,} steps" for s in steps]], rows


def seeds_with(budget: Sweep, variant: str, depth: int, lr: float, steps: int, name: str = "trains") -> list[int]:
    """The seeds of the study whose run of (variant, depth, lr) has the verdict `name` after `steps` steps (one of
    the file's checkpoints)."""
    found, at = verdicts(budget), list(budget.meta["settings"]["checkpoints"]).index(steps)
    return [s for (v, d, l, s), names in sorted(found.items()) if (v, d, l) == (variant, depth, float(lr))
            and names[at] == name]


def lrs_with(budget: Sweep, variant: str, depth: int, steps: int, name: str = "trains",
             every_seed: bool = True) -> list[float]:
    """The learning rates, in increasing order, at which (variant, depth) has the verdict `name` after `steps` steps:
    on every seed of the study (every_seed=True, what a chapter's "trains at" means), or on at least one."""
    runs = {(lr, s) for v, d, lr, s in verdicts(budget) if (v, d) == (variant, depth)}
    chosen = []
    for lr in sorted({lr for lr, _ in runs}):
        having = seeds_with(budget, variant, depth, lr, steps, name)
        if having and (not every_seed or len(having) == sum(1 for l, _ in runs if l == lr)):
            chosen.append(lr)
    return chosen
