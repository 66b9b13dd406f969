"""The learner's notebooks, read (never changed, never run here): each exercise's setup and solution cells."""

from __future__ import annotations

from pathlib import Path

import nbformat

from addnorm_grading.capstone import COMPONENTS

ASSIGNMENTS = sorted(set(COMPONENTS.values()))


def notebook_of(folder: Path, assignment: str) -> Path | None:
    """DIR/<assignment>/<notebook>.ipynb (the one there; the first by name if several), or None."""
    found = sorted((folder / assignment).glob("*.ipynb"))
    return found[0] if found else None


def exercise_code(path: Path) -> dict:
    """{"setup": the code cells above the first solution cell, "cells": [[grade_id, source] of each solution cell]}."""
    nb = nbformat.read(path, as_version=4)
    setup, cells = [], []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cells.append([meta.get("grade_id", cell.get("id", "?")), cell.source])
        elif not cells and not meta.get("grade"):
            setup.append(cell.source)
    return {"setup": setup, "cells": cells}


def read_learner_code(folder: Path) -> dict[str, dict | None]:
    """assignment -> its code, or None when DIR has no notebook for it."""
    if not folder.is_dir():
        raise FileNotFoundError(f"--notebooks {folder}: expected a folder holding <assignment>/<notebook>.ipynb "
                                f"({', '.join(ASSIGNMENTS)}), but there is no such folder")
    code = {}
    for assignment in ASSIGNMENTS:
        path = notebook_of(folder, assignment)
        code[assignment] = exercise_code(path) if path else None
    if all(parts is None for parts in code.values()):
        raise FileNotFoundError(f"--notebooks {folder}: expected <assignment>/<notebook>.ipynb for "
                                f"{', '.join(ASSIGNMENTS)}; found none of them")
    return code
