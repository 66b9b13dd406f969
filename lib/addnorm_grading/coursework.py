"""A throw-away course folder, as the tests, the benches and the self-check use one: make it, hand in, grade, read.

nbgrader runs as a subprocess of this Python (`python -m nbgrader`), with this interpreter's bin/ first on PATH:
nbgrader calls `alembic` from there.

    course = make_course(tmp / "course")          # nbgrader_config.py, course.toml, solutions/, checks/; generated
    submit(course, "ann", "01_residual", {"residual.ipynb": text})
    run_nbgrader(["autograde", "01_residual"], course)
    scores(course)[("ann", "01_residual", "residual")]["code"]
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from addnorm_grading import secret
from addnorm_grading.course import FILE_NAME, find_course_file, read_course

CONFIG = "nbgrader_config.py"
SOURCE = "solutions"                # nbgrader's source folder in this course (CourseDirectory.source_directory)
CHECKS = "checks"                   # the hidden checks, beside it (addnorm_grading.judge)
NOT_COPIED = (".ipynb_checkpoints", "__pycache__", secret.FILE)     # into a course made from these files


def course_root(start: Path | None = None) -> Path:
    """The course folder: where course.toml is, in `start` (default: the working directory) or above it."""
    return find_course_file(start).parent


def assignments(source: Path | None = None) -> list[tuple[str, str]]:
    """(assignment id, notebook name) for every notebook under <source>/<id>/ (default: the course's solutions/)."""
    source = source or course_root() / SOURCE
    return sorted((nb.parent.name, nb.stem) for nb in source.glob("*/*.ipynb")
                  if ".ipynb_checkpoints" not in nb.parts)


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


def make_course(course: Path, origin: Path | None = None, source: Path | None = None) -> Path:
    """A course folder at `course`: nbgrader_config.py, course.toml and checks/ from `origin` (default: this
    course), the instructor notebooks from `source` (default: origin's solutions/); every assignment generated.
    The course gets a secret of its own (`addnorm_grading.secret`), never origin's.

    Afterwards course/exercises/<id>/ holds the learner versions and course/gradebook.db knows every assignment,
    ready for `nbgrader autograde`. Returns `course`. The generating is done once per process for the same files
    (`_generated`); each course is a copy of it, with a secret made for it alone.
    """
    origin = origin or course_root()
    shutil.copytree(_generated(origin, source or origin / SOURCE), course, dirs_exist_ok=True)
    secret.make(course / CHECKS, replace=True)
    return course


_GENERATED: dict[str, Path] = {}    # digest of a course's files -> that course generated, for this process


def _generated(origin: Path, source: Path) -> Path:
    """A course folder with these files, every assignment generated and no secret: made on first use, kept (and
    removed when the process ends). Generating takes nbgrader seconds; a test session makes many courses."""
    inputs = [(CONFIG, origin / CONFIG), (FILE_NAME, origin / FILE_NAME), (SOURCE, source), (CHECKS, origin / CHECKS)]
    key = _digest(inputs)
    if key not in _GENERATED:
        course = Path(tempfile.mkdtemp(prefix="addnorm-generated-")) / "course"
        atexit.register(shutil.rmtree, course.parent, ignore_errors=True)
        course.mkdir()
        for name, path in inputs:
            if path.is_dir():
                shutil.copytree(path, course / name, ignore=shutil.ignore_patterns(*NOT_COPIED))
            else:
                shutil.copy(path, course / name)
        run_nbgrader(["generate_assignment", "*", "--force"], course)     # every assignment, in one process
        _GENERATED[key] = course
    return _GENERATED[key]


def _digest(inputs: list[tuple[str, Path]]) -> str:
    """A hash of the names and contents of these files and folders (what `_generated` copies)."""
    digest = hashlib.sha256()
    for name, path in inputs:
        files = [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.is_file() and not set(p.relative_to(path).parts) & set(NOT_COPIED))
        for file in files:
            digest.update(f"{name}/{file.relative_to(path) if file != path else ''}\0".encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


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
    course_id = read_course(course / FILE_NAME).id
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id) as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                for nb in submission.notebooks:
                    table[(submission.student.id, assignment.name, nb.name)] = {
                        "code": nb.code_score, "max_code": nb.max_code_score,
                        "written": nb.written_score, "max_written": nb.max_written_score,
                    }
    return table
