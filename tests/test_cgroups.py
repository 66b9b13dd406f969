"""A learner's server's control group (addnorm_grading.cgroups): the kernel holds its process and memory limits.

On this machine's own hierarchy (cgroup v1 here, v2 on Debian 12: whichever the machine has), a process that joined
a group with a limit of 8 processes cannot start 20, and one that allocates past 64 MiB is ended by the kernel, while
the same program outside the group runs. The other hierarchy's files are checked in a folder laid out as
/sys/fs/cgroup is (the kernel's enforcement is not, there).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from addnorm_grading import cgroups

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making control groups needs root: run the tests as root")

FORKS = "import os, sys\nfor _ in range(20):\n    if os.fork() == 0:\n        os._exit(0)\nprint('started 20')"
ALLOCATES = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); print('allocated 200 MiB')"


@pytest.fixture
def group():
    name = f"test-{uuid.uuid4().hex[:8]}"
    groups = cgroups.make(name, memory_bytes=64 * 2**20, processes=8)
    yield groups
    cgroups.remove(groups)


def run_in(groups, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=(lambda: cgroups.join(groups)) if groups else None)


def test_a_process_in_the_group_cannot_start_more_than_its_limit(group):
    assert "started 20" in run_in(None, FORKS).stdout
    inside = run_in(group, FORKS)
    assert inside.returncode != 0 and "started 20" not in inside.stdout
    assert "BlockingIOError" in inside.stderr or "Resource temporarily unavailable" in inside.stderr, inside.stderr


def test_a_process_in_the_group_is_ended_past_its_memory(group):
    assert run_in(None, ALLOCATES).returncode == 0
    inside = run_in(group, ALLOCATES)
    assert inside.returncode == -9 and "allocated" not in inside.stdout, (inside.returncode, inside.stderr)


def test_the_groups_are_removed_once_empty(group):
    assert all(folder.is_dir() for folder in group)
    assert cgroups.remove(group)
    assert not any(folder.exists() for folder in group)


def test_limits_that_make_no_sense_are_refused_with_what_was_given(tmp_path):
    with pytest.raises(cgroups.CgroupError, match="at least 1, got 0"):
        cgroups.make("alice", memory_bytes=None, processes=0, root=tmp_path)
    with pytest.raises(cgroups.CgroupError, match="plain name, got '../alice'"):
        cgroups.make("../alice", memory_bytes=None, processes=8, root=tmp_path)


def unified_tree(root: Path, controllers: str) -> Path:
    """A folder laid out as cgroup v2's /sys/fs/cgroup: its controllers, and each group's subtree_control."""
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text("cpu\n")
    (root / cgroups.PARENT).mkdir()
    (root / cgroups.PARENT / "cgroup.subtree_control").write_text("\n")
    return root


def test_on_cgroup_v2_the_controllers_are_enabled_and_the_limits_written(tmp_path):
    root = unified_tree(tmp_path, "cpu io memory pids")
    [group] = cgroups.make("alice", memory_bytes=2 * 2**30, processes=512, root=root)
    assert group == root / cgroups.PARENT / "alice"
    assert (root / "cgroup.subtree_control").read_text().split() == ["+memory", "+pids"]
    assert (root / cgroups.PARENT / "cgroup.subtree_control").read_text().split() == ["+memory", "+pids"]
    assert (group / "memory.max").read_text() == f"{2 * 2**30}\n"
    assert (group / "pids.max").read_text() == "512\n"
    cgroups.make("bob", memory_bytes=None, processes=None, root=root)
    assert (root / cgroups.PARENT / "bob" / "memory.max").read_text() == "max\n"


def test_on_cgroup_v2_without_the_controllers_the_error_names_them(tmp_path):
    root = unified_tree(tmp_path, "cpu io")
    with pytest.raises(cgroups.CgroupError, match="no memory or pids controller"):
        cgroups.make("alice", memory_bytes=2**30, processes=512, root=root)


def test_on_cgroup_v1_without_a_controller_the_error_names_it(tmp_path):
    (tmp_path / "memory").mkdir()
    with pytest.raises(cgroups.CgroupError, match="pids controller is not mounted"):
        cgroups.make("alice", memory_bytes=2**30, processes=512, root=tmp_path)
