"""Grading a class in parallel (addnorm_grading.grade_class, `make grade`): several nbgrader processes, one gradebook.

The unit tests check how the students are handed out. The slow test grades a small class of 01_residual in
parallel, in the sandbox, with batches of several students per nbgrader process: every student graded exactly
once, the right scores, and a submission nbgrader cannot read named as failed without stopping anybody else.
"""

from __future__ import annotations

import sqlite3
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


def test_a_failed_run_names_its_students_from_nbgrader_log():
    log = ("[AutogradeApp | ERROR] There was an error processing assignment '01_residual' for student 'bob'\n"
           "[AutogradeApp | ERROR] Please see the the above traceback for details")
    assert grade_class.Run(["ann", "bob"], 1.0, 1, log).failed == ["bob"]
    assert grade_class.Run(["ann", "bob"], 1.0, 0, "").failed == []
    # nbgrader stopped before naming anybody (a crash, a locked gradebook): the whole batch counts as failed
    assert grade_class.Run(["ann", "bob"], 1.0, 1, "Traceback ...").failed == ["ann", "bob"]


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
