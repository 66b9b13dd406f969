"""hub/hubctl.py's own decisions that need no hub (the hub itself: tests/test_hub.py and tests/test_hub_pods.py)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("hubctl", ROOT / "hub" / "hubctl.py")
hubctl = sys.modules["hubctl"] = importlib.util.module_from_spec(spec)      # its dataclasses look itself up
spec.loader.exec_module(hubctl)


def test_a_repository_that_every_user_can_read_is_told_apart_from_a_private_one():
    top = Path(tempfile.mkdtemp(dir="/tmp"))               # /tmp and / let others through
    try:
        solutions = top / "course" / "solutions"
        solutions.mkdir(parents=True)
        for folder in (top, top / "course", solutions):
            os.chmod(folder, 0o755)
        assert hubctl.readable_by_everyone(solutions)
        os.chmod(top, 0o700)                                # the guide's advice: a folder only its owner enters
        assert not hubctl.readable_by_everyone(solutions)
        os.chmod(top, 0o755)
        os.chmod(solutions, 0o711)                          # others may pass, not list
        assert not hubctl.readable_by_everyone(solutions)
        assert not hubctl.readable_by_everyone(top / "course" / "checks")   # none there
    finally:
        shutil.rmtree(top)
