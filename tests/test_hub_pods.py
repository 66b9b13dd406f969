"""`make hub PODS=1`: the course hub with no Unix user per person, as on Zero to JupyterHub, graded end to end.

Every server runs as the one Unix user course.toml names (`[hub] pod_user`, as `jovyan` in every pod), each in PID
and mount namespaces of its own (addnorm_grading.hub_spawner); people log in on JupyterHub's login page with a hub
account (addnorm_grading.hub_accounts: NativeAuthenticator, sign-up closed); graded work travels over the HTTP
exchange service, and the feedback service grades what it received into the PostgreSQL gradebook.

The test starts it as a person does (`make hub PODS=1 STUDENTS=2 WORKERS=1`: grading on a Dask worker), enrols one more student while it runs
(`make hub-enroll`), and then, over HTTP as a browser would: nobody logs in with another's password and nobody
signs up; each person makes a token of their own from their login (the hub's own API); the instructor releases
from the formgrader; both students fetch and submit from the Assignment List (student1 a correct solution,
student2 the blank notebook); the feedback service grades both as theirs into the gradebook, which the
formgrader shows; student1 fetches their feedback through the Assignment List; the exchange refuses student1
student2's submissions. Inside student1's server (entered with nsenter, as the pod user): no other person's
folder, no exchange store, no gradebook password, no other server's process. Last, the hub is killed outright
(SIGKILL: it stops none of its services) and takes the Dask scheduler and worker with it; `make hub-down` then
leaves no user, folder or process. Needs root (it creates the pod user): skipped otherwise, with that reason.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from addnorm_grading import cgroups, submissions

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the course hub creates its pod user: run the tests as root"),
]

ROOT = Path(__file__).resolve().parent.parent
CONSTANTS = tomllib.loads((ROOT / "course.toml").read_text())
HUB_HOME = Path("/opt/addnorm-hub")
HOMES, STORE, GRADEBOOK, STATE = (HUB_HOME / name for name in ("homes", "exchange-store", "postgres", "state"))
BASE = "http://127.0.0.1:8000"
POD_USER = CONSTANTS["hub"]["pod_user"]
INSTRUCTOR = CONSTANTS["hub"]["instructor"]
COURSE_ID = CONSTANTS["course"]["id"]
FIRST, SECOND, ENROLLED = "student1", "student2", "student9"
PEOPLE = (INSTRUCTOR, FIRST, SECOND)
ASSIGNMENT, NOTEBOOK = "01_residual", "residual.ipynb"
LEDGER = HOMES / INSTRUCTOR / COURSE_ID / "feedback-service" / "ledger"


def make(target: str, *variables: str) -> subprocess.CompletedProcess:
    """Run `make <target> [NAME=value …]` in the repository, as a person would."""
    return subprocess.run(["make", "-C", str(ROOT), target, *variables], capture_output=True, text=True, timeout=1200)


def wait_until(ready, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(1)
    pytest.fail(f"{what} within {timeout:.0f} s; the hub's log:\n{(STATE / 'hub.log').read_text()[-4000:]}")


def log_in(user: str, password: str) -> tuple[requests.Session, requests.Response]:
    """JupyterHub's login form, as a browser posts it (its _xsrf cookie and field)."""
    session = requests.Session()
    session.get(f"{BASE}/hub/login", timeout=30)
    answer = session.post(f"{BASE}/hub/login", allow_redirects=False, timeout=60,
                          data={"username": user, "password": password, "_xsrf": session.cookies.get("_xsrf")})
    return session, answer


def own_token(user: str, password: str) -> str:
    """Log in, then make a token from that login with the hub's API (as the hub's Token page does)."""
    session, answer = log_in(user, password)
    assert answer.status_code == 302, f"{user} could not log in with their own password: {answer.status_code}"
    made = session.post(f"{BASE}/hub/api/users/{user}/tokens", json={"note": "test", "expires_in": 3600},
                        headers={"X-XSRFToken": session.cookies.get("_xsrf", path="/hub/")}, timeout=30)
    assert made.status_code == 201, made.text
    return made.json()["token"]


def started_from_the_hubs_environment() -> list[str]:
    """The command lines of running processes whose program is in the hub's environment (its services among them)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] if command else "Z"
        except OSError:
            continue
        if command.startswith(str(HUB_HOME / "venv").encode() + b"/") and state != "Z":
            found.append(command.replace(b"\0", b" ").decode(errors="replace"))
    return found


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[dict]:
    """`make hub PODS=1 STUDENTS=2 WORKERS=1`, one student enrolled, every person's token and server; `make hub-down`
    after."""
    make("hub-down")                                   # a clean course, whatever ran before
    started = make("hub", "PODS=1", "STUDENTS=2", "WORKERS=1")
    assert started.returncode == 0, f"make hub PODS=1 failed:\n{started.stdout[-4000:]}\n{started.stderr[-4000:]}"
    class_list = tmp_path_factory.mktemp("class") / "students.csv"
    class_list.write_text(f"id,first_name,last_name,email\n{ENROLLED},Ada,Lovelace,ada@example.org\n")
    enrolled = make("hub-enroll", f"CLASS={class_list}")
    assert enrolled.returncode == 0, f"make hub-enroll failed:\n{enrolled.stdout[-3000:]}\n{enrolled.stderr[-3000:]}"
    uid = pwd.getpwnam(POD_USER).pw_uid
    try:
        passwords = dict(line.split(" ", 1) for line in (STATE / "passwords").read_text().splitlines())
        tokens = {user: own_token(user, passwords[user]) for user in PEOPLE}
        for user in PEOPLE:
            answer = requests.post(f"{BASE}/hub/api/users/{user}/server", timeout=60,
                                   headers={"Authorization": f"token {tokens[user]}"})
            assert answer.status_code in (201, 202), answer.text
        for user in PEOPLE:
            wait_until(lambda: requests.get(f"{BASE}/hub/api/users/{user}", timeout=10,
                                            headers={"Authorization": f"token {tokens[user]}"}
                                            ).json()["servers"].get("", {}).get("ready"),
                       f"{user}'s server did not start")
        yield {"passwords": passwords, "tokens": tokens}
    finally:
        down = make("hub-down")
        assert down.returncode == 0, f"make hub-down failed:\n{down.stdout}\n{down.stderr}"
        with pytest.raises(KeyError):
            pwd.getpwnam(POD_USER)
        assert not processes_of(uid), "make hub-down left processes of the pod user"
        assert not started_from_the_hubs_environment(), "make hub-down left processes of the hub's environment"
        assert not any(path.exists() for path in (HOMES, STORE, GRADEBOOK, STATE)), "make hub-down left folders"
        assert not [folder for user in PEOPLE for folder in cgroups.folders(user) if folder.exists()], \
            "make hub-down left servers' control groups"


def call(hub, user: str, method: str, url: str, **kwargs) -> requests.Response:
    return requests.request(method, url, headers={"Authorization": f"token {hub['tokens'][user]}"}, timeout=180,
                            **kwargs)


def assignment_list(hub, user: str, action: str) -> dict:
    """One of the Assignment List's own requests to the user's server."""
    answer = call(hub, user, "POST", f"{BASE}/user/{user}/assignments/{action}",
                  data={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT})
    assert answer.status_code == 200 and answer.json()["success"], (action, answer.status_code, answer.text[:800])
    return answer.json()


def test_no_person_has_a_unix_user_and_nobody_logs_in_as_another(hub):
    for user in (*PEOPLE, ENROLLED):
        with pytest.raises(KeyError):
            pwd.getpwnam(user)
    _, wrong = log_in(FIRST, hub["passwords"][SECOND])
    assert wrong.status_code == 403 and "Invalid username or password" in wrong.text
    _, stranger = log_in("mallory", hub["passwords"][SECOND])
    assert stranger.status_code == 403
    _, enrolled = log_in(ENROLLED, hub["passwords"][ENROLLED])       # enrolled while the hub ran: no restart
    assert enrolled.status_code == 302
    assert requests.get(f"{BASE}/hub/signup", timeout=30).status_code == 404


@pytest.fixture(scope="module")
def submitted(hub):
    released = call(hub, INSTRUCTOR, "POST", f"{BASE}/user/{INSTRUCTOR}/formgrader/api/assignment/{ASSIGNMENT}/release")
    assert released.status_code == 200 and released.json()["success"], released.text
    for student in (FIRST, SECOND):
        listed = call(hub, student, "GET", f"{BASE}/user/{student}/assignments", params={"course_id": COURSE_ID})
        assert [a["assignment_id"] for a in listed.json()["value"] if a["status"] == "released"] == [ASSIGNMENT]
        assignment_list(hub, student, "fetch")
    notebook = HOMES / FIRST / ASSIGNMENT / NOTEBOOK                 # student1 writes the solution in JupyterLab
    notebook.write_text(submissions.solution_text(ASSIGNMENT))
    for student in (FIRST, SECOND):
        assignment_list(hub, student, "submit")
    return hub


def graded() -> dict[str, str]:
    """The feedback service's ledger: student -> the detail of their graded entry."""
    if not LEDGER.is_file():
        return {}
    rows = [line.split("\t") for line in LEDGER.read_text().splitlines()]
    return {row[1].split("+", 1)[0]: row[3] for row in rows if len(row) > 3 and row[2] == "graded"}


def test_the_feedback_service_grades_each_submission_as_its_own_learners_into_the_gradebook(submitted):
    hub = submitted
    wait_until(lambda: {FIRST, SECOND} <= set(graded()), "the feedback service did not grade both submissions", 300)
    details = graded()
    assert details[FIRST].startswith("score 6/8") and details[SECOND].startswith("score 0/8"), details
    shown = call(hub, INSTRUCTOR, "GET", f"{BASE}/user/{INSTRUCTOR}/formgrader/api/submissions/{ASSIGNMENT}")
    assert shown.status_code == 200, shown.text
    scores = {row["student"]: row["score"] for row in shown.json() if row.get("autograded")}
    assert scores.get(FIRST) == 6 and scores.get(SECOND) == 0, shown.json()       # the gradebook: PostgreSQL
    feedback = assignment_list(hub, FIRST, "fetch_feedback")
    assert feedback["success"]
    pages = list((HOMES / FIRST / ASSIGNMENT / "feedback").glob("*/residual.html"))
    assert pages and all(re.search(r"residual \(Score: 6\.0 / 8\.0\)", page.read_text()) for page in pages), pages
    assert not (HOMES / INSTRUCTOR / COURSE_ID / "gradebook.db").exists(), "graded into SQLite, not PostgreSQL"


def test_the_exchange_refuses_a_learner_anothers_submissions(submitted):
    hub = submitted
    other = call(hub, FIRST, "GET", f"{BASE}/services/exchange/api/{COURSE_ID}/submissions",
                 params={"student": SECOND})
    assert other.status_code == 403 and SECOND in other.json()["message"]
    everyone = call(hub, FIRST, "GET", f"{BASE}/services/exchange/api/{COURSE_ID}/submissions")
    assert everyone.status_code == 403
    collect = call(hub, FIRST, "POST", f"{BASE}/user/{FIRST}/formgrader/api/assignment/{ASSIGNMENT}/collect")
    assert collect.status_code == 404                  # a student's server has no formgrader


def inside_server(user: str, command: str) -> subprocess.CompletedProcess:
    """A shell command in `user`'s server, in its namespaces, as the pod user (what their terminal would run)."""
    [pid] = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()
             and _is_server_of(entry, user)]
    account = pwd.getpwnam(POD_USER)
    return subprocess.run(["nsenter", f"--target={pid}", "--mount", "--pid", "--", "setpriv",
                           f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", "sh", "-c",
                           command], capture_output=True, text=True, timeout=60)


def _is_server_of(entry: Path, user: str) -> bool:
    try:
        words = (entry / "cmdline").read_bytes().split(b"\0")
        return any(w.endswith(b"jupyterhub-singleuser") for w in words[:3]) and \
            f"JUPYTERHUB_USER={user}\0".encode() in (entry / "environ").read_bytes()
    except OSError:
        return False


def test_a_learners_server_sees_only_its_own_folder(submitted):
    for folder in (HOMES, STORE):                      # every person's folder, the exchange's store: not there
        seen = inside_server(FIRST, f"ls -A {folder}")
        assert seen.stdout == "" and "No such file or directory" in seen.stderr, (folder, seen.stdout, seen.stderr)
    top = set(inside_server(FIRST, "ls /").stdout.split())                       # the image's, as in a pod
    assert {"usr", "etc", "home", "tmp", "proc"} <= top <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr",
                                                           "etc", "sys", "proc", "dev", "tmp", "home", "opt"}, top
    for name in ("checks", "solutions"):               # the repository make hub ran from: the instructor's copy
        seen = inside_server(FIRST, f"ls -A {ROOT / name}")
        assert seen.stdout == "", (name, seen.stdout[:300])
    assert inside_server(FIRST, "ls -A /home").stdout.split() == [POD_USER]
    password = inside_server(FIRST, f"cat {GRADEBOOK}/password")
    assert password.returncode != 0 and password.stdout == "", "student1's server reads the gradebook's password"
    processes = inside_server(FIRST, "ls /proc").stdout.split()
    others = [pid for pid in processes if pid.isdigit()
              and SECOND in inside_server(FIRST, f"cat /proc/{pid}/environ 2>/dev/null | tr '\\0' ' '").stdout]
    assert len([pid for pid in processes if pid.isdigit()]) < 20 and not others, processes
    assert NOTEBOOK in inside_server(FIRST, f"ls /home/{POD_USER}/{ASSIGNMENT}").stdout                 # their own work
    teacher = inside_server(INSTRUCTOR, f"test -r {GRADEBOOK}/password && ls /home/{POD_USER}/{COURSE_ID}")
    assert teacher.returncode == 0 and "solutions" in teacher.stdout.split(), teacher.stdout + teacher.stderr


def test_a_hub_killed_outright_takes_its_grading_engine_with_it(hub):
    """JupyterHub stops its managed services when it stops, not when it is killed (`make hub-down` kills a hub that
    takes over 30 s): the Dask scheduler and workers die with it, so that no scheduler left on its port takes the
    next hub's workers with an old certificate (every grading then failed on TLS). Runs last: the hub is gone after."""
    engine = [command for command in started_from_the_hubs_environment() if "bin/dask " in command]
    assert any(" scheduler " in command for command in engine) and any(" worker " in command for command in engine), \
        f"no Dask scheduler and worker run beside the hub: {engine}"
    os.kill(int((STATE / "hub.pid").read_text()), 9)
    wait_until(lambda: not [command for command in started_from_the_hubs_environment() if "bin/dask " in command],
               "the Dask scheduler and workers did not die with the hub", timeout=30)
