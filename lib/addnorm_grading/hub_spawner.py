"""Every learner's server as one and the same Unix user, each in a PID and mount namespace of its own: a pod.

On Zero to JupyterHub every learner's pod runs as `jovyan`, so nothing in Unix permissions tells two learners
apart; what keeps them apart is that each pod has its own processes (no server sees another's `/proc/<pid>/environ`
and the hub token in it) and its own files (no server sees another's home). `SharedUserSpawner` gives a hub on one
machine the same shape, with the operating system's own isolation: JupyterHub's LocalProcessSpawner, but each
server started by bubblewrap (as root, for the mounts) in new PID, IPC and mount namespaces — a fresh `/proc`, an
empty `/tmp`, a file system of the operating system's folders and `visible` alone (the Python environment and the
Jupyter settings), read-only, as a pod has its image and nothing else of the node, and only this learner's folder,
`<homes>/<name>`, mounted read-write at `/home/<shared user>` — then dropped to the shared user (setpriv, no new
privileges) before the server starts. (A list of what to hide was tried first: whatever it left out, such as the
course repository `make hub` ran from, with the instructor's solutions/ and checks/, every server could read.) The learner's identity is the
hub's token alone (e.g. for the HTTP exchange, addnorm_grading.http_exchange), never a Unix user.

Two things the servers still share, closed here: the network (loopback, where the hub and the proxy reach them),
so their kernels talk over Unix sockets in the learner's own folder (`KernelManager.transport=ipc`), never over a
TCP port another server could listen to; and the hub's output, which a child would otherwise inherit (and could
read through /proc/<pid>/fd, or truncate), so each server writes to `.jupyter-server.log` in its own folder.
Unix limits are per user, so each server also gets a control group of its own (addnorm_grading.cgroups), as a pod
has: `mem_limit` (JupyterHub's own setting, which LocalProcessSpawner does not enforce) and `pids_limit` hold for
that server alone.

    c.JupyterHub.spawner_class = "addnorm_grading.hub_spawner.SharedUserSpawner"
    c.SharedUserSpawner.shared_user = "addnorm-pod"
    c.SharedUserSpawner.homes = "/srv/addnorm-homes"
    c.SharedUserSpawner.visible = ["/opt/course-venv", "/opt/course-settings"]   # besides /usr, /etc, /sys
    c.SharedUserSpawner.mem_limit = "2G"              # each server's, with everything it starts
    c.SharedUserSpawner.pids_limit = 512
"""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Integer, List, Unicode

from addnorm_grading import cgroups, sandbox, syscall_filter

SAFE_NAME = re.compile(r"^[A-Za-z0-9@._-]{1,100}$")
SYSTEM = ["/usr", "/etc", "/sys"]      # what every image has, with the /bin and /lib folders (sandbox.system_tops)


class SharedUserSpawner(LocalProcessSpawner):
    """A learner's server as `shared_user`, in namespaces of its own, with `<homes>/<name>` as its home."""

    shared_user = Unicode("addnorm-pod", help="The one Unix user every server runs as (as `jovyan` in a pod)").tag(
        config=True)
    homes = Unicode("/srv/addnorm-homes", help="Where each learner's folder is kept: <homes>/<hub name>").tag(
        config=True)
    visible = List(Unicode(), help="Folders a server reads besides the operating system's (/usr, /etc, /sys and "
                                   "the /bin and /lib links): the Python environment it runs from (default: the "
                                   "hub's own), its Jupyter settings. Nothing else of the machine is in its file "
                                   "system, as nothing but its image is in a pod's").tag(config=True)
    pids_limit = Integer(512, allow_none=True, help="The most processes and threads a server may have, everything it "
                                                    "starts included (None: no limit)").tag(config=True)

    def account(self) -> pwd.struct_passwd:
        try:
            return pwd.getpwnam(self.shared_user)
        except KeyError:
            raise RuntimeError(f"SharedUserSpawner.shared_user {self.shared_user!r} is not a Unix user here: "
                               f"create it first (useradd --system {self.shared_user})") from None

    @property
    def inside_home(self) -> str:
        return f"/home/{self.shared_user}"

    def learner_folder(self) -> Path:
        """The learner's own folder, made on first use: the shared user's, mode 0700."""
        if not SAFE_NAME.match(self.user.name):
            raise RuntimeError(f"the hub name {self.user.name!r} cannot name a folder (letters, digits, @ . _ -)")
        folder = Path(self.homes) / self.user.name
        if not folder.is_dir():
            Path(self.homes).mkdir(mode=0o711, parents=True, exist_ok=True)
            folder.mkdir(mode=0o700)
            account = self.account()
            os.chown(folder, account.pw_uid, account.pw_gid)
        return folder

    def user_env(self, env):
        env.update(USER=self.shared_user, LOGNAME=self.shared_user, HOME=self.inside_home, SHELL="/bin/bash")
        return env

    def make_preexec_fn(self, name):
        """In the server's first process, before it runs anything: join its control groups. (bwrap runs as root, for
        the mounts; setpriv then drops to the shared user.)"""
        groups = self.cgroups
        return lambda: cgroups.join(groups)

    @property
    def cgroups(self) -> list[Path]:
        """This server's groups: its user's name, and a named server's name after a ":" (which no hub name has)."""
        return cgroups.folders(f"{self.user.name}:{self.name}" if self.name else self.user.name)

    def wrapper(self, seccomp_fd: int) -> list[str]:
        """The bwrap and setpriv words put before the server's command: a file system of the readable folders
        alone (read-only), a fresh /proc, /dev and /tmp, the learner's folder as its home, and the seccomp filter
        open on `seccomp_fd` (the grading sandbox's: no server may use Linux's keys, which have no namespace, so a
        key one server adds every server of the shared user reads)."""
        account = self.account()
        args = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--seccomp", str(seccomp_fd)]
        args += sandbox.system_tops()
        readable = [Path(path) for path in [*SYSTEM, *(self.visible or [sys.prefix])]
                    if os.path.isdir(path) and not os.path.islink(path)]
        for tree in sandbox.outermost(readable):
            args += sandbox.bind_with_parents(tree)
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--perms", "0755", "--dir", "/home",
                 "--bind", str(self.learner_folder()), self.inside_home, "--chdir", self.inside_home, "--"]
        return args + ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups",
                       "--no-new-privs", "--", "sh", "-c", 'exec "$0" "$@" >>"$HOME/.jupyter-server.log" 2>&1']

    def get_args(self):
        return [*super().get_args(), "--KernelManager.transport=ipc"]

    async def start(self):
        for tool in ("bwrap", "setpriv"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"SharedUserSpawner needs {tool} (Debian: bubblewrap, util-linux)")
        if not hasattr(self, "server_cmd"):
            self.server_cmd = list(self.cmd)          # the server's own command, as configured
        if unavailable := syscall_filter.missing():
            raise RuntimeError(f"SharedUserSpawner: {unavailable}")
        cgroups.make(self.cgroups[0].name, self.mem_limit, self.pids_limit)
        with tempfile.TemporaryDirectory(prefix="addnorm-spawn-") as scratch:
            seccomp = os.open(syscall_filter.write_bpf(Path(scratch) / "seccomp.bpf"), os.O_RDONLY)
        try:
            self.cmd = [*self.wrapper(seccomp), *self.server_cmd]
            self.popen_kwargs = {**self.popen_kwargs, "stdin": subprocess.DEVNULL, "pass_fds": (seccomp,)}
            return await super().start()
        finally:
            os.close(seccomp)                         # the server has its own copy

    async def stop(self, now=False):
        await super().stop(now=now)
        for _ in range(20):                  # its last processes may take a moment to end after the server's
            if cgroups.remove(self.cgroups):
                return
            await asyncio.sleep(0.5)
        self.log.warning("%s's control groups still hold processes: left in place (%s)", self.user.name,
                         ", ".join(map(str, self.cgroups)))
