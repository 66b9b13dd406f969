"""Start an autograding kernel inside a bubblewrap sandbox: the program behind the `addnorm-sandbox` kernelspec.

Why this module exists: nbgrader's hook for isolating student code is the kernelspec it starts (`c.Execute.kernel_name`);
the isolation itself is done by the operating system through well-kept tools — bubblewrap (mount, network, PID and
IPC namespaces), setpriv (a separate unprivileged user when the grader is root), unshare (a user namespace of its
own, so the process cap counts this kernel alone), prlimit (memory, processes, file size) and a seccomp filter that
libseccomp builds (`addnorm_grading.syscall_filter`: the system calls no kernel may make). This file only puts
their command line together. What a kernel may use (memory, processes, …) is decided by the grading process
(`addnorm_grading.execute.SandboxedExecute`, from course.toml) and handed over in `sandbox.json`, in the folder above
the connection file's, which the kernel does not see (it writes its sockets in its connection folder, which is
locked once it answers: `lock_connection_folder`).

The kernel sees: the operating system's /usr (read-only, the nbgrader exchange hidden), a few files of /etc, the
Python environment and the `addnorm` package (read-only, in the copy `addnorm_grading.withheld` makes: the functions
the exercise withholds raise in its files), a private copy of its submission folder as its working
directory, without any notebook (nbgrader has already written the notebook with the hidden tests restored there),
and a private /tmp (RAM disks of the scratch size, gone when the kernel ends), and the folder of its own connection
sockets (the kernel protocol runs over Unix sockets: with no network at all, TCP is impossible). Nothing
else of the machine: not the course folder (solutions/, gradebook.db, other students' work), not any home folder.

    python -m addnorm_grading.sandbox CONNECTION_FILE [kernel arguments...]   (jupyter_client, see kernel.json)
    python -m addnorm_grading.sandbox --check          print what is missing for sandboxed grading (in a course folder)
"""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from addnorm_grading import syscall_filter, withheld, zygote
from addnorm_grading.course import SandboxLimits, read_course, size_in_bytes

SETTINGS_FILE = "sandbox.json"      # the limits and what to hide, from the grader, above the connection folder
SECCOMP_FILE = "seccomp.bpf"        # the system calls refused (addnorm_grading.syscall_filter), beside it
KERNEL_FOLDER = "kernel"            # the connection folder: connection file, sockets, staged files
STAGED = "files"                    # the submission's files, next to the connection file, copied into the scratch
NOT_STAGED = shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints")   # what of a submission its kernels never see
ETC_FILES = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group", "nsswitch.conf",
             "fonts", "alternatives", "mime.types"]
KEPT_VARIABLES = ["LANG", "LC_ALL", "TZ", "PYTHONHASHSEED", "TQDM_DISABLE", "MPLBACKEND"]
UNSAFE_HINT = ("To grade anyway, at your own risk (student code then runs with your rights: it can read "
               "solutions/ and gradebook.db, and kill the grader), set ADDNORM_UNSAFE_GRADING=1 or pass "
               "--SandboxedExecute.kernel_name=python3.")


@dataclass(frozen=True)
class Settings:
    """What the grading process decides for one kernel: its limits, and the folders under /usr it must not see."""

    limits: SandboxLimits
    hidden: tuple[str, ...]        # e.g. nbgrader's exchange, which holds everyone's work
    zygote: str = ""               # the socket of the grading process's zygote (addnorm_grading.zygote), or ""
    library: str = ""              # a copy of addnorm with the exercise's withheld functions (addnorm_grading.withheld)

    def write(self, folder: Path) -> Path:
        """Write these settings as folder/sandbox.json (JSON: data, never code); return the file."""
        path = folder / SETTINGS_FILE
        path.write_text(json.dumps({"limits": asdict(self.limits), "hidden": list(self.hidden),
                                    "zygote": self.zygote, "library": self.library}), encoding="utf-8")
        return path

    @classmethod
    def read(cls, connection_file: Path) -> "Settings":
        """The settings the grading process wrote for the kernel of `connection_file` (see `prepare`)."""
        path = connection_file.parent.parent / SETTINGS_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(SandboxLimits(**data["limits"]), tuple(data["hidden"]), str(data.get("zygote", "")),
                       str(data.get("library", "")))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise SystemExit(f"the sandbox launcher needs {path}, written by the grading process "
                             f"(addnorm_grading.execute.SandboxedExecute): {error}") from None


def prepare(folder: Path, settings: Settings) -> Path:
    """Lay out a kernel's private folder: `settings` in it, and a subfolder for the connection file and the
    sockets, the only part the kernel sees (it can write there, so the settings stay out of its reach). Returns
    that connection folder."""
    settings.write(folder)
    connection_folder = folder / KERNEL_FOLDER
    connection_folder.mkdir()
    return connection_folder


def is_root() -> bool:
    """Whether the grader runs as root (then kernels run as the grader user of course.toml)."""
    return os.geteuid() == 0


def ensure_grader_user(user: str) -> None:
    """Create `user` (a system user with no home and no login shell) if it does not exist yet."""
    try:
        pwd.getpwnam(user)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", user], check=True, capture_output=True)


def missing(user: str) -> str | None:
    """Why this machine cannot run a sandboxed kernel (a sentence with the fix), or None when it can."""
    if not sys.platform.startswith("linux"):
        return f"the grading sandbox needs Linux (this is {sys.platform}). " + UNSAFE_HINT
    unfiltered = syscall_filter.missing()
    if unfiltered:
        return f"{unfiltered}. " + UNSAFE_HINT
    for tool, package in (("bwrap", "bubblewrap"), ("prlimit", "util-linux"), ("setpriv", "util-linux"),
                          ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return (f"the grading sandbox needs `{tool}` (Debian package {package}: `make sandbox` installs it). "
                    + UNSAFE_HINT)
    if is_root():
        try:
            ensure_grader_user(user)
        except (OSError, subprocess.CalledProcessError) as error:
            return f"cannot create the unprivileged user {user} for grading kernels ({error}). " + UNSAFE_HINT
    as_a_kernel = _bwrap_true(user, "--proc", "/proc", "--dev", "/dev")      # the mounts a kernel's sandbox makes
    if as_a_kernel.returncode == 0:
        return None
    plain = _bwrap_true(user)                                                 # only then: which part failed
    if plain.returncode != 0:
        return ("bubblewrap cannot create namespaces here (unprivileged user namespaces are disabled: "
                f"{plain.stderr.strip()}; enable them with `sysctl kernel.unprivileged_userns_clone=1`). "
                + UNSAFE_HINT)
    return ("bubblewrap cannot mount a /proc for the kernel's own PID namespace here "        # every kernel would die
            f"({as_a_kernel.stderr.strip()}): in a container, the runtime masks parts of /proc (on Kubernetes, "
            "run the grading pod with securityContext.procMount: Unmasked and hostUsers: false; with Docker or "
            "podman, --security-opt unmask=/proc/*). " + UNSAFE_HINT)


def _bwrap_true(user: str, *mounts: str) -> subprocess.CompletedProcess:
    """`true` in bubblewrap's new namespaces, the root file system read-only, with `mounts` added, as `user`."""
    return subprocess.run(_user_prefix(user) + ["bwrap", "--unshare-all", "--ro-bind", "/", "/", *mounts, "true"],
                          capture_output=True, text=True)


def _user_prefix(user: str) -> list[str]:
    """As root, the command prefix that becomes `user` with no privileges left; else nothing."""
    if not is_root():
        return []
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all", "--"]


def readable_trees() -> list[Path]:
    """Folders the kernel reads besides /usr: the Python environment, its base install, the addnorm sources."""
    trees = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent.parent]
    spec = importlib.util.find_spec("addnorm")
    if spec is not None and spec.origin:
        trees.append(Path(spec.origin).resolve().parent.parent)     # lib/ of an editable install, or site-packages
    return [tree for tree in outermost([Path("/usr"), *trees]) if tree != Path("/usr")]


def outermost(trees: list[Path]) -> list[Path]:
    """The trees, resolved, without any that lies inside another, shortest first."""
    kept: list[Path] = []
    for tree in sorted({t.resolve() for t in trees}, key=lambda p: len(p.parts)):
        if not any(tree == k or k in tree.parents for k in kept):
            kept.append(tree)
    return kept


def system_tops() -> list[str]:
    """bwrap words for /bin, /sbin and the /lib folders: the link into /usr where the system has one (Debian's
    merged /usr), else the folder, read-only."""
    args: list[str] = []
    for entry in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = Path("/") / entry
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    return args


def _parents(path: Path) -> list[str]:
    """bwrap arguments that create path's parent folders, world-traversable (bwrap would make them 0700)."""
    args = []
    for parent in reversed(path.parents[:-1]):                      # /a, /a/b, ... (not / itself)
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def bind_with_parents(path: Path, *, read_only: bool = True) -> list[str]:
    """bwrap arguments that bind path at the same place, its parents created first."""
    return _parents(path) + ["--ro-bind" if read_only else "--bind", str(path), str(path)]


def bwrap_arguments(connection_dir: Path, submission: Path, settings: Settings) -> list[str]:
    """The bwrap options: what the kernel sees of the file system, and the namespaces it lives in."""
    args = [] if is_root() else ["--unshare-user"]     # as root, the user namespace comes later (see kernel_command)
    args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session", "--clearenv", "--ro-bind", "/usr", "/usr"]
    for hidden in settings.hidden:
        if Path(hidden).is_dir() and Path("/usr") in Path(hidden).parents:
            args += ["--tmpfs", hidden]
    args += system_tops()
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    scratch = str(size_in_bytes(settings.limits.scratch))
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", scratch, "--tmpfs", "/tmp",
             "--perms", "1777", "--size", scratch, "--tmpfs", "/dev/shm"]
    for tree in readable_trees():
        args += bind_with_parents(tree)
    if settings.library:               # the package as this exercise's tests withhold it, in place of the real one
        args += ["--ro-bind", settings.library, str(withheld.package_folder())]
    args += bind_with_parents(connection_dir, read_only=False)
    args += _parents(submission) + ["--perms", "0777", "--size", scratch, "--tmpfs", str(submission),
                                    "--chdir", str(submission)]
    args += ["--remount-ro", "/"]                  # the folders bwrap made for the mounts above: read-only
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    args += ["--setenv", "PATH", path, "--setenv", "HOME", "/tmp", "--setenv", "MPLCONFIGDIR", "/tmp/.matplotlib"]
    for name in KEPT_VARIABLES:
        if name in os.environ:
            args += ["--setenv", name, os.environ[name]]
    # One compute thread per kernel: a class is graded fastest with one kernel per core (addnorm_grading.grade_class), where
    # a second thread per kernel only competes with the other kernels; and the arithmetic of a submission's tests
    # then does not depend on how many cores the grading machine has.
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        args += ["--setenv", name, str(settings.limits.threads)]
    return args


def resource_limits(limits: SandboxLimits) -> dict[str, int]:
    """The kernel's resource limits, each by its name in prlimit's options and in setrlimit's RLIMIT_<NAME>: one
    table for both ways of starting a kernel (prlimit in `kernel_command`, setrlimit in a forked kernel)."""
    return {"as": size_in_bytes(limits.memory), "nproc": limits.processes,
            "fsize": size_in_bytes(limits.file_size), "core": 0}


def kernel_command(connection_file: Path, kernel_args: list[str], settings: Settings, seccomp_fd: int) -> list[str]:
    """The whole command: [become the grader user] bwrap ... [own user namespace] prlimit ... copy + ipykernel;
    `seccomp_fd` is open on the filter's BPF program (`syscall_filter.write_bpf`), which bwrap installs."""
    submission, limits = Path.cwd(), settings.limits
    inside = []
    if is_root():       # bwrap ran as root to set up the mounts; the kernel drops to limits.user in its own userns
        inside += _user_prefix(limits.user) + ["unshare", "--user", "--map-current-user", "--"]
    inside += ["prlimit", *(f"--{name}={value}" for name, value in resource_limits(limits).items()), "--"]
    # copy the submission's files into the writable scratch folder, then become the kernel
    # (its output and error go nowhere: a kernel speaks on its sockets, never on the grading process's terminal)
    inside += ["sh", "-c", 'cp -R "$0"/. . 2>/dev/null; exec "$@" </dev/null >/dev/null 2>&1',
               str(connection_file.parent / STAGED),
               sys.executable, "-m", "ipykernel_launcher", "-f", str(connection_file), *kernel_args]
    prefix = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"] if is_root() else []
    return ["bwrap", *bwrap_arguments(connection_file.parent, submission, settings), "--seccomp", str(seccomp_fd),
            *prefix, "--", *inside]


def environment(bwrap_options: list[str]) -> dict[str, str]:
    """The variables that bwrap's options set (--setenv NAME VALUE): a kernel's whole environment."""
    return {bwrap_options[i + 1]: bwrap_options[i + 2] for i, option in enumerate(bwrap_options)
            if option == "--setenv"}


def waiting_command(connection_file: Path, settings: Settings, info_fd: int) -> list[str]:
    """As root: the sandbox of `kernel_command`, with a program that only waits in it (it reads the FIFO
    zygote.ALIVE until the forked kernel closes it), root with no capability (the kernel, another user, can
    neither signal nor trace it); bwrap writes its init's pid on `info_fd`."""
    alive = str(connection_file.parent / zygote.ALIVE)
    return ["bwrap", "--info-fd", str(info_fd), *bwrap_arguments(connection_file.parent, Path.cwd(), settings),
            "--cap-drop", "ALL", "--", "sh", "-c", 'exec cat "$0" >/dev/null', alive]


def forked_kernel(connection_file: Path, kernel_args: list[str], settings: Settings, grader: int) -> int:
    """Start the sandbox with its waiting program, have the zygote fork a kernel into it, and wait for the
    sandbox's end (its exit status is this launcher's) or the end of the grading process `grader`, whichever comes
    first. Raises zygote.ZygoteError (the sandbox is gone then)."""
    alive = connection_file.parent / zygote.ALIVE
    os.mkfifo(alive)
    os.chmod(alive, 0o602)             # read by root's waiting program, written (held open) by the kernel
    info_read, info_write = os.pipe()
    command = waiting_command(connection_file, settings, info_write)
    # nothing of the grading process's is inherited: a sandbox left behind must not hold its output pipes open
    process = subprocess.Popen(command, pass_fds=(info_write,), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(info_write)
    try:
        with os.fdopen(info_read, "rb") as info:
            init = int(json.loads(info.read() or b"{}").get("child-pid", 0))
        if init <= 0:
            raise zygote.ZygoteError("bwrap did not say which process is the sandbox's")
        payload = _wait_for_program(init, ["cat", str(alive)], process)
        limits = settings.limits
        with open(os.devnull, "r+b") as nowhere:     # the kernel's input, output and error, as kernel_command's
            zygote.request_kernel(Path(settings.zygote), {
                "payload": payload, "user": limits.user, "threads": limits.threads,
                "limits": resource_limits(limits),
                "alive": str(alive), "cwd": str(Path.cwd()), "staged": str(connection_file.parent / STAGED),
                "environment": environment(command), "argv": ["-f", str(connection_file), *kernel_args]},
                descriptors=(nowhere.fileno(),) * 3)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return _wait_for_sandbox(process, grader)


def _wait_for_sandbox(process: subprocess.Popen, grader: int) -> int:
    """The sandbox's exit status once it ends; if the grading process `grader` ends first (killed, with no time
    to shut its kernels down: this launcher is then no longer its child), end the sandbox, and with it the kernel
    (bwrap's init dies with bwrap, and every process of its PID namespace with the init), and return 1.
    Not PR_SET_PDEATHSIG, for the zygote's reason (`zygote.serve`): kernels start from threads that end."""
    while os.getppid() == grader:
        try:
            return process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
    process.kill()
    process.wait()
    return 1


def _wait_for_program(init: int, argv: list[str], process: subprocess.Popen, seconds: float = 20) -> int:
    """The pid of the child of bwrap's init (`init`, as bwrap's info says) once it runs `argv` (its namespaces are
    then all made); raises ZygoteError if it does not come."""
    expected = "".join(arg + "\0" for arg in argv).encode()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            for child in Path(f"/proc/{init}/task/{init}/children").read_text().split():
                if Path(f"/proc/{child}/cmdline").read_bytes() == expected:
                    return int(child)
        except OSError:
            pass
        time.sleep(0.002)
    raise zygote.ZygoteError(f"the sandbox's waiting program did not start (bwrap's status: {process.poll()})")


def stage_submission(submission: Path, connection_dir: Path) -> None:
    """Copy the submission folder's files, but no notebook, next to the connection file (symlinks stay links)."""
    shutil.copytree(submission, connection_dir / STAGED, symlinks=True, ignore=NOT_STAGED)


def staged_files(submission: Path) -> list[Path]:
    """The files of a submission folder that `stage_submission` copies for its kernels, and its symlinks, sorted."""
    found = []
    for folder, folders, names in os.walk(submission):          # symlinks to folders are listed, not entered
        ignored = NOT_STAGED(folder, folders + names)            # what copytree leaves out, asked the same way
        folders[:] = [name for name in folders if name not in ignored]
        links = [name for name in folders if Path(folder, name).is_symlink()]
        found += [Path(folder, name) for name in names + links if name not in ignored]
    return sorted(found)


def hand_connection_files_to_grader(connection_file: Path, grader_user: str) -> None:
    """As root: let the grader user read the connection file and the staged files, and create its sockets."""
    user = pwd.getpwnam(grader_user)
    staged = connection_file.parent / STAGED
    for path in [connection_file.parent, connection_file, staged, *staged.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def lock_connection_folder(connection_folder: Path) -> None:
    """As root, once the kernel has bound its sockets (before any learner code runs): the connection folder and all
    in it become root's, so the kernel can add nothing to it (it could fill the host's disk with any number of files
    of the largest size it may write). Its bound sockets, and the FIFO it holds open, work as before. As an ordinary
    user nothing changes: the kernel, under the same user id, could change the folder's mode back."""
    if not is_root():
        return
    for path in [connection_folder, *connection_folder.rglob("*")]:
        os.chown(path, 0, 0, follow_symlinks=False)
    connection_folder.chmod(0o700)


def main(argv: list[str]) -> int:
    """Check the machine (--check, with the course.toml found from here), or become the sandboxed kernel."""
    if argv[:1] == ["--check"]:
        reason = missing(read_course().sandbox.user)
        print(reason or "the grading sandbox works on this machine")
        return 1 if reason else 0
    if not argv:
        raise SystemExit(__doc__)
    grader = os.getppid()                       # the grading process (jupyter_client starts this launcher)
    connection_file = Path(argv[0]).resolve()
    settings = Settings.read(connection_file)
    stage_submission(Path.cwd(), connection_file.parent)
    if is_root():
        hand_connection_files_to_grader(connection_file, settings.limits.user)
    if settings.zygote and is_root():
        try:
            return forked_kernel(connection_file, argv[1:], settings, grader)
        except zygote.ZygoteError as error:
            print(f"addnorm-sandbox: no forked kernel ({error}); starting the kernel itself", file=sys.stderr)
            (connection_file.parent / zygote.ALIVE).unlink(missing_ok=True)
    seccomp = os.open(syscall_filter.write_bpf(connection_file.parent.parent / SECCOMP_FILE), os.O_RDONLY)
    os.set_inheritable(seccomp, True)                                # read by bwrap, after the exec
    command = kernel_command(connection_file, argv[1:], settings, seccomp)
    os.execvp(command[0], command)
    return 1                                                        # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
