"""The website builds with every chapter executed and warnings as errors — and a chapter that raises fails it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
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


PROBE_CHAPTER = CHAPTER_HEADER + """# Probe

```{code-cell} ipython3
from addnorm import _probe
print(f"the library says {_probe.value()}")
```
"""


def make_book(book: Path) -> str:
    """`make book` in `book`, with its own lib/ first on the path (as the course's lib/ is, installed editable)."""
    env = {**os.environ, "PYTHONPATH": str(book / "lib"), "CI": ""}
    result = subprocess.run(["make", "-C", str(book), "book", "STAMP=venv-ready"], capture_output=True, text=True,
                            env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return (book / "_build" / "html" / "probe.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_library_change_executes_the_chapters_again_and_rebuilds_their_pages(tmp_path: Path):
    """`make book` after a change under lib/addnorm shows the new result in the page (the execution cache and
    Sphinx's own record of what it built are both dropped), and keeps showing it in a build without a change."""
    book = tmp_path / "book"
    book.mkdir()
    for name in ("Makefile", "pyproject.toml", "_config.yml", "tools", "_ext", "static"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, book / name)
    (book / ".venv").symlink_to(Path(sys.executable).parent.parent)     # the course's environment, not rebuilt
    (book / "venv-ready").touch()                                        # stands in for .venv/.installed
    library = book / "lib" / "addnorm"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text("")
    (library / "_probe.py").write_text("def value() -> int:\n    return 41\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: probe\n")
    (book / "intro.md").write_text("# A book with one chapter\n")
    (book / "probe.md").write_text(PROBE_CHAPTER)
    assert "the library says 41" in make_book(book)
    time.sleep(1.1)                                                      # a newer modification time
    (library / "_probe.py").write_text("def value() -> int:\n    return 42\n")
    page = make_book(book)
    assert "the library says 42" in page, "the page still shows what the old library computed"
    assert "the library says 42" in make_book(book)                     # nothing changed: still the same page
