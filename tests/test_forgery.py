"""Grades no learner code can forge, hidden tests that never leave the grader.

- What gets into grading: a submission placed in the exchange by hand with symbolic links to instructor files never
  brings their content into submitted/ (collect leaves links out: addnorm_grading.exchange.SafeCollect).
- Cheats (tests/cheats.py), each graded with a plain `nbgrader autograde` of a judged exercise (one with hidden checks
  in checks/): none scores more than the same notebook without it, and no line of a hidden check reaches its
  autograded outputs or its feedback.

The test budget: every cheat written against one exercise (SPECIFIC) runs on it, and the cheats that work on any
exercise (CHEATS) are spread over the judged exercises, each graded on one of them (a different one for each
cheat, in turn). ADDNORM_CHEATS=all grades every cheat on every judged exercise: `bench/forgery.py` does, and times it.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from addnorm_grading import coursework, secret
from addnorm_grading.course import read_course
from addnorm_grading.exchange import links_in
from cheats import CHEATS, GARBAGE, OUT_OF_SCOPE, SPECIFIC

pytestmark = pytest.mark.slow


def inbound_folder(exchange: Path, course_id: str, student: str, assignment: str) -> Path:
    """A submission as `nbgrader submit` lays it out in the exchange's inbound folder (made by hand here)."""
    folder = exchange / course_id / "inbound" / f"{student}+{assignment}+2026-12-01 10:00:00.000000 UTC+abcdef"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2026-12-01 10:00:00.000000 UTC")
    return folder


def test_collect_follows_no_symbolic_link(tmp_path):
    course = coursework.make_course(tmp_path / "course")
    course_id = read_course(course / "course.toml").id
    exchange = tmp_path / "exchange"
    solution = course / "solutions" / "01_residual" / "residual.ipynb"
    (course / "gradebook.db").touch()

    ann = inbound_folder(exchange, course_id, "ann", "01_residual")
    (ann / "residual.ipynb").write_text((course / "exercises" / "01_residual" / "residual.ipynb").read_text())
    (ann / "answers.ipynb").symlink_to(solution)                    # a link to the instructor's notebook
    (ann / "grades.db").symlink_to(course / "gradebook.db")        # to the gradebook
    (ann / "all").symlink_to(course / "solutions")                  # to a whole folder
    (ann / "sub").mkdir()
    (ann / "sub" / "deeper.ipynb").symlink_to(solution)            # one folder down
    # a submission folder that is itself a link to the instructor's notebooks
    bob = exchange / course_id / "inbound" / "bob+01_residual+2026-12-01 10:00:00.000000 UTC+abcdef"
    bob.symlink_to(course / "solutions" / "01_residual", target_is_directory=True)

    # the files are the test's, not ann's: ownership is tested in tests/test_feedback_service.py
    result = coursework.run_nbgrader(["collect", "01_residual", f"--Exchange.root={exchange}",
                                      "--ExchangeCollect.check_owner=False"], course)
    log = result.stdout + result.stderr

    collected = course / "submitted" / "ann" / "01_residual"
    assert (collected / "residual.ipynb").is_file(), log
    assert links_in(str(collected)) == [], links_in(str(collected))
    names = sorted(str(p.relative_to(collected)) for p in collected.rglob("*"))
    assert names == ["residual.ipynb", "sub", "timestamp.txt"], names
    assert "BEGIN SOLUTION" not in "".join(p.read_text() for p in collected.rglob("*") if p.is_file())
    assert "symbolic links left out" in log and "answers.ipynb" in log, log[-3000:]
    assert not (course / "submitted" / "bob" / "01_residual").exists(), "a submission folder that is a link was collected"
    assert "is a symbolic link" in log, log[-3000:]
    assert os.path.islink(bob)                                      # nothing was changed in the exchange


# ---- cheating submissions (tests/cheats.py), graded with a plain `nbgrader autograde` -----------------------

ROOT = Path(__file__).resolve().parent.parent
# A judged exercise is one with hidden checks in checks/<assignment>/; its notebook is the one in solutions/.
JUDGED = {folder.name: next((ROOT / "solutions" / folder.name).glob("*.ipynb")).name
          for folder in sorted((ROOT / "checks").iterdir()) if folder.is_dir()}
EVERY_CHEAT_EVERYWHERE = os.environ.get("ADDNORM_CHEATS") == "all"


def cheats_of(assignment: str) -> dict[str, tuple[str, str]]:
    """Every cheat that can be graded on `assignment`: the generic ones and those written against it."""
    return {**CHEATS, **SPECIFIC.get(assignment, {})}


def graded_cheats(assignment: str) -> list[str]:
    """The cheats this run grades on `assignment` (see the module's docstring for the budget)."""
    if EVERY_CHEAT_EVERYWHERE:
        return sorted(cheats_of(assignment))
    judged = sorted(JUDGED)
    spread = [cheat for i, cheat in enumerate(sorted(CHEATS)) if judged[i % len(judged)] == assignment]
    return sorted(spread + list(SPECIFIC.get(assignment, {})))


CASES = [(assignment, cheat) for assignment in JUDGED for cheat in graded_cheats(assignment)]


def with_code_at_the_end_of_the_last_solution_cell(text: str, code: str) -> str:
    nb = nbformat.reads(text, as_version=4)
    last = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"][-1]
    last.source += "\n" + code
    return nbformat.writes(nb)


def hidden_lines(assignment: str) -> list[str]:
    """The lines of an assignment's hidden checks that a learner never sees (those of its released notebook aside)."""
    released = (ROOT / "exercises" / assignment / JUDGED[assignment]).read_text(encoding="utf-8")
    released_lines = {line.strip() for cell in nbformat.reads(released, as_version=4).cells
                      for line in cell.source.splitlines()}
    lines = {line.strip() for path in (ROOT / "checks" / assignment).glob("*.py")
             for line in path.read_text(encoding="utf-8").splitlines()}
    return sorted(line for line in lines - released_lines if len(line) >= 12 and not line.startswith("#"))


def grade_cheats(course: Path, assignment: str) -> dict:
    """Grade that exercise's cheats and their two bases in `course` (one autograde run, one generate_feedback run)."""
    notebook = JUDGED[assignment]
    blank = (course / "exercises" / assignment / notebook).read_text(encoding="utf-8")
    bases = {"blank": blank, "garbage": with_code_at_the_end_of_the_last_solution_cell(blank, GARBAGE[assignment])}
    for name, text in bases.items():
        coursework.submit(course, f"base-{name}", assignment, {notebook: text})
    for name in graded_cheats(assignment):
        base, code = cheats_of(assignment)[name]
        coursework.submit(course, name, assignment, {
            notebook: with_code_at_the_end_of_the_last_solution_cell(bases[base], code)})
    for name, code in OUT_OF_SCOPE.get(assignment, {}).items():
        coursework.submit(course, name, assignment, {
            notebook: with_code_at_the_end_of_the_last_solution_cell(blank, code)})
    result = coursework.run_nbgrader(["autograde", assignment, "--force"], course, check=False, timeout=3000)
    coursework.run_nbgrader(["generate_feedback", assignment, "--force"], course, check=False, timeout=1200)
    return dict(course=course, scores=coursework.scores(course), log=result.stdout + result.stderr)


@pytest.fixture(scope="module")
def cheated(tmp_path_factory):
    """A function: `cheated(assignment)` returns what the tests read of that exercise's graded cheats. Each judged
    exercise is graded in a course folder of its own (copies of one), as many at a time as there are cores (a
    notebook's kernel works on one)."""
    base = tmp_path_factory.mktemp("cheats")
    course = coursework.make_course(base / "course")
    courses = {assignment: Path(shutil.copytree(course, base / assignment)) for assignment in JUDGED}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        runs = {assignment: pool.submit(grade_cheats, folder, assignment) for assignment, folder in courses.items()}
        graded = {assignment: run.result() for assignment, run in runs.items()}
    return graded.__getitem__


def test_there_are_at_least_twenty_cheats_per_judged_exercise():
    assert JUDGED, "no judged exercise: checks/ has no assignment folder"
    assert all(len(cheats_of(assignment)) >= 20 for assignment in JUDGED)
    assert all(assignment in GARBAGE for assignment in JUDGED), "every judged exercise needs a GARBAGE base"


def test_the_spread_grades_every_cheat_once():
    spread = [cheat for assignment in JUDGED for cheat in graded_cheats(assignment) if cheat in CHEATS]
    assert EVERY_CHEAT_EVERYWHERE or sorted(spread) == sorted(CHEATS)


@pytest.mark.parametrize("assignment, cheat", CASES)
def test_a_cheat_scores_no_more_than_the_notebook_without_it(cheated, assignment, cheat):
    graded = cheated(assignment)
    base = cheats_of(assignment)[cheat][0]
    notebook = JUDGED[assignment][:-6]
    blank = graded["scores"][("base-blank", assignment, notebook)]["code"]
    assert blank == 0, f"the blank {assignment} notebook alone should score zero, it scores {blank}"
    without = graded["scores"][(f"base-{base}", assignment, notebook)]["code"]
    key = (cheat, assignment, notebook)
    assert key in graded["scores"], f"{cheat} was not graded:\n{graded['log'][-3000:]}"
    assert graded["scores"][key]["code"] <= without, f"{cheat} scores {graded['scores'][key]}, without it {without}"


@pytest.mark.parametrize("assignment, cheat", CASES)
def test_no_hidden_test_line_reaches_a_cheats_feedback(cheated, assignment, cheat):
    course, notebook = cheated(assignment)["course"], JUDGED[assignment]
    autograded = nbformat.read(course / "autograded" / cheat / assignment / notebook, as_version=4)
    outputs = nbformat.writes(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(outputs=c.get("outputs", [])) for c in autograded.cells if c.cell_type == "code"]))
    feedback = (course / "feedback" / cheat / assignment / notebook.replace(".ipynb", ".html")).read_text(encoding="utf-8")
    feedback = html.unescape(re.sub(r"<[^>]+>", "", feedback))    # the words, as the learner reads them
    submitted = "\n".join(cell.source for cell in nbformat.read(course / "submitted" / cheat / assignment / notebook,
                                                                 as_version=4).cells)     # as written, not as JSON
    whole = "\n".join(strings_in(json.loads((course / "autograded" / cheat / assignment / notebook).read_text(
        encoding="utf-8"))))                                     # every string of the notebook, its metadata too
    for line in hidden_lines(assignment):
        if line in submitted:                  # the cheat's own code happens to hold it (`import addnorm`)
            continue
        assert line not in outputs, f"{cheat}: a hidden line in the autograded outputs: {line!r}"
        assert line not in feedback, f"{cheat}: a hidden line in the feedback: {line!r}"
        assert line not in whole, f"{cheat}: a hidden line in the autograded notebook (its metadata): {line!r}"
    for secret_text in secret_texts(course, assignment, nbformat.read(course / "autograded" / cheat / assignment /
                                                                      notebook, as_version=4)):
        for where, text in (("autograded notebook", whole), ("feedback", feedback)):
            assert secret_text not in text, f"{cheat}: the course's secret or a SEED in the {where}: {secret_text!r}"


def strings_in(data) -> list[str]:
    """Every string in a JSON document (keys too), as written (unescaped)."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [text for key, value in data.items() for text in [key, *strings_in(value)]]
    if isinstance(data, list):
        return [text for value in data for text in strings_in(value)]
    return []


def secret_texts(course: Path, assignment: str, graded: nbformat.NotebookNode) -> list[str]:
    """The course's secret (hex) and each hidden test's SEED of this assignment (decimal) for the notebook `graded`
    (its code decides its seeds) and outside a notebook, as they would be written."""
    key = secret.read(course / "checks")
    digest = secret.submission_digest(graded)
    seeds = [secret.seed_for(key, assignment, path.stem, submission) for submission in ("", digest)
             for path in (course / "checks" / assignment).glob("test_*.py")]
    return [key.hex(), *(str(seed) for seed in seeds)]


@pytest.mark.parametrize("assignment", sorted(JUDGED))
def test_a_test_cell_holds_exactly_its_verdict(cheated, assignment):
    """After autograde, a test cell has no output or one AssertionError whose message is its whole traceback."""
    graded = cheated(assignment)
    students = ["base-blank", "base-garbage"] + [cheat for cheat in ("pre_run_hook_prints_source", "displayhook_result")
                                                 if cheat in graded_cheats(assignment)]
    for student in students:
        nb = nbformat.read(graded["course"] / "autograded" / student / assignment / JUDGED[assignment], as_version=4)
        tests = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]
        assert tests
        for cell in tests:
            assert len(cell.outputs) <= 1, (student, cell.outputs)
            for output in cell.outputs:
                assert output.output_type == "error" and output.ename == "AssertionError", output
                assert output.traceback == [output.evalue], output


@pytest.mark.parametrize("assignment, name", [(a, name) for a in OUT_OF_SCOPE for name in OUT_OF_SCOPE[a]])
def test_out_of_scope_a_builtin_behind_the_guards_back_keeps_every_point(cheated, assignment, name):
    """Today's behaviour, recorded (the guide says it is not guaranteed): exercise 2's guard against torch's built-in
    norms runs in the learner's process, so code that switches it off around F.layer_norm scores full marks."""
    graded = cheated(assignment)
    score = graded["scores"][(name, assignment, JUDGED[assignment][:-6])]
    assert score["code"] == score["max_code"], f"{name} scores {score}: if the guard now holds, move it to the cheats"
