"""Grading on Dask distributed workers (FeedbackService.engine=dask, addnorm_grading.feedback_service.remote).

The scheduler and the worker are Dask's own programs (`dask scheduler`, `dask worker`), with the course's TLS
certificate. The worker runs in a mount namespace of its own in which the test's folder (the course, the exchange,
the service's state) is an empty tmpfs: it shares no disk with the service and still grades, into the PostgreSQL
gradebook. Without the certificate nobody reaches the scheduler.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from test_postgres import cluster  # noqa: F401  (the fixture: a PostgreSQL cluster for the gradebook)

from addnorm_grading.feedback_service import remote
from addnorm_grading.postgres import free_port

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


@pytest.fixture
def tls():
    """The course's certificate and key, made where the worker can read them (outside the hidden test folder)."""
    folder = Path(tempfile.mkdtemp(prefix="addnorm-tls-"))
    yield remote.certificates(folder / "tls")
    shutil.rmtree(folder)


def engine_env() -> dict[str, str]:
    """What the course's engine programs run with: this environment and no HTTP pages (remote.NO_PAGES)."""
    return {**os.environ, **remote.NO_PAGES}


def start_scheduler(tls: dict[str, str], port: int) -> subprocess.Popen:
    """`dask scheduler` on loopback at `port` as the course runs it (remote.scheduler_command), once it answers."""
    process = subprocess.Popen(remote.scheduler_command(str(BIN / "dask"), "127.0.0.1", port, tls), env=engine_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from distributed import Client
    from distributed.security import Security
    with Client(f"tls://127.0.0.1:{port}", security=Security(**tls, require_encryption=True), timeout=60):
        pass                                                    # it answers
    return process


@pytest.fixture
def scheduler(tls):
    """`dask scheduler` on loopback, TLS with the course's certificate required; yields its address."""
    port = free_port()
    process = start_scheduler(tls, port)
    yield f"tls://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=30)


def hidden_worker(address: str, tls: dict[str, str], hidden: Path) -> subprocess.Popen:
    """`dask worker` in a mount namespace where `hidden` is an empty tmpfs (util-linux's unshare, as root)."""
    command = remote.worker_command(str(BIN / "dask"), address, 1, tls)
    return subprocess.Popen(["unshare", "--mount", "--propagation=private", "sh", "-c",
                             'mount -t tmpfs tmpfs "$1" && shift && exec "$@"', "sh", str(hidden), *command],
                            env=engine_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def course_on_postgres(cluster, tls: dict[str, str], tmp_path: Path) -> Path:
    """A course whose gradebook is in `cluster` (an instructor's own setting, never committed), 01_residual
    generated into it, and the course's certificate in the feedback service's state folder."""
    from addnorm_grading import coursework

    course = coursework.make_course(tmp_path / "course")
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.CourseDirectory.db_url = {cluster.url()!r}\n")
    coursework.run_nbgrader(["generate_assignment", "01_residual", "--force"], course)
    shutil.copytree(Path(tls["tls_ca_file"]).parent, course / "feedback-service" / "tls")
    return course


def feedback_service(course: Path, exchange: Path, scheduler: str) -> subprocess.Popen:
    """The feedback service of `course`, grading on the Dask workers of `scheduler`."""
    from addnorm_grading import coursework

    return subprocess.Popen([sys.executable, "-m", "addnorm_grading.feedback_service", f"--course={course}",
                             f"--FeedbackService.exchange={exchange}", "--FeedbackService.poll_interval=0.5",
                             "--FeedbackService.cooldown=0", "--FeedbackService.settle=0.5",
                             "--FeedbackService.engine=dask", f"--FeedbackService.scheduler={scheduler}"],
                            env=coursework.nbgrader_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_no_one_reaches_the_scheduler_without_the_certificate(scheduler, tls, tmp_path):
    from distributed import Client
    from distributed.security import Security

    with pytest.raises(OSError):                                # no TLS at all
        Client(scheduler.replace("tls://", "tcp://"), timeout=5)
    other = remote.certificates(tmp_path / "other")             # a certificate of its own, not the course's
    with pytest.raises(OSError):
        Client(scheduler, security=Security(**other, require_encryption=True), timeout=5)
    for name in ("grading-cert.pem", "grading-key.pem"):        # the course's: its owner's alone
        assert os.stat(Path(tls["tls_ca_file"]).with_name(name)).st_mode & 0o077 == 0


PAGES = ["/info/main/workers.html", "/info/main/exceptions.html", "/json/counts.json", "/health", "/metrics"]


def served_pages(client) -> dict[str, int]:
    """Every HTTP port of the scheduler and its workers (their "dashboard" services): page -> status, for the pages
    Dask serves by default (the workers, the exceptions of failed jobs, counts, health, metrics)."""
    import requests
    info = client.scheduler_info()
    ports = [info["services"]["dashboard"]] + [w["services"]["dashboard"] for w in info["workers"].values()]
    assert len(ports) >= 2, info
    return {f"{port}{page}": requests.get(f"http://127.0.0.1:{port}{page}", timeout=10).status_code
            for port in ports for page in PAGES}


def listening_addresses(pid: int) -> set[str]:
    """The addresses the process `pid` and its children listen on (TCP)."""
    import psutil
    processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return {c.laddr.ip for p in processes for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN}


def test_the_engine_serves_no_page_to_anyone_on_the_network(scheduler, tls, tmp_path):
    """Dask answers HTTP beside its TLS port, without authentication, even with --no-dashboard (`dask scheduler` on
    0.0.0.0:8787): the course's engine, as the hub and the service start it, serves nothing there. The workers of
    a scheduler on loopback listen on loopback alone (Dask's own default is every interface)."""
    from distributed import Client
    from distributed.security import Security

    worker = hidden_worker(scheduler, tls, tmp_path) if os.geteuid() == 0 else subprocess.Popen(
        remote.worker_command(str(BIN / "dask"), scheduler, 1, tls), env=engine_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        with Client(scheduler, security=Security(**tls, require_encryption=True), timeout=30) as client:
            client.wait_for_workers(1, timeout=120)
            assert set(served_pages(client).values()) == {404}, served_pages(client)
            assert listening_addresses(worker.pid) == {"127.0.0.1"}
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    client, cluster = remote.connect("", Path(tls["tls_ca_file"]).parent, 1)     # the service's own cluster
    try:
        client.wait_for_workers(1, timeout=120)
        assert set(served_pages(client).values()) == {404}, served_pages(client)
        assert listening_addresses(os.getpid()) <= {"127.0.0.1"}
    finally:
        client.close()
        cluster.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="hiding the course from the worker needs a mount namespace: root")
def test_a_worker_that_cannot_see_the_course_grades_into_the_gradebook(cluster, scheduler, tls, tmp_path):  # noqa: F811
    from distributed import Client
    from distributed.security import Security
    from test_feedback_service import ME, submit, wait_for

    from addnorm_grading import submissions
    from addnorm_grading.course import read_course
    from addnorm_grading.feedback_service.ledger import Ledger

    course = course_on_postgres(cluster, tls, tmp_path)
    state = course / "feedback-service"
    worker = hidden_worker(scheduler, tls, tmp_path)
    with Client(scheduler, security=Security(**tls, require_encryption=True), timeout=60) as client:
        client.wait_for_workers(1, timeout=120)
        assert list(client.run(os.path.exists, str(course)).values()) == [False]     # the worker cannot see it
    exchange = tmp_path / "exchange"
    inbound = exchange / read_course(course / "course.toml").id / "inbound"
    service = feedback_service(course, exchange, scheduler)
    ledger = Ledger(state / "ledger")
    answers = {"right": submissions.solution_text("01_residual", course / "solutions"),
               "wrong": submissions.solution_text("01_residual", course / "solutions").replace(
                   "if self.norm_first:", "if not self.norm_first:")}          # Post-LN and Pre-LN swapped
    assert answers["wrong"] != answers["right"]
    try:
        for attempt, answer in enumerate(("right", "wrong"), start=1):
            folder = submit(inbound, ME, 0, answer)
            (folder / "residual.ipynb").write_text(answers[answer])
            (folder / "submission_secret.txt").write_text("the student's secret")
            wait_for(lambda: len(ledger.graded()) == attempt or any(e.outcome == "failed" for e in ledger.entries()),
                     service)
    finally:
        service.send_signal(signal.SIGTERM)
        said = service.communicate(timeout=60)[0].decode()
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    assert [e.outcome for e in ledger.entries() if e.outcome not in ("received", "grading")] == ["graded"] * 2, said
    right, wrong = (entry.detail for entry in ledger.graded())
    assert right.startswith("score 6/8") and wrong.startswith("score 1/8"), (right, wrong)
    with Gradebook(cluster.url(), "addnorm") as gradebook:         # the latest, once
        assert len(gradebook.find_assignment("01_residual").submissions) == 1
        assert gradebook.find_submission("01_residual", ME).code_score == 1
    assert (course / "autograded" / ME / "01_residual" / "residual.ipynb").is_file()      # for the formgrader
    (released,) = (exchange / "addnorm" / "feedback").glob("*.html")     # one notebook, one student: the latest
    assert "Score: 1.0 / 8.0" in released.read_text()
    assert "grading on Dask workers of tls://" in said


@pytest.mark.skipif(os.geteuid() != 0, reason="hiding the course from the workers needs a mount namespace: root")
def test_a_worker_killed_mid_grade_costs_nothing(cluster, scheduler, tls, tmp_path):  # noqa: F811
    """Two workers; the one grading is killed (SIGKILL, nanny and all): Dask runs the job on the other, and the
    ledger and the gradebook have the submission once."""
    import time

    from distributed import Client
    from distributed.security import Security
    from test_feedback_service import ME, submit, wait_for

    from addnorm_grading import submissions
    from addnorm_grading.course import read_course
    from addnorm_grading.feedback_service.ledger import Ledger

    course = course_on_postgres(cluster, tls, tmp_path)
    state = course / "feedback-service"
    workers = [hidden_worker(scheduler, tls, tmp_path) for _ in range(2)]
    client = Client(scheduler, security=Security(**tls, require_encryption=True), timeout=60)
    client.wait_for_workers(2, timeout=120)
    pids = client.run(os.getpid)                                  # worker address → its process
    exchange = tmp_path / "exchange"
    inbound = exchange / read_course(course / "course.toml").id / "inbound"
    service = feedback_service(course, exchange, scheduler)
    ledger = Ledger(state / "ledger")
    killed = None
    try:
        folder = submit(inbound, ME, 0, "right")
        (folder / "residual.ipynb").write_text(submissions.solution_text("01_residual", course / "solutions"))
        (folder / "submission_secret.txt").write_text("the student's secret")
        deadline = time.monotonic() + 120
        while killed is None and time.monotonic() < deadline:
            busy = [address for address, keys in client.processing().items() if keys]
            if busy:
                killed = next(w for w in workers if pids[busy[0]] in child_pids(w.pid))
                os.killpg(killed.pid, signal.SIGKILL)
            time.sleep(0.1)
        assert killed is not None, "no worker took the job"
        wait_for(lambda: ledger.graded() or any(e.outcome == "failed" for e in ledger.entries()), service)
    finally:
        service.send_signal(signal.SIGTERM)
        said = service.communicate(timeout=60)[0].decode()
        client.close()
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
    assert [e.outcome for e in ledger.entries() if e.outcome != "received"] == ["grading", "graded"], said
    assert ledger.graded()[0].detail.startswith("score 6/8")
    with Gradebook(cluster.url(), "addnorm") as gradebook:
        assert len(gradebook.find_assignment("01_residual").submissions) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="hiding the course from the workers needs a mount namespace: root")
def test_a_scheduler_restarted_mid_grade_costs_nothing(cluster, tls, tmp_path):  # noqa: F811
    """The scheduler is killed while a worker grades (its workers end with it, as Dask's do) and started again at
    the same address with a new worker, as a supervisor (Kubernetes, systemd) restarts them: the service's client
    reconnects, the lost job is handed out again, and the ledger and the gradebook have the submission once."""
    import time

    from distributed import Client
    from distributed.security import Security
    from test_feedback_service import ME, submit, wait_for

    from addnorm_grading import submissions
    from addnorm_grading.course import read_course
    from addnorm_grading.feedback_service.ledger import Ledger

    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    first = start_scheduler(tls, port)
    course = course_on_postgres(cluster, tls, tmp_path)
    workers = [hidden_worker(address, tls, tmp_path)]
    exchange = tmp_path / "exchange"
    service = feedback_service(course, exchange, address)
    ledger = Ledger(course / "feedback-service" / "ledger")
    second = None
    try:
        with Client(address, security=Security(**tls, require_encryption=True), timeout=60) as client:
            client.wait_for_workers(1, timeout=120)
            folder = submit(exchange / read_course(course / "course.toml").id / "inbound", ME, 0, "right")
            (folder / "residual.ipynb").write_text(submissions.solution_text("01_residual", course / "solutions"))
            (folder / "submission_secret.txt").write_text("the student's secret")
            deadline = time.monotonic() + 120
            while not any(client.processing().values()) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert any(client.processing().values()), "no worker took the job"
        first.kill()                                                # mid-grade
        first.wait(timeout=30)
        second = start_scheduler(tls, port)
        workers.append(hidden_worker(address, tls, tmp_path))      # the old one ended with its scheduler
        wait_for(lambda: ledger.graded() or any(e.outcome == "failed" for e in ledger.entries()), service)
    finally:
        service.send_signal(signal.SIGTERM)
        said = service.communicate(timeout=60)[0].decode()
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
        for scheduler_process in (first, second):
            if scheduler_process is not None and scheduler_process.poll() is None:
                scheduler_process.terminate()
                scheduler_process.wait(timeout=30)
    assert [e.outcome for e in ledger.entries() if e.outcome != "received"] == ["grading", "graded"], said
    assert "handed out again" in said
    assert ledger.graded()[0].detail.startswith("score 6/8")
    with Gradebook(cluster.url(), "addnorm") as gradebook:
        assert len(gradebook.find_assignment("01_residual").submissions) == 1


def child_pids(pid: int) -> set[int]:
    """A process and all its descendants (from /proc)."""
    children = {pid}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                children |= child_pids(int(entry.name))
        except (OSError, IndexError, ValueError):
            pass
    return children
