"""The website builds with every chapter executed and warnings as errors — and a chapter that raises fails it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_BOOK = ROOT / "tools" / "build_book.py"         # what `make book` runs

CHAPTER_HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


@pytest.mark.slow
def test_every_chapter_in_the_toc_executes_and_the_book_builds(built_book: Path):
    toc = (ROOT / "_toc.yml").read_text()
    chapters = sorted(ROOT.glob("chapters/[0-9][0-9]_*.md"))
    assert chapters, "no chapters found"
    for chapter in chapters:
        assert f"file: chapters/{chapter.stem}" in toc, f"{chapter.name} is not in _toc.yml"
        page = built_book / "chapters" / f"{chapter.stem}.html"
        assert page.exists(), f"{page} was not built"
        html = page.read_text()
        assert "cell_output" in html, f"{chapter.name}: no executed output in the built page"
        # myst-nb renders an uncaught exception as an "output traceback" block
        assert 'class="output traceback' not in html, f"{chapter.name}: a traceback appears in the built page"


@pytest.mark.slow
def test_a_chapter_cell_that_raises_fails_the_build(tmp_path: Path):
    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    for folder in ("_ext", "static"):   # what the configuration refers to
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, book / folder)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: broken\n")
    (book / "intro.md").write_text("# A book with one broken chapter\n")
    (book / "broken.md").write_text(
        CHAPTER_HEADER + "# Broken\n\n```{code-cell} ipython3\nraise RuntimeError('this chapter is broken')\n```\n"
    )
    result = subprocess.run([sys.executable, str(BUILD_BOOK), str(book)], capture_output=True, text=True, cwd=book)
    assert result.returncode != 0, "a chapter whose cell raises must fail the build"
    assert "this chapter is broken" in result.stdout + result.stderr
