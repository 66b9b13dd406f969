"""Which components to blame: those whose own check differs, and, when the learner's model ends clearly behind the
reference, those a bisection implicates — the learner's pieces swapped for the reference's, and back, each mix
retrained at a reduced budget, until the learner's model with the named pieces replaced keeps up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from addnorm_grading.capstone import COMPONENTS
from addnorm_grading.capstone.assembly import build, same_start
from addnorm_grading.capstone.training import Budget, Run, run

TIME_LIMIT = 120.0           # seconds the bisection may add


@dataclass
class Bisection:
    found: list[str] = field(default_factory=list)
    trials: list[tuple[list[str], float]] = field(default_factory=list)   # (the learner's pieces in it, exact match)
    seconds: float = 0.0
    stopped: str = ""         # why it stopped early, if it did


def trained(learner, yours: set[str], data, budget: Budget, probe) -> Run:
    """A model with the learner's `yours`, started from the reference's weights, trained at `budget`."""
    torch.manual_seed(0)                       # the same starting weights for every model of the capstone
    reference = build(learner, set(), data.vocab_size)
    model = build(learner, yours, data.vocab_size)
    same_start(reference, model, probe)
    return run(model, data, budget)


def bisect(learner, suspects: list[str], data, budget: Budget, probe, reference: Run | None = None) -> Bisection:
    """Name the suspects (the learner's pieces whose own checks pass) that keep the model behind the reference
    (trained here at `budget`, unless given: a run at this budget, which is deterministic)."""
    result, started = Bisection(), time.monotonic()
    reference = reference or trained(learner, set(), data, budget, probe)

    def fails(pieces: list[str]) -> bool:
        attempt = trained(learner, set(pieces), data, budget, probe)
        result.trials.append((list(pieces), attempt.exact_match))
        return attempt.behind(reference)

    suspects = list(suspects)
    while suspects and fails(suspects):
        group = list(suspects)
        while len(group) > 1:
            if time.monotonic() - started > TIME_LIMIT:
                result.stopped = f"stopped after {TIME_LIMIT:.0f} s; still suspected: {', '.join(group)}"
                result.seconds = time.monotonic() - started
                return result
            half = group[: len(group) // 2]
            group = half if fails(half) else group[len(group) // 2:]
        result.found.append(group[0])
        suspects.remove(group[0])
    result.seconds = time.monotonic() - started
    return result


def in_exercise_order(names) -> list[str]:
    return [name for name in COMPONENTS if name in set(names)]
