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
import shutil
import socket
import subprocess
import tarfile
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import requests

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
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"

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
    {{"name": "test-admin", "services": ["test-admin"],
      "scopes": ["admin:users", "tokens", "admin:groups", "access:services"]}},
]
"""

CLIENT_CONFIG = """\
from addnorm_grading.http_exchange.client import configure
c = get_config()  # noqa: F821
configure(c)
c.CourseDirectory.course_id = "addnorm"
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    tmp = tmp_path_factory.mktemp("http-exchange")
    state, course = tmp / "state", tmp / "course"
    state.mkdir()
    course.mkdir()
    for name in ("nbgrader_config.py", "course.toml"):
        shutil.copy(ROOT / name, course / name)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text() + "\n"
                                               "from addnorm_grading.http_exchange.client import configure\n"
                                               "configure(c)\n")
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, course / "exercises" / ASSIGNMENT)
    ports = {"port": free_port(), "hub_port": free_port(), "proxy_port": free_port(), "service_port": free_port()}
    (tmp / "jupyterhub_config.py").write_text(HUB_CONFIG.format(
        **ports, proxy=PROXY, state=state, password=os.urandom(8).hex(), python=PYTHON, course=course,
        admin_token=ADMIN_TOKEN))
    log = state / "hub.log"
    env = {**os.environ, "PATH": f"{PYTHON.parent}:{PROXY.parent}:/usr/bin:/bin"}
    with log.open("wb") as out:
        process = subprocess.Popen([str(PYTHON.parent / "jupyterhub"), "-f", str(tmp / "jupyterhub_config.py")],
                                   cwd=state, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{ports['port']}"
    exchange = f"{base}/services/exchange/"
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
        yield {"base": base, "exchange": exchange, "tokens": tokens, "service_port": ports["service_port"], "state": state, "course": course,
               "store": state / "exchange" / COURSE_ID, "tmp": tmp, "log": log, "admin": admin}
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)


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
    assert wrong.status_code == 404 and "serves the course addnorm, not other-course" in wrong.json()["message"]


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
    everyone = api(hub, "bob", "GET", "submissions", params={"inbound": "1"})
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
