"""The HTTP exchange (addnorm_grading.http_exchange) behind a real JupyterHub: identity from the hub's tokens alone.

A JupyterHub of the test's own (the shared environment and proxy of `make hub`, built by `hub/hubctl.py
environment`; DummyAuthenticator: no Unix user per learner, every command below runs as this one Unix user) runs
the exchange as a managed service behind its proxy. Its users are `teacher` (in the course's instructors' group),
`alice` and `bob`, each with a hub token; nbgrader's own commands run with each one's token, as the Assignment
List and the formgrader call them in that user's server, and raw requests try what the commands do not.

Checked: releasing, listing everyone's submissions, collecting and releasing feedback need the instructors' group;
a learner submits only as themselves (`--student=` naming another is refused, said so), and lists and fetches only
their own submissions and feedback; requests without a token or with a revoked one are refused; a submission's time
is the service's clock, whatever its `timestamp.txt` says; every bad upload (`..`, an absolute path, a link, 10,000
files, a 1 GiB body, a tab or a line break in a name, a notebook that is not JSON) is refused with its reason,
nothing stored, and the service keeps serving.
"""

from __future__ import annotations

import datetime
import http.client
import io
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import requests
from nbgrader.api import Gradebook

from addnorm_grading import cgroups, coursework, submissions
from addnorm_grading.feedback_service.ledger import Ledger
from addnorm_grading.postgres import free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's shared environment lives in /opt: run the tests as root"),
]

ROOT = Path(__file__).resolve().parent.parent
HUB_HOME = Path("/opt/addnorm-hub")
PYTHON = HUB_HOME / "venv" / "bin" / "python"
PROXY = HUB_HOME / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
COURSE_ID = "addnorm"
ASSIGNMENT = "01_residual"
ADMIN_TOKEN = "test-admin-" + os.urandom(16).hex()
SHARED_USER = "addnorm-pod"                 # every learner server's Unix user, as `jovyan` in every pod
MARKER = "addnorm course hub"               # the comment of users `make hub-down` may remove
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"
MEMORY_LIMIT, PIDS_LIMIT = "2G", 400         # each learner server's, in a control group of its own

HUB_CONFIG = """\
c = get_config()  # noqa: F821
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_port}"
c.ConfigurableHTTPProxy.command = ["{proxy}"]
c.ConfigurableHTTPProxy.pid_file = "{state}/proxy.pid"
c.JupyterHub.db_url = "sqlite:///{state}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{state}/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = "{password}"
c.Authenticator.allowed_users = {{"teacher", "alice", "bob"}}
c.JupyterHub.load_groups = {{"instructors": {{"users": ["teacher"]}}}}
c.JupyterHub.services = [
    {{"name": "exchange", "url": "http://127.0.0.1:{service_port}",
      "command": ["{python}", "-m", "addnorm_grading.http_exchange", "--store", "{state}/exchange",
                  "--course-file", "{course}/course.toml"]}},
    {{"name": "test-admin", "api_token": "{admin_token}"}},
]
c.JupyterHub.load_roles = [
    {{"name": "user", "scopes": ["self", "access:services!service=exchange"]}},
    {{"name": "server", "scopes": ["users:activity!user", "access:servers!server", "access:services!service=exchange",
                                  "read:users:groups!user"]}},   # a server's own token may use the exchange
    {{"name": "test-admin", "services": ["test-admin"],
      "scopes": ["admin:users", "tokens", "admin:groups", "access:services", "admin:servers", "servers"]}},
]
# every learner's server as the one Unix user addnorm-pod, in namespaces of its own (addnorm_grading.hub_spawner)
c.JupyterHub.spawner_class = "addnorm_grading.hub_spawner.SharedUserSpawner"
c.SharedUserSpawner.shared_user = "{shared_user}"
c.SharedUserSpawner.homes = "{homes}"
c.SharedUserSpawner.mem_limit = "{memory_limit}"
c.SharedUserSpawner.pids_limit = {pids_limit}
c.Spawner.cmd = ["{python_bin}/jupyterhub-singleuser"]
c.Spawner.environment = {{"PATH": "{python_bin}:/usr/bin:/bin", "ADDNORM_EXCHANGE_URL": "{exchange}"}}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
"""

CLIENT_CONFIG = """\
from addnorm_grading.http_exchange.client import configure
c = get_config()  # noqa: F821
configure(c)
c.CourseDirectory.course_id = "addnorm"
"""


def wait_until(ready, what: str, timeout: float = 90, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (OSError, requests.RequestException):
            pass
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout:.0f} s" + (f"; the hub's log:\n{log.read_text()[-4000:]}" if log else ""))


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A running hub with the exchange service; yields the addresses, the users' tokens and the folders."""
    built = subprocess.run(["/usr/bin/python3", str(ROOT / "hub" / "hubctl.py"), "environment"],
                           capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    made_user = subprocess.run(["id", SHARED_USER], capture_output=True).returncode != 0
    if made_user:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        "--comment", MARKER, SHARED_USER], check=True)
    tmp = tmp_path_factory.mktemp("http-exchange")
    state, course = tmp / "state", tmp / "course"
    state.mkdir()
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    settings, count = re.subn(r"(?m)^interval = .*$", "interval = 0", (ROOT / "course.toml").read_text())
    assert count == 1, "course.toml's [exchange] interval moved"
    (course / "course.toml").write_text(settings)      # these tests submit back to back (tests/test_exchange_store.py
                                                       # checks the interval, through the service's handlers too)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text() + "\n"
                                               "from addnorm_grading.http_exchange.client import configure\n"
                                               "configure(c)\n")
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, course / "exercises" / ASSIGNMENT)
    ports = {"port": free_port(), "hub_port": free_port(), "proxy_port": free_port(), "service_port": free_port()}
    base = f"http://127.0.0.1:{ports['port']}"
    exchange = f"{base}/services/exchange/"
    (tmp / "jupyterhub_config.py").write_text(HUB_CONFIG.format(
        **ports, proxy=PROXY, state=state, password=os.urandom(8).hex(), python=PYTHON, course=course,
        admin_token=ADMIN_TOKEN, shared_user=SHARED_USER, homes=tmp / "homes", python_bin=PYTHON.parent,
        exchange=exchange, memory_limit=MEMORY_LIMIT, pids_limit=PIDS_LIMIT))
    log = state / "hub.log"
    env = {**os.environ, "PATH": f"{PYTHON.parent}:{PROXY.parent}:/usr/bin:/bin"}
    with log.open("wb") as out:
        process = subprocess.Popen([str(PYTHON.parent / "jupyterhub"), "-f", str(tmp / "jupyterhub_config.py")],
                                   cwd=state, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    admin = {"Authorization": f"token {ADMIN_TOKEN}"}
    try:
        wait_until(lambda: requests.get(f"{base}/hub/api", timeout=2).ok, "JupyterHub did not answer", log=log)
        wait_until(lambda: requests.get(f"{exchange}api/{COURSE_ID}/assignments", timeout=2).status_code == 401,
                   "the exchange service did not answer", log=log)
        tokens = {}
        for user in ("teacher", "alice", "bob"):
            made = requests.post(f"{base}/hub/api/users/{user}/tokens", headers=admin, timeout=10,
                                 json={"note": "test", "expires_in": 3600})
            assert made.status_code == 201, made.text
            tokens[user] = made.json()["token"]
        yield {"base": base, "exchange": exchange, "tokens": tokens, "service_port": ports["service_port"],
               "hub_port": ports["hub_port"],
               "state": state, "course": course, "homes": tmp / "homes", "store": state / "exchange" / COURSE_ID,
               "tmp": tmp, "log": log, "admin": admin}
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
        for user in ("alice", "bob"):                # a server the hub could not stop (it stops them on exit)
            for pid in server_pids({"hub_port": ports["hub_port"]}, user):
                os.kill(pid, 9)
        time.sleep(1)
        for user in ("alice", "bob"):
            assert cgroups.remove(cgroups.folders(user)), f"{user}'s server left processes in its control group"
        if made_user:
            subprocess.run(["userdel", SHARED_USER], check=False)


def pids_of(program: bytes, having: bytes) -> list[int]:
    """The processes whose first words end with `program` and whose command line or environment holds `having`
    (this test's hub, not another on the machine), seen from outside any namespace."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and any(w.endswith(program) for w in words[:3]) and \
                (having in b"\0".join(words) or having in environ):
            found.append(int(entry.name))
    return found


def server_pids(hub, user: str) -> list[int]:
    """The jupyterhub-singleuser processes of this hub's `user`."""
    return [pid for pid in pids_of(b"jupyterhub-singleuser", f"JUPYTERHUB_USER={user}".encode())
            if f"127.0.0.1:{hub['hub_port']}".encode() in Path(f"/proc/{pid}/environ").read_bytes()]


def nbgrader(hub, user: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """An nbgrader command as `user`'s server runs it: their hub token, their folder (the course's for teacher)."""
    if cwd is None:
        cwd = hub["course"] if user == "teacher" else hub["tmp"] / user
        cwd.mkdir(exist_ok=True)
        if user != "teacher":
            (cwd / "nbgrader_config.py").write_text(CLIENT_CONFIG)
    env = {"PATH": f"{PYTHON.parent}:/usr/bin:/bin", "HOME": str(hub["tmp"] / f"home-{user}"),
           "JUPYTERHUB_API_TOKEN": hub["tokens"][user], "JUPYTERHUB_USER": user,
           "ADDNORM_EXCHANGE_URL": hub["exchange"], "ADDNORM_UNSAFE_GRADING": "0"}
    return subprocess.run([str(PYTHON), "-m", "nbgrader", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def api(hub, user: str | None, method: str, path: str, **kwargs) -> requests.Response:
    headers = {"Authorization": f"token {hub['tokens'][user]}"} if user else {}
    return requests.request(method, f"{hub['exchange']}api/{COURSE_ID}/{path}", headers=headers, timeout=60,
                            **kwargs)


def tar_of(files: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return buffer.getvalue()


def tar_members(members: list[tuple[str, bytes | None]]) -> bytes:
    """A tar archive of (name, content) in order, a folder where content is None: names may repeat."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def stored(hub) -> list[str]:
    """What the store holds: the submissions and anything left half-written."""
    return sorted(os.listdir(hub["store"] / "inbound")) + sorted(os.listdir(hub["store"] / ".incoming"))


NOTEBOOK = (ROOT / "exercises" / ASSIGNMENT / "residual.ipynb").read_bytes()


@pytest.fixture(scope="module")
def released(hub):
    result = nbgrader(hub, "teacher", "release_assignment", ASSIGNMENT)
    assert result.returncode == 0, result.stdout + result.stderr
    return hub


def test_requests_without_a_valid_token_are_refused(hub):
    nothing = api(hub, None, "GET", "assignments")
    assert nothing.status_code == 401 and "no JupyterHub token" in nothing.json()["message"]
    forged = requests.get(f"{hub['exchange']}api/{COURSE_ID}/assignments", timeout=10,
                          headers={"Authorization": "token " + "0" * 32})
    assert forged.status_code == 401 and "not valid" in forged.json()["message"]
    wrong = requests.get(f"{hub['exchange']}api/other-course/assignments", timeout=10,
                         headers={"Authorization": f"token {hub['tokens']['alice']}"})
    assert wrong.status_code == 404 and "serves the course addnorm, not other-course" in wrong.json()["message"], (
        wrong.status_code, wrong.text[:300], hub["log"].read_text()[-4000:])   # it was a 503 once: see the log


def test_only_instructors_release_and_learners_fetch(released):
    hub = released
    refused = nbgrader(hub, "alice", "release_assignment", ASSIGNMENT, cwd=hub["course"])
    assert refused.returncode != 0
    assert "only the course's instructors (instructors) may release an assignment; alice is not one" in refused.stderr
    listed = nbgrader(hub, "alice", "list")
    assert f"{COURSE_ID} {ASSIGNMENT}" in listed.stderr, listed.stderr
    fetched = nbgrader(hub, "alice", "fetch_assignment", ASSIGNMENT)
    assert fetched.returncode == 0, fetched.stderr
    assert (hub["tmp"] / "alice" / ASSIGNMENT / "residual.ipynb").read_bytes() == NOTEBOOK
    take_back = api(hub, "bob", "DELETE", f"assignments/{ASSIGNMENT}")
    assert take_back.status_code == 403 and "bob is not one" in take_back.json()["message"]


@pytest.fixture(scope="module")
def submitted(released):
    """alice and bob fetch and submit, each with a timestamp.txt of 2000; bob first tries to submit as alice."""
    hub = released
    runs = {}
    for user in ("alice", "bob"):
        folder = hub["tmp"] / user / ASSIGNMENT
        if not folder.exists():
            assert nbgrader(hub, user, "fetch_assignment", ASSIGNMENT).returncode == 0
        (folder / "timestamp.txt").write_text("2000-01-01 00:00:00.000000 UTC")      # a forged time goes along
    runs["bob as alice"] = nbgrader(hub, "bob", "submit", ASSIGNMENT, "--student=alice")
    runs["stored after bob as alice"] = stored(hub)
    runs["before"] = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    runs["alice"] = nbgrader(hub, "alice", "submit", ASSIGNMENT)
    runs["after"] = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    runs["bob"] = nbgrader(hub, "bob", "submit", ASSIGNMENT)
    [runs["alice's"]] = [name for name in stored(hub) if name.startswith(f"alice+{ASSIGNMENT}+")]
    return runs


def test_a_learner_submits_only_as_themselves(released, submitted):
    refused = submitted["bob as alice"]
    assert refused.returncode != 0
    assert "bob may submit only as themselves, not as alice" in refused.stderr, refused.stderr
    assert not [name for name in submitted["stored after bob as alice"] if name.startswith("alice+")]
    assert submitted["alice"].returncode == 0 and submitted["bob"].returncode == 0, submitted["alice"].stderr
    mine = nbgrader(released, "bob", "list", "--cached")
    assert f"{COURSE_ID} bob {ASSIGNMENT}" in mine.stderr and "alice" not in mine.stderr, mine.stderr


def test_a_submissions_time_is_the_services_clock(released, submitted):
    timestamp = submitted["alice's"].split("+", 2)[2]
    receipt = datetime.datetime.strptime(timestamp, TIMESTAMP_FORMAT)
    assert submitted["before"] <= receipt <= submitted["after"], (submitted["before"], receipt, submitted["after"])
    assert (released["store"] / "inbound" / submitted["alice's"] / "timestamp.txt").read_text() == timestamp


def test_a_learner_reads_no_one_elses_submissions(released, submitted):
    hub = released
    timestamp = submitted["alice's"].split("+", 2)[2]
    others = api(hub, "bob", "GET", "submissions", params={"student": "alice"})
    assert others.status_code == 403 and "bob may list submissions only their own, not alice's" in \
        others.json()["message"]
    everyone = api(hub, "bob", "GET", "submissions")
    assert everyone.status_code == 403 and "bob is not one" in everyone.json()["message"]
    download = api(hub, "bob", "GET", f"submissions/{ASSIGNMENT}/alice/{quote(timestamp, safe='')}")
    assert download.status_code == 403 and "not alice's" in download.json()["message"]
    inbound = nbgrader(hub, "bob", "list", "--inbound")
    assert inbound.returncode != 0 and "bob is not one" in inbound.stderr
    collect = nbgrader(hub, "bob", "collect", ASSIGNMENT, cwd=hub["course"])
    assert collect.returncode != 0 and "bob is not one" in collect.stderr
    own = api(hub, "alice", "GET", f"submissions/{ASSIGNMENT}/alice/{quote(timestamp, safe='')}")
    assert own.status_code == 200 and "residual.ipynb" in tarfile.open(fileobj=io.BytesIO(own.content)).getnames()


def test_feedback_reaches_its_own_learner_only(released, submitted):
    hub = released
    alice = submitted["alice's"]
    collected = nbgrader(hub, "teacher", "collect", ASSIGNMENT)
    assert collected.returncode == 0, collected.stderr
    collected_folder = hub["course"] / "submitted" / "alice" / ASSIGNMENT
    assert (collected_folder / "timestamp.txt").read_text() == alice.split("+", 2)[2]     # the receipt, not 2000
    feedback = hub["course"] / "feedback" / "alice" / ASSIGNMENT
    feedback.mkdir(parents=True)
    (feedback / "residual.html").write_text("<p>alice: 6 of 8</p>")
    shutil.copy(collected_folder / "timestamp.txt", feedback / "timestamp.txt")
    not_teacher = nbgrader(hub, "bob", "release_feedback", ASSIGNMENT, cwd=hub["course"])
    assert not_teacher.returncode != 0 and "only the course's instructors" in not_teacher.stderr
    assert nbgrader(hub, "teacher", "release_feedback", ASSIGNMENT).returncode == 0
    assert nbgrader(hub, "alice", "fetch_feedback", ASSIGNMENT).returncode == 0
    [page] = (hub["tmp"] / "alice" / ASSIGNMENT / "feedback").glob("*/residual.html")
    assert page.read_text() == "<p>alice: 6 of 8</p>"
    bob = nbgrader(hub, "bob", "fetch_feedback", ASSIGNMENT)
    assert not list((hub["tmp"] / "bob" / ASSIGNMENT).glob("feedback/*/*.html")), bob.stderr
    stolen = api(hub, "bob", "GET", f"feedback/{ASSIGNMENT}/alice/{quote(alice.split('+', 2)[2], safe='')}")
    assert stolen.status_code == 403 and "bob may fetch feedback only their own" in stolen.json()["message"]


BAD_UPLOADS = {
    "a path with ..": (tar_of({"../escape.ipynb": NOTEBOOK}), "leads out of the submission"),
    "an absolute path": (tar_of({"/tmp/escape.ipynb": NOTEBOOK}), "is absolute"),
    "a link": (tar_of({"residual.ipynb": NOTEBOOK}, links={"secret": "/opt/addnorm-hub/postgres"}), "is a link"),
    "10,000 files": (tar_of({f"f{i}.txt": b"x" for i in range(10_000)}), "more than 100 files and folders"),
    "a tab in a name": (tar_of({"resi\tdual.ipynb": NOTEBOOK}), "not printable text"),
    "a line break in a name": (tar_of({"residual.ipynb\nfake.ipynb": NOTEBOOK}), "not printable text"),
    "a notebook that is not JSON": (tar_of({"residual.ipynb": b"print('hello')"}), "it is not JSON"),
    "no archive at all": (b"just bytes, no tar", "not a tar archive"),
    "a name given twice": (tar_members([("residual.ipynb", NOTEBOOK), ("residual.ipynb", NOTEBOOK)]), "given twice"),
    "a notebook named as a folder": (tar_members([("evil.ipynb/", b"not json")]), "not written plainly"),
    "a file with a file inside": (tar_members([("a", b"x"), ("a/b.ipynb", NOTEBOOK)]), "a is a file"),
    "a notebook nested too deeply": (tar_of({"residual.ipynb": b"[" * 200_000}), "nested too deeply"),
    "a folder named timestamp.txt": (tar_members([("residual.ipynb", NOTEBOOK), ("timestamp.txt", None)]),
                                     "timestamp.txt is a folder"),
}


@pytest.mark.parametrize("what", BAD_UPLOADS)
def test_a_bad_upload_is_refused_with_its_reason_and_nothing_stored(released, what):
    hub = released
    data, reason = BAD_UPLOADS[what]
    before = stored(hub)
    answer = api(hub, "alice", "POST", f"submissions/{ASSIGNMENT}", data=data)
    assert answer.status_code == 400, (answer.status_code, answer.text)
    assert reason in answer.json()["message"], answer.json()["message"]
    assert stored(hub) == before
    still = api(hub, "alice", "GET", "assignments")
    assert still.status_code == 200 and ASSIGNMENT in still.text


def test_a_1_gib_upload_is_refused_before_it_is_read(released):
    """Straight to the service (as a pod reaches it on Kubernetes): refused on the headers, and a body streamed
    without a length cut off on the way. (Through the hub's proxy the early refusal arrives as the proxy's 503: it
    sends nothing on before the first bytes of the body, and reports the service's closing the connection as an
    error; nbgrader's submit therefore checks the size before it sends, next test.)"""
    hub = released
    before = stored(hub)
    connection = http.client.HTTPConnection("127.0.0.1", hub["service_port"], timeout=60)
    connection.putrequest("POST", f"/services/exchange/api/{COURSE_ID}/submissions/{ASSIGNMENT}")
    connection.putheader("Authorization", f"token {hub['tokens']['alice']}")
    connection.putheader("Content-Length", str(1 << 30))
    connection.endheaders()
    answer = connection.getresponse()                       # answered on the headers: no byte of the body was sent
    message = json.loads(answer.read())["message"]
    assert answer.status == 413 and "1024.0 MiB, more than the course's limit of 32M" in message, message
    connection.close()
    try:
        streamed = requests.post(f"http://127.0.0.1:{hub['service_port']}/services/exchange/api/{COURSE_ID}/"
                                 f"submissions/{ASSIGNMENT}", headers={"Authorization": f"token {hub['tokens']['alice']}"},
                                 data=(b"\0" * (1 << 20) for _ in range(1024)), timeout=60)
        assert streamed.status_code == 413, streamed.text
    except requests.ConnectionError:
        pass                                                 # cut off while sending: refused all the same
    assert stored(hub) == before
    assert api(hub, "alice", "GET", "assignments").status_code == 200


def test_nbgrader_submit_leaves_out_a_1_gib_file_and_refuses_too_much(released, submitted):
    hub = released
    folder = hub["tmp"] / "alice" / ASSIGNMENT
    with open(folder / "huge.bin", "wb") as huge:            # sparse: 1 GiB on paper, nothing on disk
        huge.truncate(1 << 30)
    before = stored(hub)
    left_out = nbgrader(hub, "alice", "submit", ASSIGNMENT)
    assert left_out.returncode == 0 and "Left out" in left_out.stderr and "huge.bin" in left_out.stderr
    [new] = sorted(set(stored(hub)) - set(before))
    assert not (hub["store"] / "inbound" / new / "huge.bin").exists()
    (folder / "huge.bin").unlink()
    (folder / "data.bin").write_bytes(os.urandom(40 << 20))       # within nbgrader's file limit, over the course's
    too_much = nbgrader(hub, "alice", "submit", ASSIGNMENT)
    (folder / "data.bin").unlink()
    assert too_much.returncode != 0 and "more than the course's limit of 32M" in too_much.stderr, too_much.stderr
    assert len(stored(hub)) == len(before) + 1


def test_the_feedback_service_grades_what_the_exchange_received_as_whom_the_token_named(released, submitted,
                                                                                        tmp_path):
    """The feedback service over the exchange's store (identity=exchange; on one machine, as the store's user):
    alice's correct solution and bob's blank notebook graded as theirs, at the exchange's receipt times, and the
    feedback fetched through the exchange by its own learner."""
    hub = released
    (hub["tmp"] / "alice" / ASSIGNMENT / "residual.ipynb").write_text(submissions.solution_text(ASSIGNMENT))
    assert nbgrader(hub, "alice", "submit", ASSIGNMENT).returncode == 0
    latest = {student: max(name for name in stored(hub) if name.startswith(f"{student}+"))
              for student in ("alice", "bob")}
    course = coursework.make_course(tmp_path / "graded-course")
    service = subprocess.Popen(
        [sys.executable, "-m", "addnorm_grading.feedback_service", f"--course={course}",
         f"--FeedbackService.exchange={hub['state'] / 'exchange'}", "--FeedbackService.identity=exchange",
         "--FeedbackService.poll_interval=0.5", "--FeedbackService.settle=0", "--FeedbackService.workers=2"],
        env=coursework.nbgrader_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ledger = Ledger(course / "feedback-service" / "ledger")
    try:
        wait_until(lambda: {e.submission for e in ledger.entries() if e.outcome == "graded"} >= set(latest.values())
                   or service.poll() is not None, "the feedback service graded nothing", timeout=300)
    finally:
        service.terminate()
        said = service.communicate(timeout=60)[0].decode()
    graded = {e.submission: e.detail for e in ledger.entries() if e.outcome == "graded"}
    assert set(latest.values()) <= set(graded), said[-3000:]
    scores = coursework.scores(course)
    assert scores[("alice", ASSIGNMENT, "residual")]["code"] > scores[("bob", ASSIGNMENT, "residual")]["code"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:       # the exchange's time, to the µs
        when = gradebook.find_submission(ASSIGNMENT, "alice").timestamp
    assert when == datetime.datetime.strptime(latest["alice"].split("+", 2)[2], TIMESTAMP_FORMAT)
    assert nbgrader(hub, "alice", "fetch_feedback", ASSIGNMENT).returncode == 0
    page = hub["tmp"] / "alice" / ASSIGNMENT / "feedback" / latest["alice"].split("+", 2)[2] / "residual.html"
    assert page.is_file() and "residual" in page.read_text()


def test_the_exchange_killed_is_restarted_by_the_hub_with_nothing_lost(released, submitted):
    hub = released
    listing = api(hub, "teacher", "GET", "submissions").json()["submissions"]
    [pid] = pids_of(b"addnorm_grading.http_exchange", str(hub["state"]).encode())
    os.kill(pid, 9)
    wait_until(lambda: api(hub, "teacher", "GET", "submissions").ok,
               "the hub did not restart the exchange", timeout=120, log=hub["log"])
    assert api(hub, "teacher", "GET", "submissions").json()["submissions"] == listing
    assert list((hub["store"] / ".incoming").iterdir()) == []


@pytest.fixture(scope="module")
def servers(released):
    """alice's and bob's JupyterLab servers, started by the hub as the one Unix user, each in its namespaces."""
    hub = released
    for user in ("alice", "bob"):
        home = hub["homes"] / user
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        (home / "nbgrader_config.py").write_text(CLIENT_CONFIG)      # the learner's own settings, in their home
        shutil.chown(home, SHARED_USER, SHARED_USER)
        shutil.chown(home / "nbgrader_config.py", SHARED_USER, SHARED_USER)
        started = requests.post(f"{hub['base']}/hub/api/users/{user}/server", headers=hub["admin"], timeout=30)
        assert started.status_code in (201, 202), started.text
    for user in ("alice", "bob"):
        wait_until(lambda: requests.get(f"{hub['base']}/hub/api/users/{user}", headers=hub["admin"],
                                        timeout=5).json()["servers"].get("", {}).get("ready"),
                   f"{user}'s server did not start", timeout=120, log=hub["log"])
    return hub


def assignment_list(hub, user: str, method: str, path: str, **data) -> dict:
    """One of the Assignment List's own requests to `user`'s server, with their token."""
    answer = requests.request(method, f"{hub['base']}/user/{user}/{path}", timeout=120, data=data or None,
                              params={"course_id": COURSE_ID} if method == "GET" else None,
                              headers={"Authorization": f"token {hub['tokens'][user]}"})
    assert answer.status_code == 200, (answer.status_code, answer.text[:500])
    return answer.json()


def test_the_assignment_list_fetches_and_submits_through_each_learners_own_server(servers, submitted):
    hub = servers
    listed = assignment_list(hub, "alice", "GET", "assignments")
    assert listed["success"], listed
    released = [a for a in listed["value"] if a["status"] == "released"]
    assert [a["assignment_id"] for a in released] == [ASSIGNMENT]
    mine = [s for a in listed["value"] if a["status"] == "submitted" for s in a["submissions"]]
    assert mine and {s["student_id"] for s in mine} == {"alice"}, mine         # the CLI's submissions: hers alone
    fetched = assignment_list(hub, "alice", "POST", "assignments/fetch", course_id=COURSE_ID,
                              assignment_id=ASSIGNMENT)
    assert fetched["success"], fetched
    assert (hub["homes"] / "alice" / ASSIGNMENT / "residual.ipynb").read_bytes() == NOTEBOOK
    before = stored(hub)
    sent = assignment_list(hub, "alice", "POST", "assignments/submit", course_id=COURSE_ID,
                           assignment_id=ASSIGNMENT)
    assert sent["success"], sent
    [new] = sorted(set(stored(hub)) - set(before))
    assert new.startswith(f"alice+{ASSIGNMENT}+")
    feedback = assignment_list(hub, "alice", "POST", "assignments/fetch_feedback", course_id=COURSE_ID,
                               assignment_id=ASSIGNMENT)
    assert feedback["success"], feedback
    pages = {page.parent.name: page.read_text()
             for page in (hub["homes"] / "alice" / ASSIGNMENT).glob("feedback/*/residual.html")}
    assert "<p>alice: 6 of 8</p>" in pages.values()                   # the instructor's release, and the service's
    alices = {name.split("+", 2)[2] for name in stored(hub) if name.startswith("alice+")}
    assert pages and set(pages) <= alices, (set(pages), alices)          # of her own submissions only
    bobs = assignment_list(hub, "bob", "GET", "assignments")
    assert {s["student_id"] for a in bobs["value"] if a["status"] == "submitted" for s in a["submissions"]} == {"bob"}


def test_a_learners_server_sees_no_other_server_and_no_other_home(servers):
    hub = servers
    [alice] = server_pids(hub, "alice")
    [bob] = server_pids(hub, "bob")
    shared = pwd.getpwnam(SHARED_USER).pw_uid
    assert os.stat(f"/proc/{alice}").st_uid == os.stat(f"/proc/{bob}").st_uid == shared     # one Unix user
    namespaces = {os.readlink(f"/proc/{pid}/ns/{kind}") for pid in (alice, bob, os.getpid()) for kind in ("pid",)}
    assert len(namespaces) == 3, namespaces
    seen = Path(f"/proc/{alice}/root")                  # the file system as alice's server sees it
    assert sorted(os.listdir(seen / "home")) == [SHARED_USER]
    for folder in (hub["homes"], hub["state"], hub["course"]):     # no learner's folder, the hub's state, the store
        assert not (seen / str(folder).lstrip("/")).exists(), folder
    operating_system = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "sys", "proc", "dev", "tmp"}
    assert set(os.listdir(seen)) <= operating_system | {"home", PYTHON.parent.parent.parts[1]}, os.listdir(seen)
    assert (seen / "home" / SHARED_USER / "nbgrader_config.py").is_file()      # her own folder is there
    assert os.readlink(f"/proc/{alice}/fd/1").endswith("/.jupyter-server.log")    # not the hub's log
    status = dict(line.split(":", 1) for line in Path(f"/proc/{alice}/status").read_text().splitlines())
    assert status["Seccomp"].strip() == "2", status["Seccomp"]     # the filter: Linux's keys have no namespace
    processes = [name for name in os.listdir(seen / "proc") if name.isdigit()]
    assert len(processes) < 10, processes                                     # its own few, not the machine's
    for pid in processes:
        environ = (seen / "proc" / pid / "environ").read_bytes()
        assert hub["tokens"]["bob"].encode() not in environ


def test_each_learners_server_has_limits_of_its_own(servers):
    """One Unix user's limits are every server's: each server's processes are in a control group of its own, with
    its memory and process limits (the kernel's enforcing them: tests/test_cgroups.py)."""
    hub = servers
    for user in ("alice", "bob"):
        [server] = server_pids(hub, user)
        groups = cgroups.folders(user)
        for group in groups:
            members = {int(pid) for pid in (group / "cgroup.procs").read_text().split()}
            assert server in members, (user, group)
        limits = {path.name: path.read_text().strip() for group in groups for path in group.iterdir()
                  if path.name in ("memory.max", "memory.limit_in_bytes", "pids.max")}
        assert limits.get("memory.max", limits.get("memory.limit_in_bytes")) == str(2 * 2**30), limits
        assert limits["pids.max"] == str(PIDS_LIMIT), limits


def test_a_learners_kernel_listens_on_no_port_another_server_could_reach(servers):
    """The servers share loopback (the hub and the proxy reach them there): their kernels use Unix sockets in the
    learner's own folder instead of TCP ports."""
    hub = servers
    headers = {"Authorization": f"token {hub['tokens']['alice']}"}
    started = requests.post(f"{hub['base']}/user/alice/api/kernels", headers=headers, json={"name": "python3"},
                            timeout=120)
    assert started.status_code == 201, started.text
    kernel = started.json()["id"]
    [server] = server_pids(hub, "alice")
    seen = Path(f"/proc/{server}/root")

    def connection_file():
        for pid in os.listdir(seen / "proc"):
            words = (seen / "proc" / pid / "cmdline").read_bytes().split(b"\0") if pid.isdigit() else []
            if any(kernel.encode() in word for word in words):
                return next(w.decode() for w in words if w.endswith(b".json"))
        return None

    wait_until(connection_file, "alice's kernel did not start", timeout=60)
    settings = json.loads((seen / connection_file().lstrip("/")).read_text())
    assert settings["transport"] == "ipc", settings
    requests.delete(f"{hub['base']}/user/alice/api/kernels/{kernel}", headers=headers, timeout=60)


def declared_only(hub, user: str | None, method: str, path: str, length: int) -> tuple[int, str]:
    """A request that declares a body of `length` bytes and sends none of it: the answer to its headers."""
    connection = http.client.HTTPConnection("127.0.0.1", hub["service_port"], timeout=60)
    connection.putrequest(method, f"/services/exchange/api/{COURSE_ID}/{path}")
    if user:
        connection.putheader("Authorization", f"token {hub['tokens'][user]}")
    connection.putheader("Content-Length", str(length))
    connection.endheaders()
    answer = connection.getresponse()
    message = json.loads(answer.read())["message"]
    connection.close()
    return answer.status, message


def test_no_body_is_read_before_the_caller_may_send_it(released):
    hub = released
    assert declared_only(hub, None, "GET", "assignments", 300 << 20)[0] == 401          # no token: not read
    status, message = declared_only(hub, "alice", "PUT", f"assignments/{ASSIGNMENT}", 100 << 20)
    assert status == 403 and "alice is not one" in message                              # a learner's release
    status, message = declared_only(hub, "alice", "GET", "assignments", 300 << 20)
    assert status == 413 and "takes no upload" in message
    assert api(hub, "alice", "GET", "assignments").status_code == 200


def test_a_name_in_the_address_that_no_submission_has_is_not_found(released, submitted):
    hub = released
    for timestamp in ("x" * 5000, "2026-12-06 10:00:00.000000 UTC/../..", "../alice"):
        answer = api(hub, "alice", "GET", f"submissions/{ASSIGNMENT}/alice/{quote(timestamp, safe='')}")
        assert answer.status_code == 404, (timestamp[:40], answer.status_code, answer.text[:200])
