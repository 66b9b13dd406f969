"""ngshare 0.6.0 with ngshare-exchange 0.5.3, put through the HTTP exchange's tests (tests/test_http_exchange.py).

Run as root (the hub's shared environment and proxy live in /opt/addnorm-hub: `hub/hubctl.py environment`):

    sudo .venv/bin/python bench/ngshare_evaluation.py

It installs the two packages from PyPI into a temporary folder (`pip install --no-deps --target`: past
ngshare-exchange's `jupyter-core<4.11.2` pin, beside nbgrader 0.9.6 and jupyter-core 5), starts a JupyterHub of its
own on loopback with ngshare as a managed service, makes a course with the instructor `teacher` and the students
`alice` and `bob` through ngshare's API, releases 01_residual, and then tries, with each user's own hub token,
what the course's own exchange is tested for: identity (submit, list, download and feedback of another learner;
`--student=` through nbgrader's command), the submission's time, and the bad uploads. It prints one line per check,
`ok` when ngshare refuses or does what the course needs, `FAILS` with what happened otherwise, and a count last.
Nothing of this runs in `make test`: it installs software the course does not use.
"""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from addnorm_grading.postgres import free_port

ROOT = Path(__file__).resolve().parent.parent
HUB_HOME = Path("/opt/addnorm-hub")
PYTHON = HUB_HOME / "venv" / "bin" / "python"
PROXY = HUB_HOME / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
PACKAGES = ["ngshare==0.6.0", "ngshare-exchange==0.5.3"]
OLD_DATABASE = ["sqlalchemy==1.4.54", "alembic==1.13.3"]   # what ngshare 0.6.0 was written for, in its path only
COURSE, ASSIGNMENT = "addnorm", "01_residual"
NOTEBOOK = (ROOT / "exercises" / ASSIGNMENT / "residual.ipynb").read_bytes()
LIMIT = 32 << 20                    # course.toml's [uploads] size

HUB_CONFIG = """\
c = get_config()  # noqa: F821
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_port}"
c.ConfigurableHTTPProxy.command = ["{proxy}"]
c.JupyterHub.db_url = "sqlite:///{tmp}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = "{password}"
c.Authenticator.allowed_users = {{"teacher", "alice", "bob"}}
c.JupyterHub.services = [
    {{"name": "ngshare", "url": "http://127.0.0.1:{service_port}",
      "command": ["{python}", "-m", "ngshare", "--admins", "teacher", "--storage", "{tmp}/files",
                  "--database", "sqlite:///{tmp}/ngshare.db"],
      "environment": {{"PYTHONPATH": "{site}"}}}},
    {{"name": "bench-admin", "api_token": "{admin_token}"}},
]
c.JupyterHub.load_roles = [
    {{"name": "user", "scopes": ["self", "access:services!service=ngshare"]}},
    {{"name": "bench-admin", "services": ["bench-admin"], "scopes": ["admin:users", "tokens", "access:services"]}},
]
"""

CLIENT_CONFIG = """\
import ngshare_exchange
c = get_config()  # noqa: F821
ngshare_exchange.configureExchange(c, "{url}".rstrip("/"))
c.CourseDirectory.course_id = "addnorm"
"""

results: list[tuple[bool, str, str]] = []


def check(ok: bool, what: str, seen: str) -> None:
    results.append((ok, what, seen))
    print(f"{'ok   ' if ok else 'FAILS'}  {what}: {seen}", flush=True)


def files_json(files: dict[str, bytes]) -> str:
    return json.dumps([{"path": name, "content": base64.encodebytes(data).decode()} for name, data in files.items()])


class Bench:
    def __init__(self, tmp: Path, old_database: bool):
        self.tmp = tmp
        self.old_database = old_database
        self.site = tmp / "site"
        ports = {"port": free_port(), "hub_port": free_port(), "proxy_port": free_port(), "service_port": free_port()}
        self.base = f"http://127.0.0.1:{ports['port']}"
        self.url = f"{self.base}/services/ngshare/"
        self.service_port = ports["service_port"]
        self.admin_token = os.urandom(16).hex()
        (tmp / "jupyterhub_config.py").write_text(HUB_CONFIG.format(
            **ports, proxy=PROXY, tmp=tmp, password=os.urandom(8).hex(), python=PYTHON, site=self.site,
            admin_token=self.admin_token))
        self.tokens: dict[str, str] = {}

    def install(self) -> None:
        subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(self.site),
                        *PACKAGES, *(OLD_DATABASE if self.old_database else [])], check=True,
                       stderr=subprocess.DEVNULL)

    def start(self) -> subprocess.Popen:
        log = (self.tmp / "hub.log").open("wb")
        hub = subprocess.Popen([str(PYTHON.parent / "jupyterhub"), "-f", str(self.tmp / "jupyterhub_config.py")],
                               cwd=self.tmp, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               env={**os.environ, "PATH": f"{PYTHON.parent}:{PROXY.parent}:/usr/bin:/bin"})
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}healthz", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        else:
            sys.exit(f"ngshare did not answer; see {self.tmp / 'hub.log'}")
        for user in ("teacher", "alice", "bob"):
            made = requests.post(f"{self.base}/hub/api/users/{user}/tokens", timeout=10,
                                 headers={"Authorization": f"token {self.admin_token}"}, json={"expires_in": 3600})
            made.raise_for_status()
            self.tokens[user] = made.json()["token"]
        return hub

    def api(self, user: str, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(method, f"{self.url}{path}", timeout=300,
                                headers={"Authorization": f"token {self.tokens[user]}"}, **kwargs)

    def nbgrader(self, user: str, *args: str) -> subprocess.CompletedProcess:
        folder = self.tmp / user
        folder.mkdir(exist_ok=True)
        (folder / "nbgrader_config.py").write_text(CLIENT_CONFIG.format(url=self.url))
        env = {"PATH": f"{PYTHON.parent}:/usr/bin:/bin", "HOME": str(folder), "PYTHONPATH": str(self.site),
               "JUPYTERHUB_API_TOKEN": self.tokens[user], "JUPYTERHUB_USER": user, "USER": user}
        return subprocess.run([str(PYTHON), "-m", "nbgrader", *args], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=300)


def short(response: requests.Response) -> str:
    return f"HTTP {response.status_code} {response.text[:120]!r}"


def set_up_course(bench: Bench) -> bool:
    """The course, its two students and 01_residual released, through ngshare's API; whether the release shows."""
    teacher = "teacher"
    bench.api(teacher, "POST", f"course/{COURSE}", data={"instructors": json.dumps([teacher])}).raise_for_status()
    for student in ("alice", "bob"):
        bench.api(teacher, "POST", f"student/{COURSE}/{student}",
                  data={"first_name": student, "last_name": "Learner", "email": f"{student}@example.org"}
                  ).raise_for_status()
    released = bench.api(teacher, "POST", f"assignment/{COURSE}/{ASSIGNMENT}",
                         data={"files": files_json({"residual.ipynb": NOTEBOOK})})
    listed = bench.api("alice", "GET", f"assignments/{COURSE}")
    return released.ok and ASSIGNMENT in listed.json().get("assignments", [])


def evaluate(bench: Bench) -> None:

    # --- identity ---------------------------------------------------------------------------------------------
    by_alice = bench.api("alice", "POST", f"assignment/{COURSE}/{ASSIGNMENT}",
                         data={"files": files_json({"residual.ipynb": b"{}"})})
    check(by_alice.status_code == 403, "a learner cannot release", short(by_alice))
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    sent = bench.api("alice", "POST", f"submission/{COURSE}/{ASSIGNMENT}",
                     data={"files": files_json({"residual.ipynb": NOTEBOOK,
                                                "timestamp.txt": b"2000-01-01 00:00:00.000000 UTC"})})
    after = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    stamp = sent.json().get("timestamp", "") if sent.ok else ""
    try:
        when = datetime.datetime.strptime(stamp.replace(" UTC", ""), "%Y-%m-%d %H:%M:%S.%f")
        on_clock = before - datetime.timedelta(seconds=1) <= when <= after + datetime.timedelta(seconds=1)
    except ValueError:
        on_clock = False
    check(sent.ok and on_clock, "a submission's time is the service's clock (timestamp.txt says 2000)",
          f"{short(sent)}")
    listed = bench.api("bob", "GET", f"submissions/{COURSE}/{ASSIGNMENT}/alice")
    check(listed.status_code == 403, "a learner cannot list another's submissions", short(listed))
    everyone = bench.api("bob", "GET", f"submissions/{COURSE}/{ASSIGNMENT}")
    check(everyone.status_code == 403, "a learner cannot list the inbound", short(everyone))
    download = bench.api("bob", "GET", f"submission/{COURSE}/{ASSIGNMENT}/alice")
    check(download.status_code == 403, "a learner cannot download another's submission", short(download))
    feedback = bench.api("bob", "GET", f"feedback/{COURSE}/{ASSIGNMENT}/alice", params={"timestamp": stamp})
    check(feedback.status_code == 403, "a learner cannot fetch another's feedback", short(feedback))
    nobody = requests.post(f"{bench.url}submission/{COURSE}/{ASSIGNMENT}", timeout=30,
                           data={"files": files_json({"residual.ipynb": NOTEBOOK})})
    check(nobody.status_code in (401, 403), "a request without a token is refused with a message", short(nobody))
    fetched = bench.nbgrader("bob", "fetch_assignment", ASSIGNMENT)
    as_alice = bench.nbgrader("bob", "submit", ASSIGNMENT, "--student=alice")
    check(fetched.returncode == 0, "nbgrader fetch_assignment through ngshare-exchange",
          f"exit {fetched.returncode}")
    check(as_alice.returncode != 0 and "student" in as_alice.stderr.lower(),
          "nbgrader submit --student=alice as bob is refused, said so",
          next((line for line in as_alice.stderr.splitlines() if "student" in line.lower()), "(no reason given)")[:160])

    # --- bad uploads ------------------------------------------------------------------------------------------
    bad = {
        "a path with ..": {"../escape.ipynb": NOTEBOOK},
        "an absolute path": {"/tmp/escape.ipynb": NOTEBOOK},
        "10,000 files": {f"f{i}.txt": b"x" for i in range(10_000)},
        "a tab in a name": {"resi\tdual.ipynb": NOTEBOOK},
        "a line break in a name": {"residual.ipynb\nfake.ipynb": NOTEBOOK},
        "a notebook that is not JSON": {"residual.ipynb": b"print('hello')"},
        "48 MiB, over the course's 32 MiB": {"residual.ipynb": NOTEBOOK, "data.bin": os.urandom(48 << 20)},
    }
    for what, files in bad.items():
        answer = bench.api("alice", "POST", f"submission/{COURSE}/{ASSIGNMENT}", data={"files": files_json(files)})
        check(answer.status_code >= 400, f"refused: {what}", short(answer))
    connection = http.client.HTTPConnection("127.0.0.1", bench.service_port, timeout=60)
    connection.putrequest("POST", f"/services/ngshare/submission/{COURSE}/{ASSIGNMENT}")
    connection.putheader("Authorization", f"token {bench.tokens['alice']}")
    connection.putheader("Content-Length", str(1 << 30))
    connection.endheaders()
    try:
        answer = connection.getresponse()
        body = answer.read()[:120]
        check(answer.status == 413 or b"message" in body, "a 1 GiB body refused with its reason",
              f"HTTP {answer.status} {body!r}")
    except (OSError, http.client.HTTPException) as error:
        check(False, "a 1 GiB body refused with its reason", f"no answer ({error.__class__.__name__})")
    alive = bench.api("alice", "GET", f"assignments/{COURSE}")
    check(alive.ok, "the service keeps serving", short(alive))
    stored = bench.api("teacher", "GET", f"submissions/{COURSE}/{ASSIGNMENT}/alice")
    count = len(stored.json().get("submissions", [])) if stored.ok else -1
    check(count == 1, "nothing of the bad uploads was stored", f"alice has {count} submissions in ngshare")


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("run as root: the hub's environment is in /opt/addnorm-hub (hub/hubctl.py environment)")
    subprocess.run(["/usr/bin/python3", str(ROOT / "hub" / "hubctl.py"), "environment"], check=True)
    for old_database in (False, True):          # first beside the hub's own SQLAlchemy 2, then with its old one
        with tempfile.TemporaryDirectory(prefix="ngshare-evaluation-") as folder:
            bench = Bench(Path(folder), old_database)
            bench.install()
            hub = bench.start()
            try:
                shown = set_up_course(bench)
                if not old_database:
                    check(shown, "a release is stored, beside JupyterHub 6.1.1's SQLAlchemy 2",
                          "listed" if shown else "answered success, listed nothing (SQLAlchemy 2 no longer "
                          "cascades the add along Course.assignments: nothing is saved)")
                    continue
                print(f"(from here: ngshare with {', '.join(OLD_DATABASE)} in its own path)")
                evaluate(bench)
            finally:
                hub.terminate()
                try:
                    hub.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(hub.pid, 9)
                shutil.copy(Path(folder) / "hub.log", "/tmp/ngshare-evaluation-hub.log")
    passed = sum(ok for ok, _, _ in results)
    print(f"ngshare evaluation: {passed}/{len(results)} checks as the course needs them")


if __name__ == "__main__":
    main()
