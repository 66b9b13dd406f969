"""A fresh kernel for the learner's code: the reporting process sends it the cells and reads back one result."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path
from queue import Empty

from jupyter_client.manager import KernelManager

from addnorm_grading.capstone.workbench import MIME


class KernelFailed(RuntimeError):
    """The kernel died, timed out, or gave no result."""


def run_workbench(payload: dict, timeout: float = 600, kernel_name: str = "python3") -> dict:
    """Run `workbench.main(payload)` in a new kernel and return its result (the learner's prints are dropped)."""
    folder = tempfile.TemporaryDirectory(prefix="capstone-kernel-")
    manager = KernelManager(kernel_name=kernel_name, transport="ipc", ip=str(Path(folder.name) / "kernel"),
                            connection_file=str(Path(folder.name) / "kernel.json"))
    manager.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)    # the learner's prints: dropped
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        code = ("from addnorm_grading.capstone.workbench import main as _capstone_main\n"
                f"_capstone_main({json.dumps(json.dumps(payload))})")
        return _result(manager, client, client.execute(code, store_history=False), timeout)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        folder.cleanup()


def _result(manager, client, request: str, timeout: float) -> dict:
    """The workbench's result, read from the kernel's messages until its request is done; a kernel that dies (the
    learner's code exited it) or runs past `timeout` is said so at once."""
    result, error, deadline = None, None, time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            message = client.get_iopub_msg(timeout=1)
        except Empty:
            if not manager.is_alive():
                raise KernelFailed("the kernel stopped (your code exited it, or it ran out of memory)") from None
            continue
        if message["parent_header"].get("msg_id") != request:
            continue
        content, kind = message["content"], message["msg_type"]
        if kind == "display_data" and MIME in content.get("data", {}):
            result = content["data"][MIME]
        elif kind == "error":
            error = f"{content.get('ename')}: {content.get('evalue')}"
        elif kind == "status" and content.get("execution_state") == "idle":
            if result is None:
                raise KernelFailed(f"the kernel gave no result{f' ({error})' if error else ''}")
            return result
    raise KernelFailed(f"the capstone did not finish within {timeout:.0f} s")
