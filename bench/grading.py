"""How fast nbgrader autogrades: one student's notebooks (every exercise), then a synthetic class serially and in parallel.

1. One student: builds a throw-away course directory, hands in the instructor solutions as one student's
   submission, and times `nbgrader autograde "*" --student=<id>` (a fresh sandboxed kernel per notebook, each
   importing torch); the scores are checked to be full marks.
2. A class (--students N, default 20): a mix of correct, untouched (wrong) and hostile submissions of all the
   exercises. The same class is graded twice from identical copies: serially (one `nbgrader autograde "*"`, as the
   instructor guide says) and in parallel (addnorm_grading.grade_class: several nbgrader processes over disjoint batches
   of students, sharing the gradebook; --workers 2 3 times each count). Reports students per minute, the ratio to
   serial, and checks that no grade was lost or duplicated: every submitted (student, notebook) graded exactly
   once, the same scores every way.

    .venv/bin/python bench/grading.py                    # 1 run for one student, a class of 20
    .venv/bin/python bench/grading.py --students 8       # quicker
    .venv/bin/python bench/grading.py --repeats 3 --students 0   # only the one-student timing, 3 runs
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from addnorm_grading import coursework, grade_class, submissions

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS, EXERCISES = ROOT / "solutions", ROOT / "exercises"

STUDENT = "bench"
# Extra cells a hostile student puts before the tests of one notebook (each is contained by the sandbox).
ATTACKS = {
    "reads_solutions": "import glob\n"
                       "print([open(p).read() for p in glob.glob('../../../solutions/**/*.ipynb', recursive=True)])",
    "exits": "import os\nos._exit(0)",
    "memory_hog": "hog = bytearray(8 * 2**30)",
    "kills_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "forks": "import os, time\n"
             "for _ in range(200):\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)",
    "floods_output": "for i in range(200_000):\n    print('flood', i)",
    "writes_gradebook": "import sqlite3\nsqlite3.connect('../../../gradebook.db').execute('DELETE FROM grade')",
    "infinite_loop": "while True:\n    pass",
}


def time_one_student(repeats: int) -> int:
    """Time autograding one student's notebooks (every exercise); print each run, the median and the scores."""
    with tempfile.TemporaryDirectory(prefix="addnorm-bench-") as tmp:
        course = coursework.make_course(Path(tmp) / "course")
        notebooks = coursework.assignments()
        for assignment, name in notebooks:
            source = SOLUTIONS / assignment / f"{name}.ipynb"
            coursework.submit(course, STUDENT, assignment, {f"{name}.ipynb": source.read_text(encoding="utf-8")})
        times = []
        for run in range(repeats):
            started = time.perf_counter()
            coursework.run_nbgrader(["autograde", "*", f"--student={STUDENT}", "--force"], course)
            times.append(time.perf_counter() - started)
            print(f"run {run + 1}: {times[-1]:.1f} s to autograde {len(notebooks)} notebooks", flush=True)
        scores = coursework.scores(course)
    print(f"median: {statistics.median(times):.1f} s for one student's {len(notebooks)} notebooks "
          f"({os.cpu_count()} CPUs, load average {_load():.1f} at the end: other work on the machine inflates this)")
    total = max_total = 0.0
    for (student, assignment, name), s in sorted(scores.items()):
        print(f"  {assignment}/{name}: {s['code']:g} / {s['max_code']:g} autograded points "
              f"(+ {s['max_written']:g} written, graded by hand)")
        total, max_total = total + s["code"], max_total + s["max_code"]
    if total != max_total:
        print(f"the solutions should score full marks, got {total:g} / {max_total:g}")
        return 1
    return 0


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def synthetic_class(course: Path, size: int) -> dict[str, str]:
    """Hand in `size` students' notebooks (every exercise); return student -> kind (correct, untouched, or an attack's name).

    Half the class is correct, a quarter hands in the untouched exercises, a quarter attacks the grader in one
    notebook (a different attack and notebook for each) and is correct in the other four.
    """
    notebooks = coursework.assignments()
    kinds = {}
    for index in range(size):
        student = f"s{index:03d}"
        kind = ("correct", "correct", "untouched", "hostile")[index % 4]
        attack = list(ATTACKS)[(index // 4) % len(ATTACKS)]
        attacked = notebooks[(index // 4) % len(notebooks)]
        kinds[student] = attack if kind == "hostile" else kind
        for assignment, name in notebooks:
            folder = EXERCISES if kind == "untouched" else SOLUTIONS
            text = (folder / assignment / f"{name}.ipynb").read_text(encoding="utf-8")
            if kind == "hostile" and (assignment, name) == attacked:
                text = submissions.with_cell_before_tests(text, ATTACKS[attack])
            coursework.submit(course, student, assignment, {f"{name}.ipynb": text})
    return kinds


def graded_exactly_once(course: Path, kinds: dict[str, str]) -> list[str]:
    """Problems with the gradebook: a submitted notebook not graded, graded twice, or a grade left empty."""
    problems = []
    expected = {(student, assignment, name) for student in kinds for assignment, name in coursework.assignments()}
    with sqlite3.connect(course / "gradebook.db") as db:
        rows = db.execute("""
            SELECT student.id, assignment.name, notebook.name, count(*) FROM submitted_notebook
            JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id
            JOIN student ON submitted_assignment.student_id = student.id
            JOIN assignment ON submitted_assignment.assignment_id = assignment.id
            JOIN notebook ON submitted_notebook.notebook_id = notebook.id
            GROUP BY student.id, assignment.name, notebook.name""").fetchall()
        empty = db.execute("""SELECT count(*) FROM grade JOIN grade_cells ON grade.cell_id = grade_cells.id
                              WHERE grade.auto_score IS NULL AND grade_cells.cell_type = 'code'""").fetchone()[0]
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    found = {(s, a, n): count for s, a, n, count in rows}
    problems += [f"not graded: {key}" for key in sorted(expected - set(found))]
    problems += [f"graded {count} times: {key}" for key, count in sorted(found.items()) if count != 1]
    problems += [f"not in the class: {key}" for key in sorted(set(found) - expected)]
    problems += [f"no graded notebook: {key}" for key in sorted(expected)
                 if not (course / "autograded" / key[0] / key[1] / f"{key[2]}.ipynb").exists()]
    if empty:
        problems.append(f"{empty} autograded cells without a score")
    if integrity != "ok":
        problems.append(f"gradebook integrity check: {integrity}")
    return problems


def time_class(size: int, worker_counts: list[int]) -> int:
    """Grade a synthetic class serially, then in parallel with each worker count; print the rates, ratios and checks."""
    with tempfile.TemporaryDirectory(prefix="addnorm-bench-class-") as tmp:
        serial = coursework.make_course(Path(tmp) / "serial")
        kinds = synthetic_class(serial, size)
        copies = {workers: Path(tmp) / f"parallel-{workers}" for workers in worker_counts}
        for copy in copies.values():
            shutil.copytree(serial, copy)           # nbgrader_config.py finds the sandbox next to itself: each copy has its own

        started = time.perf_counter()
        result = coursework.run_nbgrader(["autograde", "*"], serial, check=False)
        seconds = {"serial": time.perf_counter() - started}
        print(f"serial: {seconds['serial']:.0f} s, one nbgrader process (exit {result.returncode})", flush=True)

        failed = []
        for workers, copy in copies.items():
            started = time.perf_counter()
            runs = grade_class.grade_class(copy, "*", workers, [], report=lambda line: None)
            seconds[workers] = time.perf_counter() - started
            failed += [f"{student} ({workers} workers)" for run in runs for student in run.failed]
            print(f"parallel: {seconds[workers]:.0f} s, {workers} nbgrader processes at a time", flush=True)

        courses = {"serial": serial, **copies}
        problems = {name: graded_exactly_once(course, kinds) for name, course in courses.items()}
        scores = {name: coursework.scores(course) for name, course in courses.items()}
    print(f"\nclass of {size} students ({sum(k == 'correct' for k in kinds.values())} correct, "
          f"{sum(k == 'untouched' for k in kinds.values())} untouched, "
          f"{sum(k not in ('correct', 'untouched') for k in kinds.values())} hostile), {os.cpu_count()} CPUs, "
          f"load average {_load():.1f} at the end (other work on the machine slows every run)")
    serial_rate = size / seconds["serial"] * 60
    print(f"  serial:    {serial_rate:.2f} students per minute (one `nbgrader autograde \"*\"`)")
    for workers in worker_counts:
        rate = size / seconds[workers] * 60
        print(f"  {workers} workers: {rate:.2f} students per minute, {rate / serial_rate:.2f}x serial")
    print(f"  failed runs: {failed or 'none'}")
    ok = not failed and result.returncode == 0
    for name, course_scores in scores.items():
        differ = sorted(key for key in scores["serial"] if scores["serial"][key] != course_scores.get(key))
        wrong_full = sorted(key for key, s in course_scores.items()
                            if kinds[key[0]] == "correct" and s["code"] != s["max_code"])
        label = name if name == "serial" else f"{name} workers"
        print(f"  {label}: {len(course_scores)} notebooks graded, {len(differ)} differ from serial, "
              f"correct students below full marks: {len(wrong_full)}; gradebook: "
              + ("every submitted notebook graded exactly once" if not problems[name] else
                 f"{len(problems[name])} problems: {problems[name][:10]}"))
        for key in differ:
            print(f"    differs: {key} ({kinds[key[0]]}): {scores['serial'][key]} vs {course_scores.get(key)}")
        ok = ok and not problems[name] and not wrong_full
        ok = ok and all(kinds[key[0]] not in ("correct", "untouched") for key in differ)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    """Time one student's notebooks, then a class serially and in parallel."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="how often to autograde one student (default 1)")
    parser.add_argument("--students", type=int, default=20, help="class size (default 20; 0 skips the class)")
    parser.add_argument("--workers", type=int, nargs="+", default=[grade_class.default_workers()],
                        help="parallel processes; several counts are each timed against the one serial run "
                             "(default: addnorm_grading.grade_class's default)")
    args = parser.parse_args(argv)
    status = time_one_student(args.repeats) if args.repeats > 0 else 0
    if args.students > 0:
        print(flush=True)
        status = max(status, time_class(args.students, args.workers))
    return status


if __name__ == "__main__":
    sys.exit(main())
