"""The capstone's full run, timed: the solutions as a learner's notebooks, then one mistake whose model falls behind
(so the bisection runs too). The learner's run must stay under a minute on a 2-core machine, the bisection under
two more.

    .venv/bin/python bench/capstone.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from addnorm_grading import submissions
from addnorm_grading.capstone import COMPONENTS

EXERCISES = sorted(set(COMPONENTS.values()))

BEHIND = ("04_decoder_stack", [("x = layer(x, memory)", "x = layer(x, x)")])     # every decoder layer reads x as memory


def timed(folder: Path) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "addnorm_grading.capstone", "--notebooks", str(folder),
                             "--out", str(folder.parent / "report")], capture_output=True, text=True, check=True)
    return time.perf_counter() - started, result.stdout.strip().splitlines()


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="capstone-bench-"))
    seconds, lines = timed(submissions.learner_folder(base / "solutions", EXERCISES))
    print(f"solutions: {seconds:.1f} s\n  {lines[-1]}")
    assignment, replacements = BEHIND
    behind = {assignment: submissions.with_replacements(assignment, replacements)}
    seconds, lines = timed(submissions.learner_folder(base / "behind", EXERCISES, behind))
    bisection = next((line for line in lines if line.startswith("bisection:")), "no bisection")
    print(f"a model that falls behind: {seconds:.1f} s\n  {bisection}\n  {lines[-1]}")


if __name__ == "__main__":
    main()
