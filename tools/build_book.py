"""Build the website into _build/html, executing every chapter, warnings as errors.

Jupyter Book's execution cache does not notice a change in an imported module, so the
cache is dropped whenever a file under lib/ is newer than it, and always on CI (CI=true)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "_build" / ".jupyter_cache"


def newest_mtime(folder: Path) -> float:
    """The latest modification time of any Python file under folder."""
    return max((p.stat().st_mtime for p in folder.rglob("*.py")), default=0.0)


def drop_stale_cache() -> None:
    """Remove the execution cache on CI, or when the library changed after it was written."""
    if not CACHE.exists():
        return
    on_ci = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
    if on_ci or newest_mtime(ROOT / "lib") > CACHE.stat().st_mtime:
        shutil.rmtree(CACHE)


def build_command(root: Path) -> list[str]:
    """The jupyter-book command that builds the book in root: warnings are errors, every problem is reported."""
    return [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "-W", "-n", "--keep-going"]


def build(root: Path = ROOT) -> int:
    """Run jupyter-book on root; return its exit code."""
    env = dict(os.environ, ADDNORM_PROGRESS="0")   # no progress bars in the built pages
    return subprocess.call(build_command(root), cwd=root, env=env)


if __name__ == "__main__":
    drop_stale_cache()
    code = build()
    if code == 0:
        CACHE.mkdir(parents=True, exist_ok=True)
        CACHE.touch()
    sys.exit(code)
