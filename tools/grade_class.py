"""Autograde a whole class on every core: one `nbgrader autograde --student=<id>` at a time per core.

Why this script: nbgrader autogrades one submission after another in a single process. Several nbgrader processes
over disjoint students can share the gradebook (SQLite serializes their short writes), so this script only hands
out the students. Each submission still runs in the grading sandbox set up by nbgrader_config.py.

    make grade ASSIGNMENT=01_residual                 # from the course folder
    .venv/bin/python tools/grade_class.py 01_residual [--workers 2] [--force] [--course .]
    .venv/bin/python tools/grade_class.py "*"         # every assignment

Exit status 1 when any student's run failed (their log is printed); the other students are graded regardless.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import grading  # noqa: E402  (tools/grading.py: the environment nbgrader needs)

LOCKED = "database is locked"       # SQLite's answer when another process holds the write lock too long
RETRIES = 3


@dataclass
class Run:
    """One student's autograde run: who, how long, and nbgrader's exit status and log."""

    student: str
    seconds: float
    returncode: int
    log: str


def students_with_submissions(course: Path, assignment: str) -> list[str]:
    """The students with a folder submitted/<student>/<assignment> (the assignment may be a glob such as "*")."""
    submitted = course / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(student.name for student in submitted.iterdir() if student.is_dir()
                  and any(fnmatch(a.name, assignment) for a in student.iterdir() if a.is_dir()))


def autograde_student(course: Path, assignment: str, student: str, extra: list[str]) -> Run:
    """Run `nbgrader autograde <assignment> --student=<student>` in the course folder; retry on a locked gradebook."""
    started = time.perf_counter()
    for _ in range(RETRIES):
        result = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment, f"--student={student}",
                                 *extra], cwd=course, env=grading.nbgrader_env(), capture_output=True, text=True)
        log = result.stdout + result.stderr
        if LOCKED not in log:
            break
    return Run(student, time.perf_counter() - started, result.returncode, log)


def grade_class(course: Path, assignment: str, workers: int, extra: list[str],
                report=print) -> list[Run]:
    """Autograde every student of `assignment` with `workers` nbgrader processes at a time; return each run."""
    students = students_with_submissions(course, assignment)
    runs: list[Run] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for run in pool.map(lambda s: autograde_student(course, assignment, s, extra), students):
            runs.append(run)
            status = "ok" if run.returncode == 0 else f"FAILED (exit {run.returncode})"
            report(f"  {run.student}: {run.seconds:.1f} s, {status}")
    return runs


def main(argv: list[str] | None = None) -> int:
    """Grade the class; print one line per student and a summary; exit 1 if any run failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help='assignment id, or "*" for every assignment')
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course folder (default: here)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes at a time (default: cores)")
    parser.add_argument("--force", action="store_true", help="grade again submissions that were graded before")
    args, extra = parser.parse_known_args(argv)
    extra = (["--force"] if args.force else []) + extra
    started = time.perf_counter()
    runs = grade_class(args.course.resolve(), args.assignment, args.workers, extra)
    seconds = time.perf_counter() - started
    failed = [run for run in runs if run.returncode != 0]
    for run in failed:
        print(f"\n--- {run.student}: nbgrader exited with {run.returncode} ---\n{run.log[-4000:]}")
    rate = len(runs) / seconds * 60 if seconds else 0.0
    print(f"graded {len(runs) - len(failed)} of {len(runs)} students in {seconds:.0f} s with {args.workers} "
          f"workers ({rate:.1f} students per minute)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
