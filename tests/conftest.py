"""Shared fixtures: the repository root, and the book built once per test session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's top folder."""
    return ROOT


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the website once (every chapter executed, warnings as errors); return _build/html."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_book.py")],
        cwd=ROOT, capture_output=True, text=True,
    )
    if result.returncode != 0:
        pytest.fail(f"the book build failed (exit {result.returncode}):\n{result.stdout[-8000:]}\n{result.stderr[-8000:]}")
    return ROOT / "_build" / "html"
