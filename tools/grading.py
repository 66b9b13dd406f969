"""Helpers around nbgrader for this course: build a throw-away course directory, run nbgrader, read scores.

Used by tests/test_exercises.py, tests/test_grading.py and bench/grading.py. nbgrader runs as a subprocess
of this Python (`python -m nbgrader`), with the venv's bin/ on PATH: nbgrader calls `alembic` from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
CONFIG = ROOT / "nbgrader_config.py"
SANDBOX = ROOT / "tools" / "sandbox"           # the grading kernel's sandbox; nbgrader_config.py finds it next to itself


def assignments(source: Path = SOLUTIONS) -> list[tuple[str, str]]:
    """(assignment id, notebook name) for every notebook under solutions/<id>/, sorted."""
    return sorted((nb.parent.name, nb.stem) for nb in source.glob("*/*.ipynb")
                  if ".ipynb_checkpoints" not in nb.parts)


def solution_text(assignment: str, source: Path = SOLUTIONS) -> str:
    """The instructor notebook of `assignment` (its one notebook under solutions/<assignment>/), as text."""
    (notebook,) = [name for a, name in assignments(source) if a == assignment]
    return (source / assignment / f"{notebook}.ipynb").read_text(encoding="utf-8")


def with_replacements(assignment: str, replacements: list[tuple[str, str]]) -> str:
    """The instructor notebook with text replacements in its solution code (each must apply exactly once):
    how the grading tests write a learner's mistake, or a correct program written differently."""
    import nbformat

    nb = nbformat.reads(solution_text(assignment), as_version=4)
    solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    for old, new in replacements:
        assert sum(c.source.count(old) for c in solution_cells) == 1, (
            f"{old!r} is not exactly once in {assignment}'s solution code")
        for cell in solution_cells:
            cell.source = cell.source.replace(old, new)
    return nbformat.writes(nb)


def with_cell_before_tests(text: str, code: str) -> str:
    """A notebook (as text) with `code` as a new cell just before its first test cell: how the sandbox tests and
    the bench write a hostile submission."""
    import nbformat

    nb = nbformat.reads(text, as_version=4)
    first_test = next(i for i, cell in enumerate(nb.cells)
                      if cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code")
    nb.cells.insert(first_test, nbformat.v4.new_code_cell(code))
    return nbformat.writes(nb)


def nbgrader_env() -> dict[str, str]:
    """The environment nbgrader needs: this interpreter's bin/ first on PATH (for alembic and jupyter)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("PYTHONHASHSEED", "0")
    env["TQDM_DISABLE"] = "1"
    return env


def run_nbgrader(args: list[str], course: Path, check: bool = True, timeout: float | None = None
                 ) -> subprocess.CompletedProcess:
    """Run `nbgrader <args>` in the course directory; raise with its log when check and it fails."""
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=nbgrader_env(),
                            capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed (exit {result.returncode}):\n"
                           f"{result.stdout[-6000:]}\n{result.stderr[-6000:]}")
    return result


def make_course(course: Path, source: Path = SOLUTIONS) -> Path:
    """Copy nbgrader_config.py, the sandbox and the instructor notebooks into `course`; generate every assignment.

    Afterwards course/exercises/<id>/ holds the learner versions and course/gradebook.db knows every assignment,
    ready for `nbgrader autograde`. Returns `course`.
    """
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG, course / "nbgrader_config.py")
    shutil.copytree(SANDBOX, course / "tools" / "sandbox", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(source, course / "solutions", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    run_nbgrader(["generate_assignment", "*", "--force"], course)     # every assignment, in one process
    return course


def submit(course: Path, student: str, assignment: str, notebooks: dict[str, str | bytes]) -> Path:
    """Place a student's files in submitted/<student>/<assignment>/ (name -> text or bytes); return the folder."""
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in notebooks.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def scores(course: Path) -> dict[tuple[str, str, str], dict[str, float]]:
    """Every graded notebook in the gradebook: (student, assignment, notebook) -> its scores.

    "code" / "max_code" are the autograded points, "written" / "max_written" the manually graded ones.
    """
    from nbgrader.api import Gradebook

    table = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "addnorm") as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                for nb in submission.notebooks:
                    table[(submission.student.id, assignment.name, nb.name)] = {
                        "code": nb.code_score, "max_code": nb.max_code_score,
                        "written": nb.written_score, "max_written": nb.max_written_score,
                    }
    return table
