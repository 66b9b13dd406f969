"""Autograde a whole class on every core: several `nbgrader autograde` processes over disjoint batches of students.

Why this script: nbgrader autogrades one submission after another in a single process. Several nbgrader processes
over disjoint students can share the gradebook (SQLite serializes their short writes), so this script only hands
out the students, a small batch at a time. Each submission still runs in the grading sandbox set up by
nbgrader_config.py.

    make grade ASSIGNMENT=01_residual                 # from the course folder
    python -m addnorm_grading.grade_class 01_residual [--workers 3] [--force] [--course .]
    python -m addnorm_grading.grade_class "*"         # every assignment

Exit status 1 when any student's grading failed (the log is printed); the other students are graded regardless.

Who failed is read from what nbgrader leaves, never from its log: a student is graded when nbgrader exited 0, or
when their autograded folder was written by this run (nbgrader removes the folder of a submission it could not
grade). The log holds lines that a learner's kernel can make nbgrader print; it is only shown, with its control
characters replaced. A student that a batch's run did not grade (a gradebook locked by another process is the
usual reason) is graded again alone, up to RETRIES runs in all.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from addnorm_grading.coursework import nbgrader_env
from addnorm_grading.printable import printable

RETRIES = 3                         # runs of nbgrader for one batch, at most
BATCHES_PER_WORKER = 4              # more batches balance the workers; fewer save nbgrader start-ups (~1.4 s each)


def default_workers() -> int:
    """One nbgrader process per core, and one more: each process waits part of the time (a kernel starting, the
    gradebook), and the extra one keeps every core busy meanwhile (bench/grading.py measures it)."""
    return (os.cpu_count() or 1) + 1


@dataclass
class Run:
    """nbgrader's runs over a batch of students: who, how long, the last exit status and log, who failed."""

    students: list[str]
    seconds: float
    returncode: int
    log: str
    failed: list[str]                   # the students of the batch that no run graded


def autograded(course: Path, student: str, assignment: str) -> tuple:
    """What nbgrader has written for one student (the assignment may be a glob): each autograded folder's notebooks
    with their modification times, to compare before and after a run."""
    folder = course / "autograded" / student
    found = folder.glob(f"{assignment}/*.ipynb") if folder.is_dir() else []
    return tuple(sorted((str(path.relative_to(folder)), path.stat().st_mtime_ns) for path in found))


def not_graded(course: Path, assignment: str, students: list[str], before: dict, returncode: int) -> list[str]:
    """The students a run did not grade: none when nbgrader exited 0; else those whose autograded folder is gone or
    is as it was before the run (nbgrader stopped before them, or removed what it could not grade)."""
    if returncode == 0:
        return []
    return [student for student in students if autograded(course, student, assignment) in {(), before[student]}]


def students_with_submissions(course: Path, assignment: str) -> list[str]:
    """The students with a folder submitted/<student>/<assignment> (the assignment may be a glob such as "*")."""
    submitted = course / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(student.name for student in submitted.iterdir() if student.is_dir()
                  and any(fnmatch(a.name, assignment) for a in student.iterdir() if a.is_dir()))


def batches(students: list[str], workers: int) -> list[list[str]]:
    """The students in consecutive batches, about BATCHES_PER_WORKER per worker (at least one student each)."""
    size = max(1, math.ceil(len(students) / (workers * BATCHES_PER_WORKER)))
    return [students[i:i + size] for i in range(0, len(students), size)]


def student_arguments(students: list[str], batch: list[str]) -> list[str]:
    """nbgrader's arguments that select exactly `batch` of the class `students`: --student for one, else every
    other student of the class excluded."""
    if len(batch) == 1:
        return [f"--student={batch[0]}"]
    others = [student for student in students if student not in batch]
    return [f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []


def autograde(course: Path, assignment: str, students: list[str], group: list[str], extra: list[str]):
    """One `nbgrader autograde <assignment>` for the students of `group`: its exit status, its log, and the
    students of the group it did not grade."""
    before = {student: autograded(course, student, assignment) for student in group}
    command = [sys.executable, "-m", "nbgrader", "autograde", assignment, *student_arguments(students, group), *extra]
    result = subprocess.run(command, cwd=course, env=nbgrader_env(), capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr, not_graded(course, assignment, group, before,
                                                                       result.returncode)


def autograde_batch(course: Path, assignment: str, students: list[str], batch: list[str], extra: list[str]) -> Run:
    """Autograde the students of `batch` in one nbgrader run; those it did not grade again, each alone (so that an
    unchanged folder of one graded before cannot be mistaken for a failure), up to RETRIES runs each."""
    started = time.perf_counter()
    returncode, log, left = autograde(course, assignment, students, batch, extra)
    failed = []
    for student in left:
        code, text = returncode, log
        for _ in range(RETRIES - 1):
            code, text, still = autograde(course, assignment, students, [student], extra)
            if not still:
                break
        else:
            failed.append(student)
            returncode, log = code, text          # the run to show: the last that failed
    return Run(batch, time.perf_counter() - started, returncode if failed else 0, log, failed)


def grade_class(course: Path, assignment: str, workers: int, extra: list[str],
                report=print) -> list[Run]:
    """Autograde every student of `assignment` with `workers` nbgrader processes at a time; return each run."""
    students = students_with_submissions(course, assignment)
    runs: list[Run] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for run in pool.map(lambda batch: autograde_batch(course, assignment, students, batch, extra),
                            batches(students, workers)):
            runs.append(run)
            status = "ok" if not run.failed else f"FAILED for {', '.join(run.failed)} (exit {run.returncode})"
            report(f"  {', '.join(run.students)}: {run.seconds:.1f} s, {status}")
    return runs


def main(argv: list[str] | None = None) -> int:
    """Grade the class; print one line per batch of students and a summary; exit 1 if anybody failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help='assignment id, or "*" for every assignment')
    parser.add_argument("--course", type=Path, default=Path.cwd(), help="course folder (default: here)")
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="nbgrader processes at a time (default: cores + 1)")
    parser.add_argument("--force", action="store_true", help="grade again submissions that were graded before")
    args, extra = parser.parse_known_args(argv)
    extra = (["--force"] if args.force else []) + extra
    started = time.perf_counter()
    runs = grade_class(args.course.resolve(), args.assignment, args.workers, extra)
    seconds = time.perf_counter() - started
    for run in runs:
        if run.failed:
            print(f"\n--- {', '.join(run.students)}: nbgrader exited with {run.returncode} ---\n"
                  f"{printable(run.log[-4000:])}")
    students = sum(len(run.students) for run in runs)
    failed = sum(len(run.failed) for run in runs)
    rate = students / seconds * 60 if seconds else 0.0
    print(f"graded {students - failed} of {students} students in {seconds:.0f} s with {args.workers} "
          f"workers ({rate:.1f} students per minute)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
