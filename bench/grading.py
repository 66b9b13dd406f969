"""How long nbgrader takes to autograde one student's notebooks, every exercise (the target: under 60 s on 2 cores).

Builds a throw-away course directory (generate_assignment for every exercise), hands in the instructor
solutions as one student's submission, and times `nbgrader autograde "*" --student=<id>` — one process that
sanitizes, executes (a fresh kernel per notebook, each importing torch) and scores every notebook. Repeats
with `--force` and reports every run and the median; the scores are checked to be full marks.

    .venv/bin/python bench/grading.py              # 3 runs
    .venv/bin/python bench/grading.py --repeats 1  # quicker
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

import grading  # noqa: E402  (tools/grading.py)

STUDENT = "bench"


def main(argv: list[str] | None = None) -> int:
    """Time autograding one student's notebooks; print each run, the median and the scores."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="how many times to autograde (default 3)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="addnorm-bench-") as tmp:
        course = grading.make_course(Path(tmp) / "course")
        notebooks = grading.assignments()
        for assignment, name in notebooks:
            source = grading.SOLUTIONS / assignment / f"{name}.ipynb"
            grading.submit(course, STUDENT, assignment, {f"{name}.ipynb": source.read_text(encoding="utf-8")})
        times = []
        for run in range(args.repeats):
            started = time.perf_counter()
            grading.run_nbgrader(["autograde", "*", f"--student={STUDENT}", "--force"], course)
            times.append(time.perf_counter() - started)
            print(f"run {run + 1}: {times[-1]:.1f} s to autograde {len(notebooks)} notebooks", flush=True)
        scores = grading.scores(course)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"median: {statistics.median(times):.1f} s for one student's {len(notebooks)} notebooks "
          f"({os.cpu_count()} CPUs, load average {load:.1f} at the end: other work on the machine inflates this)")
    total = max_total = 0.0
    for (student, assignment, name), s in sorted(scores.items()):
        print(f"  {assignment}/{name}: {s['code']:g} / {s['max_code']:g} autograded points "
              f"(+ {s['max_written']:g} written, graded by hand)")
        total, max_total = total + s["code"], max_total + s["max_code"]
    if total != max_total:
        print(f"the solutions should score full marks, got {total:g} / {max_total:g}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
