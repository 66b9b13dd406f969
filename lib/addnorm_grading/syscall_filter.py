"""The system calls a grading kernel may not make, refused by a seccomp filter that libseccomp builds.

The sandbox separates a kernel from the machine by namespaces (`addnorm_grading.sandbox`), but Linux's key
retention service has none: every kernel runs as the same host user, so a key that one kernel adds is listed in
`/proc/keys` and readable by every other kernel graded at the same time. The red team passed a hidden check's inputs
and code from one notebook's hidden kernel to another process that way, and answered a wrong LayerNorm's inputs with
the right outputs (2/9 became 7/9). No kernel needs keys: `add_key`, `request_key` and `keyctl` fail with EPERM.

Both ways of starting a kernel load the same filter: bwrap from the BPF program `write_bpf` exports
(`--seccomp FD`), a kernel forked by the zygote by `load()` itself, after no_new_privs.
"""

from __future__ import annotations

import errno
from pathlib import Path

try:          # libseccomp (Debian's libseccomp2) through ctypes, loaded now: a kernel the zygote forks into the
    import pyseccomp                  # sandbox could no longer find it from there
except (ImportError, OSError, RuntimeError) as error:
    pyseccomp, UNAVAILABLE = None, f"{type(error).__name__}: {error}"
else:
    UNAVAILABLE = ""

REFUSED = ("add_key", "request_key", "keyctl")      # the key retention service: a channel between sandboxes


def _filter():
    if pyseccomp is None:
        raise RuntimeError(UNAVAILABLE)
    syscalls = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    for name in REFUSED:
        syscalls.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
    return syscalls


def write_bpf(path: Path) -> Path:
    """The filter as a BPF program in `path` (what bwrap's --seccomp reads); returns path."""
    with open(path, "wb") as out:
        _filter().export_bpf(out)
    return path


def load() -> None:
    """Install the filter on this process and the ones it starts (no_new_privs must be set, or the caller root)."""
    _filter().load()


def missing() -> str | None:
    """Why the filter cannot be built here (a sentence with the fix), or None."""
    try:
        _filter()
    except (OSError, RuntimeError) as error:
        return (f"the grading sandbox's seccomp filter cannot be built ({error}): it needs "
                "Debian's libseccomp2 (`make sandbox` installs it) and the course's Python packages")
    return None
