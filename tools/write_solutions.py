"""Write the five instructor notebooks (nbgrader "source" versions) into solutions/<id>/<name>.ipynb.

The notebooks' text, solution code and tests live in tools/solution_cells/ (one module per
exercise, cells as plain strings); this script only turns them into notebooks with the nbgrader
cell metadata. Edit a module there, then run

    .venv/bin/python tools/write_solutions.py      # rewrite solutions/
    make exercises                                 # regenerate the learner versions

`--check` writes nothing and exits 1 when solutions/ differs from what this script would write
(tests/test_grading.py uses it, so hand edits to solutions/*.ipynb are caught).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from solution_cells import EXERCISES  # noqa: E402  (the list of (assignment id, notebook name, module))

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3"}


def build_notebook(module_name: str) -> nbformat.NotebookNode:
    """The notebook described by tools/solution_cells/<module_name>.py, with deterministic cell ids."""
    module = importlib.import_module(f"solution_cells.{module_name}")
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": LANGUAGE_INFO}
    nb.cells = [cell.to_cell() for cell in module.CELLS]
    plain = 0
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is None:
            plain += 1
        cell.id = grade_id.replace("_", "-") if grade_id else f"{module_name.replace('_', '-')}-{plain}"
    nbformat.validate(nb)
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    """The notebook as nbformat writes it to disk (sorted keys, one-space indent, final newline)."""
    return nbformat.writes(nb) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write (or, with --check, compare) every instructor notebook; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with solutions/ instead of writing")
    parser.add_argument("--out", type=Path, default=ROOT / "solutions", help="folder to write into")
    args = parser.parse_args(argv)
    stale = []
    for assignment, name, module_name in EXERCISES:
        path = args.out / assignment / f"{name}.ipynb"
        text = render(build_notebook(module_name))
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path.relative_to(args.out.parent)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if stale:
        print("out of date (run .venv/bin/python tools/write_solutions.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
