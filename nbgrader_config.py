"""nbgrader configuration for the Add & Norm course (the repository root is the course directory).

The instructor notebooks live in solutions/ (nbgrader's "source"), the learner versions in exercises/ (its
"release"); `make exercises` regenerates exercises/ from solutions/. The gradebook (gradebook.db) and the
submitted/, autograded/ and feedback/ folders are created here when you grade, and are git-ignored.
See guide/instructors.md for the commands.
"""

import importlib.util
import os
import re
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor, Preprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearOutput, DeduplicateIds, Execute, GetGrades,
    IgnorePattern, LimitOutput, OverwriteCells, OverwriteKernelspec, SaveAutoGrades,
)
from jupyter_client.kernelspec import KernelSpecManager
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_output
from traitlets import Bool, Integer

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)

# --- the course ---------------------------------------------------------------------------------------------
c.CourseDirectory.course_id = "addnorm"
c.CourseDirectory.source_directory = "solutions"     # instructor versions: solutions/<assignment>/<notebook>.ipynb
c.CourseDirectory.release_directory = "exercises"    # learner versions:    exercises/<assignment>/<notebook>.ipynb
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]  # no .py file is released: helpers live in locked cells

# --- generate_assignment: what the learner version looks like -------------------------------------------------
c.ClearSolutions.begin_solution_delimeter = "BEGIN SOLUTION"      # (nbgrader's spelling of "delimiter")
c.ClearSolutions.end_solution_delimeter = "END SOLUTION"
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.ClearSolutions.enforce_metadata = True            # a solution region outside a solution cell is an error
c.ClearHiddenTests.begin_test_delimeter = "BEGIN HIDDEN TESTS"
c.ClearHiddenTests.end_test_delimeter = "END HIDDEN TESTS"

# --- autograde: running learners' code safely -----------------------------------------------------------------
# Every cell gets at most 60 s; a cell that runs longer (an infinite loop) is interrupted, marked as an error, and
# the rest of the notebook still runs. On top of that, a whole notebook gets at most 300 s: once that budget is
# spent, each remaining cell gets 1 s, so one student cannot hold the whole class's grading for long.
c.ExecutePreprocessor.timeout = 60                  # seconds per cell (the notebooks' cells take < 5 s each)
c.ExecutePreprocessor.interrupt_on_timeout = True
c.ExecutePreprocessor.startup_timeout = 120         # a cold kernel that imports torch can be slow to start


class BudgetedExecute(Execute):
    """nbgrader's Execute with a time budget for the whole notebook, on top of the per-cell timeout."""

    notebook_timeout = Integer(
        300, help="Seconds for the whole notebook; past it, each remaining cell gets 1 s."
    ).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_timeout
        return super().preprocess(nb, resources, km)

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        deadline = getattr(self, "_deadline", None)
        if deadline is None:
            return timeout
        remaining = max(1, int(deadline - time.monotonic()))
        return remaining if timeout is None else min(timeout, remaining)


c.BudgetedExecute.notebook_timeout = 300

# --- autograde: the sandbox ------------------------------------------------------------------------------------
# Every submission's kernel runs in the `addnorm-sandbox` kernelspec (tools/sandbox/, next to this file): bubblewrap
# hides the course folder (solutions/, gradebook.db, other students' work) and every home folder, takes away the
# network and the sight of other processes, caps memory and processes; as root, the kernel also runs as the
# unprivileged user addnorm-grader. Where that is impossible, autograde refuses and says why. The opt-out, at your
# own risk: ADDNORM_UNSAFE_GRADING=1, or `--SandboxedExecute.kernel_name=python3`. (Only autograde is sandboxed:
# `nbgrader validate`, a learner checking their own notebook, keeps the notebook's kernel.) See guide/instructors.md,
# "Safe grading".
SANDBOX = Path(__file__).resolve().parent / "tools" / "sandbox"
SANDBOX_KERNEL = "addnorm-sandbox"
UNSAFE = os.environ.get("ADDNORM_UNSAFE_GRADING") == "1"


def _load_sandbox():
    """tools/sandbox/sandbox.py as a module (it is a script, not part of an installed package)."""
    spec = importlib.util.spec_from_file_location("addnorm_sandbox", SANDBOX / "sandbox.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SandboxUnavailable(RuntimeError):
    """This machine cannot run the grading sandbox (the message says what is missing and the opt-out)."""


class SandboxedExecute(BudgetedExecute):
    """BudgetedExecute that starts the sandboxed kernel over Unix sockets, and keeps grading when the kernel dies.

    A kernel that dies (os._exit, killing itself, running out of memory) costs the submission every cell not yet
    run: each gets an error output, so its tests score zero, and the next submission is graded as usual.
    """

    _refusal = None                                     # the reason the sandbox cannot run, once known

    def preprocess(self, nb, resources=None, km=None):
        self._kernel_died = False
        self._connection_dirs = []
        if self.kernel_name == SANDBOX_KERNEL:
            self._refuse_if_unavailable()
        try:
            return super().preprocess(nb, resources, km)
        finally:
            for folder in self._connection_dirs:
                shutil.rmtree(folder, ignore_errors=True)

    def _refuse_if_unavailable(self):
        if SandboxedExecute._refusal is None:
            if not (SANDBOX / "sandbox.py").exists():
                SandboxedExecute._refusal = (
                    f"the grading sandbox is missing: no {SANDBOX / 'sandbox.py'} (copy the course's tools/sandbox/ "
                    "next to nbgrader_config.py). To grade anyway, at your own risk (student code then runs with "
                    "your rights), set ADDNORM_UNSAFE_GRADING=1 or pass --SandboxedExecute.kernel_name=python3.")
            else:
                SandboxedExecute._refusal = _load_sandbox().missing() or ""
            if SandboxedExecute._refusal:
                self.log.error("Autograding refused: %s", SandboxedExecute._refusal)
        if SandboxedExecute._refusal:
            raise SandboxUnavailable("Autograding refused: " + SandboxedExecute._refusal)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if self.kernel_name == SANDBOX_KERNEL:
            # A private folder per kernel for its connection file and sockets (short: Unix socket paths <= 107 bytes)
            folder = Path(tempfile.mkdtemp(prefix="addnorm-kernel-"))
            self._connection_dirs.append(folder)
            km.kernel_spec_manager = KernelSpecManager(kernel_dirs=[str(SANDBOX / "kernels")])
            km.transport = "ipc"
            km.connection_file = str(folder / "kernel.json")
            km.ip = str(folder / "ipc")
        return km

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return super().preprocess_cell(cell, resources, index)
        if self._kernel_died:
            cell.outputs = [_error("KernelDied", "not run: the kernel stopped in an earlier cell")]
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._kernel_died = True
            self.log.warning("The kernel died in cell %d; the remaining cells are marked as not run", index)
            cell.outputs.append(_error("KernelDied", "the kernel stopped while running this cell (the code exited, "
                                       "killed its own process, or ran out of memory or processes)"))
            return cell, resources


def _error(name, message):
    """An error output, as a failing cell has one (it makes a test cell score zero)."""
    return new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])


c.SandboxedExecute.kernel_name = "python3" if UNSAFE else SANDBOX_KERNEL
c.Autograde.autograde_preprocessors = [
    SandboxedExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades, AssignLatePenalties,
    CheckCellMetadata,
]
# Short tracebacks (only the failing line of each frame): the feedback shows the assertion message, not the
# hidden tests around it.
c.Execute.extra_arguments = ["--InteractiveShell.xmode=Plain"]
# A graded kernel has nothing left to save once its last cell has run: stop it at once. (A graceful shutdown waits
# while Python tears torch down: about 0.6 s of every notebook's grading, measured with bench/grading.py.)
c.Execute.shutdown_kernel = "immediate"
c.LimitOutput.max_lines = 1000                      # a runaway print cannot bloat the graded notebook
c.LimitOutput.max_traceback = 100

# A learner who deletes a test cell gets it back: the gradebook's copy is re-inserted and run. (Locked cells that
# were edited are always restored from the gradebook.)


class RestoreDeletedTests(OverwriteCells):
    """OverwriteCells that re-inserts deleted test cells even when the cell before them was deleted too.

    nbgrader 0.9.6 puts a missing test cell right after the cell that precedes it in the instructor notebook, and
    fails the whole submission (KeyError) when that cell is gone as well — e.g. a learner deleted their code cell
    and the test below it. Here the test goes after the nearest earlier cell that is still there.
    """

    def add_missing_grade_cells(self, nb, resources):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        source_cells = list(source_nb.source_cells)                   # in the instructor notebook's order
        names = [cell.name for cell in source_cells]
        grade_cells = {cell.name: cell for cell in source_nb.grade_cells}
        solution_names = {cell.name for cell in source_nb.solution_cells}
        for index, name in enumerate(names):
            present = {cell.metadata.get("nbgrader", {}).get("grade_id"): i for i, cell in enumerate(nb.cells)}
            if name not in grade_cells or name in present:
                continue
            self.log.warning(f"Missing grade cell {name} encountered, adding to notebook")
            earlier = [present[n] for n in reversed(names[:index]) if n in present]
            position = earlier[0] + 1 if earlier else 0
            cell = self.missing_cell_transform(source_cells[index], grade_cells[name].max_score,
                                               is_solution=name in solution_names)
            cell["id"] = "restored-" + name.replace("_", "-")
            nb.cells.insert(position, cell)
        return nb, resources


c.Autograde.sanitize_preprocessors = [
    ClearOutput, DeduplicateIds, OverwriteKernelspec, RestoreDeletedTests, CheckCellMetadata,
]
c.OverwriteCells.add_missing_cells = True

# --- feedback: show the failing assertion messages, not the hidden tests' code --------------------------------


class WrapErrorMessages(Preprocessor):
    """Break long lines of error messages, so that the HTML feedback shows them without horizontal scrolling."""

    enabled = Bool(True).tag(config=True)      # (nbconvert preprocessors are off unless enabled)
    width = Integer(100, help="Wrap error-message lines longer than this many characters.").tag(config=True)

    def _wrap(self, line):
        if len(re.sub(r"\x1b\[[0-9;]*m", "", line)) <= self.width:      # the length on screen, colours aside
            return line
        return "\n".join(textwrap.wrap(line, self.width, subsequent_indent="    ", break_long_words=False))

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = ["\n".join(self._wrap(line) for line in entry.split("\n"))
                                       for entry in output["traceback"]]
        return cell, resources


c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, WrapErrorMessages, CSSHTMLHeaderPreprocessor]


# === Feedback without noise, validate without cut lines, a log that tells tampering apart (issue 11) ===========
# (kept in one block: other parts of this file are maintained separately)
import nbgrader.validator
from nbgrader import utils as nbgrader_utils

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LIBRARY_FRAME = re.compile(r"(site-packages|dist-packages|[/\\]lib[/\\]python3|[/\\]lib[/\\]addnorm[/\\])")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\](?:[^\s:,\"'()\x1b/\\]+[/\\])+([^\s:,\"'()\x1b/\\]+)")


class CleanTracebacks(Preprocessor):
    """Keep the learner's own frames in error tracebacks: drop frames inside torch and other installed libraries,
    and shorten the absolute paths of the grading machine to file names."""

    enabled = Bool(True).tag(config=True)

    def _clean(self, traceback):
        kept, hidden = [], 0
        for index, entry in enumerate(traceback):
            plain = _ANSI.sub("", entry)
            if 0 < index < len(traceback) - 1 and _LIBRARY_FRAME.search(plain):
                hidden += 1
                continue
            kept.append(_ABSOLUTE_PATH.sub(r"\1", entry))
        if hidden:
            kept.insert(len(kept) - 1, f"  ({hidden} frame(s) inside torch or other libraries not shown)\n")
        return kept

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = self._clean(output["traceback"])
        return cell, resources


def _released(source):
    """A test cell's source as learners receive it: without its hidden-test regions, blank lines ignored."""
    lines, hidden = [], False
    for line in source.split("\n"):
        if "BEGIN HIDDEN TESTS" in line:
            hidden = True
        elif "END HIDDEN TESTS" in line:
            hidden = False
        elif not hidden and line.strip():
            lines.append(line.rstrip())
    return lines


class LogEditedCells(RestoreDeletedTests):
    """RestoreDeletedTests whose log tells a learner's edit of a locked cell apart from the usual restoring.

    nbgrader compares every locked cell with the instructor's copy, which holds the hidden tests the learner's
    copy lacks, so it logs "Attribute 'checksum' ... has changed!" for every test cell with hidden tests. Here a
    cell that is exactly the released one is logged at debug level ("hidden tests put back"); a cell the learner
    changed is logged as a warning that says so. In both cases the instructor's version is what runs.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        self._untouched = False
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and nbgrader_utils.is_locked(cell):
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
                self._untouched = _released(source_cell.source) == _released(cell.source)
            except Exception:                                           # unknown cell: nbgrader reports it
                pass
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name, attr, old, new):
        if attr != "checksum":
            return super().report_change(name, attr, old, new)
        if self._untouched:
            self.log.debug("Cell %s: unchanged by the student; its hidden tests were put back", name)
        else:
            self.log.warning("Cell %s was EDITED by the student (a locked cell): replaced by the instructor's version",
                             name)


c.Autograde.sanitize_preprocessors = [
    LogEditedCells if p is RestoreDeletedTests else p for p in c.Autograde.sanitize_preprocessors]
c.Autograde.autograde_preprocessors = [
    p for step in c.Autograde.autograde_preprocessors for p in ((step, CleanTracebacks) if issubclass(step, BudgetedExecute) else (step,))]
c.GenerateFeedback.preprocessors = [
    p for step in c.GenerateFeedback.preprocessors for p in ((CleanTracebacks, step) if step is WrapErrorMessages else (step,))]

# `nbgrader validate` prints every line of an error cut at Validator.width characters; wrap them instead, so that a
# learner reads the whole message in a terminal.
c.Validator.width = 100


def _indent_wrapped(self, text):
    """Validator._indent, wrapping long lines instead of cutting them at `width`."""
    lines = []
    for line in text.split("\n"):
        line = nbgrader.validator.strip_ansi(line)
        lines.extend(textwrap.wrap(line, self.width, initial_indent=self.indent, subsequent_indent=self.indent * 2,
                                   break_long_words=False) or [self.indent])
    return "\n".join(lines)


nbgrader.validator.Validator._indent = _indent_wrapped
