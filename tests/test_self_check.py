"""The learner's self-check (`make check`, addnorm_grading.self_check) on a learner's folder made for the test.

One run grades three exercises at once: 01 solved (the solutions' code in the learner's notebook), 02 half solved
(LayerNorm written, RMSNorm not) and 05 untouched. The printed scores and failing tests must match, the feedback
HTML must be written, and the learner's folder must be byte for byte what it was.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Page

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SOLVED, HALF, BLANK = "01_residual", "02_layer_norm", "05_positional_encoding"
HALF_WRITTEN = "layer_norm"        # the solution cell written in the half-solved notebook; its rms_norm one is not


def notebook_of(assignment: str) -> str:
    """The notebook file name of an exercise (its only .ipynb)."""
    return next((ROOT / "solutions" / assignment).glob("*.ipynb")).name


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata ({} if none)."""
    return cell.metadata.get("nbgrader", {})


def graded_tests(assignment: str) -> dict[str, float]:
    """The autograded test cells of an exercise (from solutions/, hidden tests included): grade id -> points."""
    nb = nbformat.read(ROOT / "solutions" / assignment / notebook_of(assignment), as_version=4)
    return {nbgrader_meta(c)["grade_id"]: float(nbgrader_meta(c)["points"]) for c in nb.cells
            if c.cell_type == "code" and nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")}


def learner_copy(assignment: str, solve=lambda grade_id: False) -> nbformat.NotebookNode:
    """The released exercise with the solutions' code in each solution cell whose grade id `solve` accepts."""
    solution = nbformat.read(ROOT / "solutions" / assignment / notebook_of(assignment), as_version=4)
    answers = {nbgrader_meta(c).get("grade_id"): c.source for c in solution.cells if nbgrader_meta(c).get("solution")}
    nb = nbformat.read(ROOT / "exercises" / assignment / notebook_of(assignment), as_version=4)
    for cell in nb.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if nbgrader_meta(cell).get("solution") and solve(grade_id):
            cell.source = answers[grade_id]
    return nb


def folder_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under folder (relative path -> hash)."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def self_check(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Run the self-check once on a made-up learner's folder; return its output, exit code, folders and hashes.
    (Session-scoped: pytest-playwright's browser parameter moves the browser test to the end of the session, and a
    module-scoped fixture would be made again for it.)"""
    base = tmp_path_factory.mktemp("learner")
    exercises, feedback = base / "exercises", base / "feedback-self"
    copies = {SOLVED: learner_copy(SOLVED, lambda grade_id: True),
              HALF: learner_copy(HALF, lambda grade_id: grade_id == HALF_WRITTEN),
              BLANK: learner_copy(BLANK)}
    half_ids = [nbgrader_meta(c).get("grade_id") for c in copies[HALF].cells if nbgrader_meta(c).get("solution")]
    assert HALF_WRITTEN in half_ids, f"{HALF} has no solution cell {HALF_WRITTEN!r}: {half_ids}"
    for assignment, nb in copies.items():
        (exercises / assignment).mkdir(parents=True)
        nbformat.write(nb, exercises / assignment / notebook_of(assignment))
    before = folder_hashes(exercises)
    result = subprocess.run([sys.executable, "-m", "addnorm_grading.self_check", SOLVED, HALF, BLANK,
                             "--exercises", str(exercises), "--feedback", str(feedback)],
                            cwd=ROOT, capture_output=True, text=True, timeout=1200)
    return {"out": result.stdout, "err": result.stderr, "code": result.returncode, "feedback": feedback,
            "before": before, "after": folder_hashes(exercises)}


def section(output: str, assignment: str) -> str:
    """The lines the self-check printed for one exercise."""
    match = re.search(rf"^{assignment}/.*?(?=^\S|\Z)", output, re.M | re.S)
    assert match, f"nothing printed for {assignment}:\n{output}"
    return match.group(0)


def score_line(text: str) -> tuple[float, float]:
    """(score, max) from '01_residual/residual.ipynb: 7 / 9 points (…)'."""
    match = re.search(r":\s*([\d.]+) / ([\d.]+) points?", text)
    assert match, text
    return float(match.group(1)), float(match.group(2))


def failed_ids(text: str) -> list[str]:
    """The grade ids listed as FAILED, each with a message on the line below."""
    return re.findall(r"^\s+FAILED (\S+) \([\d.]+ points?\)\n\s+\S", text, re.M)


def test_the_learners_files_are_not_changed(self_check) -> None:
    """The learner's folder holds the same files with the same bytes after the self-check."""
    assert self_check["after"] == self_check["before"], "the self-check changed or added files in exercises/"


def test_a_solved_exercise_scores_full_marks(self_check) -> None:
    """The solutions' code in the learner's notebook earns every point, hidden tests included."""
    text = section(self_check["out"], SOLVED)
    assert score_line(text) == (sum(graded_tests(SOLVED).values()),) * 2, text
    assert "all tests pass" in text and not failed_ids(text), text


def test_a_blank_exercise_scores_zero_and_lists_every_test(self_check) -> None:
    """The untouched exercise earns nothing, and every test (hidden ones too) is listed with its message."""
    text = section(self_check["out"], BLANK)
    assert score_line(text) == (0, sum(graded_tests(BLANK).values())), text
    assert sorted(failed_ids(text)) == sorted(graded_tests(BLANK)), text
    assert "YOUR CODE HERE" in text, "the message does not say that code is still missing"


def test_a_half_solved_exercise_scores_partial_marks(self_check) -> None:
    """LayerNorm written, RMSNorm not: the LayerNorm tests pass, the RMSNorm ones fail with their message."""
    text = section(self_check["out"], HALF)
    score, maximum = score_line(text)
    assert 0 < score < maximum == sum(graded_tests(HALF).values()), text
    failed = failed_ids(text)
    assert failed and all("rms" in grade_id for grade_id in failed), f"expected only RMSNorm tests to fail: {text}"


def test_feedback_is_written_and_the_exit_code_says_not_done(self_check) -> None:
    """Each exercise's nbgrader feedback HTML lands in the feedback folder; the exit code is 1 while a test fails."""
    for assignment in (SOLVED, HALF, BLANK):
        html = self_check["feedback"] / assignment / notebook_of(assignment).replace(".ipynb", ".html")
        assert html.is_file() and "<html" in html.read_text(encoding="utf-8")[:2000].lower(), html
        assert str(html) in self_check["out"], f"the output does not say where {html.name} is"
    assert self_check["code"] == 1, (self_check["code"], self_check["err"][-3000:])
    assert "instructor's tests may differ" in self_check["out"]


def test_feedback_formulas_render_offline(self_check, page: Page) -> None:
    """The feedback HTML, opened as a file with every other request aborted, typesets its formulas with the local
    MathJax in feedback-self/_mathjax (nbgrader's own template would load MathJax from a CDN)."""
    html = self_check["feedback"] / HALF / notebook_of(HALF).replace(".ipynb", ".html")
    assert "cdnjs" not in html.read_text(encoding="utf-8"), "the feedback still loads MathJax from a CDN"
    outside: list[str] = []
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
               else (outside.append(route.request.url), route.abort()))
    page.goto(html.as_uri())
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
    page.evaluate("() => MathJax.startup.promise")
    assert page.locator("mjx-container").count() > 0, "no formula typeset in the feedback"
    assert page.locator("mjx-merror").count() == 0, "a formula failed to typeset"
    assert not outside, f"the feedback asked for {outside}"
