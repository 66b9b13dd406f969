"""The capstone's report, from the kernel's result: one line per component, the training, the blame, the figure."""

from __future__ import annotations

from pathlib import Path

from addnorm_grading.capstone import COMPONENTS
from addnorm_grading.capstone.training import BUDGETS, TASK

WIDTH = max(len(name) for name in COMPONENTS) + 2
STANDS_IN = "addnorm's stands in for it in the rest"


def number(x: float) -> str:
    """3e-7, 0.41: one or two significant digits, as a person writes them."""
    return f"{x:.2g}".replace("e-0", "e-").replace("e+0", "e+")


def component_line(name: str, outcome: dict, result: dict) -> str:
    assignment = COMPONENTS[name]
    status, difference, detail = outcome["status"], outcome["difference"], outcome["detail"]
    if status == "matches":
        said = f"matches addnorm's (largest difference {number(difference)})"
    elif status == "differs":
        said = f"differs (largest difference {number(difference)})" if difference is not None else f"differs: {detail}"
    elif status == "missing" and assignment in result["missing_notebooks"]:
        said = f"missing: no notebook for {assignment}; {STANDS_IN}"
    elif status == "missing":
        said = f"missing: the solution cells of {assignment} define no {name}; {STANDS_IN}"
    elif detail.startswith("not written yet"):
        said = f"{detail}; {STANDS_IN}"
    else:
        said = f"raises {detail}; {STANDS_IN}"
    return f"{name:<{WIDTH}}{said}"


def percent(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


def training_lines(result: dict, budget: str) -> list[str]:
    yours, reference, steps = result["yours"], result["reference"], BUDGETS[budget]
    final = lambda run: f"final loss {sum(run['losses'][-20:]) / max(1, len(run['losses'][-20:])):.3g}" if run["losses"] else "no loss"
    lines = [f"training: chapter 6's reversal task ({TASK['max_len']} digits), {steps.steps + steps.decay_steps} steps, "
             f"the same seed, data and starting weights for both models",
             f"  your model    exact match {percent(yours['exact_match'])}, {final(yours)}"
             + (f" (it raised {yours['error']})" if yours["error"] else "")
             + ("" if yours["finite"] or yours["error"] else " (the loss became NaN or infinite)"),
             f"  the reference exact match {percent(reference['exact_match'])}, {final(reference)}"]
    bisection = result["bisection"]
    if bisection:
        trials = len(bisection["trials"])
        found = (f"it implicates {', '.join(bisection['found'])}" if bisection["found"]
                 else "with the components above replaced by addnorm's, your model keeps up: they account for the gap")
        lines.append(f"bisection: your model ended clearly behind; {trials} {'mix' if trials == 1 else 'mixes'} of your "
                     f"pieces and addnorm's retrained in {bisection['seconds']:.0f} s; {found}"
                     + (f" ({bisection['stopped']})" if bisection["stopped"] else ""))
    if yours["losses"] and reference["losses"] and yours["finite"] and yours["exact_match"] < reference["exact_match"] - 0.5 \
            and min(yours["losses"][-20:]) <= max(reference["losses"][-20:]):
        lines.append("  your model's training loss is as low as the reference's, yet it generates almost nothing right: "
                     "in training it reads something that generation cannot give it (the next token: look at the causal "
                     "mask, and at what each decoder layer attends to)")
    return lines


def last_line(result: dict) -> str:
    blame = ", ".join(result["blame"]) or "none"
    return (f"capstone: exact match {percent(result['yours']['exact_match'])} "
            f"(reference {percent(result['reference']['exact_match'])}); blame: {blame}")


def report(result: dict, notebooks: Path, figure: Path | None, budget: str) -> str:
    lines = [f"capstone: your components from {notebooks}, each checked alone against addnorm"]
    lines += [component_line(name, result["components"][name], result) for name in COMPONENTS]
    for assignment, errors in result["cell_errors"].items():
        lines += [f"  {assignment}, {error}" for error in errors]
    lines += training_lines(result, budget)
    if figure:
        lines.append(f"figure: {figure}")
    lines.append(last_line(result))
    return "\n".join(lines)


def draw(result: dict, path: Path) -> Path:
    """Both loss curves in one figure, saved as `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 3.6))
    for run, label in ((result["reference"], "addnorm's reference"), (result["yours"], "your model")):
        if run["losses"]:
            axes.plot(run["losses"], label=f"{label} ({percent(run['exact_match'])} exact match)")
    axes.set_yscale("log")
    axes.set_xlabel("training step")
    axes.set_ylabel("teacher-forcing loss")
    axes.set_title("Your Transformer and the reference, same seed, data and budget")
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
