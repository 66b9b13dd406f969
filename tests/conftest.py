"""Shared fixtures: the repository root, the book built once per test session, and the browser pytest-playwright launches."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")    # Debian's; Playwright's own browser download does not work offline
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's top folder."""
    return ROOT


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the website once with `make book` (every chapter executed, warnings as errors); return _build/html."""
    result = subprocess.run(["make", "--no-print-directory", "book"], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"the book build failed (exit {result.returncode}):\n{result.stdout[-8000:]}\n{result.stderr[-8000:]}")
    return ROOT / "_build" / "html"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """pytest-playwright's browser is Debian's headless Chromium; the tests fail (never skip) when it is missing."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: the browser tests need Debian's Chromium. Install it with `make browser` "
                    "(or `apt-get install -y chromium`); `playwright install` downloads a browser and fails offline.")
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM), "args": CHROMIUM_ARGS}
