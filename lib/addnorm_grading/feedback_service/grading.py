"""What a grading worker of the feedback service does for one submission (a process of its own, warm between jobs).

The worker is the instructor's nbgrader, in-process (`NbGraderAPI`, as the formgrader calls it): copy the verified
submission into submitted/, autograde (learner code runs only in the sandboxed kernel nbgrader_config.py names),
generate and release that student's feedback. A worker dies with the service (PR_SET_PDEATHSIG), so a killed
service leaves no grading behind it.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import shutil
import signal
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.apps.nbgraderapp import NbGraderApp
from nbgrader.utils import ignore_patterns

from addnorm_grading.course import read_course
from addnorm_grading.feedback import before_due
from addnorm_grading.exchange import copy_submission
from addnorm_grading.feedback_service.inbound import Submission
from addnorm_grading.feedback_service.ledger import ALL_CHECKS, VISIBLE_ONLY
from addnorm_grading.receipts import nbgrader_time, receipt_time, write_receipt
from addnorm_grading.structure import NOT_GRADED, notes

PR_SET_PDEATHSIG = 1
api: NbGraderAPI | None = None      # this worker's nbgrader, made by start_worker


STORE_RELEASE = "addnorm_grading.http_exchange.store.StoreReleaseFeedback"


def course_api(course: str, exchange: str, db_url: str | None = None, store: bool = False) -> NbGraderAPI:
    """nbgrader, in-process, for the course folder at `course`: its settings (and the user's), the exchange root as
    the service has it, and the gradebook at db_url if given. With `store`, the exchange root is the HTTP
    exchange's store, and feedback is released into it directly (the service runs as the store's user)."""
    here = os.getcwd()
    os.chdir(course)
    try:
        settings = NbGraderApp()
        settings.load_config_file()
    finally:
        os.chdir(here)
    settings.config.CourseDirectory.root = course
    settings.config.Exchange.root = exchange
    if db_url:
        settings.config.CourseDirectory.db_url = db_url
    if store:
        settings.config.ExchangeFactory.release_feedback = STORE_RELEASE
    return NbGraderAPI(config=settings.config)


def start_worker(course: str, exchange: str, db_url: str | None = None, die_with_parent: bool = True,
                 store: bool = False) -> None:
    """In a worker process: die with the service (unless a Dask worker), work in the course folder, load nbgrader's
    settings. What the kernels it starts print goes nowhere: a learner's flood of output cannot fill the log."""
    if die_with_parent:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    nowhere = os.open(os.devnull, os.O_WRONLY)
    os.dup2(nowhere, 1)
    os.dup2(nowhere, 2)
    os.close(nowhere)
    os.chdir(course)
    global api
    api = course_api(course, exchange, db_url, store)


GENERIC = "see the the above traceback"      # nbgrader's last word on any failure (its own spelling): it says nothing


def _check(step: str, result: dict) -> None:
    """Raise with the last line of nbgrader's log that names the error (not its closing "see the above traceback")
    when a step failed."""
    if not result.get("success"):
        log = (result.get("log") or "") + (result.get("error") or "")
        said = [line for line in log.splitlines()
                if ("ERROR" in line or "CRITICAL" in line or "Error:" in line) and GENERIC not in line.lower()]
        raise RuntimeError(f"{step} failed: {said[-1].strip() if said else log.strip()[-300:]}")


def collected_folder(submission: Submission) -> Path:
    """Where `collect` puts the submission: submitted/<student>/<assignment>/ of the course."""
    coursedir = api.coursedir
    return Path(coursedir.format_path(coursedir.submitted_directory, submission.student, submission.assignment))


def collect(submission: Submission) -> datetime.datetime:
    """Copy the submission into submitted/<student>/<assignment>/, replacing what was there (no symbolic link), with
    its receipt time as its timestamp.txt (taken after the copy: a file changed meanwhile makes it later); return
    that time."""
    coursedir = api.coursedir
    dest = collected_folder(submission)
    if dest.exists():
        shutil.rmtree(dest)
    copy_submission(str(submission.path), str(dest), ignore_patterns(
        exclude=coursedir.ignore, include=coursedir.include, max_file_size=coursedir.max_file_size, log=api.log),
        read_course(Path(coursedir.root) / "course.toml").uploads)
    received = submission.received if submission.stamped_by_exchange else \
        receipt_time(submission.path, submission.received)
    write_receipt(dest, received)
    return received


def generate(assignment: str, student: str) -> str:
    """Generate the student's feedback; say whether it shows the visible checks only."""
    visible_only = before_due(api.coursedir.db_url, assignment)
    _check("generate_feedback", api.generate_feedback(assignment, student, force=True))
    return VISIBLE_ONLY if visible_only else ALL_CHECKS


def release(assignment: str, student: str) -> str:
    """Generate and release the student's feedback; say whether it shows the visible checks only."""
    feedback = generate(assignment, student)
    _check("release_feedback", api.release_feedback(assignment, student))
    return feedback


class NotGraded(Exception):
    """The submission was not graded (a file that is not a notebook): the reason and its score, for the ledger."""


def autograde_and_generate(student: str, assignment: str, received: str) -> tuple[str, bool]:
    """Autograde a collected submission and generate its feedback; return the ledger's detail (score, feedback
    kind, receipt time, what was repaired; or why it was not graded, its score and feedback kind) and whether it was
    not graded."""
    _check("autograde", api.autograde(assignment, student, force=True, create=True))
    feedback = generate(assignment, student)
    with Gradebook(api.coursedir.db_url) as gradebook:
        graded = gradebook.find_submission(assignment, student)
        score, max_score = graded.score, graded.max_score
    said = notes(api.coursedir.db_url, assignment, student)
    reasons = [note[len(NOT_GRADED) + 2:] for note in said if note.startswith(NOT_GRADED + ":")]
    if reasons:
        return f"{'; '.join(reasons)}; score {score:g}/{max_score:g}; {feedback}", True
    return "; ".join([f"score {score:g}/{max_score:g}", feedback, f"received {received}", *said]), False


def grade(submission: Submission) -> str:
    """Collect, autograde, release feedback; return the ledger's detail (score, feedback kind, what was repaired), or
    raise NotGraded with the reason (its feedback, which says why, is released all the same)."""
    received = collect(submission)
    detail, not_graded = autograde_and_generate(submission.student, submission.assignment, nbgrader_time(received))
    _check("release_feedback", api.release_feedback(submission.assignment, submission.student))
    if not_graded:
        raise NotGraded(detail)
    return detail


def release_kept(assignment: str, student: str) -> None:
    """Release feedback a Dask worker generated and the service kept in the course folder (feedback_service.remote)."""
    _check("release_feedback", api.release_feedback(assignment, student))


def complete(submission: Submission) -> str:
    """After the due date: release the student's feedback again, now with the hidden checks."""
    return release(submission.assignment, submission.student)
