"""Forked kernels: one process per grading process imports torch once, and every sandboxed kernel is forked from it.

Why this module exists: a judged notebook runs in two kernels (`addnorm_grading.execute`), and most of a kernel's
start is `import torch` (2.7 CPU s here, against 0.03-0.05 s for a fork of a process that has imported it:
bench/kernel_start.py, bench/README.md). The isolation stays the operating system's: the sandbox launcher
(`addnorm_grading.sandbox`) starts bubblewrap exactly as for a kernel of its own, but the sandbox's program only
waits (it reads a FIFO, `ALIVE`, in the connection folder); the launcher then asks the zygote, over a Unix socket
in a folder no kernel sees, to put a kernel into that sandbox. The zygote forks a child that does what `nsenter`
does — it joins the waiting program's namespaces (cgroup, IPC, UTS, network, PID, mount) and becomes the grader
user; the kernel it forks makes a user namespace of its own, drops every capability, sets no_new_privs, installs
the seccomp filter (`addnorm_grading.syscall_filter`) and the sandbox's limits, and runs ipykernel in-process on the
imports it already has.

What a forked kernel has, compared with a kernel started by the launcher: the same namespaces, mounts, user,
limits, environment, working directory and staged files; the same PID namespace (its own /proc lists only the
sandbox's processes: bwrap's init, the waiting program, the kernel and its children); and the zygote's memory,
copy-on-write, which holds the imports (ipykernel and torch, never addnorm) and nothing else (a fresh interpreter
started with a clean environment, in /, that reads no file of the course). Its lifetime is the sandbox's: the
kernel holds the FIFO open, so its end ends the waiting program and with it the sandbox; the sandbox's end (bwrap
dies with the launcher, which jupyter_client kills, or which ends itself when its grading process is gone) kills
the kernel.

Only for a grader that runs as root (bwrap's namespaces then belong to the initial user namespace, where the
zygote can join them); otherwise, or with `c.SandboxedExecute.fork_kernels = False`, or when the zygote fails,
each kernel starts as before.

    python -P -m addnorm_grading.zygote SOCKET PARENT   (started by `start`, for the grading process's lifetime)
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import pwd
import random
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from addnorm_grading import syscall_filter

ALIVE = "alive"                   # the FIFO in the connection folder: the sandbox lives while the kernel holds it
NAMESPACES = ("cgroup", "ipc", "uts", "net", "pid", "mnt")    # bwrap's, joined as root
REQUEST_BYTES = 1 << 20
START_SECONDS = 20                # the longest a kernel's set-up may take before the zygote gives up on it
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
CLONE_NEWUSER = 0x10000000
CAPABILITY_VERSION_3 = 0x20080522
_libc = ctypes.CDLL(None, use_errno=True)


class ZygoteError(RuntimeError):
    """The zygote could not put a kernel into its sandbox (the launcher then starts the kernel itself)."""


# ---- the grading process's side -----------------------------------------------------------------------------

_started: tuple[subprocess.Popen, Path] | None = None


def start(environment: dict[str, str]) -> Path:
    """The zygote of this grading process (started on first use, ended with the process): its socket's path.

    `environment` is what the zygote's interpreter starts with (its imports may read it: OMP_NUM_THREADS)."""
    global _started
    if _started is not None and _started[0].poll() is None:
        return _started[1]
    folder = Path(tempfile.mkdtemp(prefix="addnorm-zygote-"))       # 0700: no kernel, no other user reaches it
    path = folder / "socket"
    process = subprocess.Popen([sys.executable, "-P", "-m", "addnorm_grading.zygote", str(path), str(os.getpid())],
                               cwd="/", env=environment, stdin=subprocess.DEVNULL, close_fds=True,
                               start_new_session=True)
    _started = process, path
    atexit.register(_stop, process, folder, os.getpid())
    return path


def _stop(process: subprocess.Popen, folder: Path, starter: int) -> None:
    if os.getpid() != starter:                  # a forked copy of the grading process leaves its zygote alone
        return
    process.kill()
    process.wait()
    shutil.rmtree(folder, ignore_errors=True)


# ---- the launcher's side ------------------------------------------------------------------------------------

def request_kernel(socket_path: Path, request: dict, descriptors: tuple[int, int, int],
                   wait_seconds: float = 60) -> None:
    """Ask the zygote at `socket_path` for a kernel (`request`: see `_enter`), handing it `descriptors` as the
    kernel's standard input, output and error; return once the kernel runs in its sandbox, or raise ZygoteError."""
    deadline = time.monotonic() + wait_seconds
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        while True:                                   # the zygote may still be importing torch
            try:
                connection.connect(str(socket_path))
                break
            except (FileNotFoundError, ConnectionRefusedError) as error:
                if time.monotonic() > deadline:
                    raise ZygoteError(f"no zygote answers at {socket_path}: {error}") from None
                time.sleep(0.05)
        connection.settimeout(max(1.0, deadline - time.monotonic()))
        socket.send_fds(connection, [json.dumps(request).encode()], list(descriptors))
        connection.shutdown(socket.SHUT_WR)
        try:
            answer = connection.recv(4096).decode(errors="replace")
        except OSError as error:
            raise ZygoteError(f"the zygote did not answer: {error}") from None
    if answer != "started":
        raise ZygoteError(f"the zygote could not start the kernel: {answer or 'no answer'}")


# ---- the zygote ---------------------------------------------------------------------------------------------

def serve(socket_path: Path, parent: int) -> None:
    """Import what every kernel needs, then fork a kernel for each request, one at a time, until the grading
    process `parent` ends (within a second: it is no longer this process's parent then). Not PR_SET_PDEATHSIG:
    its signal comes when the *thread* that started the zygote ends, and a grader's kernels start from several
    threads (the hidden kernel's is one per notebook; a Dask worker grades in a thread of its own), so the zygote
    would be killed after the first notebook, with the next one's kernel on its way (a 60 s wait for a kernel that
    never answers)."""
    import ipykernel.kernelapp  # noqa: F401  (the imports every kernel shares, copy-on-write)
    import torch  # noqa: F401
    # not addnorm: a kernel imports it in its sandbox, where it is the copy with the exercise's answers withheld
    # (addnorm_grading.withheld); the real package's functions would come with this process's memory
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    os.chmod(socket_path, 0o600)
    listener.listen(16)
    listener.settimeout(1.0)
    while os.getppid() == parent:
        _reap()
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        with connection:
            connection.settimeout(START_SECONDS)
            try:
                answer = _serve_one(connection, listener)
            except Exception as error:                       # one bad request never ends the zygote
                answer = f"{type(error).__name__}: {error}"
            try:
                connection.sendall(answer.encode())
            except OSError:
                pass


def _serve_one(connection: socket.socket, listener: socket.socket) -> str:
    """Read one request (from root only), fork its kernel's set-up; 'started' once the kernel runs, else why not."""
    uid = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    message, descriptors, _, _ = socket.recv_fds(connection, REQUEST_BYTES, 3)   # read before any answer: a socket
    try:                                                     # closed on unread bytes resets, and the answer is lost
        if uid != 0:
            return f"requests are taken from root only (this one is from uid {uid})"
        request = json.loads(message)
        if len(descriptors) != 3:
            return f"expected 3 descriptors (standard input, output, error), got {len(descriptors)}"
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:                                          # the set-up child
            status = 1
            try:
                listener.close()
                connection.close()
                os.close(read_end)
                status = _enter(request, descriptors, write_end)
            except BaseException as error:                   # noqa: B036 (a forked child must never return)
                _say(write_end, f"{type(error).__name__}: {error}")
            finally:
                os._exit(status)
        os.close(write_end)
        return _started_or_why(pid, read_end)
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def _started_or_why(pid: int, read_end: int) -> str:
    """What the set-up child says on its pipe: 'started', an error, or nothing in time (then it is killed)."""
    deadline, said = time.monotonic() + START_SECONDS, b""
    os.set_blocking(read_end, False)
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(read_end, 4096)
            except BlockingIOError:
                time.sleep(0.002)
                continue
            if not chunk:
                break
            said += chunk
            if said.startswith(b"started"):
                return "started"
        else:
            os.kill(pid, signal.SIGKILL)
            return f"the kernel's set-up took more than {START_SECONDS} s"
    finally:
        os.close(read_end)
    return said.decode(errors="replace") or "the kernel's set-up ended without a word"


def _reap() -> None:
    """Collect the set-up children that have ended (each ends once its kernel is started)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _say(descriptor: int, text: str) -> None:
    try:
        os.write(descriptor, text.encode()[:4000])
    except OSError:
        pass


def _ok(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


class _CapabilityHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapabilityData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _enter(request: dict, descriptors: list[int], report: int) -> int:
    """In the set-up child (root): join the sandbox of request['payload'], become request['user'], fork the kernel
    into it (`_be_kernel`), and say 'started' on `report`.

    The order is forced (bench/README.md): bwrap (run as root) made its namespaces in the initial user namespace,
    so they are joined as root; then the supplementary groups are cleared and the user changed, which drops root's
    capabilities. The waiting program stays root (with no capability), so the kernel can neither signal it nor
    trace it: only the sandbox's end, or the kernel's, ends it."""
    payload = int(request["payload"])
    namespaces = {name: os.open(f"/proc/{payload}/ns/{name}", os.O_RDONLY) for name in NAMESPACES}
    for name in NAMESPACES:
        _ok(_libc.setns(namespaces[name], 0), f"joining the sandbox's {name} namespace")
        os.close(namespaces[name])
    account = pwd.getpwnam(request["user"])
    os.setgroups([])
    os.setresgid(account.pw_gid, account.pw_gid, account.pw_gid)
    os.setresuid(account.pw_uid, account.pw_uid, account.pw_uid)
    _ok(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "making the kernel an ordinary process")  # as after an exec
    alive = _hold_open(request["alive"])
    os.chdir(request["cwd"])
    # The PID namespace applies to children; a grandchild, orphaned at once, becomes a child of the sandbox's
    # init, as a kernel that bwrap started is (its parent is then pid 1 of the sandbox, not a process outside it).
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            _be_kernel(request, descriptors, alive, report)
        os._exit(0)
    os.waitpid(middle, 0)
    _say(report, "started")
    return 0


def _own_user_namespace(uid: int, gid: int) -> None:
    """A user namespace of the kernel's own, where it is the same user (as `unshare --user --map-current-user`):
    its process cap then counts this kernel's processes alone. Being its owner grants every capability in it,
    so they are all dropped here, and no_new_privs set."""
    _ok(_libc.unshare(CLONE_NEWUSER), "making the kernel's user namespace")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    for capability in range(64):
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
    _ok(_libc.capset(ctypes.byref(_CapabilityHeader(CAPABILITY_VERSION_3, 0)), (_CapabilityData * 2)()),
        "dropping every capability")
    _ok(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "setting no_new_privs")
    syscall_filter.load()                         # the system calls no kernel may make, as bwrap's --seccomp


def _hold_open(fifo: str) -> int:
    """The FIFO's write end, opened once the waiting program reads it (it ends when every writer has closed)."""
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            descriptor = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(descriptor, True)
            return descriptor
        except OSError as error:                        # ENXIO: nobody reads it yet
            if time.monotonic() > deadline:
                raise OSError(error.errno, f"the sandbox's waiting program never opened {fifo}") from None
            time.sleep(0.002)


def _be_kernel(request: dict, descriptors: list[int], alive: int, report: int) -> None:
    """In the forked kernel: its own session and user namespace, the limits, the launcher's standard streams, nothing else of the zygote's
    descriptors but the FIFO, a fresh environment, the staged files, then ipykernel. Never returns."""
    status = 1
    try:
        os.close(report)
        os.setsid()
        _own_user_namespace(os.getuid(), os.getgid())
        for name, value in request["limits"].items():               # sandbox.resource_limits: as, nproc, ...
            resource.setrlimit(getattr(resource, f"RLIMIT_{name.upper()}"), (value, value))
        for target, descriptor in enumerate(descriptors):
            os.dup2(descriptor, target)
        os.dup2(alive, 3)
        os.closerange(4, os.sysconf("SC_OPEN_MAX"))
        for number in range(1, signal.NSIG):
            try:
                signal.signal(number, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.environ.clear()
        os.environ.update(request["environment"])
        _copy_staged(Path(request["staged"]), Path(request["cwd"]))
        random.seed()                                       # as a fresh interpreter would be seeded
        import torch
        torch.set_num_threads(int(request["threads"]))
        from ipykernel import kernelapp
        sys.argv = [sys.executable, "-m", "ipykernel_launcher", *request["argv"]]
        kernelapp.launch_new_instance(argv=request["argv"])
        status = 0
    except BaseException as error:                       # noqa: B036
        _say(2, f"the forked kernel stopped: {type(error).__name__}: {error}\n")
    finally:
        os._exit(status)


def _copy_staged(staged: Path, cwd: Path) -> None:
    """The submission's files (no notebook), as `cp -R staged/. .` copies them into the writable scratch."""
    if staged.is_dir():
        try:
            shutil.copytree(staged, cwd, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error):
            pass


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    serve(Path(sys.argv[1]), int(sys.argv[2]))
