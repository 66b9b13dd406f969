"""Learner notebooks written from the instructor's: how the grading tests and benches make a submission.

A mistake or a correct program written differently is a text replacement in the solution code
(`with_replacements`); a hostile submission is an extra cell just before the first test (`with_cell_before_tests`).
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from addnorm_grading.coursework import SOURCE, assignments, course_root


def solution_text(assignment: str, source: Path | None = None) -> str:
    """The instructor notebook of `assignment` (its one notebook under solutions/<assignment>/), as text."""
    source = source or course_root() / SOURCE
    (notebook,) = [name for a, name in assignments(source) if a == assignment]
    return (source / assignment / f"{notebook}.ipynb").read_text(encoding="utf-8")


def with_replacements(assignment: str, replacements: list[tuple[str, str]], source: Path | None = None) -> str:
    """The instructor notebook with text replacements in its solution code (each must apply exactly once):
    how the grading tests write a learner's mistake, or a correct program written differently."""
    nb = nbformat.reads(solution_text(assignment, source), as_version=4)
    solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    for old, new in replacements:
        if sum(c.source.count(old) for c in solution_cells) != 1:
            raise ValueError(f"{old!r} is not exactly once in {assignment}'s solution code")
        for cell in solution_cells:
            cell.source = cell.source.replace(old, new)
    return nbformat.writes(nb)


def with_cell_before_tests(text: str, code: str) -> str:
    """A notebook (as text) with `code` as a new cell just before its first test cell: how the sandbox tests and
    the bench write a hostile submission."""
    nb = nbformat.reads(text, as_version=4)
    first_test = next(i for i, cell in enumerate(nb.cells)
                      if cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code")
    nb.cells.insert(first_test, nbformat.v4.new_code_cell(code))
    return nbformat.writes(nb)


def learner_folder(folder: Path, assignments_: list[str], changes: dict[str, str] | None = None) -> Path:
    """The solutions of `assignments_` laid out as a learner's fetched notebooks, folder/<assignment>/<notebook>.ipynb,
    with the notebook texts in `changes` in place of the solutions': how the capstone's tests and bench make one."""
    for assignment, notebook in assignments(course_root() / SOURCE):
        if assignment in assignments_:
            (folder / assignment).mkdir(parents=True)
            text = (changes or {}).get(assignment) or solution_text(assignment)
            (folder / assignment / f"{notebook}.ipynb").write_text(text, encoding="utf-8")
    return folder
