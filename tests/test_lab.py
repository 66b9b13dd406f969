"""JupyterLab as a learner meets it: `make lab`'s own command, served on 127.0.0.1 and opened in headless Chromium.

The command is read from `make --dry-run lab` (so the test follows the Makefile) and started with a free port, a
token and no browser of its own; the learner's Jupyter settings, workspaces and runtime files are replaced by empty
temporary folders, and autosave is off, so the test neither reads nor changes anything outside the repository and
never writes a chapter back; its checkpoints go to the temporary folder too. Every request to a host other than 127.0.0.1 is aborted.

Checked: the browser lands on exercises/; a chapter (a MyST Markdown file) opens as a Jupytext notebook with its MyST
rendered (headings, math, no raw `{role}` text), its first cells run and draw a figure; the chapter link inside an
exercise opens the chapter the same way; no file in chapters/ or exercises/ changes or appears.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shlex
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
START_TIMEOUT_S = 120
KERNEL_TIMEOUT_MS = 180_000          # a cold kernel imports torch, on a machine that may be busy
EXERCISES = sorted(p.name for p in (ROOT / "exercises").iterdir() if p.is_dir())
FIGURE_CHAPTER = "chapters/05_positional_encoding.md"   # its third code cell draws a heatmap in about a second
FIGURE_CELLS = 3
LINKED_CHAPTER = "chapters/02_layer_normalization.md"   # linked from exercises/02_layer_norm, full of {term} and {glue:text}
RAW_ROLES = ("{term}", "{glue:text}", "{glue}", "{numref}", "{ref}", "{doc}", "{download}")
# Test-only user settings: no autosave (the test must not write a chapter back), every cell rendered (no windowing).
USER_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def lab_command() -> str:
    """The `jupyter lab` line of `make --dry-run lab` (the course venv must be installed already)."""
    dry = subprocess.run(["make", "--dry-run", "--no-print-directory", "lab"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    lines = [line for line in dry if "jupyter lab" in line or "jupyter-lab" in line]
    if len(lines) != 1:
        pytest.fail(f"expected one `jupyter lab` line in `make --dry-run lab`, got:\n" + "\n".join(dry))
    return lines[0]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def course_files() -> dict[str, str]:
    """SHA-256 of every file in chapters/ and exercises/, to prove the browser session wrote or added none."""
    return {p.relative_to(ROOT).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in ("chapters", "exercises") for p in sorted((ROOT / folder).rglob("*")) if p.is_file()}


def private_jupyter_env(home: Path) -> dict[str, str]:
    """The environment with Jupyter's per-user folders moved to `home`, holding only the test's user settings."""
    settings = home / "lab-user-settings"
    for name, value in USER_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value), encoding="utf-8")
    return dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_RUNTIME_DIR=str(home / "runtime"),
                JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
                TQDM_DISABLE="1")


def wait_until_up(url: str, process: subprocess.Popen, log: Path) -> None:
    """Poll the server's status API until it answers; fail with its log if it exits or takes too long."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"`make lab`'s command exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer within {START_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`make lab`'s command on a free port with a token and no browser; yield the URL a learner would open first."""
    home = tmp_path_factory.mktemp("jupyter-home")
    port, token = free_port(), secrets.token_hex(16)
    command = (f"exec {lab_command()} --no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} "
               f"--ServerApp.port_retries=0 --IdentityProvider.token={shlex.quote(token)} "
               f"--FileCheckpoints.checkpoint_dir={shlex.quote(str(home / 'checkpoints'))}")   # not beside the notebooks
    log = home / "lab.log"
    before = course_files()
    with log.open("w") as out:
        process = subprocess.Popen(["bash", "-c", command], cwd=ROOT, env=private_jupyter_env(home),
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/api/status?token={token}", process, log)
        yield f"http://127.0.0.1:{port}/?token={token}"
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
    after = course_files()
    assert after == before, f"JupyterLab changed or added files: {sorted(set(after.items()) ^ set(before.items()))}"


@pytest.fixture
def context(context: BrowserContext) -> BrowserContext:
    """pytest-playwright's context, cut off from the network: a request to a host other than 127.0.0.1 is aborted."""
    context.set_default_timeout(60_000)
    context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname in LOOPBACK
                  else route.abort())
    return context


def open_in_lab(page: Page, lab: str, path: str) -> None:
    """Open `path` (relative to the course folder) in JupyterLab with its default viewer."""
    page.goto(lab.replace("/?token=", f"/lab/tree/{path}?token="))


def rendered_markdown(page: Page) -> str:
    """The text of the current notebook's rendered Markdown cells, once MyST has rendered the first heading."""
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell h1", timeout=120_000)
    return page.eval_on_selector_all(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell .myst",   # jupyterlab-myst
                                     "cells => cells.map(c => c.innerText).join('\\n')")


def raw_roles(text: str) -> list[str]:
    """Sphinx roles left as raw text (e.g. "{term}`residual stream`") in rendered Markdown."""
    return [role for role in RAW_ROLES if role in text]


def test_make_lab_lands_on_the_exercises(lab: str, page: Page) -> None:
    """Opening the server's front page (what `make lab` opens) lands in the file browser on exercises/."""
    page.goto(lab)
    page.wait_for_selector(".jp-DirListing-item")
    with contextlib.suppress(PlaywrightTimeoutError):      # the router may still be on its way; the assert says where
        page.wait_for_url("**/lab/tree/exercises", timeout=15_000)
    assert urlsplit(page.url).path == "/lab/tree/exercises", \
        f"make lab lands on {page.url}, not on exercises/ (JupyterLab honours --LabApp.default_url, not ServerApp's)"
    listed = page.eval_on_selector_all(".jp-DirListing-itemName", "items => items.map(i => i.innerText.trim())")
    assert sorted(listed) == EXERCISES, f"the file browser shows {listed}, not the exercise folders"


def test_a_chapter_opens_as_a_notebook_renders_and_runs(lab: str, page: Page) -> None:
    """A chapter opens as a notebook with MyST rendered (heading, math, no raw roles); its first cells draw a figure."""
    open_in_lab(page, lab, FIGURE_CHAPTER)
    text = rendered_markdown(page)
    panel = ".jp-NotebookPanel:not(.lm-mod-hidden)"
    assert "Positional encoding, added once" in text, text[:500]
    assert not raw_roles(text), f"raw roles in the rendered chapter: {raw_roles(text)}"
    assert page.locator(f"{panel} .jp-MarkdownCell .katex").count() > 0, "no formula typeset by MyST (KaTeX)"
    assert "```{" not in text and ":::{" not in text, "a MyST directive shown as raw text"
    page.wait_for_function("() => /Idle/.test(document.querySelector('#jp-main-statusbar').innerText)",
                           timeout=KERNEL_TIMEOUT_MS)                  # the chapter's kernel has started
    page.locator(f"{panel} .jp-MarkdownCell").first.click()
    page.keyboard.press("Escape")                                      # command mode
    queued = 0
    while queued < FIGURE_CELLS:                                       # run cell by cell up to the third code cell
        queued += page.locator(f"{panel} .jp-Cell.jp-mod-active.jp-CodeCell").count()
        page.keyboard.press("Shift+Enter")
    figure = page.locator(f"{panel} .jp-OutputArea-output img[src^='data:image/png']").first
    try:
        figure.wait_for(timeout=KERNEL_TIMEOUT_MS)
    except PlaywrightTimeoutError:
        prompts = page.locator(f"{panel} .jp-CodeCell .jp-InputPrompt").all_inner_texts()[:FIGURE_CELLS + 1]
        status = page.inner_text("#jp-main-statusbar")
        pytest.fail(f"no figure after running the first {FIGURE_CELLS} code cells: prompts {prompts}, status {status!r}")
    assert figure.evaluate("img => img.naturalWidth") > 100, "the figure did not load"
    errors = page.locator(f"{panel} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']")
    assert errors.count() == 0, errors.all_inner_texts()


def test_the_chapter_link_in_an_exercise_opens_the_chapter_as_a_notebook(lab: str, page: Page) -> None:
    """The exercise's "Read first" link opens the chapter as a rendered notebook; terms and glued values read as text."""
    open_in_lab(page, lab, "exercises/02_layer_norm/layer_norm.ipynb")
    link = page.locator(".jp-MarkdownCell a[href*='02_layer_normalization.md']").first
    link.click()
    page.wait_for_selector(f".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell h1:has-text('Layer normalization')",
                           timeout=120_000)
    text = rendered_markdown(page)
    assert not raw_roles(text), f"raw roles in the rendered chapter: {raw_roles(text)}"
    assert "layer normalization" in text and "Post-LN" in text, "the glossary terms are missing from the text"
