"""Running a submission for autograde: a time budget per notebook, and the kernel in the grading sandbox.

`BudgetedExecute` is nbgrader's Execute with a budget for the whole notebook on top of the per-cell timeout.
`SandboxedExecute` starts each kernel through the `addnorm-sandbox` kernelspec (`addnorm_grading.sandbox`), tells
it the limits of course.toml, keeps grading the rest when a kernel dies, and keeps of the kernel's outputs only
what `addnorm_grading.verdicts` allows. nbgrader_config.py names them.

A notebook with judged tests runs in two kernels, each in a sandbox of its own, at the same time
(`addnorm_grading.judge`): the *visible* one (nbgrader's own run: its outputs above the first test are what the
learner gets back) observes the visible tests; the *hidden* one (`HiddenRun`, in a thread) runs the same cells and
observes the visible and hidden tests. Nothing of the hidden kernel reaches the notebook but the verdicts, and the
notebook's metadata after grading is what it was before (no kernel, no widget state, writes it).
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import threading
import time
from dataclasses import fields
from functools import cached_property
from importlib.resources import files
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from nbclient.exceptions import DeadKernelError
from nbformat import from_dict
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer, Unicode, default

from addnorm_grading import kernel_messages, observation, sandbox, secret, withheld, zygote
from addnorm_grading.course import SandboxLimits, read_course
from addnorm_grading.judge import CPU_SECONDS, Judge, JudgeError, Trial
from addnorm_grading.verdicts import (BUDGET_SPENT, GRADER_FAILURES, SPLIT, is_test_cell, kernel_failure,
                                     message_from_outputs, record_split, verdict_outputs)

SANDBOX_KERNEL = "addnorm-sandbox"
HELPERS = "test_helpers"                                  # the grade id of a notebook's locked helpers cell
KERNELS = files("addnorm_grading") / "kernels"           # the addnorm-sandbox kernelspec, installed with the package
UNSAFE_VARIABLE = "ADDNORM_UNSAFE_GRADING"
OUTPUT_CHARS = 1_000_000                                  # characters of output kept per cell (observations aside)
NOTEBOOK_OUTPUT_CHARS = 4_000_000                         # and per notebook, every cell's outputs and updates counted


class BudgetedExecute(Execute):
    """nbgrader's Execute with a time budget for the whole notebook, on top of the per-cell timeout."""

    notebook_timeout = Integer(
        300, help="Seconds for the whole notebook; past them, no cell runs (each is marked NotebookTimeout)."
    ).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_timeout
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        """A cell, run if the notebook's budget is not spent; past it, marked as not run (without the kernel: a
        second of each for thousands of endless cells would have been hours)."""
        deadline = getattr(self, "_deadline", None)
        if cell.cell_type == "code" and cell.source.strip() and deadline is not None and time.monotonic() >= deadline:
            cell.outputs = [_error(BUDGET_SPENT, GRADER_FAILURES[BUDGET_SPENT])]
            return cell, resources
        return super().preprocess_cell(cell, resources, index)

    def _get_timeout(self, cell):
        timeout = super()._get_timeout(cell)
        deadline = getattr(self, "_deadline", None)
        if deadline is None:
            return timeout
        remaining = max(1, int(deadline - time.monotonic()))      # the cell that starts just before the end
        return remaining if timeout is None else min(timeout, remaining)


def _from_course(limit: str):
    """A traitlets default for one sandbox limit: its value in course.toml (after the ADDNORM_SANDBOX_* overrides)."""
    @default(limit)
    def _default(self):
        return getattr(self.course.sandbox, limit)
    return _default


class SandboxUnavailable(RuntimeError):
    """This machine cannot run the grading sandbox (the message says what is missing and the opt-out)."""


class SandboxedExecute(BudgetedExecute):
    """BudgetedExecute that starts the sandboxed kernel over Unix sockets, and keeps grading when the kernel dies.

    The limits default to course.toml's [sandbox] (with its ADDNORM_SANDBOX_* overrides); each can also be set
    here, e.g. `c.SandboxedExecute.memory = "8G"`. A kernel that dies (os._exit, killing itself, running out of
    memory) costs the submission every cell not yet run: each gets an error output, so its tests score zero, and
    the next submission is graded as usual.
    """

    course_file = Unicode(help="The course's constants, course.toml (its [sandbox] limits and exchange); by default "
                          "the one in the working directory or the nearest folder above it.").tag(config=True)
    user = Unicode(help="The unprivileged user kernels run as when grading as root.").tag(config=True)
    memory = Unicode(help='Address space of each kernel process, e.g. "4G".').tag(config=True)
    processes = Integer(help="Processes and threads in one sandbox.").tag(config=True)
    scratch = Unicode(help='Size of each of the kernel\'s two RAM disks (cwd, /tmp), e.g. "256M".').tag(config=True)
    threads = Integer(help="torch (OpenMP) threads in each kernel.").tag(config=True)
    file_size = Unicode(help='The largest file a kernel may write, e.g. "64M".').tag(config=True)
    judge_seconds = Float(CPU_SECONDS, help="CPU seconds the judge may spend on one test cell's checks (past them, "
                          "that test fails and says so; the next test is judged as usual).").tag(config=True)
    fork_kernels = Bool(True, help="Fork each sandboxed kernel from one process of this grading process that has "
                        "imported torch (addnorm_grading.zygote: only when grading as root), instead of starting "
                        "a fresh interpreter for each.").tag(config=True)
    store_widget_state = Bool(False, help="Never: a kernel's widget state would write the notebook's metadata.")

    _refusal = None                                     # the reason the sandbox cannot run, once known
    _hidden_run = False                                 # True in the executor of a HiddenRun
    _visible_done = None                                # in a HiddenRun's executor: set once the visible kernel is gone
    _output_chars, _output_cut = 0, False               # the running cell's output so far, and whether it was cut
    _notebook_chars = 0                                 # the notebook's outputs so far (every cell, every update)
    _observing_cells: frozenset = frozenset()           # the indexes of the cells whose observation the judge reads
    _observing, _observed = False, False                # the running cell is one of them; its observation came
    _library = None                                     # the withheld copy of addnorm this executor's kernels read

    def process_message(self, msg, cell, cell_index):
        """A kernel message, as `addnorm_grading.kernel_messages` lets nbclient see it (or nothing of it)."""
        msg = kernel_messages.checked(msg)
        return None if msg is None else super().process_message(msg, cell, cell_index)

    def on_cell_executed(self, **kwargs):
        """nbgrader's hook on the reply to a cell, after the reply is made what `kernel_messages.checked_reply` lets
        through (a forged one with a non-string ename stopped the grading; a 200 MB traceback went into the cell)."""
        reply = kwargs.get("execute_reply")
        if isinstance(reply, dict):
            reply["content"] = kernel_messages.checked_reply(reply.get("content"))
        return super().on_cell_executed(**kwargs)

    def output(self, outs, msg, display_id, cell_index):
        """Keep a cell's outputs, up to OUTPUT_CHARS characters (one line of 10 MB counts as what it is: nbgrader's
        LimitOutput counts lines), and the notebook's up to NOTEBOOK_OUTPUT_CHARS; past them, one note, and the rest
        dropped as it arrives. A test's observation is kept apart from that count, one per observing cell and no
        larger than the judge reads."""
        content = msg.get("content", {})
        if observation.MIME in (content.get("data") or {}):
            return self._observation_output(outs, msg, display_id, cell_index)
        return self._counted_output(outs, msg, display_id, cell_index)

    def _counted_output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = len(str(content))
        room = min(OUTPUT_CHARS - self._output_chars, NOTEBOOK_OUTPUT_CHARS - self._notebook_chars)
        self._output_chars += size
        self._notebook_chars += size
        if size <= room:
            return super().output(outs, msg, display_id, cell_index)
        if not self._output_cut:
            self._output_cut = True
            if msg.get("msg_type") == "stream" and room > 0:     # the beginning of a long stream is kept
                super().output(outs, {**msg, "content": {**content, "text": str(content.get("text", ""))[:room]}},
                               display_id, cell_index)
            limit = (f"more than {OUTPUT_CHARS:,} characters" if self._output_chars > OUTPUT_CHARS else
                     f"this notebook's outputs passed {NOTEBOOK_OUTPUT_CHARS:,} characters")
            outs.append(new_output("stream", name="stderr", text=f"[the rest of this cell's output was cut: {limit}]\n"))
        return None

    def _update_display_id(self, display_id, msg):
        """An update of earlier outputs (`update_display_data`, or a display with the same id) lands in every output
        of that id still there: counted as that many outputs against the notebook's cap, refused past it; never an
        observation's, and never one in an observation's place."""
        targets = [self.nb.cells[cell].outputs[i] for cell, indexes in self._display_id_map.get(display_id, {}).items()
                   for i in indexes if i < len(self.nb.cells[cell].get("outputs", []))]
        content = msg["content"]                      # a valid display (addnorm_grading.kernel_messages.checked)
        if not targets or observation.MIME in content["data"]:
            return
        if any(observation.MIME in target.get("data", {}) for target in targets):
            return
        size = len(str(content)) * len(targets)
        if self._notebook_chars + size > NOTEBOOK_OUTPUT_CHARS:
            return
        self._notebook_chars += size
        for output in targets:
            output["data"], output["metadata"] = from_dict(content["data"]), from_dict(content["metadata"])

    def _observation_output(self, outs, msg, display_id, cell_index):
        """The first observation of an observing cell, if the judge can read its size, is kept whole. Any other
        (a second one, one too large, one from a cell that observes nothing: the learner's own) is kept as a
        small stand-in the judge refuses, counted as ordinary output, so it costs no memory."""
        payload = msg["content"]["data"][observation.MIME]
        text = payload.get("observation") if isinstance(payload, dict) else None
        size = len(text) if isinstance(text, str) else 0
        first, self._observed = self._observing and not self._observed, True
        if first and isinstance(text, str) and size <= observation.MAX_BYTES:
            return super().output(outs, msg, display_id, cell_index)
        stand_in = {observation.MIME: {"dropped": f"an observation of {size:,} characters"}}
        return self._counted_output(outs, {**msg, "content": {**msg["content"], "data": stand_in}},
                                    display_id, cell_index)

    def handle_comm_msg(self, outputs, msg, cell_index):
        """Comm messages (widgets) from a learner's kernel are ignored: nothing of a kernel's widget state reaches
        the notebook, and a malformed one (nbclient's handler raises KeyError on it) cannot stop the grading."""

    @default("kernel_name")
    def _sandbox_unless_opted_out(self):
        return "python3" if os.environ.get(UNSAFE_VARIABLE) == "1" else SANDBOX_KERNEL

    @cached_property
    def course(self):
        """The course whose course.toml gives the limits' defaults and the exchange, read once."""
        return read_course(self.course_file or None)

    _default_user = _from_course("user")
    _default_memory = _from_course("memory")
    _default_processes = _from_course("processes")
    _default_scratch = _from_course("scratch")
    _default_threads = _from_course("threads")
    _default_file_size = _from_course("file_size")

    @cached_property
    def judge(self) -> Judge:
        """The judge of judged tests (`addnorm_grading.judge`): one per grading process, with the course's checks/."""
        return Judge(self.course.root)

    @property
    def sandboxed(self) -> bool:
        """Whether kernels start in the sandbox (any other kernel_name is the documented opt-out)."""
        return self.kernel_name == SANDBOX_KERNEL

    def settings(self) -> sandbox.Settings:
        """What the sandbox launcher is told: these limits, and nbgrader's exchange hidden."""
        limits = SandboxLimits(**{limit.name: getattr(self, limit.name) for limit in fields(SandboxLimits)})
        forked = self.fork_kernels and sandbox.is_root()
        return sandbox.Settings(limits, hidden=(str(self.course.exchange),),
                                zygote=str(zygote.start(self._zygote_environment(limits))) if forked else "",
                                library=str(self._library or ""))

    @staticmethod
    def _zygote_environment(limits: SandboxLimits) -> dict[str, str]:
        """What the zygote's interpreter starts with: nothing of the grader's environment but what the kernels keep."""
        kept = {name: os.environ[name] for name in sandbox.KEPT_VARIABLES if name in os.environ}
        return {**kept, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent",
                "OMP_NUM_THREADS": str(limits.threads), "MKL_NUM_THREADS": str(limits.threads)}

    def preprocess(self, nb, resources=None, km=None):
        self._kernel_died, self._notebook_chars = False, 0
        self._connection_dirs = []
        self._first_test = None            # index of the first test cell, once it has started
        self._outputs_before_tests = []    # the outputs of the cells above it, as they were then
        self._verdicts = {}                # test cell index -> its message (None: passed)
        self._split = {}                   # judged test cell index -> its visible and hidden verdicts
        self._visible = {}                 # judged test cell index -> the visible kernel's outputs
        if self.sandboxed:
            self._refuse_if_unavailable()
        metadata = copy.deepcopy(nb.metadata), [copy.deepcopy(cell.metadata) for cell in nb.cells]
        self._trials = self._prepare_trials(nb, resources)
        self._observing_cells = frozenset(self._trials)
        helpers = _helpers(nb)
        self._library = self._withheld_library(
            [helpers, *("\n".join(t.visible_observing_lines) for t in self._trials.values())])
        hidden = HiddenRun(self, nb, resources, self._trials) if self._trials else None
        if hidden:                    # the hidden kernel's copy also withholds what the hidden checks withhold
            hidden.executor._library = self._withheld_library(
                [helpers, *("\n".join(t.observing_lines) for t in self._trials.values())])
        try:
            if hidden:
                hidden.start()                 # its kernel starts now; it runs nothing of the learner's yet
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            if hidden:
                hidden.visible_done.set()      # the visible kernel is shut down: the hidden one may run
                hidden.join()
            for folder in self._connection_dirs + (hidden.connection_dirs if hidden else []):
                shutil.rmtree(folder, ignore_errors=True)
        if hidden:
            self._decide(hidden)
        nb.metadata = metadata[0]
        for cell, cell_metadata in zip(nb.cells, metadata[1]):
            cell.metadata = cell_metadata
        self._keep_only_verdicts(nb)
        return nb, resources

    def _withheld_library(self, code: list[str]) -> Path | None:
        """The copy of addnorm that a kernel running `code` reads: what that code withholds raises in its files
        (`addnorm_grading.withheld`); None outside the sandbox, or when nothing is withheld."""
        calls = [call for text in code for call in withheld.withheld_calls(text)]
        if not (self.sandboxed and calls):
            return None
        try:
            return withheld.library(calls)
        except (OSError, ValueError) as error:          # the course's mistake: the kernel's own _withhold still runs
            self.log.error("The withheld copy of addnorm could not be made: %s", error)
            return None

    def _prepare_trials(self, nb, resources) -> dict[int, Trial]:
        """Each judged test cell's trial (its inputs made, its kernels' code written), by cell index. A test that
        cannot be judged (the instructor's mistake) is logged and gets its verdict now."""
        trials, helpers = {}, _helpers(nb)
        assignment = (resources or {}).get("nbgrader", {}).get("assignment", "")
        folder = (resources or {}).get("metadata", {}).get("path")     # the kernels' working folder, staged
        submission = secret.submission_digest(nb, Path(folder) if folder else None)   # its own hidden inputs
        for index, cell in enumerate(nb.cells):
            if not (is_test_cell(cell) and self.judge.judges(cell.source)):
                continue
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            try:
                trials[index] = self.judge.trial(assignment, grade_id, cell.source, helpers, submission)
            except JudgeError as error:
                self.log.error("Test %s cannot be judged: %s", grade_id, error)
                self._verdicts[index] = f"this test could not be run (a mistake in the course's tests: {grade_id})"
        return trials

    def _decide(self, hidden: "HiddenRun") -> None:
        """Every judged test's verdicts, from what the two kernels observed (in this process, never the kernels')."""
        learner = learner_text(self.nb)
        for index, trial in self._trials.items():
            visible_outputs = self._visible.get(index, [])
            hidden_outputs = hidden.outputs.get(index, [])
            verdicts = trial.verdicts(visible_outputs, hidden_outputs, learner,
                                      kernel_failure(visible_outputs), kernel_failure(hidden_outputs),
                                      cpu_seconds=self.judge_seconds)
            for error in trial.errors:
                self.log.warning("A check of %s could not run on what a kernel observed: %s", trial.name, error)
            self._verdicts[index] = verdicts.message
            self._split[index] = verdicts

    def preprocess_hidden(self, nb, resources):
        """The hidden kernel's run (in a HiddenRun): every cell as it is given, outputs kept in the copy it was given."""
        self._kernel_died, self._ran, self._notebook_chars = False, set(), 0
        return BudgetedExecute.preprocess(self, nb, resources)

    def _keep_only_verdicts(self, nb):
        """Outputs as the first test found them above it; from it on, the verdicts and nothing else."""
        for index, cell in enumerate(nb.cells):         # the split verdicts are the judge's, never the notebook's
            if is_test_cell(cell):
                cell.metadata.pop(SPLIT, None)
                if index in self._split:
                    record_split(cell, self._split[index].visible, self._split[index].hidden)
        if self._first_test is None:
            return
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if index < self._first_test:
                cell.outputs = self._outputs_before_tests[index]
            elif is_test_cell(cell):
                cell.outputs = verdict_outputs(self._verdicts.get(index, "not run: the grading stopped before this test"))
            else:
                cell.outputs, cell.execution_count = [], None

    def _refuse_if_unavailable(self):
        if SandboxedExecute._refusal is None:
            SandboxedExecute._refusal = sandbox.missing(self.user) or ""
            if SandboxedExecute._refusal:
                self.log.error("Autograding refused: %s", SandboxedExecute._refusal)
        if SandboxedExecute._refusal:
            raise SandboxUnavailable("Autograding refused: " + SandboxedExecute._refusal)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        if self.sandboxed:
            # A private folder per kernel (short: Unix socket paths <= 107 bytes), laid out by the sandbox module
            folder = Path(tempfile.mkdtemp(prefix="addnorm-kernel-"))
            self._connection_dirs.append(folder)
            connection_folder = sandbox.prepare(folder, self.settings())
            km.kernel_spec_manager = KernelSpecManager(kernel_dirs=[str(KERNELS)])
            km.client_class = f"{kernel_messages.__name__}.KernelClient"     # no stdin channel, frames capped
            km.transport = "ipc"
            km.connection_file = str(connection_folder / "kernel.json")
            km.ip = str(connection_folder / "ipc")
        return km

    def start_new_kernel_client(self):
        """nbclient's start of the kernel's client, once the kernel answers: then its connection folder is locked
        (`sandbox.lock_connection_folder`), before any of the learner's code runs."""
        client = super().start_new_kernel_client()
        if self.sandboxed:
            sandbox.lock_connection_folder(Path(self.km.connection_file).parent)
        return client

    def preprocess_cell(self, cell, resources, index):
        if self._hidden_run:                  # the hidden kernel: the learner's cells, then the tests' hidden code
            if self._visible_done is not None:
                self._visible_done.wait()     # the visible kernel is gone before any learner code runs here
                self._deadline = time.monotonic() + self.notebook_timeout
                self._visible_done = None
            if cell.cell_type == "code" and cell.source.strip():
                cell, resources = self._run_cell(cell, resources, index)
                self._ran.add(index)
            return cell, resources
        if cell.cell_type != "code":
            return super().preprocess_cell(cell, resources, index)
        if is_test_cell(cell) and self._first_test is None:
            self._first_test = index
            self._outputs_before_tests = [copy.deepcopy(c.get("outputs", [])) for c in self.nb.cells[:index]]
        if self._first_test is not None and not is_test_cell(cell):
            return cell, resources            # below the first test only tests run: nothing else reaches the learner
        if is_test_cell(cell) and (index in self._trials or index in self._verdicts):
            return self._judge_cell(cell, resources, index)
        cell, resources = self._run_cell(cell, resources, index)
        if is_test_cell(cell):
            self._verdicts[index] = message_from_outputs(cell.outputs)
        return cell, resources

    def _judge_cell(self, cell, resources, index):
        """A judged test in the visible kernel: its visible observing code runs there; the verdict comes later."""
        if index not in self._trials:
            return cell, resources                # it cannot be judged: its verdict is already said
        probe = copy.deepcopy(cell)
        probe.source = self._trials[index].visible_code
        probe, resources = self._run_cell(probe, resources, index)
        self.nb.cells[index] = cell               # nbclient put the probe (the observing code) in its place
        self._visible[index] = probe.outputs
        return cell, resources

    def _run_cell(self, cell, resources, index):
        if self._kernel_died:
            cell.outputs = [_error("KernelDied", "not run: the kernel stopped in an earlier cell")]
            return cell, resources
        self._output_chars, self._output_cut = 0, False
        self._observing, self._observed = index in self._observing_cells, False
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._kernel_died = True
            self.log.warning("The kernel died in cell %d; the remaining cells are marked as not run", index)
            cell.outputs.append(_error("KernelDied", "the kernel stopped while running this cell (the code exited, "
                                       "killed its own process, or ran out of memory or processes)"))
            return cell, resources
        except Exception as error:
            # No output for too long (CellTimeoutError), or messages the grader cannot read: the code broke the
            # kernel's own I/O, forked processes wrote on its sockets (invalid signatures: ValueError), or it sent a
            # message of its own making that jupyter_client or nbclient choke on (RecursionError on content nested
            # too deep, KeyError or AttributeError on a header of the wrong shape). Only the exception's class is
            # logged: its text may be the kernel's.
            self._kernel_died = True
            self.log.warning("The kernel stopped answering in cell %d (%s); the remaining cells are marked as not "
                             "run", index, type(error).__name__)
            cell.outputs.append(_error("KernelUnresponsive", "the kernel stopped answering while running this cell"))
            return cell, resources


class HiddenRun(threading.Thread):
    """The hidden kernel of one notebook: a fresh sandboxed kernel that runs the learner's cells, then each judged
    test's hidden kernel code (visible and hidden observing lines). It keeps the outputs of the tests' code for the
    judge, and nothing else reaches the notebook.

    Its kernel starts, and imports torch, while the visible kernel runs; it runs nothing of the learner's until the
    visible kernel has been shut down (`visible_done`). The two sandboxes share no writable file and no process, but
    they read the same files, and what one process does to a file it only reads (a lock on it) the other can see:
    run side by side, the learner's code in the hidden kernel could hand what it saw to the visible kernel, whose
    values the feedback may quote. One after the other, there is nobody to hand it to."""

    PRELOAD = ["--IPKernelApp.exec_lines=['import torch as _addnorm_preloaded', 'del _addnorm_preloaded']"]

    def __init__(self, visible: SandboxedExecute, nb, resources, trials: dict[int, Trial]):
        super().__init__(name="addnorm-hidden-kernel", daemon=True)
        self.executor = type(visible)(parent=visible.parent, config=visible.config, log=visible.log)
        self.executor.kernel_name, self.executor._hidden_run = visible.kernel_name, True
        self.executor.extra_arguments = [*self.executor.extra_arguments, *self.PRELOAD]
        self.visible_done = self.executor._visible_done = threading.Event()
        first_test = next(index for index, cell in enumerate(nb.cells) if is_test_cell(cell))
        self.nb = copy.deepcopy(nb)
        for index, cell in enumerate(self.nb.cells):
            if index in trials:
                cell.source = trials[index].hidden_code
            elif index >= first_test and cell.cell_type == "code":
                cell.source = ""                 # below the first test only the tests' code runs, as in the visible one
        self.resources = copy.deepcopy(resources)
        self.trials, self.outputs, self.connection_dirs = trials, {}, []
        self.executor._observing_cells = frozenset(trials)

    def run(self) -> None:
        executor = self.executor
        executor._connection_dirs = self.connection_dirs
        executor._ran = set()
        try:
            executor.preprocess_hidden(self.nb, self.resources)
        except Exception as error:               # the judge then says "no result" for every test left unrun
            executor.log.warning("The hidden kernel stopped before the end of this notebook: %s: %s",
                                 type(error).__name__, str(error)[:300])
        self.outputs = {index: self.nb.cells[index].get("outputs", []) for index in self.trials
                        if index in executor._ran}


def learner_text(nb) -> str:
    """The learner's own cells (their solution cells and cells they added): where a quoted string may come from."""
    def own(cell):
        meta = cell.metadata.get("nbgrader", {})
        return meta.get("solution", False) or not meta
    return "\n".join(cell.source for cell in nb.cells if own(cell))


def _helpers(nb) -> str:
    """A notebook's locked helpers cell (as the gradebook restored it), or ''."""
    return next((c.source for c in nb.cells if c.cell_type == "code"
                 and c.metadata.get("nbgrader", {}).get("grade_id") == HELPERS
                 and c.metadata["nbgrader"].get("locked")), "")


def _error(name, message):
    """An error output, as a failing cell has one (it makes a test cell score zero)."""
    return new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])
