"""Forked kernels (addnorm_grading.zygote): a kernel forked into its sandbox is the kernel the launcher would start,
with nothing of root's and nothing of the zygote's but the imports; and when the zygote fails, the launcher starts
the kernel itself. The class-sized checks (traces, limits, attacks) are tests/test_sandbox.py's, which grade with
forked kernels as root."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

from addnorm_grading import sandbox, zygote
from addnorm_grading.course import read_course
from addnorm_grading.execute import KERNELS, SandboxedExecute

ROOT = Path(__file__).resolve().parent.parent
LIMITS = read_course(ROOT / "course.toml").sandbox

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sandbox.is_root() or sandbox.missing(LIMITS.user) is not None,
                                 reason="kernels are forked only by a root grader with the sandbox")]

DESCRIBE = """
import glob, os, sys
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print("torch" in sys.modules, status["CapEff"].strip(), status["CapBnd"].strip(), status["NoNewPrivs"].strip(),
      os.getuid(), os.getppid(), sorted(int(p[6:]) for p in glob.glob("/proc/[0-9]*")), sorted(os.listdir(".")),
      os.environ.get("HOME"), os.path.exists(%r))
""" % str(ROOT / "solutions")


def run_in_kernel(settings: sandbox.Settings, code: str, submission: Path) -> tuple[str, str]:
    """Start a sandboxed kernel as SandboxedExecute does, run `code`; (its stdout on IOPub, what the launcher's
    process wrote on its standard output and error)."""
    folder = Path(tempfile.mkdtemp(prefix="addnorm-kernel-"))
    connection = sandbox.prepare(folder, settings)
    manager = KernelManager(kernel_name="addnorm-sandbox")
    manager.kernel_spec_manager = KernelSpecManager(kernel_dirs=[str(KERNELS)])
    manager.transport, manager.ip = "ipc", str(connection / "ipc")
    manager.connection_file = str(connection / "kernel.json")
    launcher_err, outputs = folder / "launcher.err", []
    with open(launcher_err, "w") as err:
        manager.start_kernel(cwd=str(submission), stdout=err, stderr=err)
        client = manager.client()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=60)
            reply = client.execute_interactive(code, timeout=60, output_hook=lambda msg: outputs.append(msg))
            assert reply["content"]["status"] == "ok", reply["content"]
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
    text = "".join(msg["content"].get("text", "") for msg in outputs if msg["msg_type"] == "stream")
    return text, launcher_err.read_text()


@pytest.fixture()
def submission(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "data.txt").write_text("the learner's file")
    return folder


def test_a_forked_kernel_has_torch_and_nothing_of_roots(submission):
    socket_path = zygote.start(SandboxedExecute._zygote_environment(LIMITS))
    settings = sandbox.Settings(LIMITS, hidden=(), zygote=str(socket_path))
    text, _ = run_in_kernel(settings, DESCRIBE, submission)
    grader = pwd.getpwnam(LIMITS.user).pw_uid
    zeros = "0000000000000000"
    assert text.split("[")[0].split() == ["True", zeros, zeros, "1", str(grader), "1"], text
    assert "[1, 2, " in text, text                       # bwrap's init, the waiting program, the kernel (and no more)
    assert "['data.txt'] /tmp False" in text, text      # the staged files, the sandbox's HOME, no course folder
    assert str(socket_path.parent) not in text
    folder = socket_path.parent
    assert folder.stat().st_uid == 0 and folder.stat().st_mode & 0o077 == 0, "only root reaches the zygote"


def test_a_zygote_that_refuses_costs_only_the_fork(submission, tmp_path):
    """The launcher then starts the kernel itself, in the sandbox, and says so on its stderr."""
    refusing = tmp_path / "refusing.socket"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(refusing))
    server.listen()

    def refuse():
        connection, _ = server.accept()
        with connection:
            socket.recv_fds(connection, 1 << 16, 3)
            connection.sendall(b"no")
    threading.Thread(target=refuse, daemon=True).start()
    settings = sandbox.Settings(LIMITS, hidden=(), zygote=str(refusing))
    text, launcher = run_in_kernel(settings, DESCRIBE, submission)
    assert "no forked kernel" in launcher and "could not start the kernel: no" in launcher, launcher
    assert text.startswith("False "), text               # a fresh interpreter: no torch before the learner's import
    assert "['data.txt'] /tmp False" in text, text
    server.close()


WRITES_ON_ITS_OWN_OUTPUT = """
import os, subprocess, sys
mark = "addnorm-" + "kernel-output"                 # not in the source: only a write can put it in the launcher's
os.write(1, (mark + " database is locked\\n").encode()); os.write(2, (mark + "\\n").encode())
sys.__stdout__.write(mark); sys.__stdout__.flush(); sys.__stderr__.write(mark); sys.__stderr__.flush()
subprocess.run(["sh", "-c", f"echo {mark}; echo {mark} >&2"])
print("written")
"""


@pytest.mark.parametrize("forked", [True, False], ids=["forked", "started"])
def test_a_kernel_writes_nothing_on_the_graders_output(submission, forked):
    """What a kernel writes on its descriptors 1 and 2 (nbgrader's own output, where a grading script looks for
    nbgrader's messages) goes nowhere, whether the zygote forked it or the launcher started it."""
    zygote_socket = str(zygote.start(SandboxedExecute._zygote_environment(LIMITS))) if forked else ""
    text, launcher = run_in_kernel(sandbox.Settings(LIMITS, hidden=(), zygote=zygote_socket),
                                   WRITES_ON_ITS_OWN_OUTPUT, submission)
    assert "written" in text, text
    assert "addnorm-kernel-output" not in launcher, launcher


def test_the_zygote_takes_requests_from_root_only():
    """Even where the grader user could reach its socket (never, in grading: the socket is root's, 0600, in a
    folder that is root's, 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="addnorm-open-zygote-"))
    os.chmod(folder, 0o777)
    path = folder / "socket"
    process = subprocess.Popen([sys.executable, "-P", "-m", "addnorm_grading.zygote", str(path), str(os.getpid())], cwd="/",
                               env=SandboxedExecute._zygote_environment(LIMITS))
    try:
        for _ in range(1200):                    # the zygote imports torch before it listens
            if path.exists():
                break
            time.sleep(0.05)
        os.chmod(path, 0o666)
        ask = ("import json, socket, time\n"
               "s = socket.socket(socket.AF_UNIX)\n"
               "for _ in range(600):\n"
               "    try:\n        s.connect(%r); break\n"
               "    except OSError:\n        time.sleep(0.05)\n"
               "socket.send_fds(s, [json.dumps({'payload': 1}).encode()], [0, 1, 2]); s.shutdown(socket.SHUT_WR)\n"
               "print(s.recv(4096).decode())\n" % str(path))
        run = subprocess.run(["setpriv", f"--reuid={LIMITS.user}", f"--regid={LIMITS.user}", "--clear-groups",
                              sys.executable, "-c", ask], capture_output=True, text=True, timeout=120)
        assert "from root only" in run.stdout, run.stdout + run.stderr
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


OUTLIVES = """
import os, sys, threading, time
from pathlib import Path
from addnorm_grading import zygote
from addnorm_grading.course import read_course
from addnorm_grading.execute import SandboxedExecute

environment = SandboxedExecute._zygote_environment(read_course(Path(%r)).sandbox)
starter = threading.Thread(target=lambda: (zygote.start(environment), time.sleep(2)))   # a hidden kernel's thread
starter.start()
starter.join()
time.sleep(3)
process = zygote._started[0]
print(process.pid, process.poll(), flush=True)
os._exit(0)                                   # the grading process ends, with no clean-up of its own
"""


def test_the_zygote_outlives_the_thread_that_started_it_and_ends_with_its_process():
    """A grader starts kernels from several threads (the hidden kernel's, one per notebook; a Dask worker grades in
    a thread of its own): the zygote lives as long as the grading process, not as long as the thread that happened
    to start it (a zygote killed with that thread left the next notebook's kernel unanswered for 60 s)."""
    run = subprocess.run([sys.executable, "-c", OUTLIVES % str(ROOT / "course.toml")], capture_output=True,
                         text=True, timeout=120)
    pid, status = run.stdout.split()
    assert status == "None", f"the zygote ended with the thread that started it (status {status}): {run.stderr}"
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2], \
        "the zygote outlived its grading process"


ORPHANED = """
import os, sys, tempfile
from pathlib import Path
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from addnorm_grading import sandbox, zygote
from addnorm_grading.course import read_course
from addnorm_grading.execute import KERNELS, SandboxedExecute

limits = read_course(Path(%r)).sandbox
settings = sandbox.Settings(limits, hidden=(), zygote=str(zygote.start(SandboxedExecute._zygote_environment(limits))))
connection = sandbox.prepare(Path(tempfile.mkdtemp(prefix="addnorm-kernel-")), settings)
manager = KernelManager(kernel_name="addnorm-sandbox")
manager.kernel_spec_manager = KernelSpecManager(kernel_dirs=[str(KERNELS)])
manager.transport, manager.ip = "ipc", str(connection / "ipc")
manager.connection_file = str(connection / "kernel.json")
manager.start_kernel(cwd=%r)
client = manager.client()
client.start_channels()
client.wait_for_ready(timeout=60)
print(manager.provisioner.process.pid, flush=True)
os._exit(0)                                   # the grading process is killed: no kernel is shut down
"""


def _descendants(pid: int) -> list[int]:
    """The processes below `pid` (children, their children, ...)."""
    found, queue = [], [pid]
    while queue:
        parent = queue.pop()
        try:
            children = [int(c) for c in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
        except OSError:
            children = []
        found += children
        queue += children
    return found


def _running() -> list[int]:
    """The machine's processes that have not ended (zombies left out)."""
    running = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                running.append(int(name))
        except OSError:
            pass
    return running


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def test_a_killed_grading_process_leaves_no_launcher_and_no_kernel(submission):
    """A grading process killed with its kernels running (a worker killed mid-grade, `kill -9`) cannot shut them
    down: each launcher sees that its grading process is gone and ends its sandbox, and the forked kernel with it
    (left running, they kept their memory and a copy of a submission until the machine restarted)."""
    grader = subprocess.Popen([sys.executable, "-c", ORPHANED % (str(ROOT / "course.toml"), str(submission))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    launcher = int(grader.stdout.readline() or 0)
    assert launcher > 0, grader.communicate(timeout=60)[1]
    sandboxes = {_pid_namespace(pid) for pid in _descendants(launcher)} - {_pid_namespace(os.getpid()), None}
    assert sandboxes, "the launcher's sandbox was not found"
    grader.wait(timeout=60)
    deadline = time.monotonic() + 15
    left: list[int] = [launcher]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [pid for pid in _running() if pid == launcher or _pid_namespace(pid) in sandboxes]
    for pid in left:                                    # a failing run leaves the machine as it found it
        os.kill(pid, signal.SIGKILL)
    assert not left, f"left running after their grading process was killed: {left}"
