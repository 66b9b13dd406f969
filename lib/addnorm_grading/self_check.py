"""Self-check for a learner studying alone: grade your own exercises/ notebooks with the full tests, hidden ones too.

`make check` (or `make check EXERCISE=02_layer_norm`) runs `python -m addnorm_grading.self_check [EXERCISE…]` in the
course folder. nbgrader does the grading, exactly as an instructor's `nbgrader autograde` would, in a throw-away
course directory: the instructor notebooks in solutions/ give the tests, a copy of your notebook is the submission. Your files are only read, never written. It prints each exercise's score
and the message of every failing test, and writes nbgrader's HTML feedback to feedback-self/ (git-ignored).

(nbgrader has no single command for "grade this one notebook of mine with the hidden tests": Validate runs only the
visible tests, and autograde needs a course directory with a gradebook, which this builds and throws away.)
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from addnorm_grading import coursework

STUDENT = "self"
# nbgrader's feedback template loads MathJax 2 from a CDN (its mathjax() macro takes no URL from the configuration).
# The self-check's feedback instead loads MathJax 3 from one copy in feedback-self/_mathjax/ (about 3 MB, copied from
# sphinx-mathjax-offline, which the course installs for the website), so formulas render offline.
MATHJAX_SOURCE = Path(sysconfig.get_paths()["purelib"]) / "sphinx-mathjax-offline" / "static" / "mathjax"
MATHJAX_FILES = ["tex-chtml.js", "output/chtml/fonts/woff-v2"]
CDN_MATHJAX = re.compile(r'<script src="https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/[^"]*">\s*</script>.*?'
                         r'<script type="text/x-mathjax-config">.*?</script>', re.S)
LOCAL_MATHJAX = """<script>window.MathJax = {{tex: {{inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], processEscapes: true,
  processEnvironments: true, tags: 'ams'}}}};</script>
<script src="{src}" defer></script>"""
# How the learner's code runs. It is the learner's own code on their own machine, so the course's grading sandbox
# (which needs bubblewrap; see guide/instructors.md) is not needed: its documented opt-out runs a plain kernel.
AUTOGRADE_OPTIONS: list[str] = ["--SandboxedExecute.kernel_name=python3"]


@dataclass
class FailedTest:
    """One test cell that raised: its id, its points and the error it showed."""

    cell: str
    points: float
    message: str


@dataclass
class Result:
    """The self-check of one exercise notebook."""

    assignment: str
    notebook: str
    score: float
    max_score: float
    failed: list[FailedTest]
    written_points: float
    feedback: Path | None


NAMED_ERROR = re.compile(r"^[A-Z]\w*(Error|Exception|Interrupt|Died|Unresponsive): ")


def error_message(output: dict) -> str:
    """An error output as 'AssertionError: the message' (the traceback's last line, without colours)."""
    name, value = str(output.get("ename", "Error")), str(output.get("evalue", "")).strip()
    if name == "AssertionError" and NAMED_ERROR.match(value):    # the grader's verdict on an error: it names it
        return value
    return f"{name}: {value}" if value else name


def points(number: float) -> str:
    """'1 point', '3 points', '0.5 points'."""
    return f"{number:g} point" + ("" if number == 1 else "s")


def failed_tests(autograded: Path) -> list[FailedTest]:
    """The test cells (autograded, not solution) of a graded notebook that ended in an error, in notebook order."""
    nb = nbformat.read(autograded, as_version=4)
    failed = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            failed.append(FailedTest(meta.get("grade_id", "?"), float(meta.get("points", 0)), error_message(errors[0])))
    return failed


def copy_mathjax(feedback_dir: Path) -> Path:
    """Copy MathJax 3's TeX-to-HTML bundle and its fonts into feedback_dir/_mathjax once; return that folder."""
    target = feedback_dir / "_mathjax"
    for name in MATHJAX_FILES:
        source, destination = MATHJAX_SOURCE / name, target / name
        if destination.exists():
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, destination)
        else:
            shutil.copy(source, destination)
    return target


def with_local_mathjax(html: str, src: str) -> str:
    """The feedback HTML with nbgrader's CDN MathJax block replaced by MathJax 3 loaded from `src`."""
    return CDN_MATHJAX.sub(lambda _: LOCAL_MATHJAX.format(src=src), html, count=1)


def check(assignment: str, notebook: Path, course: Path, feedback_dir: Path) -> Result:
    """Autograde a copy of `notebook` as exercise `assignment` in `course`; copy its feedback HTML to feedback_dir."""
    coursework.submit(course, STUDENT, assignment, {notebook.name: notebook.read_bytes()})
    coursework.run_nbgrader(["autograde", assignment, f"--student={STUDENT}", "--force", *AUTOGRADE_OPTIONS], course)
    coursework.run_nbgrader(["generate_feedback", assignment, f"--student={STUDENT}", "--force"], course)
    score = coursework.scores(course)[(STUDENT, assignment, notebook.stem)]
    html = course / "feedback" / STUDENT / assignment / f"{notebook.stem}.html"
    target = feedback_dir / assignment / html.name
    if html.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        text = html.read_text(encoding="utf-8")
        if MATHJAX_SOURCE.is_dir():          # else nbgrader's page as it is: formulas stay LaTeX source offline
            mathjax = copy_mathjax(feedback_dir) / "tex-chtml.js"
            text = with_local_mathjax(text, Path("..", mathjax.relative_to(feedback_dir)).as_posix())  # relative path
        target.write_text(text, encoding="utf-8")
    failed = failed_tests(course / "autograded" / STUDENT / assignment / notebook.name)
    return Result(assignment, notebook.name, score["code"], score["max_code"], failed, score["max_written"],
                  target if html.is_file() else None)


def report(result: Result) -> str:
    """The lines printed for one exercise: score, each failing test with its message, where the feedback is."""
    verdict = "all tests pass" if not result.failed else f"{len(result.failed)} failing test" + "s" * (len(result.failed) > 1)
    lines = [f"{result.assignment}/{result.notebook}: {result.score:g} / {points(result.max_score)}  ({verdict})"]
    for test in result.failed:
        message = test.message.replace("\n", "\n      ")
        lines.append(f"  FAILED {test.cell} ({points(test.points)})\n      {message}")
    if result.written_points:
        lines.append(f"  + {points(result.written_points)} for written answers, which a person reads (not graded here)")
    if result.feedback:
        lines.append(f"  feedback: {result.feedback}")
    return "\n".join(lines)


def learner_notebooks(course: Path, exercises: Path, wanted: list[str]) -> list[tuple[str, Path]]:
    """(assignment, the learner's notebook) for each exercise of the course, or only those named in `wanted`."""
    known = coursework.assignments(course / coursework.SOURCE)
    unknown = sorted(set(wanted) - {a for a, _ in known})
    if unknown:
        raise SystemExit(f"no such exercise: {', '.join(unknown)} (choose from {', '.join(a for a, _ in known)})")
    return [(a, exercises / a / f"{nb}.ipynb") for a, nb in known if not wanted or a in wanted]


def main(argv: list[str] | None = None) -> int:
    """Self-check the named exercises (all by default); exit 1 when a notebook is missing or a test fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("exercise", nargs="*", help="e.g. 02_layer_norm (default: every exercise)")
    parser.add_argument("--course", type=Path, help="the course folder with the tests (default: the one with "
                        "course.toml, here or above)")
    parser.add_argument("--exercises", type=Path, help="the learner's exercise folder (default: the course's exercises/)")
    parser.add_argument("--feedback", type=Path, help="where the feedback HTML goes (default: the course's feedback-self/)")
    args = parser.parse_args(argv)
    origin = (args.course or coursework.course_root()).resolve()
    exercises, feedback = args.exercises or origin / "exercises", args.feedback or origin / "feedback-self"
    ok = True
    with tempfile.TemporaryDirectory(prefix="addnorm-self-check-") as scratch:
        course = coursework.make_course(Path(scratch) / "course", origin)
        for assignment, notebook in learner_notebooks(origin, exercises, args.exercise):
            if not notebook.is_file():
                print(f"{assignment}: {notebook} is missing", flush=True)
                ok = False
                continue
            result = check(assignment, notebook, course, feedback.resolve())
            ok = ok and not result.failed and result.score == result.max_score
            print(report(result), flush=True)
    print("\nThese are the course's own hidden tests; in a graded course your instructor's tests may differ.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
