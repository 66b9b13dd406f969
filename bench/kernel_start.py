"""What a sandboxed kernel's start costs, and what a kernel forked from a process that has imported torch would cost.

Measures, in CPU seconds (user+sys: the machine is shared, wall time means little; see bench/README.md):
1. inside today's sandbox (`addnorm_grading.sandbox.kernel_command`, the kernel replaced by a timed command):
   bwrap and the launchers alone, `import torch, addnorm`, and that with ipykernel's;
2. as root only, kernels started as grading starts them (the addnorm-sandbox kernelspec): forked from a zygote
   (`addnorm_grading.zygote`, which replaced this file's prototype of it) and each a fresh interpreter, in wall
   seconds to the last kernel's answer, and what a kernel sees (uid, capabilities, processes, the course folder).

    .venv/bin/python bench/kernel_start.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from addnorm_grading import sandbox
from addnorm_grading.course import read_course

ROOT = Path(__file__).resolve().parent.parent
KERNELS_PER_RUN = 4


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


def started_kernels(count: int, forked: bool) -> float:
    """Start `count` kernels through the addnorm-sandbox kernelspec, as grading does (forked from a zygote, or each
    a fresh interpreter), wait until each answers, print what the first one sees; the wall seconds to the last."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    from addnorm_grading import zygote
    from addnorm_grading.execute import KERNELS, SandboxedExecute

    limits = read_course(ROOT / "course.toml").sandbox
    socket_path = str(zygote.start(SandboxedExecute._zygote_environment(limits))) if forked else ""
    settings = sandbox.Settings(limits, hidden=(), zygote=socket_path)
    started, running = time.monotonic(), []
    try:
        for number in range(count):
            folder = sandbox.prepare(Path(tempfile.mkdtemp(prefix="kernel-")), settings)
            manager = KernelManager(kernel_name="addnorm-sandbox", transport="ipc", ip=str(folder / "ipc"),
                                    connection_file=str(folder / "kernel.json"))
            manager.kernel_spec_manager = KernelSpecManager(kernel_dirs=[str(KERNELS)])
            manager.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            client = manager.client()
            client.start_channels()
            client.wait_for_ready(timeout=120)
            running.append((manager, client))
            if number == 0:
                print("  the first kernel sees:", what_it_sees(client))
        return time.monotonic() - started
    finally:
        for manager, client in running:
            client.stop_channels()
            manager.shutdown_kernel(now=True)


def what_it_sees(client) -> str:
    """Its uid, capabilities, no_new_privs, processes, whether the course folder exists, torch's thread count."""
    code = ("import glob, os, torch; print(os.getuid(), [l.split()[0] + l.split()[1][-4:]"
            " for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapBnd', 'NoNewPrivs'))],"
            " sorted(int(p[6:]) for p in glob.glob('/proc/[0-9]*')),"
            f" os.path.exists({str(ROOT / 'solutions')!r}), torch.get_num_threads())")
    printed: list[str] = []
    reply = client.execute_interactive(code, timeout=60,
                                       output_hook=lambda message: printed.append(message["content"].get("text", "")))
    return "".join(printed).strip() or str(reply["content"])


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
    if not sandbox.is_root():
        print("(forked kernels need root: the zygote joins namespaces that bwrap made as root)")
        return
    for forked in (True, False):
        seconds = started_kernels(KERNELS_PER_RUN, forked)
        how = "forked from the zygote (its own start included)" if forked else "each a fresh interpreter"
        print(f"{KERNELS_PER_RUN} kernels {how}: {seconds:.1f} s wall to the last one's answer")


if __name__ == "__main__":
    sys.exit(main())
