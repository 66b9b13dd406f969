"""A control group for each learner's server: its memory and its number of processes limited, as a pod's are.

Every learner's server may run as one Unix user (addnorm_grading.hub_spawner), and Unix limits are per user: one
learner's fork bomb would take the processes of every server, and one learner's tensors the memory of the machine.
A pod on Kubernetes has limits of its own, set in its cgroup; here each server gets one too, made with the kernel's
own interface (the files of /sys/fs/cgroup, as container runtimes and systemd write them):

    cgroup v2 (one hierarchy, Debian 12's default)   /sys/fs/cgroup/addnorm-servers/<name>/{memory.max,pids.max}
    cgroup v1 (a hierarchy per controller)           /sys/fs/cgroup/memory/addnorm-servers/<name>/memory.limit_in_bytes
                                                     /sys/fs/cgroup/pids/addnorm-servers/<name>/pids.max

The server's first process joins its groups before it runs anything (`join`, from the spawner's preexec_fn), so
everything it starts is inside; the kernel then refuses a fork past the process limit and ends what allocates past
the memory limit, in that server alone. Making groups needs root (the hub's spawner runs as root).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PARENT = "addnorm-servers"          # every server's group is under this one
CONTROLLERS = ("memory", "pids")


class CgroupError(RuntimeError):
    """The limits cannot be set here (the message says which file refused, and why)."""


def is_unified(root: Path = ROOT) -> bool:
    """Whether the machine uses cgroup v2's single hierarchy (else v1, a hierarchy per controller)."""
    return (root / "cgroup.controllers").is_file()


def folders(name: str, root: Path = ROOT) -> list[Path]:
    """The group folders of the server `name`: one on cgroup v2, one per controller on v1."""
    if is_unified(root):
        return [root / PARENT / name]
    return [root / controller / PARENT / name for controller in CONTROLLERS]


def make(name: str, memory_bytes: int | None, processes: int | None, root: Path = ROOT) -> list[Path]:
    """The groups of the server `name`, made (or found) and given these limits (None: no limit); their folders."""
    if not name or "/" in name or name.startswith("."):
        raise CgroupError(f"a server's group needs a plain name, got {name!r}")
    if processes is not None and processes < 1:
        raise CgroupError(f"a server's process limit must be at least 1, got {processes}")
    if memory_bytes is not None and memory_bytes < 1:
        raise CgroupError(f"a server's memory limit must be at least 1 byte, got {memory_bytes}")
    if is_unified(root):
        [group] = folders(name, root)
        _enable_controllers(root, group.parent)
        _mkdir(group)
        _write(group / "memory.max", "max" if memory_bytes is None else memory_bytes)
        _write(group / "pids.max", "max" if processes is None else processes)
        return [group]
    memory, pids = folders(name, root)
    for group in (memory, pids):
        if not group.parent.parent.is_dir():
            raise CgroupError(f"cgroup v1's {group.parent.parent.name} controller is not mounted at "
                              f"{group.parent.parent}: no limit can be set on a server's "
                              f"{'memory' if group is memory else 'processes'}")
        _mkdir(group)
    _write(memory / "memory.limit_in_bytes", -1 if memory_bytes is None else memory_bytes)
    _write(pids / "pids.max", "max" if processes is None else processes)
    return [memory, pids]


def join(groups: list[Path]) -> None:
    """Put the calling process in these groups (its children are born in them)."""
    for group in groups:
        _write(group / "cgroup.procs", os.getpid())


def remove(groups: list[Path]) -> bool:
    """Remove these groups whose processes have ended (a group with a process left stays); whether all are gone."""
    for group in groups:
        try:
            group.rmdir()
        except OSError:              # gone already, or a process left in it
            pass
    return not any(group.exists() for group in groups)


def remove_all(root: Path = ROOT) -> list[Path]:
    """Remove every server's groups whose processes have ended, then the parent groups if they are empty (the
    spawner removes a server's groups when it stops it; a hub that was killed stopped none); the folders left."""
    parents = [root / PARENT] if is_unified(root) else [root / controller / PARENT for controller in CONTROLLERS]
    for parent in parents:
        groups = [group for group in parent.iterdir() if group.is_dir()] if parent.is_dir() else []
        remove(groups)
        if parent.is_dir() and not any(child.is_dir() for child in parent.iterdir()):
            remove([parent])
    return [group for parent in parents if parent.is_dir() for group in parent.iterdir() if group.is_dir()]


def _enable_controllers(root: Path, parent: Path) -> None:
    """cgroup v2: the memory and pids controllers on for the children of the root and of `parent`."""
    available = (root / "cgroup.controllers").read_text().split()
    missing = [c for c in CONTROLLERS if c not in available]
    if missing:
        raise CgroupError(f"this machine's cgroup v2 hierarchy has no {' or '.join(missing)} controller "
                          f"({root / 'cgroup.controllers'} lists {' '.join(available) or 'none'})")
    _mkdir(parent)
    for folder in (root, parent):
        enabled = (folder / "cgroup.subtree_control").read_text().split()
        wanted = " ".join(f"+{c}" for c in CONTROLLERS if c not in enabled)
        if wanted:
            _write(folder / "cgroup.subtree_control", wanted)


def _mkdir(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CgroupError(f"cannot make the group {folder}: {error.strerror} (the hub must run as root, with "
                          f"/sys/fs/cgroup writable)") from None


def _write(path: Path, value) -> None:
    try:
        path.write_text(f"{value}\n")
    except OSError as error:
        raise CgroupError(f"cannot write {value} to {path}: {error.strerror}") from None


if __name__ == "__main__":                # `python -m addnorm_grading.cgroups remove-all` (make hub-down, as root)
    import sys
    if sys.argv[1:] != ["remove-all"]:
        sys.exit(f"expected `python -m addnorm_grading.cgroups remove-all`, got {sys.argv[1:]}")
    left = remove_all()
    sys.exit(f"control groups still hold processes: {', '.join(map(str, left))}" if left else 0)
