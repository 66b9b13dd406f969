"""The content of the five instructor notebooks, one module per exercise (see tools/write_solutions.py).

Each module defines CELLS, a list built from the helpers below:
- `markdown(text)` / `code(text)`: ordinary cells, no nbgrader metadata;
- `solution(grade_id, text)`: an autograded answer cell (its `### BEGIN SOLUTION` regions become stubs);
- `tests(grade_id, points, text)`: a locked autograder cell (its `### BEGIN HIDDEN TESTS` regions are removed
  from the learner version);
- `answer(grade_id, points, text)`: a manually graded written answer (its text becomes "YOUR ANSWER HERE").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from textwrap import dedent

import nbformat

# (assignment id, notebook name, module in this package) — the ids and names are fixed by issue 5.
EXERCISES = [
    ("01_residual", "residual", "nb01_residual"),
    ("02_layer_norm", "layer_norm", "nb02_layer_norm"),
    ("03_encoder_stack", "encoder_stack", "nb03_encoder_stack"),
    ("04_decoder_stack", "decoder_stack", "nb04_decoder_stack"),
    ("05_positional_encoding", "positional_encoding", "nb05_positional_encoding"),
]


def _clean(text: str) -> str:
    return dedent(text).strip("\n")


@dataclass
class Cell:
    """One notebook cell, with its nbgrader role (None for an ordinary cell)."""

    kind: str                      # "markdown" or "code"
    source: str
    nbgrader: dict | None = field(default=None)

    def to_cell(self) -> nbformat.NotebookNode:
        """The nbformat cell, with nbgrader metadata (schema 3) when it has a role."""
        make = nbformat.v4.new_markdown_cell if self.kind == "markdown" else nbformat.v4.new_code_cell
        cell = make(self.source)
        if self.nbgrader is not None:
            # nbgrader's LockCells makes locked cells read-only in the learner version.
            cell.metadata["nbgrader"] = dict(self.nbgrader, schema_version=3, task=False)
        return cell


def markdown(text: str) -> Cell:
    """An ordinary markdown cell."""
    return Cell("markdown", _clean(text))


def code(text: str) -> Cell:
    """An ordinary code cell (setup, a demonstration to run)."""
    return Cell("code", _clean(text))


def solution(grade_id: str, text: str) -> Cell:
    """A code cell the learner completes: `### BEGIN SOLUTION` … `### END SOLUTION` regions become stubs."""
    return Cell("code", _clean(text), {"grade": False, "solution": True, "locked": False, "grade_id": grade_id})


def tests(grade_id: str, points: int, text: str) -> Cell:
    """A locked autograder cell worth `points`; it passes when it raises nothing."""
    return Cell("code", _clean(text),
                {"grade": True, "solution": False, "locked": True, "grade_id": grade_id, "points": points})


def with_snippet(text: str, placeholder: str, snippet: str) -> str:
    """dedent(text) with `{placeholder}` replaced by snippet: helper code that several test cells carry.

    Each test cell must define what it uses (nbgrader runs and restores cells on their own), so a shared
    helper is written once here and pasted into every cell that names it.
    """
    return dedent(text).replace("{" + placeholder + "}", snippet)


def answer(grade_id: str, points: int, text: str) -> Cell:
    """A manually graded written answer worth `points`; `text` is the model answer and marking guide."""
    return Cell("markdown", _clean(text),
                {"grade": True, "solution": True, "locked": False, "grade_id": grade_id, "points": points})
