"""exercises/ is exactly what nbgrader generates from solutions/, and nothing secret reaches it.

solutions/<id>/<name>.ipynb are the instructor notebooks (edited in JupyterLab with nbgrader's Create Assignment
panel); `make exercises` runs `nbgrader generate_assignment` on them. These tests run the same generation in a
temporary course directory (a few seconds) and compare, and check what a learner can see.
"""

from __future__ import annotations

import filecmp
import re
import shutil
from collections import Counter
from pathlib import Path

import nbformat
import pytest
from addnorm_grading import coursework, helpers

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS, EXERCISES = ROOT / "solutions", ROOT / "exercises"
CHECKS = ROOT / "checks"                 # the judged tests' hidden parts (addnorm_grading.judge), never released

ASSIGNMENTS = dict(coursework.assignments(SOLUTIONS))            # assignment id -> notebook name
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """The exercises/ folder nbgrader generates from solutions/ with the course's nbgrader_config.py."""
    return coursework.make_course(tmp_path_factory.mktemp("generate") / "course", ROOT) / "exercises"


def tree_differences(made: Path, committed: Path) -> list[str]:
    """Files (relative paths) that are missing on one side or whose bytes differ."""
    def files(root: Path) -> set[Path]:      # JupyterLab's .ipynb_checkpoints/ are git-ignored, and nbgrader ignores them
        return {p.relative_to(root) for p in root.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts}
    ours, theirs = files(made), files(committed)
    found = [f"{p} (not in exercises/)" for p in sorted(ours - theirs)]
    found += [f"{p} (in exercises/, not generated)" for p in sorted(theirs - ours)]
    found += [f"{p} (differs)" for p in sorted(ours & theirs) if not filecmp.cmp(made / p, committed / p, shallow=False)]
    return found


def test_exercises_are_what_nbgrader_generates_from_solutions(generated):
    """Byte for byte, every file both ways (else: run `make exercises` and commit)."""
    stale = tree_differences(generated, EXERCISES)
    assert not stale, "exercises/ is out of date; run `make exercises` and commit:\n  " + "\n  ".join(stale)


# ---------------------------------------------------------------------------------------------- what leaks

def _regions(source: str, begin: str, end: str) -> tuple[list[str], list[str]]:
    """(lines inside begin/end regions, lines outside them) of one cell."""
    inside, outside, within = [], [], False
    for line in source.splitlines():
        if begin in line:
            within = True
        elif end in line:
            within = False
        else:
            (inside if within else outside).append(line.strip())
    return inside, outside


def hidden_checks(assignment: str | None) -> str:
    """The hidden checks of an assignment's judged tests: checks/<assignment>/*.py ('' if none)."""
    if assignment is None:
        return ""
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted((CHECKS / assignment).glob("*.py")))


def secret_lines(source_nb, assignment: str | None = None) -> set[str]:
    """Lines that occur only inside solution regions, written answers or hidden tests of an instructor notebook,
    or in the hidden checks of its judged tests."""
    secret = {line.strip() for line in hidden_checks(assignment).splitlines()}
    public = set()
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "markdown":
            secret.update(line.strip() for line in cell.source.splitlines())
            continue
        for begin, end in (("BEGIN SOLUTION", "END SOLUTION"), ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")):
            secret.update(_regions(cell.source, begin, end)[0])
        public.update(_regions(HIDDEN.sub("", cell.source), "BEGIN SOLUTION", "END SOLUTION")[1])
    return {line for line in secret - public if len(line) > 3}


def hidden_names(source_nb, assignment: str | None = None) -> set[str]:
    """Functions and classes the hidden tests define (the reference implementations among them)."""
    regions = [region for cell in source_nb.cells for region in HIDDEN.findall(cell.source)] + [hidden_checks(assignment)]
    return {name for region in regions for name in re.findall(r"^\s*(?:def|class) (\w+)", region, flags=re.M)}


def released_text(path: Path) -> str:
    """What a learner can read in a released file: a notebook's cell sources, any other file's text."""
    if path.suffix == ".ipynb":
        return "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
    return path.read_text(encoding="utf-8", errors="replace")


def leaks(release: Path, source_nb, assignment: str | None = None) -> list[str]:
    """Every marker, solution line, hidden-test line or hidden helper name found in any file of a release folder."""
    secret, names, found = secret_lines(source_nb, assignment), hidden_names(source_nb, assignment), []
    for path in sorted(p for p in release.rglob("*") if p.is_file()):
        text = released_text(path)
        lines = {line.strip() for line in text.splitlines()}
        found += [f"{path.name}: {marker!r}" for marker in MARKERS if marker in text]
        found += [f"{path.name}: line {line!r}" for line in sorted(secret & lines)]
        found += [f"{path.name}: hidden helper {name}" for name in sorted(names)
                  if re.search(rf"\b{name}\b", text)]
    return found


def read_source(assignment: str):
    return nbformat.read(SOLUTIONS / assignment / f"{ASSIGNMENTS[assignment]}.ipynb", as_version=4)


@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_exercises_hold_no_solution_and_no_hidden_test(assignment):
    source = read_source(assignment)
    assert hidden_names(source, assignment), f"{assignment}: expected the hidden tests to define their reference helpers"
    found = leaks(EXERCISES / assignment, source, assignment)
    assert not found, f"{assignment}: secret text in the learner version: {found[:5]}"
    release = nbformat.read(EXERCISES / assignment / f"{ASSIGNMENTS[assignment]}.ipynb", as_version=4)
    for cell in release.cells:         # every solution region became a stub that raises, every written answer a blank
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            assert "raise NotImplementedError()" in cell.source
        if meta.get("solution") and cell.cell_type == "markdown":
            assert cell.source.strip() == "YOUR ANSWER HERE"
    points = lambda nb: [(c.metadata["nbgrader"]["grade_id"], c.metadata["nbgrader"].get("points"))
                         for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert points(release) == points(source), "the same graded cells, with the same points, in both versions"
    written = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "markdown"]
    assert len(written) == 1, f"{assignment}: expected one manually graded written answer"


def test_a_stray_file_beside_a_solution_is_not_released_or_is_caught(tmp_path):
    """nbgrader releases every file of solutions/<id>/ that the config does not ignore: a .py file is ignored,
    and a file of any other kind that carries solution text is reported by the leak check."""
    assignment = "01_residual"
    source_nb = read_source(assignment)
    solution_line = sorted(secret_lines(source_nb))[0]
    solutions = tmp_path / "solutions"
    shutil.copytree(SOLUTIONS, solutions)
    (solutions / assignment / "notes.py").write_text(f"### BEGIN SOLUTION\n{solution_line}\n", encoding="utf-8")
    (solutions / assignment / "notes.md").write_text(f"Marking notes:\n{solution_line}\n", encoding="utf-8")
    release = coursework.make_course(tmp_path / "course", source=solutions) / "exercises" / assignment
    assert not (release / "notes.py").exists(), "c.CourseDirectory.ignore in nbgrader_config.py should keep *.py out"
    assert (release / "notes.md").exists()                 # released, as nbgrader does with any other file ...
    found = leaks(release, source_nb)                      # ... and the leak check catches it
    assert f"notes.md: line {solution_line!r}" in found and all(f.startswith("notes.md: ") for f in found), found


@pytest.mark.parametrize("folder", ["solutions", "exercises", "capstone"])
def test_committed_notebooks_carry_no_outputs(repo_root, folder):
    notebooks = sorted((repo_root / folder).glob("*.ipynb" if folder == "capstone" else "*/*.ipynb"))
    assert len(notebooks) == (1 if folder == "capstone" else len(ASSIGNMENTS))
    for path in notebooks:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, (
                    f"{path.relative_to(repo_root)}: cell {cell.id} has outputs or an execution count; clear them "
                    "(JupyterLab: Edit → Clear Outputs of All Cells) before committing")


@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_shared_test_helpers_are_written_once(assignment):
    """No helper is pasted into several cells; the ones visible tests share sit in one locked cell nbgrader restores."""
    source = read_source(assignment)
    defined = Counter(name for cell in source.cells
                      for name in re.findall(r"^(?:def|class) (\w+)", cell.source, flags=re.M))
    assert not [name for name, count in defined.items() if count > 1], f"{assignment}: defined in several cells: {defined}"
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "test_helpers":
            assert meta["locked"] and not meta["grade"] and not meta["solution"], meta
            assert not HIDDEN.search(cell.source), "nbgrader only removes hidden tests from graded cells"


def test_helpers_that_exercises_share_come_from_one_source(repo_root):
    """The helpers several exercises' tests use are copied from addnorm_grading/helper_source.py (make exercises),
    into the notebooks and the hidden checks alike, and are not pasted anywhere else."""
    shared = helpers.helper_sources(repo_root / "checks")
    stale = [str(path.relative_to(repo_root)) for folder in ("solutions", "checks")
             for pattern in ("*/*.ipynb", "*/*.py") for path in sorted((repo_root / folder).glob(pattern))
             if helpers.sync(path, write=False)]
    assert not stale, f"run `make exercises`: the shared test helpers in {stale} differ from helper_source.py"
    for folder, pattern in (("solutions", "*/*.ipynb"), ("checks", "*/*.py")):
        for path in sorted((repo_root / folder).glob(pattern)):
            text = path.read_text(encoding="utf-8")
            outside = helpers.BLOCK.sub("", text if folder == "checks" else "\n".join(
                cell.source for cell in nbformat.reads(text, as_version=4).cells))
            pasted = [name for name in shared if re.search(rf"^\s*def {name}\(", outside, flags=re.M)]
            assert not pasted, f"{path.relative_to(repo_root)} defines {pasted} itself: name them in a shared-helpers block"


def test_a_shared_helpers_block_names_only_helpers_that_exist():
    with pytest.raises(ValueError, match=r"\['_nope'\] are not in helper_source.py"):
        helpers.filled("# [shared helpers: _run, _nope]\n# [end of shared helpers]", helpers.helper_sources())


@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_visible_tests_pass_on_the_solution_without_the_hidden_tests(assignment):
    """A learner with a right answer sees every visible test pass: none of them needs what only hidden tests define."""
    from nbclient import NotebookClient

    nb = read_source(assignment)
    for cell in nb.cells:
        cell.source = HIDDEN.sub("", cell.source)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(SOLUTIONS / assignment)}}).execute()


STACK_CONTRACT = "applies `norm` once, after the last layer, when it is given, and adds nothing of its own otherwise"


@pytest.mark.parametrize("assignment, cls", [("03_encoder_stack", "Encoder"), ("04_decoder_stack", "Decoder")])
def test_the_stacks_state_the_norm_contract_in_the_same_words(repo_root, assignment, cls):
    """Issue 11: `Encoder`/`Decoder(layer, num_layers, norm=None)` is stated identically in the notebook and the guide."""
    sentence = f"`{cls}(layer, num_layers, norm=None)` {STACK_CONTRACT}"
    intro = " ".join(read_source(assignment).cells[0].source.split())
    assert sentence in intro, f"{assignment}'s introduction does not state: {sentence}"
    guide = " ".join((repo_root / "guide" / "exercises.md").read_text(encoding="utf-8").split())
    assert sentence in guide, f"guide/exercises.md does not state: {sentence}"
    signature = next(c.source for c in read_source(assignment).cells if c.metadata.get("nbgrader", {}).get("grade_id")
                     == cls.lower())
    assert "num_layers: int, norm: nn.Module | None = None" in signature, f"{cls}'s signature lacks norm=None"
