"""Running a submission for autograde: a time budget per notebook, and the kernel in the grading sandbox.

`BudgetedExecute` is nbgrader's Execute with a budget for the whole notebook on top of the per-cell timeout.
`SandboxedExecute` starts each kernel through the `addnorm-sandbox` kernelspec (`addnorm_grading.sandbox`), tells
it the limits of course.toml, and keeps grading the rest when a kernel dies. nbgrader_config.py names them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import fields
from functools import cached_property
from importlib.resources import files
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Integer, Unicode, default

from addnorm_grading import sandbox
from addnorm_grading.course import SandboxLimits, read_course

SANDBOX_KERNEL = "addnorm-sandbox"
KERNELS = files("addnorm_grading") / "kernels"           # the addnorm-sandbox kernelspec, installed with the package
UNSAFE_VARIABLE = "ADDNORM_UNSAFE_GRADING"


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

    _refusal = None                                     # the reason the sandbox cannot run, once known

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

    @property
    def sandboxed(self) -> bool:
        """Whether kernels start in the sandbox (any other kernel_name is the documented opt-out)."""
        return self.kernel_name == SANDBOX_KERNEL

    def settings(self) -> sandbox.Settings:
        """What the sandbox launcher is told: these limits, and nbgrader's exchange hidden."""
        limits = SandboxLimits(**{limit.name: getattr(self, limit.name) for limit in fields(SandboxLimits)})
        return sandbox.Settings(limits, hidden=(str(self.course.exchange),))

    def preprocess(self, nb, resources=None, km=None):
        self._kernel_died = False
        self._connection_dirs = []
        if self.sandboxed:
            self._refuse_if_unavailable()
        try:
            return super().preprocess(nb, resources, km)
        finally:
            for folder in self._connection_dirs:
                shutil.rmtree(folder, ignore_errors=True)

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
            km.transport = "ipc"
            km.connection_file = str(connection_folder / "kernel.json")
            km.ip = str(connection_folder / "ipc")
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
