"""The lab helpers chapter 1 words its verdicts with: learning rates by name, and the budget study's cells by verdict."""

from __future__ import annotations

from addnorm.lab.budget import course_budget, lrs_with, seeds_with, verdicts
from addnorm.lab.sweep_file import Sweep
from addnorm.lab.sweep_maps import lr_name, lrs_name


def test_learning_rates_are_named_as_the_chapters_write_them():
    assert [lr_name(lr) for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)] == ["10⁻⁴", "3·10⁻⁴", "10⁻³", "3·10⁻³", "10⁻²"]
    assert lrs_name([]) == "—" and lrs_name([1e-3]) == "10⁻³"
    assert lrs_name([3e-4, 1e-3, 3e-3]) == "3·10⁻⁴, 10⁻³, 3·10⁻³"     # no "and": the Chinese editions glue it too


def _study(cells: dict[tuple[str, int, float, int], list[float]]) -> Sweep:
    """A budget study in the file's form: each cell's accuracies at the checkpoints 300, 1,000 and 3,000."""
    results = [dict(variant=v, depth=d, lr=lr, seed=s,
                    checkpoints=[dict(steps=n, accuracy=a, diverged=False) for n, a in zip((300, 1000, 3000), accs)])
               for (v, d, lr, s), accs in cells.items()]
    return Sweep(meta=dict(position_blind=0.29, seeds=[0, 1], settings=dict(checkpoints=[300, 1000, 3000])),
                 results=results)


def test_lrs_with_counts_a_learning_rate_only_where_every_seed_has_the_verdict():
    study = _study({("post_ln", 12, 3e-4, 0): [0.29, 0.30, 0.95], ("post_ln", 12, 3e-4, 1): [0.29, 0.29, 0.99],
                    ("post_ln", 12, 1e-3, 0): [0.29, 0.30, 0.97], ("post_ln", 12, 1e-3, 1): [0.29, 0.29, 0.30],
                    ("post_ln", 12, 3e-3, 0): [0.10, 0.10, 0.10], ("post_ln", 12, 3e-3, 1): [0.10, 0.11, 0.10]})
    assert lrs_with(study, "post_ln", 12, 3000) == [3e-4]
    assert lrs_with(study, "post_ln", 12, 3000, every_seed=False) == [3e-4, 1e-3]
    assert lrs_with(study, "post_ln", 12, 1000) == []
    assert lrs_with(study, "post_ln", 12, 3000, "chance") == [3e-3]
    assert lrs_with(study, "post_ln", 12, 300, "plateau") == [3e-4, 1e-3]
    assert seeds_with(study, "post_ln", 12, 1e-3, 3000) == [0]
    assert seeds_with(study, "post_ln", 12, 1e-3, 3000, "plateau") == [1]
    assert lrs_with(study, "post_ln", 24, 3000) == []          # a depth the study did not run: nothing trains


def test_the_helpers_agree_with_the_committed_study():
    budget = course_budget()
    found = verdicts(budget)
    for variant, depth in {(v, d) for v, d, _, _ in found}:
        for i, steps in enumerate(budget.meta["settings"]["checkpoints"]):
            lrs = sorted({lr for v, d, lr, _ in found if (v, d) == (variant, depth)})
            every = [lr for lr in lrs if all(found[variant, depth, lr, s][i] == "trains" for s in budget.meta["seeds"])]
            assert lrs_with(budget, variant, depth, steps) == every
