"""A fresh kernel for the learner's code: the reporting process sends it the cells and reads back one result."""

from __future__ import annotations

import json
import subprocess
import tempfile
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
        result, error = None, None

        def collect(message):
            nonlocal result, error
            content = message["content"]
            if message["msg_type"] == "display_data" and MIME in content.get("data", {}):
                result = content["data"][MIME]
            elif message["msg_type"] == "error":
                error = f"{content.get('ename')}: {content.get('evalue')}"

        try:
            client.execute_interactive(code, timeout=timeout, output_hook=collect, store_history=False)
        except (TimeoutError, Empty):
            raise KernelFailed(f"the capstone did not finish within {timeout:.0f} s") from None
        if result is None:
            raise KernelFailed(f"the kernel gave no result{f' ({error})' if error else ''}")
        return result
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        folder.cleanup()
