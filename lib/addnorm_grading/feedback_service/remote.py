"""Grading on Dask distributed workers that share no disk with the service (`FeedbackService.engine = "dask"`).

A job carries everything a worker needs: the course's settings and checks (nbgrader_config.py, course.toml, checks/
with the course's secret, the assignment's solutions/), the submission's files, its receipt time and the gradebook's
address (PostgreSQL: a SQLite file cannot leave the machine). The worker grades in a course folder made for the job
and removed after it, with the same nbgrader, sandbox and judge as on one machine, writes the grade into the
gradebook through nbgrader, and sends back the autograded notebooks and the feedback it generated; the service puts
them in the course folder and releases the feedback. A job whose worker dies is run again by Dask on another
worker (autograde --force: the gradebook holds the submission once); the ledger records an outcome when it reaches
the service, once.

Nobody reaches the scheduler or a worker without the course's certificate and key (mutual TLS, `certificates`):
they are made by the service in its state folder, readable by its owner alone. Nor do they serve web pages: Dask's
scheduler and workers answer HTTP beside their TLS port even with `--no-dashboard` (`dask scheduler` on 0.0.0.0:8787,
with no authentication: the workers, their logs, the exceptions of failed jobs, call stacks), so the course's engine
runs with no HTTP routes at all (`NO_PAGES`), its empty HTTP port on loopback (`scheduler_command`, `worker_command`).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from concurrent.futures import CancelledError
from dataclasses import dataclass
from pathlib import Path

from addnorm_grading.feedback_service.inbound import Submission
from addnorm_grading.uploads import path_problem

COURSE_FILES = ("nbgrader_config.py", "course.toml", "checks")
LOST = (CancelledError,)      # a job's future when its scheduler went away (distributed's FutureCancelledError)


@dataclass(frozen=True)
class Job:
    """One submission to grade, with all of the course a worker needs for it."""

    submission: str            # the inbound folder's name (what the ledger records)
    student: str
    assignment: str
    received: str              # the receipt time, as nbgrader writes it in timestamp.txt
    db_url: str
    course: bytes              # a tar of COURSE_FILES and solutions/<assignment>
    files: bytes               # a tar of the submission's files (already checked: addnorm_grading.uploads)


@dataclass(frozen=True)
class Graded:
    """What a worker sends back: the detail for the ledger, and the files the course folder keeps."""

    detail: str
    not_graded: bool           # the detail says why it was not graded (a file that is no notebook; its feedback too)
    autograded: bytes          # a tar of autograded/<student>/<assignment>/
    feedback: bytes            # a tar of feedback/<student>/<assignment>/


def tar(folder: Path, names: list[str] | None = None) -> bytes:
    """The folder's regular files and folders (or only `names` in it), as an uncompressed tar; no links."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name in names if names is not None else sorted(os.listdir(folder)):
            archive.add(folder / name, arcname=name, filter=lambda info: None if info.issym() or info.islnk() else info)
    return buffer.getvalue()


def untar(data: bytes, folder: Path) -> None:
    """Unpack a tar made by `tar` into folder: regular files and folders only, no absolute or `..` path (else
    ValueError, before anything is written). Where tarfile has its "data" filter (Python 3.11.4 and later) it
    extracts too; on an older Python (Debian 12's 3.11.2, which `make hub` builds its environment from) each file
    is written by its contents alone (no mode, owner or time)."""
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = archive.getmembers()
        for member in members:
            reason = path_problem(member.name) or (
                None if member.isfile() or member.isdir() else f"{member.name} is neither a file nor a folder")
            if reason:
                raise ValueError(f"not unpacked: {reason}")
        if hasattr(tarfile, "data_filter"):
            archive.extractall(folder, filter="data")
            return
        for member in members:
            target = folder / member.name
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())


def pack(course: Path, submission: Submission, received: str, db_url: str) -> Job:
    """The job for one submission of the course at `course`."""
    if not db_url.startswith("postgresql"):
        raise ValueError(f"grading on Dask workers needs the gradebook in PostgreSQL (CourseDirectory.db_url), "
                         f"got {db_url.split(':', 1)[0]}: a worker on another machine cannot write a SQLite file")
    from addnorm_grading.feedback_service import grading

    # the service's own copy, made by grading.collect through folder descriptors: never the inbound folder, which
    # the learner may change while it is read
    solutions = Path("solutions") / submission.assignment
    names = [*COURSE_FILES, str(solutions)] if (course / solutions).is_dir() else list(COURSE_FILES)
    return Job(submission.name, submission.student, submission.assignment, received, db_url,
               tar(course, names), tar(grading.collected_folder(submission)))


def grade(job: Job) -> Graded:
    """On a worker: grade the job in a course folder of its own; what the kernels print goes nowhere."""
    from addnorm_grading.feedback_service import grading

    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="addnorm-job-") as scratch:
        course = Path(scratch) / "course"
        untar(job.course, course)
        submitted = course / "submitted" / job.student / job.assignment
        untar(job.files, submitted)
        (submitted / "timestamp.txt").write_text(job.received)
        try:
            grading.start_worker(str(course), str(Path(scratch) / "exchange"), db_url=job.db_url,
                                 die_with_parent=False)
            detail, not_graded = grading.autograde_and_generate(job.student, job.assignment, job.received)
            return Graded(detail, not_graded, tar(course / "autograded" / job.student / job.assignment),
                          tar(course / "feedback" / job.student / job.assignment))
        finally:
            os.chdir(here)                 # out of the folder before it is removed


def keep(course: Path, job: Job, graded: Graded) -> None:
    """In the service: the worker's autograded notebooks and feedback into the course folder, as local grading
    leaves them (the formgrader shows them, release_feedback and a later completion read them)."""
    for kind, data in (("autograded", graded.autograded), ("feedback", graded.feedback)):
        folder = course / kind / job.student / job.assignment
        if folder.exists():
            shutil.rmtree(folder)
        untar(data, folder)


def certificates(folder: Path) -> dict[str, str]:
    """The course's TLS certificate and key for the scheduler, the workers and the service (made by openssl the
    first time, 0600 in a 0700 folder), as `distributed.security.Security` arguments. Give them only to the grading
    machines: whoever holds them can run code on the workers, which read the hidden checks."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    files = certificate_files(folder)
    cert, key = files["tls_ca_file"], files["tls_worker_key"]
    if not (Path(cert).is_file() and Path(key).is_file()):
        old_umask = os.umask(0o077)
        try:
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
                            "-subj", "/CN=addnorm-grading", "-keyout", key, "-out", cert],
                           check=True, capture_output=True)
        finally:
            os.umask(old_umask)
    return files


def certificate_files(folder: Path) -> dict[str, str]:
    """Where `certificates` keeps the course's certificate and key in `folder`, as `distributed.security.Security`
    arguments, without making them (for a program that only reads them: the hub's scheduler and workers)."""
    cert, key = str(folder / "grading-cert.pem"), str(folder / "grading-key.pem")
    files = {"tls_ca_file": cert}
    for role in ("client", "scheduler", "worker"):
        files[f"tls_{role}_cert"], files[f"tls_{role}_key"] = cert, key
    return files


NO_PAGES = {"DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES": "[]", "DASK_DISTRIBUTED__WORKER__HTTP__ROUTES": "[]"}
NO_PAGES_CONFIG = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}


def tls_options(files: dict[str, str]) -> list[str]:
    """The command-line options of Dask's programs for the course's certificate (`certificates`)."""
    return [f"--tls-ca-file={files['tls_ca_file']}", f"--tls-cert={files['tls_worker_cert']}",
            f"--tls-key={files['tls_worker_key']}"]


def scheduler_command(dask: str, host: str, port: int, files: dict[str, str]) -> list[str]:
    """`dask scheduler` on host:port with the course's certificate required; run it with NO_PAGES in its
    environment (its HTTP port, on loopback, then serves nothing)."""
    return [dask, "scheduler", "--protocol=tls", f"--host={host}", f"--port={port}", "--no-dashboard",
            "--dashboard-address=127.0.0.1:0", *tls_options(files)]


def worker_command(dask: str, scheduler: str, workers: int, files: dict[str, str]) -> list[str]:
    """`dask worker` processes of one thread each for the scheduler at `scheduler`, with the course's certificate;
    run it with NO_PAGES in its environment. The workers of a scheduler on loopback are on its machine: they listen
    on loopback too (by default Dask's workers and their nannies listen on every interface)."""
    on_loopback = scheduler.split("://")[-1].rsplit(":", 1)[0] in ("127.0.0.1", "localhost")
    return [dask, "worker", scheduler, "--nthreads=1", f"--nworkers={workers}", "--no-dashboard",
            "--dashboard-address=127.0.0.1:0", *(["--host=127.0.0.1"] if on_loopback else []), *tls_options(files)]


def connect(scheduler: str, tls_folder: Path, workers: int):
    """A Dask client of the scheduler at `scheduler` (tls://…), or of a scheduler and `workers` single-threaded
    worker processes started here on loopback when it is empty; both with the course's certificate, required.
    Returns (client, the local cluster or None)."""
    from distributed import Client, LocalCluster
    from distributed.security import Security

    security = Security(**certificates(tls_folder), require_encryption=True)
    if scheduler:
        if not scheduler.startswith("tls://"):
            raise ValueError(f"FeedbackService.scheduler: expected a tls:// address, got {scheduler!r}")
        return Client(scheduler, security=security, timeout=30), None
    import dask
    with dask.config.set(NO_PAGES_CONFIG):         # the nannies hand the configuration on to their workers
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, protocol="tls",
                               host="127.0.0.1", security=security, dashboard_address=None)
    return Client(cluster, security=security), cluster
