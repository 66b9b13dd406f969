"""The grading pipeline end to end (issue 5), in temporary nbgrader course directories.

One `nbgrader autograde` run grades a class of made-up students: the instructor solutions, the untouched learner
notebooks, a submission whose test cells were rewritten or deleted, one that never returns, and one that is not
a notebook at all. A second course, graded at the same time, holds one submission per classic mistake — each a
small text replacement of the solution code, listed in MISTAKES. Every notebook's kernel imports torch, so the
whole module takes a few minutes (marked slow).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import grading  # tools/grading.py (tools/ is on pytest's pythonpath, see pyproject.toml)
import nbformat
import pytest


pytestmark = pytest.mark.slow

ASSIGNMENTS = dict(grading.assignments())            # assignment id -> notebook name
CELL_TIMEOUT = 30                                    # seconds per cell in these runs (the config says 60)

# name -> (assignment, [(text in the solution code, its replacement), ...]). Each must cost points.
MISTAKES = {
    "post_pre_ln_swapped": ("01_residual", [("if self.norm_first:", "if not self.norm_first:")]),
    "residual_forgotten": ("01_residual", [("return self.norm(x + self.dropout(sublayer(x)))",
                                            "return self.norm(self.dropout(sublayer(x)))")]),
    "bessel_variance": ("02_layer_norm", [("variance = centered.pow(2).mean(dim=-1, keepdim=True)",
                                           "variance = x.var(dim=-1, keepdim=True)")]),
    "wrong_axis": ("02_layer_norm", [("mean = x.mean(dim=-1, keepdim=True)", "mean = x.mean(dim=0, keepdim=True)"),
                                     ("variance = centered.pow(2).mean(dim=-1, keepdim=True)",
                                      "variance = centered.pow(2).mean(dim=0, keepdim=True)")]),
    "eps_outside_sqrt": ("02_layer_norm", [("torch.sqrt(variance + self.eps)", "(torch.sqrt(variance) + self.eps)")]),
    "calls_F_layer_norm": ("02_layer_norm", [(
        "return centered / torch.sqrt(variance + self.eps) * self.weight + self.bias",
        "return torch.nn.functional.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)")]),
    "uses_nn_LayerNorm": ("02_layer_norm", [
        ("self.bias = nn.Parameter(torch.zeros(d_model))", "self.builtin = nn.LayerNorm(d_model)"),
        ("return centered / torch.sqrt(variance + self.eps) * self.weight + self.bias", "return self.builtin(x)")]),
    "encoder_post_pre_ln_swapped": ("03_encoder_stack", [("if self.norm_first:", "if not self.norm_first:")]),
    "encoder_residual_forgotten": ("03_encoder_stack", [("x = self.norm1(x + self.dropout(attend(x)))",
                                                         "x = self.norm1(self.dropout(attend(x)))")]),
    "encoder_shared_weights": ("03_encoder_stack", [(
        "self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))",
        "self.layers = nn.ModuleList([layer] * num_layers)")]),
    "no_causal_mask": ("04_decoder_stack", [("self.self_attn(h, h, h, attn_mask=mask)", "self.self_attn(h, h, h)")]),
    "inverted_causal_mask": ("04_decoder_stack", [("return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)",
                                                   "return ~torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)")]),
    "decoder_memory_is_x": ("04_decoder_stack", [("x = layer(x, memory)", "x = layer(x, x)")]),
    "decoder_memory_is_previous_output": ("04_decoder_stack", [("x = layer(x, memory)", "memory = x = layer(x, memory)")]),
    "sin_cos_swapped": ("05_positional_encoding", [("pe[:, 0::2] = torch.sin(angle)", "pe[:, 0::2] = torch.cos(angle)"),
                                                   ("pe[:, 1::2] = torch.cos(angle)", "pe[:, 1::2] = torch.sin(angle)")]),
    "sin_cos_not_interleaved": ("05_positional_encoding", [(
        "return pe.float()", "return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).float()")]),
    "no_sqrt_d_model_scaling": ("05_positional_encoding", [("self.tokens(tokens) * math.sqrt(self.d_model)",
                                                            "self.tokens(tokens)")]),
    "encoding_added_twice": ("05_positional_encoding", [("return x + self.position_table[: tokens.shape[1]]",
                                                         "return x + 2 * self.position_table[: tokens.shape[1]]")]),
}


# ---------------------------------------------------------------------------------------------- helpers

def solution_text(assignment: str) -> str:
    return (grading.SOLUTIONS / assignment / f"{ASSIGNMENTS[assignment]}.ipynb").read_text(encoding="utf-8")


def is_test_cell(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution") and cell.cell_type == "code"


def with_mistake(assignment: str, replacements: list[tuple[str, str]]) -> str:
    """The solution notebook with the replacements applied to its solution cells (each must apply)."""
    nb = nbformat.reads(solution_text(assignment), as_version=4)
    solution_cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
    for old, new in replacements:
        assert sum(c.source.count(old) for c in solution_cells) == 1, f"{old!r} is not exactly once in {assignment}'s solution code"
        for cell in solution_cells:
            cell.source = cell.source.replace(old, new)
    return nbformat.writes(nb)


def submit_notebook(course: Path, student: str, assignment: str, text: str | bytes) -> None:
    grading.submit(course, student, assignment, {f"{ASSIGNMENTS[assignment]}.ipynb": text})


def autograde(course: Path, *extra: str) -> subprocess.Popen:
    """Start `nbgrader autograde` (every assignment, every student) in the background."""
    command = [sys.executable, "-m", "nbgrader", "autograde", "*", f"--ExecutePreprocessor.timeout={CELL_TIMEOUT}", *extra]
    return subprocess.Popen(command, cwd=course, env=grading.nbgrader_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


# ---------------------------------------------------------------------------------------------- the class

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Two graded courses: "class" (the pipeline cases) and "mistakes" (one student per classic mistake)."""
    base = tmp_path_factory.mktemp("grading")
    course = grading.make_course(base / "class")
    mistakes = base / "mistakes"
    shutil.copytree(course, mistakes)                           # the same release and gradebook, graded separately

    for assignment in ASSIGNMENTS:
        submit_notebook(course, "full", assignment, solution_text(assignment))
        released = course / "exercises" / assignment / f"{ASSIGNMENTS[assignment]}.ipynb"
        submit_notebook(course, "blank", assignment, released.read_text(encoding="utf-8"))

    # rewritten test cells (on top of a real mistake), and deleted test cells (on top of another one)
    nb = nbformat.reads(with_mistake(*MISTAKES["post_pre_ln_swapped"]), as_version=4)
    for cell in nb.cells:
        if is_test_cell(cell):
            cell.source = "# all tests pass\npass"
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_helpers":     # the locked helpers cell
            cell.source = "_is_normalized = lambda t: True"
    submit_notebook(course, "tamper", "01_residual", nbformat.writes(nb))
    nb = nbformat.reads(with_mistake(*MISTAKES["bessel_variance"]), as_version=4)
    nb.cells = [cell for cell in nb.cells if not is_test_cell(cell)]
    submit_notebook(course, "tamper", "02_layer_norm", nbformat.writes(nb))

    # a learner's code cell deleted together with the test cell below it
    nb = nbformat.reads(solution_text("03_encoder_stack"), as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in ("encoder", "test_encoder_stack")]
    submit_notebook(course, "tamper", "03_encoder_stack", nbformat.writes(nb))

    # a submission that never returns: an infinite loop in RMSNorm.forward
    submit_notebook(course, "hang", "02_layer_norm", with_mistake("02_layer_norm", [(
        "mean_square = x.pow(2).mean(dim=-1, keepdim=True)",
        "while True:\n            pass\n        mean_square = x.pow(2).mean(dim=-1, keepdim=True)")]))

    # a file that is not notebook JSON
    submit_notebook(course, "broken", "03_encoder_stack", "{ this is not a notebook")

    for name, (assignment, replacements) in MISTAKES.items():
        submit_notebook(mistakes, name, assignment, with_mistake(assignment, replacements))

    started = time.monotonic()
    runs = {"class": autograde(course), "mistakes": autograde(mistakes)}   # two kernels at a time on two cores
    logs = {name: run.communicate()[0] for name, run in runs.items()}
    return {
        "course": course, "mistakes": mistakes, "log": logs["class"], "returncode": runs["class"].returncode,
        "mistakes_log": logs["mistakes"], "mistakes_returncode": runs["mistakes"].returncode,
        "scores": grading.scores(course), "mistake_scores": grading.scores(mistakes),
        "seconds": time.monotonic() - started,
    }


def score(scores, student: str, assignment: str) -> dict[str, float]:
    return scores[(student, assignment, ASSIGNMENTS[assignment])]


# ---------------------------------------------------------------------------------------------- grading

@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_solutions_score_full_marks(graded, assignment):
    result = score(graded["scores"], "full", assignment)
    assert result["max_code"] > 0 and result["code"] == result["max_code"], (result, graded["log"][-4000:])
    assert result["max_written"] > 0, "each notebook has a manually graded written answer"


@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_untouched_exercises_score_zero(graded, assignment):
    result = score(graded["scores"], "blank", assignment)
    assert result["code"] == 0 and result["max_code"] > 0, result
    autograded = graded["course"] / "autograded" / "blank" / assignment / f"{ASSIGNMENTS[assignment]}.ipynb"
    nb = nbformat.read(autograded, as_version=4)
    errors = [o.ename for c in nb.cells if is_test_cell(c) for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors and set(errors) <= {"NotImplementedError", "NameError"}, errors


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_each_classic_mistake_loses_points(graded, mistake):
    assignment, _ = MISTAKES[mistake]
    result = score(graded["mistake_scores"], mistake, assignment)
    assert result["code"] < result["max_code"], f"{mistake} scored full marks: {result}"


def test_one_mistake_costs_only_the_parts_it_breaks(graded):
    """Partial credit: a single mistake never zeroes a whole notebook."""
    partial = {m: score(graded["mistake_scores"], m, a)["code"] for m, (a, _) in MISTAKES.items()}
    assert all(value > 0 for value in partial.values()), partial


def test_rewritten_and_deleted_test_cells_are_restored(graded):
    tampered = score(graded["scores"], "tamper", "01_residual")
    assert tampered["code"] < tampered["max_code"], "test cells replaced by `pass` were not restored from the gradebook"
    deleted = score(graded["scores"], "tamper", "02_layer_norm")
    assert deleted["max_code"] == score(graded["scores"], "full", "02_layer_norm")["max_code"]
    assert deleted["code"] < deleted["max_code"], "deleted test cells were not put back and run"
    nb = nbformat.read(graded["course"] / "autograded" / "tamper" / "02_layer_norm" / "layer_norm.ipynb", as_version=4)
    restored = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_test_cell(c)]
    original = [c.metadata["nbgrader"]["grade_id"]
                for c in nbformat.reads(solution_text("02_layer_norm"), as_version=4).cells if is_test_cell(c)]
    assert restored == original
    rewritten = nbformat.read(graded["course"] / "autograded" / "tamper" / "01_residual" / "residual.ipynb", as_version=4)
    assert all("# all tests pass" not in c.source for c in rewritten.cells if is_test_cell(c))
    helpers = lambda nb: [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_helpers"]
    assert helpers(rewritten) == helpers(nbformat.reads(solution_text("01_residual"), as_version=4)), (
        "the locked test-helpers cell was not restored from the gradebook")
    # the code cell and the test below it both deleted: the test comes back, the missing code scores zero
    both = score(graded["scores"], "tamper", "03_encoder_stack")
    nb = nbformat.read(graded["course"] / "autograded" / "tamper" / "03_encoder_stack" / "encoder_stack.ipynb", as_version=4)
    assert "test_encoder_stack" in [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_test_cell(c)]
    assert both["code"] == both["max_code"] - 4, both        # the two Encoder tests (2 + 2 points) fail


def test_an_infinite_loop_times_out_and_the_class_is_still_graded(graded):
    result = score(graded["scores"], "hang", "02_layer_norm")
    nb = nbformat.reads(solution_text("02_layer_norm"), as_version=4)
    blocked = sum(c.metadata["nbgrader"]["points"] for c in nb.cells if is_test_cell(c)
                  and "rms_norm" in c.metadata["nbgrader"]["grade_id"])
    assert result["code"] == result["max_code"] - blocked, (
        f"the LayerNorm parts should keep their points and the RMSNorm parts (which loop) score zero: {result}")
    assert "Timeout waiting for execute reply" in graded["log"]
    for assignment in ASSIGNMENTS:        # the rest of the class, graded in the same run
        assert score(graded["scores"], "full", assignment)["code"] == score(graded["scores"], "full", assignment)["max_code"]


def test_a_file_that_is_not_a_notebook_is_reported_with_its_student(graded):
    assert graded["returncode"] != 0, "nbgrader should report the failure with a non-zero exit code"
    assert "There was an error processing assignment '03_encoder_stack' for student 'broken'" in graded["log"]
    assert not (graded["course"] / "autograded" / "broken" / "03_encoder_stack").exists()
    assert score(graded["scores"], "full", "03_encoder_stack")["code"] == score(graded["scores"], "full", "03_encoder_stack")["max_code"]
    assert graded["mistakes_returncode"] == 0, graded["mistakes_log"][-4000:]


def test_feedback_is_written_for_every_student(graded):
    course = graded["course"]
    grading.run_nbgrader(["generate_feedback", "*"], course)
    autograded = sorted(p.relative_to(course / "autograded") for p in course.glob("autograded/*/*/*.ipynb"))
    assert len(autograded) >= 5 + 5 + 3 + 1
    for path in autograded:
        html = course / "feedback" / path.with_suffix(".html")
        assert html.exists(), f"no feedback for {path}"
        text = html.read_text(encoding="utf-8")
        assert "Score:" in text and "BEGIN HIDDEN TESTS" not in text, path
    hang = (course / "feedback" / "hang" / "02_layer_norm" / "layer_norm.html").read_text(encoding="utf-8")
    assert "CellTimeoutError" in hang or "KeyboardInterrupt" in hang


def test_grading_twice_gives_identical_scores(graded):
    """Regrade the positional-encoding submissions (four partial scores) and compare."""
    course = graded["mistakes"]
    grading.run_nbgrader(["autograde", "05_positional_encoding", "--force",
                          f"--ExecutePreprocessor.timeout={CELL_TIMEOUT}"], course)
    again = grading.scores(course)
    before = {k: v for k, v in graded["mistake_scores"].items() if k[1] == "05_positional_encoding"}
    assert len(before) == 4 and {k: again[k] for k in before} == before


def test_the_notebook_time_budget_cuts_a_hanging_notebook_short(graded):
    """With a 20 s budget per notebook, the looping cell is interrupted before its 60 s per-cell limit."""
    course = graded["course"]
    result = grading.run_nbgrader(["autograde", "02_layer_norm", "--student=hang", "--force",
                                   "--BudgetedExecute.notebook_timeout=20"], course)
    waited = [int(s) for s in re.findall(r"Timeout waiting for execute reply \((\d+)s\)", result.stderr + result.stdout)]
    assert waited and max(waited) <= 20, waited
    hang = score(grading.scores(course), "hang", "02_layer_norm")
    assert hang == score(graded["scores"], "hang", "02_layer_norm"), hang
