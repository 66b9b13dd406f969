"""Every submitted notebook graded, or told why: a broken structure is rebuilt, an unreadable file is "not graded".

nbgrader fails a whole submission on a notebook whose structure it does not expect — a cell copied with its
grade_id (DeduplicateIds: KeyError), a test's grade_id renamed or a solution cell marked as graded (OverwriteCells),
a file that is not JSON — and the gradebook keeps that student's earlier score as if it were the latest. Here:

- `TolerantExporter` (the Autograde exporter) reads any file: one that is not a notebook becomes an empty one, with
  the reason in the resources; and if grading a notebook raises all the same, that notebook's grades are set to
  zero with the reason before nbgrader reports the failure (never an earlier score that looks current).
- `RestoreStructure` (the first sanitize step) compares the learner's notebook with the instructor's (the gradebook's
  cells; the released notebook for the cells between them). A notebook that matches goes on unchanged (nbgrader's
  OverwriteCells restores edited and deleted tests as before); one with only missing or repeated cell ids gets new
  ids; any other difference in the graded structure (grade ids repeated, unknown or missing from cells that still
  carry the exercise's cell ids; grade, solution or locked flags changed; cells out of order; cells that are not
  cells) makes the notebook rebuilt from the released one, the learner's answers put back by grade_id (else by the
  cell id the release gave them), their other cells left out. A note at the top says what was repaired. A file that
  could not be read is graded as the blank release, and every test says "not graded: <reason>".
- `RecordStructure` (after SaveAutoGrades) writes the note where the instructor sees it: the log, and the comment of
  the notebook's first answer cell in the gradebook ("Repaired: …" / "Not graded: …", which the feedback shows
  too); a notebook not graded scores zero, its written answers included.
"""

from __future__ import annotations

import copy
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from nbformat.v4 import new_markdown_cell, new_notebook
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.preprocessors import NbGraderPreprocessor

from addnorm_grading.verdicts import is_test_cell, record_split, verdict_outputs

UNREADABLE = "addnorm_unreadable"       # resources key: why the submitted file could not be read as a notebook
CELL_IDS = "addnorm_cell_ids"           # resources key: its cell id problems as submitted
NOT_GRADED = "Not graded"               # the gradebook comment's first words when a notebook was not graded
REPAIRED = "Repaired"                   # ... when its structure was repaired
CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_notes: dict[tuple[str, str, str], "Note"] = {}   # (assignment, student, notebook) -> its note, sanitize -> autograde

NOT_GRADED_NOTE = ("**Not graded: {reason}.** This submission scores 0. Submit the exercise's notebook again (the "
                   ".ipynb file from the assignment list; download the exercise again if yours is lost).")
REPAIRED_NOTE = ("**Your notebook was repaired before it was graded.** {problems}. It was rebuilt from the exercise as "
                 "released: every test and locked cell is the instructor's, in its place, and {kept}. {dropped}Your "
                 "score is the score of the rebuilt notebook.")
IDS_NOTE = ("**Your notebook was repaired before it was graded.** {problems}; they were given new ids. Nothing else "
            "was changed.")


@dataclass
class Note:
    """What was done to one notebook: graded (False: not graded), the reason or the repairs, for the log and comment."""

    graded: bool
    text: str                   # the note at the top of the graded notebook (Markdown)
    comment: str                # the gradebook comment and the log line


@dataclass
class InstructorCell:
    """One nbgrader cell of the instructor's notebook, as the gradebook has it."""

    name: str
    cell_type: str
    grade: bool
    solution: bool
    locked: bool
    task: bool = False


@dataclass
class Instructor:
    """The instructor's notebook: its nbgrader cells in order, and the released notebook (None if unavailable)."""

    cells: list[InstructorCell]
    release: dict | None = None
    names: dict[str, InstructorCell] = field(init=False)

    def __post_init__(self):
        self.names = {cell.name: cell for cell in self.cells}

    @classmethod
    def from_gradebook(cls, gradebook: Gradebook, notebook: str, assignment: str, release: dict | None):
        source = gradebook.find_notebook(notebook, assignment)
        grades = {c.name for c in source.grade_cells}
        solutions = {c.name for c in source.solution_cells}
        tasks = {c.name for c in source.task_cells}
        cells = [InstructorCell(c.name, c.cell_type, c.name in grades, c.name in solutions, bool(c.locked),
                                c.name in tasks) for c in source.source_cells]
        if release is not None and sorted(_release_names(release)) != sorted(c.name for c in cells):
            release = None                    # a release that drifted from the gradebook is no skeleton
        return cls(cells, release)

    @classmethod
    def from_notebook(cls, nb: dict):
        """The structure a released notebook describes (how the fast tests make one, without a gradebook)."""
        cells = []
        for cell in nb["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader")
            if meta and meta.get("grade_id"):
                flags = [bool(meta.get(flag)) for flag in ("grade", "solution", "locked", "task")]
                cells.append(InstructorCell(meta["grade_id"], cell["cell_type"], *flags))
        return cls(cells, nb)

    def skeleton(self) -> list[dict]:
        """The cells a rebuilt notebook starts from: the release's, or (without one) the gradebook's nbgrader cells."""
        if self.release is not None:
            cells = copy.deepcopy(self.release["cells"])
            for cell in cells:
                cell["source"] = _source(cell)
            return cells
        return [{"cell_type": c.cell_type, "id": c.name.replace("_", "-")[:64], "source": "", "metadata": {
            "nbgrader": {"grade": c.grade, "grade_id": c.name, "locked": c.locked, "solution": c.solution,
                         "task": c.task, "schema_version": 3, "cell_type": c.cell_type}},
            **({"outputs": [], "execution_count": None} if c.cell_type == "code" else {})} for c in self.cells]


def _release_names(nb: dict) -> list[str]:
    return [n for n in (_grade_id(c) for c in nb["cells"]) if n]


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    value = meta.get("nbgrader") if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def _grade_id(cell) -> str | None:
    name = _nbgrader(cell).get("grade_id")
    return name if isinstance(name, str) else None


def _well_formed(cell) -> bool:
    return (isinstance(cell, dict) and cell.get("cell_type") in ("code", "markdown", "raw")
            and isinstance(cell.get("metadata", {}), dict)
            and (isinstance(cell.get("source"), str) or (isinstance(cell.get("source"), list)
                                                         and all(isinstance(s, str) for s in cell["source"]))))


def _source(cell) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


# ------------------------------------------------------------------------------------------------ reading a file

def read_submitted(text: str | None) -> tuple[object | None, str | None]:
    """A submitted file's text as a notebook, or None and the reason it is none (in words that quote nothing of it)."""
    if text is None:
        return None, "the file is not text (it is not a notebook saved by Jupyter)"
    if not text.strip():
        return None, "the file is empty"
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return None, "the file is not a notebook (it is not JSON, the format Jupyter saves notebooks in)"
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list) or not isinstance(raw.get("metadata"), dict):
        return None, "the file is JSON but not a notebook (it has no list of cells)"
    if raw.get("nbformat") != 4:
        try:                                    # an older format nbformat converts (version 3)
            return nbformat.reads(text, as_version=4), None
        except Exception:
            return None, "the file is a notebook in a format version this grader does not read (it reads version 4)"
    if not isinstance(raw["metadata"].get("language", ""), str):
        del raw["metadata"]["language"]         # nbconvert lower-cases it before any preprocessor runs
    for cell in raw["cells"]:
        if _well_formed(cell):
            cell["source"] = _source(cell)    # as nbformat keeps it: one string
    return nbformat.from_dict(raw), None


class TolerantExporter(NotebookExporter):
    """nbgrader's notebook exporter, for autograde: any file reads (a non-notebook as an empty notebook, the reason in
    the resources), and a notebook whose grading raises gets zero, with the reason, before the failure goes on."""

    def from_file(self, file_stream, resources=None, **kw):
        try:
            text = file_stream.read()
        except UnicodeDecodeError:
            text = None
        nb, reason = read_submitted(text)
        resources = {} if resources is None else resources
        if reason is not None:
            resources[UNREADABLE] = reason
            nb = new_notebook()
        else:
            resources[CELL_IDS] = cell_id_problems(nb)
        return self.from_notebook_node(nb, resources, **kw)

    def from_notebook_node(self, nb, resources=None, **kw):
        try:
            return super().from_notebook_node(nb, resources, **kw)
        except Exception as error:
            if type(error).__name__ not in ("SandboxUnavailable", "OperationalError"):   # the machine, not the notebook
                info = (resources or {}).get("nbgrader", {})
                if info.get("db_url"):
                    note = Note(False, "", f"{NOT_GRADED}: the grader stopped on this notebook "
                                f"({type(error).__name__}); see the grading log")
                    try:
                        record(info["db_url"], info["notebook"], info["assignment"], info["student"], note)
                        self.log.error("%s/%s of %s: %s", info["assignment"], info["notebook"], info["student"],
                                       note.comment)
                    except Exception as second:            # the gradebook itself failed: nbgrader reports the first
                        self.log.error("Could not record the failure in the gradebook: %s", second)
            raise


# ------------------------------------------------------------------------------------------------ the structure

def problems(nb, instructor: Instructor) -> list[str]:
    """What differs in a learner's notebook from the instructor's graded structure, so that it is rebuilt. Names
    quoted are the instructor's, never the learner's."""
    rebuild = []
    cells = nb.get("cells", [])
    malformed = sum(not _well_formed(cell) for cell in cells)
    if malformed:
        rebuild.append(f"{_count(malformed, 'cell')} that {_are(malformed)} not notebook cells")
    good = [cell for cell in cells if _well_formed(cell)]
    seen: dict[str, int] = {}
    changed: dict[str, list[str]] = defaultdict(list)       # what changed -> the cells it changed in
    unnamed = unknown = 0
    for cell in good:
        meta, flags = cell.get("metadata", {}).get("nbgrader"), ("grade", "solution", "locked")
        if meta is None or meta == {}:
            continue
        if not isinstance(meta, dict):
            rebuild.append("nbgrader metadata that is not a dictionary")
            continue
        name = meta.get("grade_id")
        if not isinstance(name, str):
            unnamed += any(meta.get(flag) for flag in flags)
            continue
        if name not in instructor.names:
            unknown += 1
            continue
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            continue
        mine, grouped = instructor.names[name], changed
        if bool(meta.get("grade")) != mine.grade:
            grouped["no longer marked as graded" if mine.grade else "marked as graded, unlike in the exercise"
                    ].append(name)
        if bool(meta.get("solution")) != mine.solution:
            grouped["no longer marked as answers" if mine.solution else "marked as answers, unlike in the exercise"
                    ].append(name)
        if mine.grade and not mine.solution and not isinstance(meta.get("points"), (int, float)):
            grouped["without points"].append(name)
        if bool(meta.get("locked")) != mine.locked and mine.solution:
            grouped["marked as locked" if meta.get("locked") else "unlocked"].append(name)
        if cell["cell_type"] != mine.cell_type:
            grouped["of another cell type than the exercise's"].append(name)
    rebuild += [f"the {'cell' if len(names) == 1 else 'cells'} {', '.join(names)} {'is' if len(names) == 1 else 'are'} "
                f"{what}" for what, names in changed.items()]
    if unnamed:
        rebuild.append(f"{_count(unnamed, 'cell')} marked as graded, an answer or locked without a name")
    if unknown:
        rebuild.append(f"{_count(unknown, 'cell')} named as no cell of the exercise (a renamed grade_id)")
    rebuild += [f"the cell {name} appears {n} times" for name, n in seen.items() if n > 1]
    order = [cell.name for cell in instructor.cells if cell.name in seen]
    if list(seen) != order:
        rebuild.append("cells of the exercise are out of its order")
    released_ids = _released_ids(instructor)
    stripped = sorted({released_ids[cell.get("id")] for cell in good if cell.get("id") in released_ids
                       and cell.get("metadata", {}).get("nbgrader") in (None, {})} - set(seen))
    if stripped:
        rebuild.append(f"the nbgrader metadata of {', '.join(stripped)} was deleted")
    answers = [cell.name for cell in instructor.cells if cell.solution]
    if answers and not seen.keys() & set(answers) and not stripped and any(_source(c).strip() for c in good):
        rebuild.append("none of the exercise's answer cells is in the notebook (their nbgrader metadata is gone)")
    if not rebuild:
        try:
            MetadataValidator().validate_nb(copy.deepcopy(nb))
        except Exception:
            rebuild.append("nbgrader metadata that does not validate")
    return rebuild


def cell_id_problems(nb) -> list[str]:
    """Missing, invalid or repeated nbformat cell ids (nbconvert gives such cells new ids before any preprocessor:
    this is read from the file as it was submitted)."""
    minor, ids = nb.get("nbformat_minor", 0), []
    if not (isinstance(minor, int) and minor >= 5):
        return ids
    given = [cell.get("id") for cell in nb.get("cells", []) if _well_formed(cell)]
    missing = sum(not (isinstance(i, str) and CELL_ID.match(i)) for i in given)
    named = [i for i in given if isinstance(i, str)]
    repeated = len(named) - len(set(named))
    if missing:
        ids.append(f"{_count(missing, 'cell')} had no valid cell id")
    if repeated:
        ids.append(f"{_count(repeated, 'cell')} repeated another cell's id")
    return ids


def _released_ids(instructor: Instructor) -> dict[str, str]:
    """The cell id the release gave each nbgrader cell -> its grade id."""
    cells = instructor.release["cells"] if instructor.release else instructor.skeleton()
    return {cell["id"]: _grade_id(cell) for cell in cells if _grade_id(cell) and isinstance(cell.get("id"), str)}


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def rebuild(nb, instructor: Instructor) -> tuple[object, list[str], int]:
    """The instructor's released notebook with the learner's answers in it: (notebook, answers kept, cells left out).

    An answer is the learner's last cell with its grade_id, else their last cell (without a grade id of the exercise)
    that has the cell id the release gave it. Every other learner cell is left out, except copies of the release's
    own cells."""
    good = [cell for cell in nb.get("cells", []) if _well_formed(cell)]
    skeleton = instructor.skeleton()
    released_ids = _released_ids(instructor)
    used, kept = set(), []
    for cell in skeleton:
        mine = instructor.names.get(_grade_id(cell))
        if mine is None or not mine.solution:
            continue
        by_name = [i for i, c in enumerate(good) if _grade_id(c) == mine.name]
        by_id = [i for i, c in enumerate(good) if c.get("id") == cell.get("id") and _grade_id(c) not in instructor.names
                 and released_ids.get(c.get("id")) == mine.name]
        chosen = (by_name or by_id or [None])[-1]
        if chosen is not None:
            cell["source"] = _source(good[chosen])
            used.add(chosen)
            kept.append(mine.name)
    released = {_source(cell).strip() for cell in skeleton}
    dropped = sum(1 for i, c in enumerate(good) if i not in used and _source(c).strip()
                  and _source(c).strip() not in released)
    for cell in skeleton:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    metadata = copy.deepcopy(instructor.release["metadata"]) if instructor.release else {}
    rebuilt = nbformat.from_dict({"cells": skeleton, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5})
    return rebuilt, kept, dropped


def renumber_ids(nb) -> None:
    """Give every cell whose id is missing, invalid or repeated a new one."""
    taken = set()
    for index, cell in enumerate(nb.cells):
        given = cell.get("id")
        if not (isinstance(given, str) and CELL_ID.match(given)) or given in taken:
            n = index
            while f"repaired-{n}" in taken or any(c.get("id") == f"repaired-{n}" for c in nb.cells):
                n += 1
            cell["id"] = f"repaired-{n}"
        taken.add(cell["id"])


def repair(nb, instructor: Instructor, unreadable: str | None = None, ids: list[str] = ()
           ) -> tuple[object, Note | None]:
    """The notebook to grade and the note for it (None: unchanged, nothing to say). `unreadable`: why the file is no
    notebook; `ids`: its cell id problems as submitted (`cell_id_problems`)."""
    if unreadable is not None:
        blank, _, _ = rebuild(new_notebook(), instructor)
        note = Note(False, NOT_GRADED_NOTE.format(reason=unreadable), f"{NOT_GRADED}: {unreadable}")
        return _with_note(blank, note), note
    to_rebuild = problems(nb, instructor)
    if to_rebuild:
        rebuilt, kept, dropped = rebuild(nb, instructor)
        said = _sentence(to_rebuild)
        kept_text = (f"your answers were put back ({', '.join(kept)})" if kept
                     else "none of your answers could be matched to the exercise's answer cells (they score zero)")
        dropped_text = f"{_count(dropped, 'cell')} of yours that {_are(dropped)} not part of the exercise " \
                       f"{'was' if dropped == 1 else 'were'} left out. " if dropped else ""
        text = REPAIRED_NOTE.format(problems=said, kept=kept_text, dropped=dropped_text)
        comment = f"{REPAIRED}: {said}; answers kept: {', '.join(kept) or 'none'}; cells left out: {dropped}"
        note = Note(True, text, comment)
        return _with_note(rebuilt, note), note
    if ids:
        renumber_ids(nb)
        said = _sentence(ids)
        note = Note(True, IDS_NOTE.format(problems=said), f"{REPAIRED}: {said}; they were given new ids")
        return _with_note(nb, note), note
    return nb, None


def _sentence(parts: list[str]) -> str:
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


def _with_note(nb, note: Note):
    cell = new_markdown_cell(note.text)
    cell["id"] = "grader-note"
    while any(c.get("id") == cell["id"] for c in nb.cells):
        cell["id"] += "-1"
    nb.cells.insert(0, cell)
    return nb


# ------------------------------------------------------------------------------------------------ preprocessors

class RestoreStructure(NbGraderPreprocessor):
    """The first sanitize step: a notebook whose graded structure is broken is rebuilt, an unreadable one replaced by
    the blank release (module docstring); the note goes to RecordStructure, after the grading."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        key = (info["assignment"], info["student"], info["notebook"])
        _notes.pop(key, None)
        with Gradebook(info["db_url"]) as gradebook:
            instructor = Instructor.from_gradebook(gradebook, info["notebook"], info["assignment"],
                                                   self._release(info["assignment"], info["notebook"]))
        nb, note = repair(nb, instructor, resources.get(UNREADABLE), resources.get(CELL_IDS, []))
        if note is not None:
            _notes[key] = note
            self.log.warning("%s/%s of %s: %s", info["assignment"], info["notebook"], info["student"], note.comment)
        return nb, resources

    def _release(self, assignment: str, notebook: str) -> dict | None:
        """The released notebook (the release folder of the course), or None."""
        coursedir = getattr(getattr(self.parent, "parent", None), "coursedir", None) or CourseDirectory(
            config=self.config)
        path = Path(coursedir.format_path(coursedir.release_directory, ".", assignment)) / f"{notebook}.ipynb"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.log.warning("No released notebook %s: a broken notebook is rebuilt from the gradebook's cells", path)
            return None


class RecordStructure(NbGraderPreprocessor):
    """After SaveAutoGrades: a repaired notebook's note in the gradebook's comment; a notebook not graded scores zero,
    and each of its tests says why. A notebook graded as it was clears a note an earlier submission left."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        note = _notes.pop((info["assignment"], info["student"], info["notebook"]), None)
        if note is not None and not note.graded:
            message = note.comment[0].lower() + note.comment[1:]
            for cell in nb.cells:
                if is_test_cell(cell):
                    cell.outputs = verdict_outputs(message)
                    record_split(cell, message, message)
        record(info["db_url"], info["notebook"], info["assignment"], info["student"], note)
        return nb, resources


def record(db_url: str, notebook: str, assignment: str, student: str, note: Note | None) -> None:
    """Write a notebook's note into the gradebook (the first answer cell's comment); not graded: every grade zero."""
    with Gradebook(db_url) as gradebook:
        try:
            submitted = gradebook.find_submission_notebook(notebook, assignment, student)
        except MissingEntry:
            return
        comments = {comment.name: comment for comment in submitted.comments}
        first = next((cell.name for cell in submitted.notebook.source_cells if cell.name in comments), None)
        for name, comment in comments.items():
            if comment.auto_comment and comment.auto_comment.startswith((NOT_GRADED + ":", REPAIRED + ":")):
                comment.auto_comment = None             # an earlier submission's note
        if note is not None and first is not None:
            comments[first].auto_comment = note.comment
        if note is not None and not note.graded:
            for grade in submitted.grades:
                grade.auto_score, grade.manual_score, grade.extra_credit = 0.0, None, None
                grade.needs_manual_grade = False
        gradebook.db.commit()


def notes(db_url: str, assignment: str, student: str) -> list[str]:
    """The notes of a student's graded submission: its gradebook comments "Not graded: …" and "Repaired: …"."""
    with Gradebook(db_url) as gradebook:
        submission = gradebook.find_submission(assignment, student)
        return [comment.auto_comment for notebook in submission.notebooks for comment in notebook.comments
                if comment.auto_comment and comment.auto_comment.startswith((NOT_GRADED + ":", REPAIRED + ":"))]
