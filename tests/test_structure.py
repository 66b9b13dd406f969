"""Every notebook graded or told why (issue 29, item 5): addnorm_grading.structure.

The fast tests ask the structure check and the rebuild directly, with the released exercise 1 as the instructor's
structure. The slow one grades a class of broken notebooks in a course folder of its own, in one `nbgrader autograde`
run, each student with an earlier full score in the gradebook: every repaired notebook must score what the same
notebook unbroken scores (a mistake: partial), every file that is no notebook zero, each with its note.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from addnorm_grading import coursework, structure, submissions
from addnorm_grading.course import read_course

ROOT = Path(__file__).resolve().parent.parent
RELEASE = json.loads((ROOT / "exercises" / "01_residual" / "residual.ipynb").read_text(encoding="utf-8"))
MISTAKE = [("if self.norm_first:", "if not self.norm_first:")]          # Post-LN and Pre-LN swapped: partial marks


def nbg(cell) -> dict:
    return cell["metadata"].get("nbgrader", {}) if isinstance(cell["metadata"].get("nbgrader"), dict) else {}


def learner(text: str | None = None) -> dict:
    """A learner's notebook as JSON (default: the solution with the mistake)."""
    return json.loads(text or submissions.with_replacements("01_residual", MISTAKE, ROOT / "solutions"))


def cell_named(nb: dict, name: str) -> dict:
    return next(cell for cell in nb["cells"] if nbg(cell).get("grade_id") == name)


def graded_cells(nb: dict) -> list[dict]:
    return [cell for cell in nb["cells"] if nbg(cell).get("grade") and not nbg(cell).get("solution")]


def copied_cell(nb):                     # the answer cell copied, cell id and grade_id with it (nbgrader: KeyError)
    nb["cells"].insert(4, copy.deepcopy(cell_named(nb, "add_norm")))


def repeated_and_missing_ids(nb):        # nbformat cell ids only: one repeated, one gone
    nb["cells"][4]["id"] = nb["cells"][3]["id"]
    del nb["cells"][1]["id"]


def grade_cleared(nb):                   # every test's grade flag cleared: its earlier score stayed in the gradebook
    for cell in graded_cells(nb):
        cell["metadata"]["nbgrader"]["grade"] = False


def grade_id_renamed(nb):                # nbgrader deletes the unknown id, then CheckCellMetadata fails
    cell_named(nb, "test_post_ln")["metadata"]["nbgrader"]["grade_id"] = "test_post_ln_mine"


def solution_graded(nb):                 # OverwriteCells: MissingEntry for a graded cell the gradebook lacks
    cell_named(nb, "add_norm")["metadata"]["nbgrader"].update(grade=True, points=10)


def solution_locked(nb):
    cell_named(nb, "add_norm")["metadata"]["nbgrader"]["locked"] = True


def reordered(nb):                       # the tests first (they would run before the answer), and a cell of one's own
    tests = graded_cells(nb)
    nb["cells"] = tests + [cell for cell in nb["cells"] if cell not in tests]
    nb["cells"].append(nbformat.v4.new_code_cell("print('my own scratch cell')"))


def nbgrader_deleted(nb):                # every cell's nbgrader metadata gone (the release's cell ids kept)
    for cell in nb["cells"]:
        cell["metadata"].pop("nbgrader", None)


BREAKS = {f.__name__: f for f in (copied_cell, repeated_and_missing_ids, grade_cleared, grade_id_renamed,
                                   solution_graded, solution_locked, reordered, nbgrader_deleted)}
# what the note (and the gradebook's comment) says for each
NOTES = {
    "copied_cell": "The cell add_norm appears 2 times",
    "repeated_and_missing_ids": "1 cell had no valid cell id; 1 cell repeated another cell's id; they were given new ids",
    "grade_cleared": "The cells test_shapes_and_parameters, test_post_ln, test_pre_ln, test_dropout_and_gradients are no longer "
                     "marked as graded",
    "grade_id_renamed": "1 cell named as no cell of the exercise (a renamed grade_id)",
    "solution_graded": "The cell add_norm is marked as graded, unlike in the exercise",
    "solution_locked": "The cell add_norm is marked as locked",
    "reordered": "Cells of the exercise are out of its order",
    "nbgrader_deleted": "The nbgrader metadata of add_norm, answer_stream_size, test_dropout_and_gradients, "
                        "test_helpers, test_post_ln, test_pre_ln, test_shapes_and_parameters was deleted",
}
UNREADABLE = {            # a file that is no notebook -> the reason given
    "not_json": (b"{ this is not a notebook", "the file is not a notebook (it is not JSON"),
    "empty": (b"", "the file is empty"),
    "binary": (bytes(range(256)) * 4, "the file is not text"),
    "json_not_notebook": (b'{"cells": 3, "metadata": {}}', "the file is JSON but not a notebook"),
}


def broken(name: str) -> dict:
    nb = learner()
    BREAKS[name](nb)
    return nb


# ---------------------------------------------------------------------------------------------- fast

def read(nb: dict):
    return structure.read_submitted(json.dumps(nb))[0]


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_file_that_is_no_notebook_is_told_why(name):
    content, reason = UNREADABLE[name]
    text = content.decode("utf-8") if name != "binary" else None
    nb, said = structure.read_submitted(text)
    assert nb is None and said.startswith(reason), said


def test_an_untouched_or_tampered_but_whole_notebook_goes_on_unchanged():
    """The release, the solution, and a notebook whose tests were edited or deleted: nbgrader's OverwriteCells
    restores those, as before (tests/test_grading.py's "tamper" student)."""
    instructor = structure.Instructor.from_notebook(RELEASE)
    deleted = learner()
    deleted["cells"] = [cell for cell in deleted["cells"] if cell not in graded_cells(deleted)]
    edited = learner()
    for cell in graded_cells(edited):
        cell["source"] = "pass"
    for nb in (RELEASE, learner(), deleted, edited):
        assert structure.problems(read(nb), instructor) == []
        assert structure.cell_id_problems(read(nb)) == []
        same, note = structure.repair(read(nb), instructor)
        assert note is None and same == read(nb)


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_structure_is_rebuilt_with_the_learners_answer_and_a_note(name):
    instructor = structure.Instructor.from_notebook(RELEASE)
    submitted = read(broken(name))
    nb, note = structure.repair(submitted, instructor, ids=structure.cell_id_problems(submitted))
    assert note is not None and note.graded and NOTES[name] in note.text and NOTES[name] in note.comment
    assert nb.cells[0].source == note.text                               # the note is the notebook's first cell
    names = [nbg(cell).get("grade_id") for cell in nb.cells if nbg(cell)]
    assert names == [nbg(cell)["grade_id"] for cell in RELEASE["cells"] if nbg(cell)]
    answer = "".join(cell_named(learner(), "add_norm")["source"])
    assert cell_named(nb, "add_norm").source == answer, "the learner's answer was not kept"
    ids = [cell.get("id") for cell in nb.cells]
    assert len(set(ids)) == len(ids) and all(structure.CELL_ID.match(i) for i in ids)
    if name != "repeated_and_missing_ids":                                # a rebuild: the release's cells, in order
        assert [c.source for c in nb.cells[1:]] == [c.source for c in nbformat.from_dict(
            structure.rebuild(read(learner()), instructor)[0]).cells]
        assert "answers kept: add_norm, answer_stream_size" in note.comment


def test_cells_of_ones_own_are_left_out_of_a_rebuild_and_counted():
    _, note = structure.repair(read(broken("reordered")), structure.Instructor.from_notebook(RELEASE))
    assert "1 cell of yours that is not part of the exercise was left out" in note.text
    assert note.comment.endswith("cells left out: 1")


def test_an_answer_is_matched_by_the_released_cell_id_when_its_grade_id_is_gone_and_else_scores_zero():
    instructor = structure.Instructor.from_notebook(RELEASE)
    nb = broken("nbgrader_deleted")
    nb["cells"] = [cell for cell in nb["cells"] if cell.get("id") != cell_named(RELEASE, "add_norm")["id"]]
    rebuilt, note = structure.repair(read(nb), instructor)
    assert "YOUR CODE HERE" in cell_named(rebuilt, "add_norm").source          # no answer: the release's stub
    assert "answers kept: answer_stream_size" in note.comment


def test_a_notebook_not_graded_is_the_blank_release_with_the_reason():
    nb, note = structure.repair(structure.read_submitted("")[0], structure.Instructor.from_notebook(RELEASE),
                                unreadable="the file is empty")
    assert not note.graded and note.comment == "Not graded: the file is empty"
    assert nb.cells[0].source.startswith("**Not graded: the file is empty.** This submission scores 0.")
    assert [c.source for c in nb.cells[1:]] == ["".join(c["source"]) for c in RELEASE["cells"]]


# ---------------------------------------------------------------------------------------------- one nbgrader run

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course where every student had full marks, then handed in a broken notebook; graded in one run."""
    course = coursework.make_course(tmp_path_factory.mktemp("structure") / "course")
    texts = {"control": json.dumps(learner())}
    texts.update({name: json.dumps(broken(name)) for name in BREAKS})
    files = {**{name: text.encode() for name, text in texts.items()},
             **{name: content for name, (content, _) in UNREADABLE.items()}}
    db = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(db, read_course(course / "course.toml").id) as gradebook:
        for student in files:
            gradebook.update_or_create_student(student)
            submission = gradebook.update_or_create_submission("01_residual", student)
            for grade in submission.notebooks[0].grades:                 # the earlier grade: everything right
                grade.auto_score = grade.max_score
                if grade.cell.cell_type == "markdown":                  # the written answer, graded by a person
                    grade.manual_score = grade.max_score
            gradebook.db.commit()
    for student, content in files.items():
        coursework.submit(course, student, "01_residual", {"residual.ipynb": content})
    run = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "01_residual", "--force",
                          "--ExecutePreprocessor.timeout=30"], cwd=course, env=coursework.nbgrader_env(),
                         capture_output=True, text=True)
    feedback = coursework.run_nbgrader(["generate_feedback", "01_residual", "--force"], course, check=False)
    return {"course": course, "db": db, "log": run.stdout + run.stderr, "returncode": run.returncode,
            "feedback_log": feedback.stdout + feedback.stderr, "scores": coursework.scores(course),
            "comments": {student: structure.notes(db, "01_residual", student) for student in files}}


def score(graded, student):
    return graded["scores"][(student, "01_residual", "residual")]


def autograded(graded, student):
    return nbformat.read(graded["course"] / "autograded" / student / "01_residual" / "residual.ipynb", as_version=4)


def comments(graded, student) -> list[str]:
    """The student's notes in the gradebook after the run ("Repaired: …", "Not graded: …")."""
    return graded["comments"][student]


@pytest.mark.slow
def test_the_class_of_broken_notebooks_is_graded_without_a_failure(graded):
    assert graded["returncode"] == 0, graded["log"][-4000:]
    assert "There was an error processing" not in graded["log"]
    control = score(graded, "control")
    assert 0 < control["code"] < control["max_code"], control        # the mistake costs part of the points
    assert comments(graded, "control") == []


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_repaired_notebook_scores_what_it_scores_unbroken_with_its_note(graded, name):
    result, control = score(graded, name), score(graded, "control")
    assert result["code"] == control["code"] < result["max_code"], (name, result, control)   # never the earlier 6
    (comment,) = comments(graded, name)
    assert comment.startswith("Repaired: ") and NOTES[name] in comment
    assert NOTES[name] in autograded(graded, name)["cells"][0]["source"]
    assert f"01_residual/residual of {name}: Repaired: " in graded["log"]
    feedback = (graded["course"] / "feedback" / name / "01_residual" / "residual.html").read_text(encoding="utf-8")
    assert "Your notebook was repaired before it was graded" in feedback


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_file_that_is_no_notebook_scores_zero_and_says_not_graded(graded, name):
    reason = UNREADABLE[name][1]
    result = score(graded, name)
    assert result["code"] == 0 and result["written"] == 0, result           # not the earlier 8 of 8
    (comment,) = comments(graded, name)
    assert comment.startswith(f"Not graded: {reason}")
    assert re.search(rf"01_residual/residual of {name}: Not graded: {re.escape(reason)}", graded["log"])
    nb = autograded(graded, name)
    assert nb["cells"][0]["source"].startswith(f"**Not graded: {reason}")
    messages = {o["evalue"] for cell in graded_cells(nb) for o in cell["outputs"]}
    assert len(messages) == 1 and messages.pop().startswith(f"not graded: {reason}")
    feedback = (graded["course"] / "feedback" / name / "01_residual" / "residual.html").read_text(encoding="utf-8")
    assert f"Not graded: {reason}" in " ".join(feedback.split())


@pytest.mark.slow
def test_a_notebook_whose_grading_raises_gets_zero_and_the_reason_not_its_earlier_score(graded):
    """Belt and braces: whatever still makes a notebook's grading raise leaves zero in the gradebook, not the score
    before it."""
    from nbgrader.preprocessors import NbGraderPreprocessor

    class Raises(NbGraderPreprocessor):
        def preprocess(self, nb, resources):
            raise KeyError("grade_id")

    exporter = structure.TolerantExporter()
    exporter.register_preprocessor(Raises(), enabled=True)
    before = score(graded, "control")
    assert before["code"] > 0
    resources = {"nbgrader": {"db_url": graded["db"], "notebook": "residual", "assignment": "01_residual",
                              "student": "control"}}
    with pytest.raises(KeyError):
        exporter.from_notebook_node(nbformat.from_dict(learner()), resources)
    assert score({"scores": coursework.scores(graded["course"])}, "control")["code"] == 0
    assert structure.notes(graded["db"], "01_residual", "control") == [
        "Not graded: the grader stopped on this notebook (KeyError); see the grading log"]
