"""Writes the shared test helpers (`addnorm_grading.helper_source`) into the solution notebooks' helpers cells
and into the hidden checks (checks/<assignment>/*.py) that use them; those only hidden checks share come from the
instructor's checks/_helpers.py.

A helpers cell, or a hidden check, takes shared helpers with a pair of lines around them:

    # [shared helpers: _withhold, _run]      (the names, in order)
    … their code, written here by `make exercises` …
    # [end of shared helpers]

`sync` rewrites what is between such lines from the one source; `python -m addnorm_grading.helpers solutions
checks` does it for every notebook and hidden check (make exercises runs it first), `--check` only says which
files differ.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.resources import files
from pathlib import Path

import nbformat

from addnorm_grading.parsing import parse

HELPERS_CELL = "test_helpers"
BLOCK = re.compile(r"^# \[shared helpers: (?P<names>[\w, ]+)\]\n(?P<body>.*?)^# \[end of shared helpers\]$",
                   re.MULTILINE | re.DOTALL)


HIDDEN_SOURCE = "_helpers.py"          # checks/_helpers.py: the helpers only hidden checks share


def _definitions(text: str) -> dict[str, str]:
    return {node.name: ast.get_source_segment(text, node) for node in parse(text).body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def helper_sources(checks: Path | None = None) -> dict[str, str]:
    """Each shared helper's code, by name: helper_source.py's, and with `checks` (a course's checks/ folder) the
    hidden ones of checks/_helpers.py too."""
    sources = _definitions((files("addnorm_grading") / "helper_source.py").read_text(encoding="utf-8"))
    if checks is not None and (checks / HIDDEN_SOURCE).is_file():
        sources.update(_definitions((checks / HIDDEN_SOURCE).read_text(encoding="utf-8")))
    return sources


def filled(source: str, sources: dict[str, str]) -> str:
    """A helpers cell's source with every shared-helpers block written from `sources`."""
    def block(match: re.Match) -> str:
        names = [name.strip() for name in match["names"].split(",")]
        unknown = [name for name in names if name not in sources]
        if unknown:
            raise ValueError(f"shared helpers {unknown} are not in helper_source.py or checks/{HIDDEN_SOURCE} "
                             f"(they have {sorted(sources)})")
        body = "\n\n\n".join(sources[name] for name in names)
        return f"# [shared helpers: {', '.join(names)}]\n{body}\n# [end of shared helpers]"
    return BLOCK.sub(block, source)


def sync(path: Path, write: bool = True) -> bool:
    """Fill a notebook's helpers cell, or a hidden check, from the one source; True when it was (or, with
    write=False, would be) changed."""
    if path.suffix == ".py":                        # a hidden check: checks/<assignment>/<grade_id>.py
        text = path.read_text(encoding="utf-8")
        new = filled(text, helper_sources(path.parent.parent))
        if new != text and write:
            path.write_text(new, encoding="utf-8")
        return new != text
    nb = nbformat.read(path, as_version=4)
    sources, changed = helper_sources(), False
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade_id") == HELPERS_CELL:
            new = filled(cell.source, sources)
            changed |= new != cell.source
            cell.source = new
    if changed and write:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str]) -> int:
    check = "--check" in argv
    folders = [Path(arg) for arg in argv if arg != "--check"] or [Path("solutions"), Path("checks")]
    files_ = [path for folder in folders for pattern in ("*/*.ipynb", "*/*.py") for path in sorted(folder.glob(pattern))]
    stale = [path for path in files_ if sync(path, write=not check)]
    for path in stale:
        print(f"{path}: shared test helpers {'differ from' if check else 'rewritten from'} addnorm_grading/helper_source.py")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
