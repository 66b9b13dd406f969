"""A class at full size on the course hub: N students log in, fetch, answer, submit within about a minute, and get
their feedback from the feedback service (addnorm_grading.feedback_service) while the instructor's formgrader is open.

    sudo .venv/bin/python bench/class_load.py --students 30            # nbgrader's file exchange, Unix users
    sudo .venv/bin/python bench/class_load.py --students 200 --workers 2 --exchange http   # no Unix user each
    sudo .venv/bin/python bench/class_load.py --students 4 --kill-midway   # what tests/test_class_load.py runs

Set-up, not timed: `make hub STUDENTS=N` (real Unix users, PAM logins; with --exchange http `make hub PODS=1`: one
Unix user for every server, hub accounts, the HTTP exchange service; with --workers W `WORKERS=W`: the feedback
service grades on W Dask workers of its own, mutual TLS), the instructor releases the assignment (`nbgrader
release_assignment` as the guide says; on the HTTP exchange from the formgrader's API), every user logs in and
their server is spawned. On the HTTP exchange only the first --servers students (3) get a server; every student
makes a token from their own login (the hub's API, as its Token page does), and those without a server call the
exchange service's API with it as their server's Assignment List would: a class of 200 needs no 200 servers.

Timed: each student (a Locust user: plain HTTP, as JupyterLab's Assignment List calls its server) starts in turn
over the first ~50 s (Locust's spawn rate), fetches, writes an answer into the fetched notebook (a mix of correct,
wrong, blank and tests/test_sandbox.py's hostile ones; no student kernel runs), submits, and asks for feedback
every few seconds until it is there, then opens it. Through a server that is the Assignment List's own requests
and the Jupyter contents API; without one, the exchange's fetch (a tar archive), submit, list and feedback.
Meanwhile a real headless Chromium opens the instructor's formgrader (its gradebook, submissions and students
pages) again every LOOK seconds and records any error page. The clients and the browser run at a lower priority
than the hub (nice CLIENTS_NICE): in a class they are on the learners' and the instructor's own machines. With --kill-midway the service is killed (SIGKILL, by the PID in its PID file)
while it grades; the hub restarts it.

After the class: one student submits in another's name and one puts a submission with a symbolic link in (on the
file exchange `nbgrader submit --student=…` and a folder made by hand in the inbound folder; on the HTTP exchange
the service's API with the learner's own token); both must be refused, and change no grade. Then it checks that
the ledger, the gradebook and the exchange agree (every submission graded once, each with its feedback), stops
the hub (`make hub-down`), and prints, last:

    class load: N/N submissions with feedback; submit-to-feedback median S s, max S s; hub API p95 S s; peak memory M GiB; workers W, T submissions/min

submit-to-feedback: from the submission's receipt time (its exchange timestamp) to its released feedback file; hub
API p95: over every HTTP request this script makes (set-up included); peak memory: machine-wide, MemTotal -
MemAvailable; workers: --workers, or the service's pool (one process a core); T: the class's graded submissions
over the time from the first one's start of grading to the last one's end. With --workers the longest
submit-to-feedback must be within the guide's capacity model (N / R minutes and a worker's cold start, R being W x
RATE for workers with a core each, HUB_RATE a core for workers on every core of the hub's machine, or --rate).
Exit status 1 when anything above did not hold (the reasons are printed before the last line). Needs root: it
creates users.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import re
import runpy
import signal
import statistics
import subprocess
import sys
import tarfile
import time
import tomllib
import traceback
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy

from addnorm_grading import submissions
from addnorm_grading.feedback_service.ledger import FINAL, Entry, Ledger
from addnorm_grading.postgres import Cluster
from addnorm_grading.receipts import parse_nbgrader_time

ROOT = Path(__file__).resolve().parent.parent
CONSTANTS = tomllib.loads((ROOT / "course.toml").read_text())
HUB_HOME = Path("/opt/addnorm-hub")
GRADEBOOK = HUB_HOME / "postgres"           # the instructor's PostgreSQL cluster (hub/hubctl.py)
BASE = "http://127.0.0.1:8000"
INSTRUCTOR = CONSTANTS["hub"]["instructor"]
COURSE_ID = CONSTANTS["course"]["id"]
EXCHANGE = Path(CONSTANTS["course"]["exchange"]) / COURSE_ID     # nbgrader's file exchange (make hub)
STORE = HUB_HOME / "exchange-store" / COURSE_ID                 # the HTTP exchange's store (make hub PODS=1)
EXCHANGE_API = f"{BASE}/services/exchange/api/{COURSE_ID}"
RATE = 24                  # submissions of 01_residual per minute per worker, warm (bench/grading_scale.py, README)
HUB_RATE = 9.4             # per minute per core, workers on every core of the hub's machine: a class of 40 on this
                           # 2-core machine, `make hub PODS=1 WORKERS=2`, graded 18.8 a minute (bench/README.md)
COLD_START = 10            # seconds: a worker's first grading starts its zygote and imports nbgrader
NOTICED = 5                # seconds before the service hands a submission out: it settles 3 s, the service polls every 2
LOOK = 5                   # seconds between two of the formgrader pages the instructor's browser opens
CLIENTS_NICE = 10          # the learners' clients and the instructor's browser run on their own machines in a real
                           # class: here they yield the cores to the hub and its grading
ASSIGNMENT, NOTEBOOK = "01_residual", "residual"
HOSTILE = ["reads_hidden_tests", "writes_gradebook", "kills_parent", "network", "fork_bomb", "sys_exit",
           "floods_output"]                   # tests/test_sandbox.py's attacks that end quickly
WRONG = [("if self.norm_first:", "if not self.norm_first:")]      # Post-LN and Pre-LN swapped
FEEDBACK_WAIT = 300                           # seconds a student waits for feedback before the run counts it lost
                                              # (at least; four times the capacity model's time with --workers, so
                                              # that a model that is wrong is measured, not cut off)
ERROR_WORDS = ("database is locked", "500 : Internal Server Error", "Traceback (most recent call last)")


@dataclass(frozen=True)
class Course:
    """Where the hub of one exchange keeps the instructor's course: /home/<instructor> (the file exchange, Unix
    users) or the pod user's folder of the instructor (the HTTP exchange, make hub PODS=1)."""

    http: bool

    @property
    def folder(self) -> Path:
        home = HUB_HOME / "homes" / INSTRUCTOR if self.http else Path("/home") / INSTRUCTOR
        return home / COURSE_ID

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.folder / "feedback-service" / "ledger")

    @property
    def pid_file(self) -> Path:
        return self.folder / "feedback-service" / "service.pid"


COURSE = Course(http=False)                   # main() sets the one of --exchange
feedback_wait = FEEDBACK_WAIT


def say(message: str) -> None:
    print(f"[class load] {message}", flush=True)


def as_user(user: str, *cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """A command as a hub user, in a clean environment with the hub's Python first on PATH (as their terminal)."""
    env = ["env", "-i", f"HOME=/home/{user}", f"USER={user}", "LANG=C.UTF-8", f"PATH={HUB_HOME}/venv/bin:/usr/bin:/bin"]
    return subprocess.run(["runuser", "-u", user, "--", *env, *cmd], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


# --------------------------------------------------------------------------- what the students write


def answers(students: list[str]) -> dict[str, tuple[str, str, str]]:
    """Each student's (kind, notebook whose solution cells they copy or "" for none, an extra cell's code or ""):
    correct, wrong, blank and hostile in turn."""
    attacks = runpy.run_path(str(ROOT / "tests" / "test_sandbox.py"))["ATTACKS"]
    fill = {"course": COURSE.folder, "port": 9, "drop": "/tmp", "assignment": ASSIGNMENT, "notebook": NOTEBOOK,
            "secrets": repr(["BEGIN HIDDEN TESTS", "SQLite format"])}
    solution = submissions.solution_text(ASSIGNMENT, ROOT / "solutions")
    wrong = submissions.with_replacements(ASSIGNMENT, WRONG, ROOT / "solutions")
    chosen = {}
    for i, student in enumerate(students):
        kind = ["correct", "wrong", "blank", "hostile"][i % 4]
        attack = HOSTILE[(i // 4) % len(HOSTILE)]
        chosen[student] = {"correct": (kind, solution, ""), "wrong": (kind, wrong, ""), "blank": (kind, "", ""),
                           "hostile": (f"hostile ({attack})", solution, attacks[attack].format(**fill))}[kind]
    return chosen


def filled_in(fetched: dict, answer: str, extra: str) -> dict:
    """The fetched notebook with each solution cell's source taken from `answer`'s cell of the same grade id, and
    `extra` (when given) as a new code cell just before the first test: what a learner types."""
    cells = [dict(cell) for cell in fetched["cells"]]
    if answer:
        written = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in json.loads(answer)["cells"]
                   if c["metadata"].get("nbgrader", {}).get("solution")}
        for cell in cells:
            grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
            if cell["metadata"].get("nbgrader", {}).get("solution") and grade_id in written:
                cell["source"] = written[grade_id]
    if extra:
        first_test = next(i for i, c in enumerate(cells) if c["cell_type"] == "code"
                          and c["metadata"].get("nbgrader", {}).get("grade"))
        cells.insert(first_test, {"cell_type": "code", "metadata": {}, "source": extra, "outputs": [],
                                  "execution_count": None})
    return {**fetched, "cells": cells}


# --------------------------------------------------------------------------- the formgrader, in a real browser


def watch_formgrader(password: str, stop_file: Path, out: Path) -> None:
    """Log the instructor in (headless Chromium) and open the formgrader's three pages, again every LOOK seconds,
    until stop_file exists; write {"pages": n, "errors": [...]} to out. Runs in a process of its own (Locust's
    gevent patches this one), at a lower priority (CLIENTS_NICE)."""
    from playwright.sync_api import sync_playwright
    errors, pages = [], 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.route(re.compile(r"^(?!https?://127\.0\.0\.1[:/]).*"), lambda route: route.abort())
        page.goto(f"{BASE}/hub/login")
        page.fill("#username_input", INSTRUCTOR)
        page.fill("#password_input", password)
        page.click("#login_submit")
        page.wait_for_url(re.compile(r".*/user/.*"), timeout=120_000)
        urls = [f"{BASE}/user/{INSTRUCTOR}/formgrader/gradebook/{ASSIGNMENT}/{NOTEBOOK}",
                f"{BASE}/user/{INSTRUCTOR}/formgrader/manage_submissions/{ASSIGNMENT}",
                f"{BASE}/user/{INSTRUCTOR}/formgrader/manage_students"]
        while not stop_file.exists():
            for url in urls:
                response = page.goto(url, wait_until="networkidle", timeout=60_000)
                page.wait_for_timeout(500)             # the tables fill from the formgrader's API
                text = page.content()
                pages += 1
                if response is None or response.status >= 400 or any(word in text for word in ERROR_WORDS):
                    errors.append(f"{url}: HTTP {response.status if response else '?'}")
                    page.screenshot(path=str(out.with_suffix(f".error{len(errors)}.png")))
            page.wait_for_timeout(LOOK * 1000)        # an instructor looking, not a reload loop
        page.screenshot(path=str(out.with_suffix(".png")), full_page=True)
        browser.close()
    out.write_text(json.dumps({"pages": pages, "errors": errors}))


# --------------------------------------------------------------------------- the load


def memory_used() -> int:
    """Bytes in use machine-wide: MemTotal - MemAvailable."""
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return (int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])) * 1024


# What a process is, by its command line (the first pattern that matches), for where the class's CPU went.
PARTS = [("grading (Dask workers, their zygotes and kernels)", ("dask worker", "multiprocessing.spawn",  # dask's
                                                              "addnorm_grading.zygote", "ipykernel",      # workers
                                                              "addnorm_grading.sandbox", "bwrap")),
         ("feedback service and Dask scheduler", ("feedback_service", "dask scheduler")),
         ("exchange service", ("http_exchange",)),
         ("learners' and instructor's servers", ("jupyterhub-singleuser", "jupyter-lab", "jupyter_server")),
         ("hub and proxy", ("bin/jupyterhub", "configurable-http-proxy")),
         ("PostgreSQL", ("postgres",)),
         ("browser (the formgrader)", ("chrom", "playwright", "--watch-formgrader")),
         ("this bench's clients (Locust)", ("class_load.py",))]


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """Every process's part (PARTS, or "other") and the CPU seconds it has used so far (user + system)."""
    tick = os.sysconf("SC_CLK_TCK")
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            command = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        part = next((part for part, patterns in PARTS if any(p in command for p in patterns)), "other")
        found[int(name)] = (part, (int(fields[11]) + int(fields[12])) / tick)
    return found


def notebook_of(archive: bytes) -> dict:
    """The assignment's notebook in a tar archive from the exchange service."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        return json.loads(tar.extractfile(f"{NOTEBOOK}.ipynb").read())


def run_class(students: list[str], passwords: dict[str, str], kill_midway: bool, servers: int) -> dict:
    """The set-up logins, tokens and spawns, then the timed class (Locust users); returns what was measured.

    On the file exchange every student goes through their own server's Assignment List. On the HTTP exchange the
    first `servers` students do, and the others call the exchange service as their server's Assignment List would,
    with a token made from their own login (no server: a class of 200 needs no 200 running servers)."""
    import gevent
    import gevent.pool
    from locust import HttpUser, constant, events, task
    from locust.clients import HttpSession
    from locust.env import Environment

    from addnorm_grading.http_exchange.store import pack_files     # after Locust's gevent has patched ssl

    env = Environment(events=events)
    env.create_local_runner()
    found = {"feedback": {}, "problems": [], "peak": memory_used(), "kill": None, "done": 0, "tokens": {}}
    chosen = answers(students)
    with_server = set(students if not COURSE.http else students[:servers])

    def xsrf(client, path: str) -> dict:
        for cookie in client.cookies:
            if cookie.name == "_xsrf" and cookie.path.rstrip("/") == path.rstrip("/"):
                return {"X-XSRFToken": cookie.value}
        return {}

    def log_in(user: str) -> HttpSession:
        client = HttpSession(BASE, env.events.request, None)
        client.get("/hub/login", name="/hub/login")
        token = xsrf(client, "/hub/").get("X-XSRFToken", "")
        client.post("/hub/login", data={"username": user, "password": passwords[user], "_xsrf": token},
                    name="/hub/login [POST]", allow_redirects=False)
        return client

    def log_in_and_spawn(user: str) -> HttpSession:
        client = log_in(user)
        headers = xsrf(client, "/hub/")
        if COURSE.http:                              # a token from their own login, as the hub's Token page makes
            made = client.post(f"/hub/api/users/{user}/tokens", json={"note": "class load", "expires_in": 7200},
                               headers=headers, name="/hub/api/users/[user]/tokens")
            found["tokens"][user] = made.json()["token"]
        if user not in with_server and user != INSTRUCTOR:
            return client
        client.post(f"/hub/api/users/{user}/server", headers=headers, name="/hub/api/users/[user]/server")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            model = client.get(f"/hub/api/users/{user}", headers=headers, name="/hub/api/users/[user]").json()
            if model.get("servers", {}).get("", {}).get("ready"):
                break
            gevent.sleep(1)
        else:
            raise RuntimeError(f"{user}'s server did not start within 180 s")
        client.get(f"/user/{user}/lab", name="/user/[user]/lab")          # the server's own cookies
        return client

    spawned = len(with_server) + 1
    say(f"logging in {len(students) + 1} people, spawning {spawned} servers"
        + (f", {len(students) - len(with_server)} tokens" if COURSE.http else ""))
    sessions = {}
    pool = gevent.pool.Pool(4)
    for user, client in zip([INSTRUCTOR, *students], pool.imap(log_in_and_spawn, [INSTRUCTOR, *students])):
        sessions[user] = client
    if COURSE.http:                                  # the instructor releases from the formgrader (its API)
        client = sessions[INSTRUCTOR]
        released = client.post(f"/user/{INSTRUCTOR}/formgrader/api/assignment/{ASSIGNMENT}/release",
                               headers=xsrf(client, f"/user/{INSTRUCTOR}/"), name="/user/[user]/formgrader/api/release")
        if not released.json().get("success"):
            raise RuntimeError(f"the formgrader did not release {ASSIGNMENT}: {released.text[-1000:]}")

    stop_file = Path(f"/tmp/class-load-{os.getpid()}.stop")
    watched = ROOT / "_build" / "screenshots" / "class_load" / "formgrader.json"
    watched.parent.mkdir(parents=True, exist_ok=True)
    watcher = subprocess.Popen([sys.executable, __file__, "--watch-formgrader", str(stop_file), str(watched)],
                               stdin=subprocess.PIPE, text=True, preexec_fn=lambda: os.nice(CLIENTS_NICE))
    os.nice(CLIENTS_NICE)         # the Locust clients too, from here on: the hub, started before, keeps its priority
    watcher.stdin.write(passwords[INSTRUCTOR] + "\n")
    watcher.stdin.close()

    queue = list(students)
    form = {"course_id": COURSE_ID, "assignment_id": ASSIGNMENT}

    class Student(HttpUser):
        host = BASE
        wait_time = constant(0)

        def on_start(self):
            self.user_name = queue.pop(0)
            self.client = sessions[self.user_name]

        def post(self, action):
            name = f"/user/[user]/assignments/{action}"
            url = f"/user/{self.user_name}/assignments/{action}"
            return self.client.post(url, data=form, headers=xsrf(self.client, f"/user/{self.user_name}/"), name=name)

        @task
        def whole_cycle(self):
            try:
                if self.user_name in with_server:
                    self.through_the_assignment_list()
                else:
                    self.through_the_exchange()
            except Exception as error:                # a student whose cycle broke is a finding, not a retry
                found["problems"].append(f"{self.user_name}: {type(error).__name__}: {error}")
            found["done"] += 1
            gevent.sleep(feedback_wait * 10)          # done: parked until the run ends (a stopped user is replaced)

        def through_the_assignment_list(self):
            """Fetch, answer (the Jupyter contents API), submit and wait for feedback in the user's own server."""
            user, base = self.user_name, f"/user/{self.user_name}"
            headers = xsrf(self.client, f"{base}/")
            self.post("fetch")
            path = f"{base}/api/contents/{ASSIGNMENT}/{NOTEBOOK}.ipynb"
            model = self.client.get(path, name="/user/[user]/api/contents/[notebook]").json()
            notebook = filled_in(model["content"], chosen[user][1], chosen[user][2])
            self.client.put(path, json={"type": "notebook", "format": "json", "content": notebook},
                            headers=headers, name="/user/[user]/api/contents/[notebook] [PUT]")
            submitted = self.post("submit").json()
            if not submitted.get("success"):
                raise RuntimeError(f"submit failed: {str(submitted.get('value'))[-300:]}")
            deadline = time.monotonic() + feedback_wait
            while time.monotonic() < deadline:
                gevent.sleep(3)
                listing = self.post("fetch_feedback").json()["value"]
                done = [s for a in listing if a.get("assignment_id") == ASSIGNMENT and a.get("status") == "submitted"
                        for s in a.get("submissions", []) if s.get("has_local_feedback")]
                if done:
                    folder = (done[-1]["local_feedback_path"] if not COURSE.http    # relative to the server's root
                              else f"{ASSIGNMENT}/feedback/{done[-1]['timestamp']}")
                    page = self.client.get(f"{base}/files/{folder}/{NOTEBOOK}.html",
                                           name="/user/[user]/files/[feedback]")
                    found["feedback"][user] = "Score" in page.text
                    return
            found["problems"].append(f"{user} had no feedback {feedback_wait:.0f} s after submitting")

        def through_the_exchange(self):
            """Fetch, answer, submit and wait for feedback with the exchange service's API and the learner's token,
            as their server's Assignment List would (addnorm_grading.http_exchange.client)."""
            user = self.user_name
            auth = {"Authorization": f"token {found['tokens'][user]}"}
            fetched = self.client.get(f"{EXCHANGE_API}/assignments/{ASSIGNMENT}", headers=auth,
                                      name="/services/exchange/api/[course]/assignments/[a]")
            fetched.raise_for_status()
            notebook = filled_in(notebook_of(fetched.content), chosen[user][1], chosen[user][2])
            archive = pack_files({f"{NOTEBOOK}.ipynb": json.dumps(notebook).encode()})
            submitted = self.client.post(f"{EXCHANGE_API}/submissions/{ASSIGNMENT}", data=archive, headers=auth,
                                         name="/services/exchange/api/[course]/submissions/[a] [POST]")
            if submitted.status_code != 201:
                raise RuntimeError(f"submit refused: {submitted.status_code} {submitted.text[-300:]}")
            timestamp = submitted.json()["timestamp"]
            deadline = time.monotonic() + feedback_wait
            while time.monotonic() < deadline:
                gevent.sleep(5)
                listing = self.client.get(f"{EXCHANGE_API}/submissions", headers=auth,
                                          params={"student": user, "assignment": ASSIGNMENT},
                                          name="/services/exchange/api/[course]/submissions?student=[s]").json()
                if any(s["timestamp"] == timestamp and s["feedback"] for s in listing["submissions"]):
                    page = self.client.get(f"{EXCHANGE_API}/feedback/{ASSIGNMENT}/{user}/{timestamp}", headers=auth,
                                           name="/services/exchange/api/[course]/feedback/[a]/[s]/[t]")
                    with tarfile.open(fileobj=io.BytesIO(page.content), mode="r:") as tar:
                        html = tar.extractfile(f"{NOTEBOOK}.html").read().decode()
                    found["feedback"][user] = "Score" in html
                    return
            found["problems"].append(f"{user} had no feedback {feedback_wait:.0f} s after submitting")

    def sample_memory_and_cpu():
        first = cpu_seconds()                   # what each process had used when the class started
        while True:
            found["peak"] = max(found["peak"], memory_used())
            for pid, (part, used) in cpu_seconds().items():
                found["cpu"][pid] = (part, used - first.get(pid, (part, 0.0))[1])
            gevent.sleep(0.5)

    def kill_while_grading():
        while True:
            graded = len(COURSE.ledger.graded())
            grading = {entry.submission for entry in COURSE.ledger.entries() if entry.outcome == "grading"}
            finished = COURSE.ledger.finished()
            if graded >= max(1, len(students) // 3) and grading - finished:
                pid = int(COURSE.pid_file.read_text())
                os.kill(pid, signal.SIGKILL)
                killed_at = time.monotonic()
                say(f"killed the feedback service (pid {pid}) while it graded {len(grading - finished)}")
                while not COURSE.pid_file.is_file() or int(COURSE.pid_file.read_text() or 0) == pid:
                    gevent.sleep(1)
                found["kill"] = (pid, sorted(grading - finished), time.monotonic() - killed_at)
                say(f"the hub restarted it after {found['kill'][2]:.0f} s (pid {COURSE.pid_file.read_text().strip()})")
                return
            gevent.sleep(0.5)

    found["cpu"] = {}
    helpers = [gevent.spawn(sample_memory_and_cpu)] + ([gevent.spawn(kill_while_grading)] if kill_midway else [])
    say(f"the class starts: {len(students)} students over ~50 s")
    started = time.monotonic()
    env.user_classes = [Student]
    env.runner.start(len(students), spawn_rate=max(len(students) / 50, 0.2))
    while found["done"] < len(students):
        gevent.sleep(1)
        if time.monotonic() - started > feedback_wait + 120:
            found["problems"].append("the class did not finish in time")
            break
    env.runner.quit()
    for helper in helpers:
        helper.kill()
    stop_file.touch()
    watcher.wait(timeout=180)
    stop_file.unlink(missing_ok=True)
    class_seconds = time.monotonic() - started
    by_part: dict[str, float] = {}
    for part, used in found["cpu"].values():
        by_part[part] = by_part.get(part, 0.0) + used
    say(f"CPU during the class ({class_seconds:.0f} s on {os.cpu_count()} cores, processes seen every 0.5 s): "
        + "; ".join(f"{part} {used:.0f} s" for part, used in sorted(by_part.items(), key=lambda item: -item[1])))
    shown = json.loads(watched.read_text()) if watched.is_file() else {"pages": 0, "errors": ["the watcher died"]}
    say(f"the formgrader was reloaded {shown['pages']} times: {len(shown['errors'])} error pages")
    found["problems"] += [f"formgrader error page: {error}" for error in shown["errors"]]
    found["p95"] = env.stats.total.get_response_time_percentile(0.95) / 1000
    found["failed_requests"] = env.stats.total.num_failures
    for error in env.stats.errors.values():
        found["problems"].append(f"HTTP request failed: {error.method} {error.name}: {error.error} "
                                 f"({error.occurrences}×)")
    return found


# --------------------------------------------------------------------------- forgeries and the books


def wait_for_ledger(submission: str, timeout: float = 120) -> Entry:
    """The final ledger entry of `submission` once there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in COURSE.ledger.entries():
            if entry.submission == submission and entry.outcome in FINAL:
                return entry
        time.sleep(1)
    raise RuntimeError(f"the feedback service did not decide on {submission} within {timeout:.0f} s")


def scores() -> dict[str, float]:
    """Each student's score on the assignment, from the gradebook (the hub's PostgreSQL cluster; root reads its
    password file as the instructor's nbgrader_config.py does)."""
    engine = sqlalchemy.create_engine(Cluster(GRADEBOOK, INSTRUCTOR).url())
    try:
        with engine.connect() as db:
            rows = db.execute(sqlalchemy.text(
                "select student.id, sum(coalesce(grade.manual_score, grade.auto_score, 0)) from grade "
                "join submitted_notebook on grade.notebook_id = submitted_notebook.id "
                "join submitted_assignment on submitted_notebook.assignment_id = submitted_assignment.id "
                "join student on submitted_assignment.student_id = student.id group by student.id"))
            return {student: float(score) for student, score in rows}
    finally:
        engine.dispose()


def forgeries(students: list[str]) -> list[str]:
    """A submission in another's name and one with a symbolic link: both refused, no grade changed."""
    problems = []
    forger, victim, linker = students[0], students[1 % len(students)], students[-1]
    before = scores()
    result = as_user(forger, "nbgrader", "submit", ASSIGNMENT, f"--student={victim}", cwd=Path("/home") / forger)
    named = sorted(p.name for p in (EXCHANGE / "inbound").iterdir() if p.name.startswith(f"{victim}+")
                   and p.stat().st_uid == int(subprocess.check_output(["id", "-u", forger])))
    if result.returncode != 0 or not named:
        return [f"{forger} could not submit in {victim}'s name, so nothing was tested: {result.stderr[-500:]}"]
    entry = wait_for_ledger(named[-1])
    say(f"{forger}'s submission in {victim}'s name: {entry.outcome}: {entry.detail}")
    if entry.outcome != "refused":
        problems.append(f"a submission made by {forger} in {victim}'s name was {entry.outcome}, not refused")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    folder = EXCHANGE / "inbound" / f"{linker}+{ASSIGNMENT}+{stamp}+linked"
    code = (f"import os; f = {str(folder)!r}; os.mkdir(f); os.symlink({str(GRADEBOOK / 'password')!r}, "
            f"f + '/{NOTEBOOK}.ipynb'); open(f + '/timestamp.txt', 'w').write({stamp!r})")
    made = as_user(linker, "python3", "-c", code)
    if made.returncode != 0:
        problems.append(f"{linker} could not make a linked submission: {made.stderr[-500:]}")
    else:
        entry = wait_for_ledger(folder.name)
        say(f"{linker}'s submission with a symbolic link: {entry.outcome}: {entry.detail}")
        if entry.outcome != "refused":
            problems.append(f"a submission carrying a symbolic link was {entry.outcome}, not refused")
    if scores() != before:
        problems.append(f"the refused submissions changed grades: {before} → {scores()}")
    return problems


def feedback_file(submission: Path) -> Path:
    """Where release_feedback puts this submission's feedback in the exchange (nbgrader's hash of its secret)."""
    from nbgrader.utils import notebook_hash
    secret = (submission / "submission_secret.txt").read_text()
    return EXCHANGE / "feedback" / f"{notebook_hash(secret=secret, notebook_id=NOTEBOOK)}.html"


def graded_once(name: str, student: str, graded: list[Entry], gradebook: dict[str, float],
                problems: list[str]) -> bool:
    """Whether the ledger graded submission `name` exactly once (else a problem); its score must be the
    gradebook's (else a problem too)."""
    times = [entry for entry in graded if entry.submission == name]
    if len(times) != 1:
        problems.append(f"{name} was graded {len(times)} times according to the ledger")
        return False
    ledger_score = float(re.search(r"score ([\d.]+)/", times[0].detail).group(1))
    if abs(gradebook.get(student, -1) - ledger_score) > 1e-9:
        problems.append(f"{student}: the ledger says {ledger_score}, the gradebook {gradebook.get(student)}")
    return True


def the_books(students: list[str], found: dict) -> tuple[list[float], list[str]]:
    """Ledger, gradebook and exchange agree; each submission's submit-to-feedback seconds."""
    problems, latencies = [], []
    entries, graded = COURSE.ledger.entries(), COURSE.ledger.graded()
    gradebook = scores()
    for student in students:
        theirs = sorted(p for p in (EXCHANGE / "inbound").iterdir() if p.name.startswith(f"{student}+{ASSIGNMENT}+")
                        and not p.is_symlink() and (p / "submission_secret.txt").is_file())
        own = [p for p in theirs if p.stat().st_uid == int(subprocess.check_output(["id", "-u", student]))]
        if len(own) != 1:
            problems.append(f"{student} has {len(own)} submissions of their own in the exchange, expected 1")
            continue
        submission = own[0]
        if not graded_once(submission.name, student, graded, gradebook, problems):
            continue
        released = feedback_file(submission)
        if not released.is_file():
            problems.append(f"{student}'s feedback is not in the exchange ({released.name})")
            continue
        if not found["feedback"].get(student):
            problems.append(f"{student} did not see their feedback (with its score)")
            continue
        stamp = submission.name.rsplit("+", 3)[2]
        submitted = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f %Z").replace(tzinfo=datetime.timezone.utc)
        latencies.append(released.stat().st_mtime - submitted.timestamp())
    if found["kill"]:
        pid, in_flight, _ = found["kill"]
        for name in in_flight:
            starts = sum(1 for entry in entries if entry.submission == name and entry.outcome == "grading")
            if starts < 2:
                problems.append(f"{name} was being graded when the service was killed, but was not graded again")
    return latencies, problems


def exchange_call(token: str, method: str, path: str, **kwargs):
    """One request to the exchange service's API with a hub token."""
    import requests
    return requests.request(method, f"{EXCHANGE_API}/{path}", headers={"Authorization": f"token {token}"},
                            timeout=120, **kwargs)


def http_forgeries(students: list[str], tokens: dict[str, str]) -> list[str]:
    """On the HTTP exchange: a submission in another's name and an archive with a symbolic link, each with the
    learner's own token: both refused with their reason, nothing stored, no grade changed."""
    from addnorm_grading.http_exchange.store import pack_files
    problems = []
    forger, victim = students[-1], students[0]
    before, stored = scores(), {s.name for s in STORE.joinpath("inbound").iterdir()}
    answer = pack_files({f"{NOTEBOOK}.ipynb": submissions.solution_text(ASSIGNMENT, ROOT / "solutions").encode()})
    named = exchange_call(tokens[forger], "POST", f"submissions/{ASSIGNMENT}", params={"student": victim}, data=answer)
    say(f"{forger}'s submission in {victim}'s name: {named.status_code} {named.json().get('message')}")
    if named.status_code != 403:
        problems.append(f"a submission by {forger} in {victim}'s name got {named.status_code}, not 403")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as tar:
        link = tarfile.TarInfo(f"{NOTEBOOK}.ipynb")
        link.type, link.linkname = tarfile.SYMTYPE, str(GRADEBOOK / "password")
        tar.addfile(link)
    linked = exchange_call(tokens[forger], "POST", f"submissions/{ASSIGNMENT}", data=buffer.getvalue())
    say(f"{forger}'s submission with a symbolic link: {linked.status_code} {linked.json().get('message')}")
    if linked.status_code != 400:
        problems.append(f"a submission carrying a symbolic link got {linked.status_code}, not 400")
    if {s.name for s in STORE.joinpath("inbound").iterdir()} != stored:
        problems.append("a refused submission was stored")
    if scores() != before:
        problems.append(f"the refused submissions changed grades: {before} → {scores()}")
    return problems


def http_books(students: list[str], found: dict) -> tuple[list[float], list[str]]:
    """On the HTTP exchange: the ledger, the gradebook and the exchange's own list agree; each submission's
    seconds from its receipt (the exchange's clock) to its feedback in the store."""
    problems, latencies = [], []
    graded, gradebook = COURSE.ledger.graded(), scores()
    listed = exchange_call(found["tokens"][INSTRUCTOR], "GET", "submissions", params={"assignment": ASSIGNMENT})
    listing = listed.json()["submissions"]
    for student in students:
        theirs = [s for s in listing if s["student_id"] == student]
        if len(theirs) != 1:
            problems.append(f"{student} has {len(theirs)} submissions in the exchange, expected 1")
            continue
        name = f"{student}+{ASSIGNMENT}+{theirs[0]['timestamp']}"
        if not graded_once(name, student, graded, gradebook, problems):
            continue
        released = STORE / "feedback" / name / f"{NOTEBOOK}.html"
        if not theirs[0]["feedback"] or not released.is_file():
            problems.append(f"{student}'s feedback is not in the exchange")
            continue
        if not found["feedback"].get(student):
            problems.append(f"{student} did not see their feedback (with its score)")
            continue
        received = parse_nbgrader_time(theirs[0]["timestamp"]).replace(tzinfo=datetime.timezone.utc)
        latencies.append(released.stat().st_mtime - received.timestamp())
    return latencies, problems


def throughput(students: list[str]) -> float:
    """Submissions graded per minute: the class's graded ledger lines over the time from the first one's start of
    grading to the last one's end (the ledger's clock, to the second)."""
    ours = [e for e in COURSE.ledger.entries() if e.submission.split("+", 1)[0] in students]
    starts = [e.time for e in ours if e.outcome == "grading"]
    ends = [e.time for e in ours if e.outcome == "graded"]
    if not starts or not ends:
        return 0.0
    seconds = (datetime.datetime.fromisoformat(max(ends)) - datetime.datetime.fromisoformat(min(starts))).total_seconds()
    return len(ends) / max(seconds, 1) * 60


def grading_rate(workers: int, cores: int) -> float:
    """The capacity model's rate, submissions a minute: RATE for each worker with a core of its own (one core left
    for the hub); workers on every core of the hub's machine grade what a smaller class measured there (HUB_RATE,
    per core)."""
    return workers * RATE if workers < cores else HUB_RATE * cores


def predicted_max(count: int, rate: float) -> float:
    """The guide's capacity model: a burst of `count` clears in count / rate minutes once the service has noticed it
    (NOTICED); the first grading of each worker costs COLD_START more."""
    return NOTICED + count / rate * 60 + COLD_START


def main() -> int:
    global COURSE, feedback_wait
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--exchange", choices=["file", "http"], default="file",
                        help="file: `make hub` (Unix users, nbgrader's exchange folder); http: `make hub PODS=1` (one "
                             "Unix user for every server, hub accounts, the HTTP exchange service)")
    parser.add_argument("--workers", type=int, help="grade on this many Dask workers (`make hub WORKERS=N`); "
                                                    "default: the feedback service's pool of processes, one a core")
    parser.add_argument("--servers", type=int, default=3,
                        help="http: how many students use a running server and its Assignment List (the others call "
                             "the exchange service with a token of their own)")
    parser.add_argument("--rate", type=float,
                        help="with --workers: the submissions a minute the workers grade, for the capacity model "
                             "(default: RATE a worker on a core of its own, HUB_RATE a core when they share every "
                             "core with the hub; measure it with a smaller class on the same machine)")
    parser.add_argument("--kill-midway", action="store_true", help="kill the feedback service while it grades")
    parser.add_argument("--keep-hub", action="store_true", help="leave the hub running afterwards (to look around)")
    parser.add_argument("--watch-formgrader", nargs=2, metavar=("STOP_FILE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.watch_formgrader:
        watch_formgrader(sys.stdin.readline().strip(), Path(args.watch_formgrader[0]), Path(args.watch_formgrader[1]))
        return 0
    if os.geteuid() != 0:
        sys.exit("bench/class_load.py needs root: `make hub` creates Unix users")
    if args.students < 2 or (args.workers is not None and args.workers < 1) or args.servers < 0:
        sys.exit(f"expected --students of at least 2, --workers of at least 1 and --servers of at least 0; got "
                 f"{args.students}, {args.workers} and {args.servers}")
    COURSE = Course(http=args.exchange == "http")
    workers = args.workers or os.cpu_count() or 1
    model_rate = args.rate or (grading_rate(args.workers, os.cpu_count() or 1) if args.workers else None)
    prediction = predicted_max(args.students, model_rate) if args.workers else None
    feedback_wait = max(FEEDBACK_WAIT, 4 * (prediction or 0))
    students = [f"student{i}" for i in range(1, args.students + 1)]
    make = ["make", "-C", str(ROOT), "--no-print-directory"]
    subprocess.run([*make, "hub-down"], capture_output=True, text=True)
    hub = [f"STUDENTS={args.students}", *(["PODS=1"] if COURSE.http else []),
           *([f"WORKERS={args.workers}"] if args.workers else [])]
    say(f"make hub {' '.join(hub)}")
    up = subprocess.run([*make, "hub", *hub], capture_output=True, text=True)
    if up.returncode != 0:
        sys.exit(f"make hub failed:\n{up.stdout[-3000:]}{up.stderr[-3000:]}")
    problems, latencies, found = [], [], {"p95": float("nan"), "peak": memory_used()}
    try:
        passwords = dict(line.split(" ", 1) for line in (HUB_HOME / "state" / "passwords").read_text().splitlines())
        if not COURSE.http:
            release = as_user(INSTRUCTOR, "nbgrader", "release_assignment", ASSIGNMENT, "--force",
                              cwd=COURSE.folder)
            if release.returncode != 0:
                sys.exit(f"nbgrader release_assignment failed: {release.stderr[-2000:]}")
        found = run_class(students, passwords, args.kill_midway, args.servers)
        problems += found["problems"]
        if COURSE.http:
            problems += http_forgeries(students, found["tokens"])
            latencies, more = http_books(students, found)
        else:
            problems += forgeries(students)
            latencies, more = the_books(students, found)
        problems += more
        rate = throughput(students)
    except Exception as error:                    # what broke is a finding: the hub still goes down below
        traceback.print_exc()
        problems.append(f"the run stopped: {type(error).__name__}: {error}")
        rate = 0.0
    finally:
        down = subprocess.run(["true"] if args.keep_hub else [*make, "hub-down"], capture_output=True, text=True)
        if down.returncode != 0:
            print(f"make hub-down failed:\n{down.stdout[-2000:]}{down.stderr[-2000:]}")
    median = statistics.median(latencies) if latencies else float("nan")
    longest = max(latencies) if latencies else float("nan")
    if prediction is not None:
        say(f"capacity model (guide): {args.students} submissions on {args.workers} workers at {model_rate:.1f} a minute "
            f"in at most {prediction:.0f} s; the longest wait was {longest:.0f} s")
        if not longest <= prediction:              # NaN (nobody had feedback) fails too
            problems.append(f"the longest submit-to-feedback ({longest:.0f} s) is past the capacity model's "
                            f"{prediction:.0f} s")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print(f"class load: {len(latencies)}/{len(students)} submissions with feedback; submit-to-feedback median "
          f"{median:.1f} s, max {longest:.1f} s; hub API p95 {found['p95']:.2f} s; peak memory "
          f"{found['peak'] / 2**30:.1f} GiB; workers {workers}, {rate:.1f} submissions/min")
    return 1 if problems or len(latencies) != len(students) else 0


if __name__ == "__main__":
    sys.exit(main())
