"""The feedback service's loop: find new submissions, decide what each needs, hand grading to the workers.

Its settings are traitlets (`--FeedbackService.cooldown=…` on the command line, or a `c.FeedbackService` line in
the course's nbgrader_config.py). The loop itself runs no learner code: it reads the exchange, the ledger and the
gradebook's due dates, and writes the ledger; with engine=dask it also collects each submission and releases the
feedback a worker sent back (nbgrader's file steps, in-process).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import signal
import sqlite3
import time
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from nbgrader.apps.nbgraderapp import NbGraderApp
from nbgrader.coursedir import CourseDirectory
from traitlets import Float, Int, Unicode, default
from traitlets.config import Application

from addnorm_grading.feedback import due_date, utc_now
from addnorm_grading.exchange import refusal
from addnorm_grading.feedback_service import grading, remote
from addnorm_grading.feedback_service.inbound import Submission, parse, submissions
from addnorm_grading.feedback_service.ledger import NOT_GRADED, Ledger
from addnorm_grading.feedback_service.notices import release_notice
from addnorm_grading.receipts import change_time, nbgrader_time, receipt_time
from addnorm_grading.uploads import folder_problem


FAILED_NOTICE = ("This submission of {assignment} was not graded: the grader stopped on it, and your instructor has "
                 "the reason in the grading log. Submit it again, or ask your instructor.")
LIMIT_NOTICE = ("You have used all {limit} graded submissions of {assignment}, so this one was not graded. Your "
                "grade is the one of your last graded submission; ask your instructor if you need another attempt.")

NO_SECRET = ("it has no submission_secret.txt, which nbgrader submit (and the Assignment List) write into every "
             "submission: it was put into the exchange by hand, and its feedback, filed under that secret, could not "
             "reach its student")
UPLOAD_NOTICE = ("This submission of {assignment} was not graded: {reason}. It was neither collected nor graded, and "
                 "it counts as no attempt: submit it again without that.")


def gradebook_url(course: Path) -> str:
    """The gradebook nbgrader grades the course into (`CourseDirectory.db_url` in the course's or the user's
    nbgrader_config.py; by default the course's gradebook.db): the service reads the due dates where the workers
    write the grades, SQLite on one machine or PostgreSQL (addnorm_grading.postgres)."""
    here = os.getcwd()
    os.chdir(course)
    try:
        settings = NbGraderApp()
        settings.load_config_file()
        return CourseDirectory(config=settings.config).db_url
    finally:
        os.chdir(here)


class FeedbackService(Application):
    """Grade each new submission and release its feedback (addnorm_grading.feedback_service)."""

    name = "addnorm-feedback"
    description = __doc__.splitlines()[0]
    aliases = {"course": "FeedbackService.course"}

    course = Unicode(".", help="The course folder (nbgrader_config.py, gradebook.db).").tag(config=True)
    exchange = Unicode(help="nbgrader's exchange root (default: the course's exchange, from course.toml)."
                       ).tag(config=True)
    cooldown = Float(120.0, help="Seconds after a graded submission before the same student's next one of the "
                     "same assignment is graded (it waits; a newer one supersedes it).").tag(config=True)
    attempt_limit = Int(10, help="Graded submissions per student and assignment; later ones are refused "
                        "(0: no limit).").tag(config=True)
    workers = Int(help="Submissions graded at a time (default: the number of cores).").tag(config=True)
    poll_interval = Float(2.0, help="Seconds between looks at the inbound folder.").tag(config=True)
    settle = Float(3.0, help="Seconds a submission must be unchanged before it is decided on: `nbgrader submit` "
                   "writes into the inbound folder in place, so a younger one may still be arriving.").tag(config=True)
    due_date_refresh = Float(30.0, help="Seconds between readings of the assignments' due dates from the gradebook."
                             ).tag(config=True)
    state = Unicode(help="Where the ledger and the PID file are (default: <course>/feedback-service).").tag(config=True)
    engine = Unicode("processes", help="Where submissions are graded: `processes`, a pool on this machine; `dask`, "
                     "Dask distributed workers that share no disk with the service (feedback_service.remote; the "
                     "gradebook must be in PostgreSQL).").tag(config=True)
    identity = Unicode("owner", help="Who a submission is: `owner`, the Unix owner of its files (nbgrader's file "
                       "exchange, one Unix user per learner); `exchange`, the name the HTTP exchange service wrote "
                       "from the hub's token (`exchange` is then its store's folder, and the service runs as the "
                       "store's Unix user)").tag(config=True)
    scheduler = Unicode("", help="With engine=dask: the address (tls://host:port) of a Dask scheduler that uses the "
                        "certificate in <state>/tls; empty: a scheduler and `workers` workers on this machine, started "
                        "by the service.").tag(config=True)

    @default("log_level")
    def _log_level(self):
        return logging.INFO                          # one line per submission in the hub's log

    @default("workers")
    def _workers(self):
        return os.cpu_count() or 1

    @default("exchange")
    def _exchange(self):
        from addnorm_grading.course import read_course
        return str(read_course(Path(self.course) / "course.toml").exchange)

    @default("state")
    def _state(self):
        return str(Path(self.course) / "feedback-service")

    # ------------------------------------------------------------------ set-up

    def initialize(self, argv=None):
        super().initialize(argv)
        from addnorm_grading.course import read_course
        self.course_root = Path(self.course).resolve()
        course = read_course(self.course_root / "course.toml")
        course_id, self.upload_limits = course.id, course.uploads
        self.inbound = Path(self.exchange) / course_id / "inbound"
        self.db_url = gradebook_url(self.course_root)
        self.db = Path(self.db_url.removeprefix("sqlite:///")) if self.db_url.startswith("sqlite:///") else None
        state = Path(self.state)
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.ledger = Ledger(state / "ledger")
        self.pid_file = state / "service.pid"
        if self.identity not in ("owner", "exchange"):
            raise ValueError(f"FeedbackService.identity: expected 'owner' or 'exchange', got {self.identity!r}")
        self.store = self.identity == "exchange"
        if self.engine not in ("processes", "dask"):
            raise ValueError(f"FeedbackService.engine: expected 'processes' or 'dask', got {self.engine!r}")
        if self.engine == "dask" and not self.db_url.startswith("postgresql"):
            raise ValueError("FeedbackService.engine=dask: the gradebook must be in PostgreSQL (CourseDirectory.db_url,"
                             f" guide/instructors.md), got {self.db_url.split(':', 1)[0]}: a worker on another machine "
                             "cannot write a SQLite file")
        self.running: dict[str, tuple] = {}      # submission name → (it, its job, kind, what the job was given)
        self.client = self.cluster = None          # engine=dask: its Dask client (and local cluster), from start()
        self.due_dates: dict[str, datetime.datetime | None] = {}
        self.due_read = 0.0
        self.wal = False

    def use_wal(self) -> None:
        """Put the gradebook in SQLite's WAL mode (it stays so): readers, the formgrader, never wait for a writer.
        Tried before every job until it is done (a new course has no gradebook yet)."""
        if not self.wal and self.db and self.db.is_file():
            with sqlite3.connect(self.db, timeout=30) as connection:
                mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self.wal = mode == "wal"

    # ------------------------------------------------------------------ decisions

    def due(self, assignment: str) -> datetime.datetime | None:
        """The assignment's due date, read from the gradebook at most every due_date_refresh seconds."""
        if time.monotonic() - self.due_read > self.due_date_refresh:
            self.due_dates, self.due_read = {}, time.monotonic()
        if assignment not in self.due_dates and (self.db is None or self.db.is_file()):
            self.due_dates[assignment] = due_date(self.db_url, assignment)
        return self.due_dates.get(assignment)

    def received(self, found: list[Submission]) -> list[Submission]:
        """The submissions found, each with its receipt time (addnorm_grading.receipts), in the order they were
        received; one seen for the first time is recorded as received. A folder removed meanwhile is left out."""
        first_seen, received = self.ledger.first_seen(), []
        for submission in found:
            try:
                if submission.name not in first_seen:
                    first_seen[submission.name] = self.ledger.receive(
                        submission.name, submission.claimed if self.store else change_time(submission.path))
                when = submission.claimed if self.store else receipt_time(submission.path, first_seen[submission.name])
            except FileNotFoundError:
                continue
            received.append(dataclasses.replace(submission, received=when))
        return sorted(received, key=lambda s: s.order)

    def history(self, found: list[Submission]) -> dict[tuple[str, str], list[Submission]]:
        """The graded submissions of each (student, assignment), in the order they were received (a folder removed
        since: when the service first saw it)."""
        first_seen, now = self.ledger.first_seen(), {s.name: s for s in found}
        graded: dict[tuple[str, str], list[Submission]] = {}
        for entry in self.ledger.graded():
            submission = now.get(entry.submission) or parse(self.inbound / entry.submission, self.store)
            if submission and submission.received is None:
                submission = dataclasses.replace(submission, received=first_seen.get(entry.submission,
                                                                                     datetime.datetime.min))
            if submission:
                graded.setdefault(submission.key, []).append(submission)
        return {key: sorted(them, key=lambda s: s.order) for key, them in graded.items()}

    def next_jobs(self) -> list[tuple[Submission, str]]:
        """Record what is decided now (received, refused, superseded) and return what to grade: (submission,
        "grade"). Every time here is a receipt time: what a folder's name says is never used."""
        finished = self.ledger.finished()
        busy = {submission.key for submission, *_ in self.running.values()}
        grading_now = {submission.student for submission, _, kind, _ in self.running.values() if kind == "grade"}
        found = self.received(submissions(self.inbound, self.store))
        settled = utc_now() - datetime.timedelta(seconds=self.settle)
        waiting = [s for s in found if s.name not in finished and s.name not in self.running and s.received <= settled]
        genuine = []
        for submission in waiting:
            reason = None if self.store else refusal(str(submission.path), submission.student)
            if reason:                                # not the named student's: the notice would go to the victim
                self.log.warning("refused %s: %s", submission.name, reason)
                self.ledger.record(submission.name, "refused", reason)
                continue
            if not self.store and not (submission.path / "submission_secret.txt").is_file():
                self.log.warning("refused %s: %s", submission.name, NO_SECRET)
                self.ledger.record(submission.name, "refused", NO_SECRET)   # no notice: it is filed under the secret
                continue
            reason = folder_problem(submission.path, self.upload_limits)
            if reason:                                # the student's own: they read why
                self.log.warning("refused %s: %s", submission.name, reason)
                self.ledger.record(submission.name, "refused", reason)
                release_notice(self.inbound.parent / "feedback", submission, UPLOAD_NOTICE.format(
                    assignment=submission.assignment, reason=reason))
                continue
            genuine.append(submission)
        history, jobs = self.history(found), []
        for submission in genuine:
            newer = [s for s in genuine if s.key == submission.key and s.order > submission.order]
            if newer:
                self.ledger.record(submission.name, "superseded", f"by {newer[-1].name}")
                continue
            earlier = history.get(submission.key, [])
            if self.attempt_limit and len(earlier) >= self.attempt_limit:
                self.ledger.record(submission.name, "refused", f"attempt limit: {len(earlier)} of "
                                   f"{self.attempt_limit} graded submissions used")
                release_notice(self.inbound.parent / "feedback", submission, LIMIT_NOTICE.format(
                    limit=self.attempt_limit, assignment=submission.assignment))
                continue
            if submission.key in busy:
                continue
            if submission.student in grading_now:     # one grading at a time per learner, whatever the assignment:
                continue                              # a learner's slow notebooks hold one worker, never all of them
            if earlier and utc_now() < earlier[-1].received + datetime.timedelta(seconds=self.cooldown):
                continue                              # the cooldown: graded when it has passed
            busy.add(submission.key)
            grading_now.add(submission.student)
            jobs.append((submission, "grade"))
        return jobs + self.completions(history, busy)

    def completions(self, history, busy) -> list[tuple[Submission, str]]:
        """The latest graded submissions whose feedback showed only the visible checks, now past their due date."""
        waiting_for_hidden, jobs = self.ledger.waiting_for_hidden(), []
        for key, graded in history.items():
            latest = graded[-1]
            due = self.due(latest.assignment) if latest.name in waiting_for_hidden else None
            if due and utc_now() >= due and key not in busy and latest.name not in self.running:
                jobs.append((latest, "complete"))
        return jobs

    # ------------------------------------------------------------------ the loop

    def start_job(self, pool, submission: Submission, kind: str) -> None:
        """Hand one job to the workers, its start in the ledger first. With engine=dask a grading job goes to the
        Dask workers with everything it needs (feedback_service.remote); a completion stays on this machine."""
        self.use_wal()
        if kind == "grade":
            self.ledger.record(submission.name, "grading")
        self.log.info("%s %s", "grading" if kind == "grade" else "completing the feedback of", submission.name)
        if kind == "grade" and self.client is not None:
            job, future = self.hand_out(submission)
            self.running[submission.name] = (submission, future, kind, job)
            return
        work = grading.grade if kind == "grade" else grading.complete
        self.running[submission.name] = (submission, pool.submit(work, submission), kind, None)

    def hand_out(self, submission: Submission, job: remote.Job | None = None) -> tuple[remote.Job | None, Future]:
        """Its job (made now unless given: collected for the formgrader, packed with its receipt time) on the Dask
        workers; a failure here is the job's failure, recorded as any other."""
        try:
            if job is None:
                received = grading.collect(submission)
                job = remote.pack(self.course_root, submission, nbgrader_time(received), self.db_url)
            return job, self.client.submit(remote.grade, job, pure=False)
        except Exception as error:               # one submission's failure never stops the others
            failed = Future()
            failed.set_exception(error)
            return job, failed

    def outcome(self, job: remote.Job | None, result) -> str:
        """A finished job's detail for the ledger; a Dask job's files are kept and its feedback released here first
        (raises NotGraded, as a local job does, when the submission was not graded)."""
        if not isinstance(result, remote.Graded):
            return result                        # a local job: it kept and released everything itself
        remote.keep(self.course_root, job, result)
        grading.release_kept(job.assignment, job.student)
        if result.not_graded:
            raise grading.NotGraded(result.detail)
        return result.detail

    def finish_jobs(self) -> None:
        """Record the outcome of every job that has ended; a Dask job lost with its scheduler is handed out again."""
        for name, (submission, future, kind, job) in list(self.running.items()):
            if not future.done():
                continue
            del self.running[name]
            try:
                detail = self.outcome(job, future.result())
            except remote.LOST as error:            # the scheduler went away with it: nothing was recorded yet
                self.log.warning("%s: its grading job was lost (%s); handed out again", name, type(error).__name__)
                self.running[name] = (submission, self.hand_out(submission, job)[1], kind, job)
                continue
            except grading.NotGraded as error:   # not a notebook: its feedback says why
                self.log.warning("%s: not graded: %s", name, error)
                self.ledger.record(name, NOT_GRADED, str(error))
                continue
            except Exception as error:           # one submission's failure never stops the others
                self.log.error("%s: %s", name, error)
                if kind == "grade":
                    self.ledger.record(name, "failed", str(error))
                    release_notice(self.inbound.parent / "feedback", submission,
                                   FAILED_NOTICE.format(assignment=submission.assignment))
                continue
            self.log.info("%s: %s", name, detail)
            self.ledger.record(name, "graded" if kind == "grade" else "full feedback", detail)

    def wait_for_work(self) -> None:
        """Sleep until the next look at the inbound folder (poll_interval from now), or until a running job ends
        first: its worker is free then, and the next submission goes to it at once, not up to poll_interval later
        (a worker idle for a second after each grading of two or three seconds)."""
        deadline = time.monotonic() + self.poll_interval
        while time.monotonic() < deadline and not any(future.done() for _, future, *_ in self.running.values()):
            time.sleep(0.05)

    def start(self):
        """Write the PID file, then look for work every poll_interval until SIGTERM."""
        self.pid_file.write_text(f"{os.getpid()}\n")
        self.log.info("watching %s (cooldown %g s, attempt limit %d, %d workers); ledger %s", self.inbound,
                      self.cooldown, self.attempt_limit, self.workers, self.ledger.path)
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        context = get_context("spawn")                 # a fresh interpreter per worker: no state of this loop
        pool = ProcessPoolExecutor(self.workers, mp_context=context, initializer=grading.start_worker,
                                   initargs=(str(self.course_root), self.exchange, None, True, self.store))
        if self.engine == "dask":
            grading.api = grading.course_api(str(self.course_root), self.exchange, store=self.store)   # collect, release
            self.client, self.cluster = remote.connect(self.scheduler, Path(self.state) / "tls", self.workers)
            self.log.info("grading on Dask workers of %s", self.client.scheduler.address)
        while not stopping:
            self.finish_jobs()
            for submission, kind in self.next_jobs():
                if len(self.running) >= self.workers:
                    break
                self.start_job(pool, submission, kind)
            self.wait_for_work()
        pool.shutdown(wait=False, cancel_futures=True)  # the workers die with this process (PR_SET_PDEATHSIG)
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.log.info("stopped; unfinished submissions are graded at the next start")
