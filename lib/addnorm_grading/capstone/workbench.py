"""The capstone's kernel side: everything that runs learner code, started by the reporting process in a fresh kernel.

`main(payload)` loads the learner's cells, checks every component, trains the learner's model and the reference,
bisects a gap, and hands the results back as one JSON display (MIME); it prints nothing of its own.
"""

from __future__ import annotations

import json

import torch

from addnorm_grading.capstone import ASSEMBLED, COMPONENTS
from addnorm_grading.capstone.blame import bisect, in_exercise_order, trained
from addnorm_grading.capstone.components import check
from addnorm_grading.capstone.learner import load
from addnorm_grading.capstone.training import BISECTION, BUDGETS, task

MIME = "application/x.addnorm-capstone+json"


def evaluate(payload: dict) -> dict:
    torch.set_num_threads(1)
    learner = load(payload["code"])
    outcomes = {name: check(name, learner) for name in COMPONENTS}
    data = task()
    probe = data.sample(4, torch.Generator().manual_seed(0))
    probe = (probe.src, probe.tgt_in)
    usable = {name for name in ASSEMBLED if outcomes[name].status in ("matches", "differs")}
    budget = BUDGETS[payload["budget"]]
    reference = trained(learner, set(), data, budget, probe)
    yours = trained(learner, usable, data, budget, probe)
    blamed = [name for name in COMPONENTS if not outcomes[name].ok]
    bisection = None
    if yours.behind(reference):
        suspects = [name for name in ASSEMBLED if name in usable and outcomes[name].ok]
        bisection = bisect(learner, suspects, data, BISECTION, probe, reference if budget == BISECTION else None)
        blamed = in_exercise_order(blamed + bisection.found)
    return {
        "components": {name: vars(outcome) for name, outcome in outcomes.items()},
        "cell_errors": learner.cell_errors, "missing_notebooks": learner.missing_notebooks,
        "yours": vars(yours), "reference": vars(reference),
        "bisection": vars(bisection) if bisection else None,
        "blame": blamed,
    }


def main(payload_json: str) -> None:
    from IPython.display import display

    display({MIME: json.loads(json.dumps(evaluate(json.loads(payload_json)), default=float))}, raw=True)
