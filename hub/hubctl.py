#!/usr/bin/env python3
"""Start (`up`) and stop (`down`) the course's JupyterHub on 127.0.0.1 with real Unix users (`make hub`, `hub-down`).

up   [--pods] builds a Python environment every user can read (/opt/addnorm-hub/venv, from Debian's python3.11) and
     configurable-http-proxy (npm), creates the users (course.toml's [hub] instructor, and its students or, with
     --students N, student1 … studentN; homes 0700), each with a password of its own (state/passwords, root only:
     one `user password` a line) for JupyterHub's PAM login, nbgrader's exchange folder and the instructor's course
     folder (nbgrader_config.py, course.toml, solutions/ and checks/, every assignment generated, the students
     enrolled) with its gradebook in a PostgreSQL cluster run by the instructor (/opt/addnorm-hub/postgres, made by
     addnorm_grading.postgres: a password only the instructor can read), then starts JupyterHub in the background
     (PID in state/hub.pid).
     --pods (`make hub PODS=1`): no Unix user per person, as on Zero to JupyterHub. Every server runs as the one
     user [hub] pod_user, each in PID and mount namespaces of its own that show it only its own folder of
     /opt/addnorm-hub/homes (addnorm_grading.hub_spawner); people log in with a hub account (the same passwords,
     addnorm_grading.hub_accounts); graded work travels over the HTTP exchange service, whose store is
     /opt/addnorm-hub/exchange-store, and the feedback service grades what it received. The instructor's course
     is in their own folder, homes/<instructor>/<course id>.
enroll FILE  adds a class list in nbgrader's students.csv format (id,first_name,last_name,email): a Unix user and a
     password for each id, and the students in nbgrader's gradebook (`nbgrader db student import`), on a running hub.
down stops the hub, every user server it recorded and any process left of the hub's users (by PID), removes every
     user the hub made (whatever the class size) with their homes, the course's exchange folder, the gradebook's
     cluster and the hub's state.
     The environment stays: it is slow to build, and holds nobody's data. Both are safe to run twice, and `down`
     after a failed or interrupted `up`.
environment  only builds (or refreshes) the shared environment and the proxy: no user, no hub
     (tests/test_http_exchange.py starts a hub of its own with them).

Only the standard library: it runs before the shared environment exists. (Why home-made: JupyterHub and nbgrader
document these steps but ship no command that performs them for local Unix users.)
"""

from __future__ import annotations

import argparse
import csv
import grp
import hashlib
import re
import stat
import json
import os
import pwd
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONSTANTS = tomllib.loads((REPO / "course.toml").read_text())       # the course's constants, in one file
HUB_HOME = Path(os.environ.get("ADDNORM_HUB_HOME", "/opt/addnorm-hub"))
VENV = HUB_HOME / "venv"
NODE = HUB_HOME / "node"
STATE = HUB_HOME / "state"
GRADEBOOK = HUB_HOME / "postgres"     # beside the state folder, not in it: that is root's alone, this the instructor's
PORT = int(os.environ.get("ADDNORM_HUB_PORT", "8000"))
SYSTEM_PYTHON = "/usr/bin/python3.11"          # Debian's: root's own Python may live where users cannot read
PROXY_VERSION = "5.3.0"                        # configurable-http-proxy, from npm
INSTRUCTOR = CONSTANTS["hub"]["instructor"]
DEFAULT_STUDENTS = tuple(CONSTANTS["hub"]["students"])
MARKER = "addnorm course hub"                  # the users' comment field: `down` removes only users that carry it
GROUP = "addnorm-course"                       # every hub user is in it: JupyterHub lets this group log in
USERNAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")     # what useradd accepts on Debian (NAME_REGEX)
COURSE_ID = CONSTANTS["course"]["id"]
POD_USER = CONSTANTS["hub"]["pod_user"]       # --pods: every server's Unix user (`jovyan` in a pod)
HOMES = HUB_HOME / "homes"                     # --pods: <hub name>/ for each person
STORE = HUB_HOME / "exchange-store"            # --pods: the HTTP exchange's releases, submissions and feedback
EXCHANGE = Path(CONSTANTS["course"]["exchange"])
COURSE_FILES = ("nbgrader_config.py", "course.toml", "solutions", "checks")   # a course folder (guide/instructors.md)
NOT_COURSE = (".git", ".venv", "_build", "node_modules", "__pycache__", ".pytest_cache", "*.egg-info",
              ".ipynb_checkpoints", "gradebook.db", "submitted", "autograded", "feedback", ".exchange",
              "secret")      # checks/secret: the hub's course gets a secret of its own (addnorm_grading.secret)


@dataclass(frozen=True)
class Layout:
    """Who owns the course and where it lives: the instructor's Unix account, or (pods) the pod user's folder of
    the instructor."""

    pods: bool

    @property
    def owner(self) -> str:
        return POD_USER if self.pods else INSTRUCTOR

    @property
    def home(self) -> Path:
        return HOMES / INSTRUCTOR if self.pods else Path("/home") / INSTRUCTOR

    @property
    def course(self) -> Path:
        return self.home / COURSE_ID


def recorded_layout() -> Layout:
    """The layout of the hub that state/ belongs to (Unix users unless state/mode says pods)."""
    mode = STATE / "mode"
    return Layout(pods=mode.is_file() and mode.read_text().strip() == "pods")


def assignments() -> list[str]:
    """Every assignment of the course: the folders of solutions/ (nbgrader's source)."""
    return sorted(folder.name for folder in (REPO / "solutions").iterdir() if folder.is_dir()
                  and not folder.name.startswith("."))


def say(message: str) -> None:
    """Print one progress line."""
    print(f"[hub] {message}", flush=True)


def run(cmd: list[str], **kwargs) -> None:
    """Run a command; stop with its output if it fails."""
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        output = result.stdout[-3000:] + result.stderr[-3000:]
        sys.exit(f"[hub] failed ({result.returncode}): {' '.join(map(str, cmd))}\n{output}")


def user_env(user: str, home: Path | None = None) -> list[str]:
    """`env` arguments for a command run as `user`: a clean environment with the shared one first on PATH."""
    return ["env", "-i", f"HOME={home or Path('/home') / user}", f"USER={user}", f"LOGNAME={user}", "LANG=C.UTF-8",
            f"PATH={VENV}/bin:/usr/local/bin:/usr/bin:/bin"]


def as_user(user: str, cmd: list[str], cwd: Path | None = None, home: Path | None = None) -> None:
    """Run a command as a hub user (runuser: there is no sudo here)."""
    run(["runuser", "-u", user, "--", *user_env(user, home), *cmd], cwd=cwd)


def as_owner(layout: Layout, cmd: list[str]) -> None:
    """Run a command in the course folder as its owner, with the instructor's home (their nbgrader settings)."""
    as_user(layout.owner, cmd, cwd=layout.course, home=layout.home)


def require_root(what: str) -> None:
    """Exit with one sentence when not root."""
    if os.geteuid() != 0:
        sys.exit(f"make {what} needs root: it creates and removes the Unix users of the course hub "
                 f"(run it as root, e.g. `sudo make {what}`).")


# --------------------------------------------------------------------------- up


def dependencies_digest() -> str:
    """A hash of what the shared environment's dependencies are read from: pyproject.toml."""
    return hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()


def library_digest() -> str:
    """A hash of the packages' files."""
    digest = hashlib.sha256()
    for path in sorted(p for p in (REPO / "lib").rglob("*") if p.suffix in {".py", ".json"}):
        digest.update(path.relative_to(REPO).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def ensure_environment() -> None:
    """Build the shared venv (course + hub extras, the library installed as a copy) unless it is up to date: the
    dependencies again only when pyproject.toml changed (minutes), else only the library (seconds)."""
    stamp = VENV / ".addnorm-installed"          # "<dependencies digest> <library digest>"
    wanted = [dependencies_digest(), library_digest()]
    built = stamp.read_text().split() if stamp.is_file() else []
    if built == wanted:
        return
    say(f"building the shared Python environment in {VENV} (a few minutes the first time)")
    HUB_HOME.mkdir(mode=0o755, parents=True, exist_ok=True)
    if not (VENV / "bin" / "python").exists():
        run([SYSTEM_PYTHON, "-m", "venv", str(VENV)])
    with tempfile.TemporaryDirectory() as tmp:        # build from a copy: pip would leave build/ in the repository
        shutil.copy(REPO / "pyproject.toml", tmp)
        shutil.copy(REPO / "README.md", tmp)
        shutil.copytree(REPO / "lib", Path(tmp) / "lib", ignore=shutil.ignore_patterns(*NOT_COURSE))
        pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        if built[:1] != wanted[:1]:
            run([*pip, f"{tmp}[course,hub]"])
        run([*pip, "--no-deps", "--force-reinstall", tmp])     # the library as it is now, same version or not
    stamp.write_text(" ".join(wanted))


def ensure_proxy() -> None:
    """Install configurable-http-proxy from npm into the hub's folder."""
    package = NODE / "node_modules" / "configurable-http-proxy" / "package.json"
    if package.is_file() and json.loads(package.read_text())["version"] == PROXY_VERSION:
        return
    say(f"installing configurable-http-proxy {PROXY_VERSION} from npm")
    run(["npm", "install", "--prefix", str(NODE), "--no-audit", "--no-fund", "--loglevel=error",
         f"configurable-http-proxy@{PROXY_VERSION}"])


def hub_user(name: str) -> pwd.struct_passwd | None:
    """The Unix user `name` if it exists."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def the_class(count: int | None) -> tuple[str, ...]:
    """The students: student1 … student<count>, else those this hub already has (state/class), else course.toml's."""
    recorded = STATE / "class"
    if count is not None:
        if count < 1:
            sys.exit(f"[hub] STUDENTS must be a whole number of at least 1, got {count}")
        return tuple(f"student{i}" for i in range(1, count + 1))
    if recorded.is_file():
        return tuple(recorded.read_text().split())
    return DEFAULT_STUDENTS


def made_users() -> list[str]:
    """Every user this hub made (their comment field says so), whatever the class size was."""
    return sorted(user.pw_name for user in pwd.getpwall() if user.pw_gecos == MARKER)


def ensure_users(names: list[str]) -> None:
    """Create the users, in the course's group (homes mode 0700: Debian's useradd makes them 0755)."""
    try:
        grp.getgrnam(GROUP)
    except KeyError:
        run(["groupadd", GROUP])
    for name in names:
        if not USERNAME.match(name):
            sys.exit(f"[hub] {name!r} cannot be a Unix user name: expected lower-case letters, digits, _ or -, "
                     f"starting with a letter or _, at most 32 characters")
        user = hub_user(name)
        if user is None:
            run(["useradd", "--create-home", "--comment", MARKER, "--shell", "/bin/bash", "--groups", GROUP, name])
        elif user.pw_gecos != MARKER:
            sys.exit(f"[hub] a user named {name!r} already exists and was not made by `make hub`: not touching it.")
        os.chmod(f"/home/{name}", 0o700)


def read_passwords() -> dict[str, str]:
    """state/passwords: one `user password` a line."""
    path = STATE / "passwords"
    if not path.is_file():
        return {}
    return dict(line.split(" ", 1) for line in path.read_text().splitlines() if " " in line)


def ensure_passwords(names: list[str], unix: bool = True) -> dict[str, str]:
    """A random password for each user that has none yet, kept in state/passwords (mode 0600, root's), one
    `user password` a line: set with chpasswd too for Unix users (PAM checks it); with pods the hub's accounts
    are made from the file (addnorm_grading.hub_accounts)."""
    passwords = read_passwords()
    new = {name: secrets.token_urlsafe(9) for name in names if name not in passwords}
    if new:
        if unix:
            run(["chpasswd"], input="".join(f"{name}:{password}\n" for name, password in new.items()))
        passwords.update(new)
        path = STATE / "passwords"
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text("".join(f"{name} {password}\n" for name, password in sorted(passwords.items())))
    return passwords


def ensure_pod_user() -> None:
    """The one Unix user of every server (pods): a system user with no home and no login shell."""
    user = hub_user(POD_USER)
    if user is None:
        run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
             "--comment", MARKER, POD_USER])
    elif user.pw_gecos != MARKER:
        sys.exit(f"[hub] a user named {POD_USER!r} already exists and was not made by `make hub`: not touching it.")


def ensure_pod_folders(names: list[str]) -> None:
    """Each person's folder (pods): <homes>/<name>, the pod user's, 0700; and the exchange service's store."""
    for name in names:
        if not USERNAME.match(name):
            sys.exit(f"[hub] {name!r} cannot be a hub name: expected lower-case letters, digits, _ or -, starting "
                     f"with a letter or _, at most 32 characters")
    account = pwd.getpwnam(POD_USER)
    HOMES.mkdir(mode=0o711, exist_ok=True)
    for folder in [STORE, *(HOMES / name for name in names)]:
        folder.mkdir(mode=0o700, exist_ok=True)
        os.chown(folder, account.pw_uid, account.pw_gid)


def ensure_exchange() -> None:
    """nbgrader's exchange: everyone may write, nobody may delete another's files (mode 1777)."""
    if not EXCHANGE.is_dir():
        EXCHANGE.mkdir(parents=True)
        (STATE / "made-exchange").touch()            # so that `down` removes it again
    os.chmod(EXCHANGE, 0o1777)


def install_settings() -> None:
    """Copy the Jupyter settings: everyone's nbgrader config (with course.toml beside it, which it reads) into the
    environment, the per-role ones beside it."""
    etc = HUB_HOME / "etc"
    shutil.rmtree(etc, ignore_errors=True)
    shutil.copytree(REPO / "hub" / "jupyter", etc)
    global_config = VENV / "etc" / "jupyter"
    global_config.mkdir(parents=True, exist_ok=True)
    shutil.copy(etc / "everyone" / "nbgrader_config.py", global_config / "nbgrader_config.py")
    shutil.copy(REPO / "course.toml", global_config / "course.toml")
    (global_config / "course.toml").chmod(0o644)
    lab_settings = VENV / "share" / "jupyter" / "lab" / "settings"     # no news or update checks: loopback only
    lab_settings.mkdir(parents=True, exist_ok=True)
    shutil.copy(etc / "lab-overrides.json", lab_settings / "overrides.json")
    for path in [etc, *etc.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def ensure_gradebook(layout: Layout) -> None:
    """The gradebook's PostgreSQL cluster, run by the course's owner: made at the first `up`, started at every one."""
    run([str(VENV / "bin" / "python"), "-m", "addnorm_grading.postgres", "up", str(GRADEBOOK),
         "--owner", layout.owner])


INSTRUCTOR_CONFIG = """\
from pathlib import Path

from addnorm_grading.postgres import Cluster

c = get_config()  # noqa: F821
c.CourseDirectory.root = {course}

# The gradebook: the hub's PostgreSQL cluster. Its address holds the password, read from the owner's own
# file (0600) each time nbgrader starts; it is written nowhere else.

c.CourseDirectory.db_url = Cluster(Path("{gradebook}"), "{owner}").url()
"""
# pods: the course seen from the instructor's server (/home/<pod user>/…) and from the feedback service (homes/…)
BESIDE_THIS_FILE = 'str(Path(__file__).resolve().parent.parent / "{course_id}")'



def ensure_course(layout: Layout, students: tuple[str, ...]) -> None:
    """The instructor's course folder: what a course folder needs, every assignment generated, the students enrolled."""
    ready = STATE / "course-ready"
    if ready.is_file():
        enroll_in_gradebook(layout, students)
        return
    course = layout.course
    say(f"setting up the course in {course}")
    shutil.rmtree(course, ignore_errors=True)        # an interrupted earlier set-up
    course.mkdir(parents=True)
    for name in COURSE_FILES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, course / name, ignore=shutil.ignore_patterns(*NOT_COURSE))
        else:
            shutil.copy(REPO / name, course / name)
    jupyter_dir = layout.home / ".jupyter"
    jupyter_dir.mkdir(exist_ok=True)
    root = BESIDE_THIS_FILE.format(course_id=COURSE_ID) if layout.pods else f'"{course}"'
    (jupyter_dir / "nbgrader_config.py").write_text(
        INSTRUCTOR_CONFIG.format(course=root, gradebook=GRADEBOOK, owner=layout.owner))
    run(["chown", "-R", f"{layout.owner}:{layout.owner}", str(course), str(jupyter_dir)])
    as_owner(layout, ["python", "-m", "addnorm_grading.secret", str(course)])    # the course's own, owner-only
    for assignment in assignments():                 # one id per call
        as_owner(layout, ["nbgrader", "generate_assignment", assignment, "--force"])
    enroll_in_gradebook(layout, students)
    ready.touch()


GRADING_TLS = "feedback-service/tls"              # in the course folder: the grading engine's certificate and key


def ensure_grading_certificate(layout: Layout) -> None:
    """WORKERS=N: the certificate and key that the Dask scheduler, its workers and the feedback service require of
    each other (mutual TLS), made by the course's owner in the service's own state folder (0700, 0600): no learner
    can read them, so no learner can reach the engine."""
    make = ("import sys; from pathlib import Path; from addnorm_grading.feedback_service.remote import certificates; "
            "certificates(Path(sys.argv[1]))")
    as_owner(layout, ["python", "-c", make, str(layout.course / GRADING_TLS)])


def enroll_in_gradebook(layout: Layout, students: tuple[str, ...]) -> None:
    """nbgrader's student table: every student of the hub (`nbgrader db student import`, one call)."""
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, dir="/tmp") as table:
        table.write("id,first_name,last_name,email\n" + "".join(f"{name},,,\n" for name in students))
    os.chmod(table.name, 0o644)
    try:
        as_owner(layout, ["nbgrader", "db", "student", "import", table.name])
    finally:
        os.unlink(table.name)


def recorded_workers() -> str:
    """The Dask workers the feedback service grades on (state/workers, from `make hub WORKERS=N`); "" for its pool
    of processes on the hub's machine."""
    workers = STATE / "workers"
    return workers.read_text().strip() if workers.is_file() else ""


def running_pid(pid_file: Path, command_word: str) -> int | None:
    """The PID in `pid_file` if that process is alive and its command line contains `command_word`."""
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if command_word in cmdline else None


def hub_environment(layout: Layout) -> dict[str, str]:
    """The environment JupyterHub runs with: what hub/jupyterhub_config.py reads, the proxy and venv on PATH."""
    pods = {"ADDNORM_HUB_MODE": "pods", "ADDNORM_HUB_POD_USER": POD_USER, "ADDNORM_HUB_HOMES": str(HOMES),
            "ADDNORM_HUB_STORE": str(STORE), "ADDNORM_HUB_GRADEBOOK": str(GRADEBOOK)}
    return {
        **os.environ,
        "PATH": f"{VENV}/bin:{NODE}/node_modules/.bin:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ADDNORM_HUB_HOME": str(HUB_HOME), "ADDNORM_HUB_PORT": str(PORT), "ADDNORM_HUB_INSTRUCTOR": INSTRUCTOR,
        "ADDNORM_HUB_GROUP": GROUP, "ADDNORM_HUB_COURSE": str(layout.course),
        **(pods if layout.pods else {}),
        **({"ADDNORM_HUB_WORKERS": workers} if (workers := recorded_workers()) else {}),
    }


def wait_for_hub(pid: int, log: Path, timeout: float = 90) -> None:
    """Wait until the hub answers on its port; stop with its log if it dies or does not answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            sys.exit(f"[hub] JupyterHub exited at start; its log ({log}):\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/hub/api", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit(f"[hub] JupyterHub did not answer on 127.0.0.1:{PORT} within {timeout:.0f} s; see {log}")


def start_hub(layout: Layout, students: tuple[str, ...]) -> None:
    """Start JupyterHub in its own session, record its PID, and wait until it answers."""
    if running_pid(STATE / "hub.pid", "jupyterhub") is None:
        say(f"starting JupyterHub on http://127.0.0.1:{PORT}")
        log = STATE / "hub.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                [str(VENV / "bin" / "jupyterhub"), "-f", str(REPO / "hub" / "jupyterhub_config.py")],
                cwd=STATE, env=hub_environment(layout), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        (STATE / "hub.pid").write_text(str(process.pid))
        wait_for_hub(process.pid, log)
    else:
        say("JupyterHub is already running")
    shown = ", ".join([INSTRUCTOR, *students[:3]]) + (f", … {students[-1]}" if len(students) > 3 else "")
    say(f"open http://127.0.0.1:{PORT} — users: {shown}; each user's password is in {STATE / 'passwords'} "
        f"(root only); stop with `make hub-down`")


def readable_by_everyone(path: Path) -> bool:
    """Whether any user can list `path`: every folder on the way searchable by others, `path` readable by them."""
    folders = [path, *path.parents]
    return path.is_dir() and bool(path.stat().st_mode & stat.S_IROTH) and all(
        folder.stat().st_mode & stat.S_IXOTH for folder in folders)


def warn_if_learners_read_the_repository() -> None:
    """With a Unix user per learner, nothing hides this repository from their servers: say so when its solutions/
    or checks/ can be read by every user (PODS=1 servers see it as an empty folder)."""
    exposed = [name for name in ("solutions", "checks") if readable_by_everyone(REPO / name)]
    if exposed:
        say(f"WARNING: every user on this machine, learners included, can read {REPO}'s {' and '.join(exposed)}/ "
            f"(the hidden checks, the solutions): for a real class, keep your private copy of the course in a "
            f"folder only you can read (chmod 700 {REPO.parent if REPO.parent != Path('/') else REPO})")


def up(count: int | None, pods: bool = False, workers: int | None = None) -> None:
    """Everything `make hub` (PODS=1: `up --pods`; WORKERS=N: `up --workers N`) does, in order."""
    require_root("hub")
    if workers is not None and workers < 1:
        sys.exit(f"[hub] WORKERS: expected a number of Dask workers of at least 1, got {workers}")
    layout = Layout(pods)
    if STATE.is_dir() and recorded_layout() != layout:
        sys.exit(f"[hub] a hub {'with' if recorded_layout().pods else 'without'} PODS=1 was made here: "
                 f"take it down first (`make hub-down`), then `make hub{' PODS=1' if pods else ''}`")
    os.umask(0o022)
    ensure_environment()
    ensure_proxy()
    STATE.mkdir(parents=True, exist_ok=True)
    STATE.chmod(0o700)
    (STATE / "mode").write_text("pods" if pods else "users")
    if workers is not None and running_pid(STATE / "hub.pid", "jupyterhub") and recorded_workers() != str(workers):
        sys.exit("[hub] the hub runs with another number of grading workers: `make hub-down` first")
    if workers is not None:
        (STATE / "workers").write_text(str(workers))
    students = the_class(count)
    if pods:
        ensure_pod_user()
        ensure_pod_folders([INSTRUCTOR, *students])
    else:
        ensure_users([INSTRUCTOR, *students])
        ensure_exchange()
    ensure_passwords([INSTRUCTOR, *students], unix=not pods)
    (STATE / "class").write_text(" ".join(students))
    if not pods:
        warn_if_learners_read_the_repository()
    install_settings()
    ensure_gradebook(layout)
    ensure_course(layout, students)
    if recorded_workers():
        ensure_grading_certificate(layout)
    start_hub(layout, students)


def enroll(table: Path) -> None:
    """`make hub-enroll CLASS=students.csv`: users, passwords and gradebook rows for a class list."""
    require_root("hub-enroll")
    if running_pid(STATE / "hub.pid", "jupyterhub") is None:
        sys.exit("[hub] the hub is not running: start it with `make hub` first")
    try:
        with table.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as error:
        sys.exit(f"[hub] cannot read the class list {table}: {error.strerror}")
    if not rows or "id" not in rows[0]:
        sys.exit(f"[hub] {table}: expected nbgrader's students.csv format, a header `id,first_name,last_name,email` "
                 f"and one student a line; got {'no rows' if not rows else 'the columns ' + ', '.join(rows[0])}")
    ids = [row["id"].strip() for row in rows]
    layout = recorded_layout()
    if layout.pods:
        ensure_pod_folders(ids)
    else:
        ensure_users(ids)
    ensure_passwords(ids, unix=not layout.pods)
    students = sorted(set(the_class(None)) | set(ids))
    (STATE / "class").write_text(" ".join(students))
    table_copy = Path(tempfile.mkdtemp(dir="/tmp")) / "students.csv"
    shutil.copy(table, table_copy)
    os.chmod(table_copy.parent, 0o755)
    os.chmod(table_copy, 0o644)
    try:
        as_owner(layout, ["nbgrader", "db", "student", "import", str(table_copy)])
    finally:
        shutil.rmtree(table_copy.parent)
    say(f"enrolled {len(ids)} students from {table}; their passwords are in {STATE / 'passwords'} (root only)")


# --------------------------------------------------------------------------- down


def process_ids_of(uids: set[int]) -> list[int]:
    """The PIDs of every process whose real user is one of `uids`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid in uids:
                    found.append(int(entry.name))
            except OSError:
                pass                                  # it ended meanwhile
    return found


def process_ids_started_from(environment: Path) -> list[int]:
    """The PIDs of every process whose command starts with a program of `environment` (the hub's managed services,
    the Dask scheduler and workers among them, run as root: no user's processes), this one and its callers left out."""
    ours, pid = set(), os.getpid()
    while pid > 1:                                    # hubctl itself and whatever started it
        ours.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    prefix = str(environment).encode() + b"/"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in ours:
            try:
                if (entry / "cmdline").read_bytes().startswith(prefix) and not _is_zombie(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                pass                                  # it ended meanwhile
    return found


def stop(pids: list[int], grace: float = 10) -> None:
    """SIGTERM each PID, then SIGKILL what is still alive after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2)):
        alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        for pid in alive:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            alive = [pid for pid in alive if Path(f"/proc/{pid}").exists() and not _is_zombie(pid)]
            time.sleep(0.2)


def _is_zombie(pid: int) -> bool:
    """Whether a process has ended and only waits for its parent to collect it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def recorded_server_pids() -> list[int]:
    """The user servers' PIDs, as LocalProcessSpawner recorded them in the hub's database."""
    database = STATE / "jupyterhub.sqlite"
    if not database.is_file():
        return []
    with sqlite3.connect(database) as connection:
        states = [row[0] for row in connection.execute("select state from spawners where state is not null")]
    return [json.loads(state).get("pid") for state in states if state and json.loads(state).get("pid")]


def down() -> None:
    """Everything `make hub-down` does: processes by PID, then users and homes, the exchange and the state."""
    require_root("hub-down")
    layout = recorded_layout()
    hub = running_pid(STATE / "hub.pid", "jupyterhub")
    if hub:
        say("stopping JupyterHub (it stops the user servers)")
        stop([hub], grace=30)
    proxy = running_pid(STATE / "jupyterhub-proxy.pid", "configurable-http-proxy")
    names = made_users()
    ours = {pwd.getpwnam(name).pw_uid for name in names}
    servers = [pid for pid in recorded_server_pids() if Path(f"/proc/{pid}").exists()
               and Path(f"/proc/{pid}").stat().st_uid in ours]
    stop([pid for pid in [proxy, *servers] if pid])
    # a hub that had to be killed (SIGKILL after 30 s) stopped none of its managed services: the Dask scheduler left
    # on its port would take the next hub's workers, with the old certificate (every grading then fails on TLS)
    stop(process_ids_started_from(VENV))
    if (GRADEBOOK / "data").is_dir() and (VENV / "bin" / "python").exists() and names:
        subprocess.run([str(VENV / "bin" / "python"), "-m", "addnorm_grading.postgres", "down", str(GRADEBOOK),
                        "--owner", layout.owner], capture_output=True)     # cleanly; what is left is stopped below
    for _ in range(5):                               # kernels and terminals a killed server left behind, and
        left = process_ids_of(ours)                  # what a stopping process started meanwhile
        if not left:
            break
        stop(left)
    if (VENV / "bin" / "python").exists():         # the servers' control groups, which a killed hub left behind
        subprocess.run([str(VENV / "bin" / "python"), "-m", "addnorm_grading.cgroups", "remove-all"],
                       capture_output=True)
    for name in names:
        has_home = Path(pwd.getpwnam(name).pw_dir).is_dir()     # the pod user has none
        run(["userdel", *(["--remove"] if has_home and name != POD_USER else []), name])
    if names:
        say(f"removed {len(names)} users ({', '.join(names[:4])}{', …' if len(names) > 4 else ''}) and their homes")
    try:
        grp.getgrnam(GROUP)
        run(["groupdel", GROUP])
    except KeyError:
        pass
    shutil.rmtree(EXCHANGE / COURSE_ID, ignore_errors=True)
    if (STATE / "made-exchange").exists():
        for folder in (EXCHANGE, EXCHANGE.parent):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
    shutil.rmtree(GRADEBOOK, ignore_errors=True)
    shutil.rmtree(HOMES, ignore_errors=True)
    shutil.rmtree(STORE, ignore_errors=True)
    shutil.rmtree(STATE, ignore_errors=True)
    say("the course hub is down; its users, homes, exchange and gradebook are gone")


def main() -> None:
    """Parse `up [--students N]`, `enroll FILE`, `down` or `environment` and run it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("action", choices=["up", "enroll", "down", "environment"],
                        help="environment: only build the shared environment and the proxy (no user, no hub)")
    parser.add_argument("table", nargs="?", type=Path, help="enroll: the class list, in students.csv format")
    parser.add_argument("--students", type=int, help="up: a class of student1 … studentN (default: course.toml's)")
    parser.add_argument("--workers", type=int, help="up: grade on this many Dask workers (FeedbackService.engine="
                        "dask, a scheduler and workers of the service's own, mutual TLS) instead of a pool of processes")
    parser.add_argument("--pods", action="store_true",
                        help="up: one Unix user for every server, each in namespaces of its own (as on Kubernetes)")
    args = parser.parse_args()
    if args.action == "up":
        up(args.students, args.pods, args.workers)
    elif args.action == "enroll":
        if args.table is None:
            sys.exit("[hub] enroll needs the class list: `make hub-enroll CLASS=students.csv`")
        enroll(args.table)
    elif args.action == "environment":
        require_root("hub")
        ensure_environment()
        ensure_proxy()
    else:
        down()


if __name__ == "__main__":
    main()
