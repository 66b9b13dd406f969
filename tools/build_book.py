"""Build the website into _build/html, executing every chapter, warnings as errors (`make book` runs this).

    python tools/build_book.py [BOOK_FOLDER]      (default: this repository)

Jupyter Book's execution cache does not notice a change in an imported module: the Makefile's `book` target
drops the cache when a file under lib/ changes, and on CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build_command(root: Path) -> list[str]:
    """The jupyter-book command that builds the book in root: warnings are errors, every problem is reported."""
    return [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "-W", "-n", "--keep-going"]


def build(root: Path = ROOT) -> int:
    """Run jupyter-book on root with no progress bars in the built pages; return its exit code."""
    env = dict(os.environ, TQDM_DISABLE="1", ADDNORM_BOOK_BUILD="1")   # no progress bars; glued values stay in the text
    return subprocess.call(build_command(root), cwd=root, env=env)


if __name__ == "__main__":
    sys.exit(build(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT))
