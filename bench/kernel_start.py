"""What a sandboxed kernel's start costs, and what a kernel forked from a process that has imported torch would cost.

Measures, in CPU seconds (user+sys: the machine is shared, wall time means little; see bench/README.md):
1. inside today's sandbox (`addnorm_grading.sandbox.kernel_command`, the kernel replaced by a timed command):
   bwrap and the launchers alone, `import torch, addnorm`, and that with ipykernel's;
2. as root only, a prototype of a per-grading-process zygote, NOT used by grading: this process imports torch, then
   a forked child joins the namespaces bwrap made for a sandbox (as nsenter does), becomes the grader user, drops
   every capability, and runs torch in there; it prints what the child sees (its PID namespace's processes, its
   capabilities) and what the fork and the join cost.

    .venv/bin/python bench/kernel_start.py
"""

from __future__ import annotations

import ctypes
import glob
import os
import pwd
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from addnorm_grading import sandbox
from addnorm_grading.course import read_course

ROOT = Path(__file__).resolve().parent.parent
NAMESPACES = ("cgroup", "ipc", "uts", "net", "pid", "mnt")     # bwrap's (owned by the grader's user namespace)
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, CAPABILITY_VERSION_3 = 24, 38, 0x20080522


def sandboxed(command: list[str]) -> list[str]:
    """Today's sandbox around `command` (in place of ipykernel), in a throw-away connection folder."""
    settings = sandbox.Settings(read_course(ROOT / "course.toml").sandbox, hidden=())
    connection = sandbox.prepare(Path(tempfile.mkdtemp(prefix="kernel-")), settings) / "kernel.json"
    connection.write_text("{}")
    sandbox.stage_submission(Path.cwd(), connection.parent)
    if sandbox.is_root():
        sandbox.hand_connection_files_to_grader(connection, settings.limits.user)
    full = sandbox.kernel_command(connection, [], settings)
    return full[:full.index("sh")] + command                   # bwrap ... prlimit ... -- command


def inside(code: str) -> str:
    """`python -c code` timed by /usr/bin/time inside the sandbox (its CPU does not reach this process's rusage)."""
    run = subprocess.run(sandboxed(["/usr/bin/time", "-f", "%U %S", sys.executable, "-c", code]),
                         capture_output=True, text=True, check=True)
    user, system = run.stderr.split()[-2:]
    return f"{float(user) + float(system):.2f}"


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def forked_into(payload_pid: int, user: str) -> None:
    """In a forked child: join the sandbox of `payload_pid`, become `user` with no capability, report, exit."""
    libc = ctypes.CDLL(None, use_errno=True)

    def ok(result: int, what: str) -> None:
        if result != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    files = {name: os.open(f"/proc/{payload_pid}/ns/{name}", os.O_RDONLY) for name in (*NAMESPACES, "user")}
    for name in NAMESPACES:                                    # as root: these belong to the initial user namespace
        ok(libc.setns(files[name], 0), f"setns {name}")
    account = pwd.getpwnam(user)
    os.setgroups([])                                           # before the user namespace, where setgroups is denied
    os.setresgid(account.pw_gid, account.pw_gid, account.pw_gid)
    os.setresuid(account.pw_uid, account.pw_uid, account.pw_uid)    # root's capabilities are gone here
    ok(libc.setns(files["user"], 0), "setns user")             # as its owner; this grants every capability in it...
    for capability in range(64):
        libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
    ok(libc.capset(ctypes.byref(_Header(CAPABILITY_VERSION_3, 0)), (_Data * 2)()), "capset")   # ...dropped here
    ok(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    os.environ.clear()
    child = os.fork()                                          # the PID namespace applies to children
    if child == 0:
        import torch
        status = [line.split()[0] + line.split()[1][-4:] for line in open("/proc/self/status")
                  if line.startswith(("CapEff", "CapBnd", "NoNewPrivs"))]
        print(f"  the forked kernel: pid {os.getpid()} in the sandbox, uid {os.getuid()}, {' '.join(status)}, sees "
              f"processes {sorted(int(p[6:]) for p in glob.glob('/proc/[0-9]*'))}, the course folder: "
              f"{os.path.exists(ROOT / 'solutions')}, torch: {float(torch.ones(2, 2).sum())}", flush=True)
        os._exit(0)
    os.waitpid(child, 0)
    os._exit(0)


def zygote_prototype() -> None:
    """Fork a torch-loaded child into a running sandbox; print what it cost and what the child saw."""
    marker = f"61.{os.getpid()}"                                # a sleep that names this run
    launcher = subprocess.Popen(sandboxed(["sleep", marker]))
    try:
        started = time.monotonic()
        payload = None
        while payload is None and time.monotonic() - started < 30:
            time.sleep(0.2)
            payload = next((int(p.split("/")[2]) for p in glob.glob("/proc/[0-9]*/cmdline")
                            if Path(p).read_bytes() == f"sleep\0{marker}\0".encode()), None)
        before = time.process_time()
        import torch  # noqa: F401  (the zygote's import)
        import ipykernel.kernelapp  # noqa: F401
        print(f"the zygote's import of torch and ipykernel: {time.process_time() - before:.2f} CPU s")
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        parent = time.process_time()
        pid = os.fork()
        if pid == 0:
            forked_into(payload, read_course(ROOT / "course.toml").sandbox.user)
        os.waitpid(pid, 0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        print(f"fork + join + drop + a torch sum in the child: "
              f"{after.ru_utime - children.ru_utime + after.ru_stime - children.ru_stime:.3f} CPU s in the children, "
              f"{time.process_time() - parent:.3f} s in the zygote")
    finally:
        launcher.kill()
        launcher.wait()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="addnorm-kernel-start-") as folder:
        tempfile.tempdir = folder                               # every folder below is made in it, and removed
        os.chdir(tempfile.mkdtemp(prefix="submission-"))
        measure()
        os.chdir(ROOT)
    return 0


def measure() -> None:
    print("inside today's sandbox, CPU s: nothing", inside("pass"), "| import torch, addnorm",
          inside("import torch, addnorm"), "| with ipykernel", inside("import ipykernel.kernelapp, torch, addnorm"))
    if sandbox.is_root():
        zygote_prototype()
    else:
        print("(the zygote prototype needs root: it joins namespaces that bwrap made as root)")


if __name__ == "__main__":
    sys.exit(main())
