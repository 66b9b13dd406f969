"""Grading a class in parallel (addnorm_grading.grade_class, `make grade`): several nbgrader processes, one gradebook.

The unit tests check how the students are handed out. The slow test grades a small class of 01_residual in
parallel, in the sandbox, with batches of several students per nbgrader process: every student graded exactly
once, the right scores, and a submission nbgrader cannot read named as failed without stopping anybody else.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from addnorm_grading import coursework, grade_class, submissions

EXERCISES = Path(__file__).resolve().parent.parent / "exercises"

ASSIGNMENT, NOTEBOOK = "01_residual", "residual"


@pytest.mark.parametrize("size, workers", [(1, 3), (2, 3), (7, 2), (20, 3), (200, 3), (201, 4)])
def test_batches_cover_every_student_once_in_order(size, workers):
    students = [f"s{i:03d}" for i in range(size)]
    found = grade_class.batches(students, workers)
    assert [s for batch in found for s in batch] == students
    assert all(batch for batch in found)
    # enough batches to keep every worker busy, and about BATCHES_PER_WORKER of them per worker
    assert len(found) >= min(size, workers)
    assert len(found) <= workers * grade_class.BATCHES_PER_WORKER


def test_one_student_is_chosen_by_name_and_a_batch_by_excluding_everybody_else():
    students = ["ann", "bob", "cy", "dee"]
    assert grade_class.student_arguments(students, ["bob"]) == ["--student=bob"]
    assert grade_class.student_arguments(students, ["bob", "dee"]) == ["--CourseDirectory.student_id_exclude=ann,cy"]
    assert grade_class.student_arguments(students, students) == []


class FakeNbgrader:
    """`subprocess.run` for autograde_batch: writes the autograded notebooks of the students it grades, exits 1 when
    it leaves any out, and prints `log` whatever it does (a kernel can make nbgrader print lines of its choosing)."""

    def __init__(self, course: Path, refuses=(), skips=(), log=""):
        self.course, self.refuses, self.skips, self.log, self.calls = course, set(refuses), set(skips), log, []

    def __call__(self, command, **kwargs):
        selected = [a.split("=", 1)[1] for a in command if a.startswith("--student=")]
        excluded = {s for a in command if a.startswith("--CourseDirectory.student_id_exclude=")
                    for s in a.split("=", 1)[1].split(",")}
        group = selected or [s for s in ["ann", "bob", "cy"] if s not in excluded]
        self.calls.append(group)
        for student in group:
            folder = self.course / "autograded" / student / ASSIGNMENT
            if student in self.refuses:          # nbgrader removes what it could not grade
                shutil.rmtree(folder, ignore_errors=True)
            elif student not in self.skips:      # and leaves alone what it graded before
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{NOTEBOOK}.ipynb").write_text(str(len(self.calls)))
        return subprocess.CompletedProcess(command, int(bool(self.refuses & set(group))), self.log, "")


def test_who_failed_is_read_from_the_autograded_folders_not_from_nbgrader_log(tmp_path, monkeypatch):
    forged = ("database is locked\n[AutogradeApp | ERROR] There was an error processing assignment "
              f"'{ASSIGNMENT}' for student 'ann'\n")
    fake = FakeNbgrader(tmp_path, log=forged)
    monkeypatch.setattr(grade_class.subprocess, "run", fake)
    run = grade_class.autograde_batch(tmp_path, ASSIGNMENT, ["ann", "bob", "cy"], ["ann", "bob", "cy"], [])
    assert run.failed == [] and run.returncode == 0 and fake.calls == [["ann", "bob", "cy"]]


def test_the_students_a_run_did_not_grade_are_retried_alone_and_then_named(tmp_path, monkeypatch):
    fake = FakeNbgrader(tmp_path, refuses={"bob"})
    monkeypatch.setattr(grade_class.subprocess, "run", fake)
    run = grade_class.autograde_batch(tmp_path, ASSIGNMENT, ["ann", "bob", "cy"], ["ann", "bob", "cy"], [])
    assert run.failed == ["bob"] and run.returncode == 1
    assert fake.calls == [["ann", "bob", "cy"]] + [["bob"]] * (grade_class.RETRIES - 1)


def test_a_student_graded_before_and_skipped_in_a_failed_run_is_not_named(tmp_path, monkeypatch):
    """nbgrader skips a submission graded before (its folder unchanged); in a run that failed for somebody else,
    that folder alone cannot tell, so the student is run again alone: nbgrader exits 0, and nobody is blamed."""
    done = tmp_path / "autograded" / "cy" / ASSIGNMENT
    done.mkdir(parents=True)
    (done / f"{NOTEBOOK}.ipynb").write_text("graded earlier")
    fake = FakeNbgrader(tmp_path, refuses={"bob"}, skips={"cy"})
    monkeypatch.setattr(grade_class.subprocess, "run", fake)
    before = grade_class.autograded(tmp_path, "cy", ASSIGNMENT)
    assert grade_class.not_graded(tmp_path, ASSIGNMENT, ["cy"], {"cy": before}, 1) == ["cy"]
    assert grade_class.not_graded(tmp_path, ASSIGNMENT, ["cy"], {"cy": before}, 0) == []
    run = grade_class.autograde_batch(tmp_path, ASSIGNMENT, ["ann", "bob", "cy"], ["ann", "bob", "cy"], [])
    assert run.failed == ["bob"]
    assert fake.calls == [["ann", "bob", "cy"]] + [["bob"]] * (grade_class.RETRIES - 1) + [["cy"]]


def test_the_log_is_shown_with_its_control_characters_visible():
    assert grade_class.printable("ok\tline\n\x1b[2Jgone\r") == "ok\tline\n\\x1b[2Jgone\\x0d"


@pytest.mark.slow
def test_a_class_graded_in_parallel_is_graded_exactly_once(tmp_path, monkeypatch, capsys):
    course = coursework.make_course(tmp_path / "course")
    solution = submissions.solution_text(ASSIGNMENT)
    untouched = (EXERCISES / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text(encoding="utf-8")
    kinds = {f"c{i}": solution for i in range(4)} | {"u0": untouched, "u1": untouched}
    for student, text in kinds.items():
        coursework.submit(course, student, ASSIGNMENT, {f"{NOTEBOOK}.ipynb": text})
    coursework.submit(course, "broken", ASSIGNMENT, {f"{NOTEBOOK}.ipynb": "this is not a notebook"})
    monkeypatch.setattr(grade_class, "BATCHES_PER_WORKER", 1)      # batches of 4 and 3: the exclusion path

    status = grade_class.main([ASSIGNMENT, "--course", str(course), "--workers", "2"])

    out = capsys.readouterr().out
    # a file that is not a notebook is graded too, as "not graded" with zero (addnorm_grading.structure)
    assert status == 0 and "FAILED" not in out and "graded 7 of 7 students" in out, out
    scores = coursework.scores(course)
    for student in [*kinds, "broken"]:
        result = scores[(student, ASSIGNMENT, NOTEBOOK)]
        expected = result["max_code"] if student.startswith("c") else 0
        assert result["max_code"] > 0 and result["code"] == expected, (student, result)
    with sqlite3.connect(course / "gradebook.db") as db:
        graded = db.execute("""
            SELECT student.id, count(*) FROM submitted_notebook
            JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id
            JOIN student ON submitted_assignment.student_id = student.id
            GROUP BY student.id""").fetchall()
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert dict(graded) == {student: 1 for student in kinds} | {"broken": 1}, graded
    for student in [*kinds, "broken"]:
        assert (course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb").is_file()


def test_a_course_without_submissions_grades_nobody(tmp_path: Path, capsys):
    assert grade_class.main([ASSIGNMENT, "--course", str(tmp_path)]) == 0
    assert "graded 0 of 0 students" in capsys.readouterr().out
