"""The feedback service's decisions (addnorm_grading.feedback_service), feedback before and after the due date
(addnorm_grading.feedback), and collect's ownership check (addnorm_grading.exchange).

The fast tests build an exchange of submission folders owned by the user running the tests (root on CI), and ask
the service what it would do with them; the slow ones grade with nbgrader. The whole service on the course hub,
with real students, a kill in the middle and forged submissions, is tests/test_class_load.py.
"""

from __future__ import annotations

import datetime
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook
from nbgrader.api import Gradebook
from nbgrader.utils import notebook_hash

from addnorm_grading import coursework, submissions
from addnorm_grading.course import read_course
from addnorm_grading.exchange import refusal
from addnorm_grading.feedback import NOTE, ClearHiddenTestsOfTests, VisibleBeforeDue
from addnorm_grading.feedback_service.grading import NotGraded
from addnorm_grading.feedback_service.inbound import parse
from addnorm_grading.feedback_service.ledger import Ledger
from addnorm_grading.feedback_service.service import FeedbackService
from addnorm_grading.verdicts import SPLIT

ROOT = Path(__file__).resolve().parent.parent
ME = pwd.getpwuid(os.geteuid()).pw_name
EMPTY_NOTEBOOK = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
OTHER = "nobody"                                   # a Unix user that exists everywhere and is not the test runner


def stamp(minutes_ago: float) -> str:
    """An nbgrader timestamp `minutes_ago` minutes before now."""
    then = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=minutes_ago)
    return then.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def submit(inbound: Path, student: str, minutes_ago: float, tag: str | None = "x") -> Path:
    """A submission folder as `nbgrader submit` leaves it in the inbound folder (owned by the test runner); with
    tag=None, as the HTTP exchange stores it: <student>+<assignment>+<its clock's time>, no random string."""
    when = stamp(minutes_ago)
    folder = inbound / (f"{student}+01_residual+{when}" + (f"+{tag}" if tag else ""))
    folder.mkdir(parents=True)
    (folder / "residual.ipynb").write_text(EMPTY_NOTEBOOK)
    (folder / "timestamp.txt").write_text(when)
    if tag:
        (folder / "submission_secret.txt").write_text("the student's secret")
    return folder


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory) -> Path:
    """An empty nbgrader gradebook, made once (nbgrader runs its database migrations: seconds), copied by the tests."""
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    Gradebook(f"sqlite:///{path}").close()
    return path


@pytest.fixture
def service(tmp_path, empty_gradebook):
    """A feedback service over an empty exchange in tmp_path (not started: its decisions are asked directly)."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "course.toml", course)
    exchange = tmp_path / "exchange"
    shutil.copy(empty_gradebook, course / "gradebook.db")
    app = FeedbackService(course=str(course), exchange=str(exchange), cooldown=600, attempt_limit=2, settle=0)
    app.initialize([])
    app.inbound.mkdir(parents=True)
    return app


def decided(app) -> dict[str, str]:
    """What the service decides now: each submission's folder tag → "grade", or its latest ledger outcome
    ("received" if it has no other)."""
    jobs = {s.name.rsplit("+", 1)[1]: kind for s, kind in app.next_jobs()}
    latest: dict[str, str] = {}
    for entry in app.ledger.entries():
        tag = entry.submission.rsplit("+", 1)[1]
        if entry.outcome != "received" or tag not in latest:
            latest[tag] = entry.outcome
    return {**latest, **jobs}


# --------------------------------------------------------------------------- ownership


def test_a_students_own_submission_is_accepted(tmp_path):
    assert refusal(str(submit(tmp_path, ME, 1)), ME) is None


def test_a_submission_in_another_students_name_is_refused(tmp_path):
    reason = refusal(str(submit(tmp_path, OTHER, 1)), OTHER)
    assert reason == f"it names {OTHER} but the folder belongs to {ME}", reason


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_of_another_user_inside_is_refused(tmp_path):
    folder = submit(tmp_path, ME, 1)
    os.chown(folder / "residual.ipynb", pwd.getpwnam(OTHER).pw_uid, -1)
    assert refusal(str(folder), ME) == f"it names {ME} but residual.ipynb belongs to {OTHER}"


def test_symbolic_links_are_refused(tmp_path):
    folder = submit(tmp_path, ME, 1)
    (folder / "grades.db").symlink_to("/etc/passwd")
    assert refusal(str(folder), ME) == "it carries symbolic links (grades.db)"
    linked = tmp_path / f"{ME}+01_residual+{stamp(0)}+link"
    linked.symlink_to(folder, target_is_directory=True)
    assert refusal(str(linked), ME).startswith("the submission is a symbolic link")


def test_a_name_without_a_unix_user_is_refused(tmp_path):
    assert refusal(str(submit(tmp_path, "no-such-student", 1)), "no-such-student") == (
        "it names 'no-such-student', who has no Unix user here")


# --------------------------------------------------------------------------- the service's decisions


def test_each_genuine_submission_is_graded_and_a_forged_one_refused(service):
    submit(service.inbound, ME, 3, "mine")
    submit(service.inbound, OTHER, 2, "forged")
    assert decided(service) == {"mine": "grade", "forged": "refused"}
    (refused,) = [e for e in service.ledger.entries() if e.outcome == "refused"]
    assert "belongs to" in refused.detail


def test_a_newer_submission_supersedes_one_not_yet_graded(service):
    submit(service.inbound, ME, 3, "first")
    submit(service.inbound, ME, 2, "second")
    assert decided(service) == {"second": "grade", "first": "superseded"}


def later(monkeypatch, seconds: float) -> None:
    """Let the service's clock run `seconds` ahead (what the cooldown is measured with)."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) + datetime.timedelta(seconds=seconds)
    monkeypatch.setattr("addnorm_grading.feedback_service.service.utc_now", lambda: now)


def test_a_bad_upload_is_refused_with_a_notice_and_the_others_are_graded(service):
    bad = submit(service.inbound, ME, 3, "bad")
    (bad / "residual.ipynb").write_text("this is not json")
    (bad / "submission_secret.txt").write_text("the student's secret")
    submit(service.inbound, "root" if ME != "root" else "nobody", 2, "other")     # another's: refused on its own
    assert decided(service)["bad"] == "refused"
    (entry,) = [e for e in service.ledger.entries() if e.outcome == "refused" and e.submission == bad.name]
    assert entry.detail.startswith("residual.ipynb is not a notebook: it is not JSON"), entry.detail
    (notice,) = (service.inbound.parent / "feedback").glob("*.html")
    assert "not graded: residual.ipynb is not a notebook" in notice.read_text()
    assert not (service.course_root / "submitted").exists()
    good = submit(service.inbound, ME, 1, "good")
    assert decided(service)["good"] == "grade"               # the service goes on
    assert good.exists()


def test_a_learner_is_graded_one_submission_at_a_time_whatever_the_assignment(service):
    """A learner whose notebooks sleep through every cell's limit holds one worker, never all of them: their next
    submission, of another assignment, waits while another learner's is graded."""
    service.identity, service.store = "exchange", True                # names are identities (the HTTP exchange)
    slow = submit(service.inbound, "alice", 3, tag=None)
    [(found, kind)] = service.next_jobs()
    service.running[slow.name] = (found, None, kind, None)          # handed out, still grading
    next_one = slow.with_name(slow.name.replace("01_residual", "02_layer_norm"))
    shutil.copytree(slow, next_one)
    theirs = submit(service.inbound, "bob", 1, tag=None)
    assert [s.name for s, _ in service.next_jobs()] == [theirs.name]
    del service.running[slow.name]                                  # alice's first one is done
    service.ledger.record(slow.name, "graded", "score 8/8")
    assert next_one.name in {s.name for s, _ in service.next_jobs()}


def test_a_submission_put_into_the_inbound_by_hand_without_its_secret_is_refused_and_says_why(service):
    by_hand = submit(service.inbound, ME, 2, "byhand")
    (by_hand / "submission_secret.txt").unlink()
    submit(service.inbound, "nobody" if ME == "root" else "root", 1, "other")
    assert decided(service)["byhand"] == "refused"
    (entry,) = [e for e in service.ledger.entries() if e.submission == by_hand.name and e.outcome == "refused"]
    assert entry.detail.startswith("it has no submission_secret.txt, which nbgrader submit"), entry.detail
    assert not (service.course_root / "submitted").exists()


def test_from_the_http_exchanges_store_the_name_is_the_identity_and_its_time_the_receipt(service, monkeypatch):
    service.identity, service.store = "exchange", True
    folder = submit(service.inbound, "alice", 10, tag=None)          # no Unix user alice: the hub's token named her
    [(found, kind)] = service.next_jobs()
    assert (found.student, kind) == ("alice", "grade")
    assert found.received == found.claimed == datetime.datetime.strptime(folder.name.split("+")[2],
                                                                        "%Y-%m-%d %H:%M:%S.%f UTC")
    assert service.ledger.first_seen()[folder.name] == found.received
    service.ledger.record(folder.name, "graded", "score 1/8")
    bad = submit(service.inbound, "alice", 0, tag=None)
    (bad / "residual.ipynb").write_text("this is not json")
    monkeypatch.setattr("addnorm_grading.feedback_service.service.utc_now",
                        lambda: datetime.datetime.utcnow() + datetime.timedelta(hours=1))
    assert service.next_jobs() == []
    notice = service.inbound.parent / "feedback" / bad.name / "residual.html"      # where the exchange serves it
    assert "not graded: residual.ipynb is not a notebook" in notice.read_text()


def test_the_file_exchange_still_refuses_a_name_without_a_unix_user(service):
    submit(service.inbound, "alice", 10, tag=None)
    assert service.next_jobs() == []
    assert "who has no Unix user here" in service.ledger.entries()[-1].detail


def test_a_submission_still_arriving_waits_until_it_settles(service, monkeypatch):
    service.settle = 3
    submit(service.inbound, ME, 1, "arriving")
    assert decided(service) == {"arriving": "received"}
    later(monkeypatch, 4)
    assert decided(service) == {"arriving": "grade"}


def test_a_resubmission_waits_for_the_cooldown(service, monkeypatch):
    first = submit(service.inbound, ME, 3, "first")
    assert decided(service) == {"first": "grade"}
    service.ledger.record(first.name, "graded", "score 1/8; feedback: all checks")
    submit(service.inbound, ME, 2, "second")            # received a moment after the first: cooldown 10 minutes
    assert decided(service) == {"first": "graded", "second": "received"}     # waiting, nothing refused
    later(monkeypatch, 601)
    assert decided(service) == {"first": "graded", "second": "grade"}


def submit_named(inbound: Path, student: str, claimed: str, tag: str) -> Path:
    """A submission whose name and timestamp.txt claim the time `claimed` (anybody can name a folder)."""
    folder = inbound / f"{student}+01_residual+{claimed}+{tag}"
    folder.mkdir(parents=True)
    (folder / "residual.ipynb").write_text(EMPTY_NOTEBOOK)
    (folder / "timestamp.txt").write_text(claimed)
    (folder / "submission_secret.txt").write_text("the student's secret")
    time.sleep(0.02)                      # the next submission is received a clock tick or more later
    return folder


def test_a_back_dated_name_does_not_pass_the_cooldown(service, monkeypatch):
    first = submit_named(service.inbound, ME, "2000-01-01 10:00:00.000000 UTC", "first")
    assert decided(service) == {"first": "grade"}
    service.ledger.record(first.name, "graded", "score 1/8; feedback: all checks")
    submit_named(service.inbound, ME, "2000-01-02 10:00:00.000000 UTC", "second")    # "a day later", by its name
    assert decided(service) == {"first": "graded", "second": "received"}
    later(monkeypatch, 601)
    assert decided(service) == {"first": "graded", "second": "grade"}


def test_a_name_dated_in_the_future_does_not_make_a_submission_the_latest(service):
    submit_named(service.inbound, ME, "2099-01-01 10:00:00.000000 UTC", "future")
    submit_named(service.inbound, ME, "2000-01-01 10:00:00.000000 UTC", "past")       # received after it
    assert decided(service) == {"past": "grade", "future": "superseded"}
    received = service.ledger.first_seen()
    assert all(abs(when - datetime.datetime.utcnow()) < datetime.timedelta(minutes=1) for when in received.values())


def test_the_attempt_limit_cannot_be_passed(service):
    service.cooldown = 0
    for minutes, tag in [(30, "one"), (20, "two")]:
        service.ledger.record(submit(service.inbound, ME, minutes, tag).name, "graded", "score 8/8")
    third = submit(service.inbound, ME, 1, "three")
    assert decided(service)["three"] == "refused"
    assert service.ledger.entries()[-1].detail == "attempt limit: 2 of 2 graded submissions used"
    (notice,) = (service.inbound.parent / "feedback").glob("*.html")     # what Fetch Feedback brings the learner
    assert notice.stem == notebook_hash(secret="the student's secret", notebook_id="residual")
    assert "You have used all 2 graded submissions of 01_residual" in notice.read_text()


def test_an_interrupted_grading_is_done_again_and_a_finished_one_never(service):
    done = submit(service.inbound, ME, 5, "done")
    service.ledger.record(done.name, "grading")
    service.ledger.record(done.name, "graded", "score 8/8")
    interrupted = submit(service.inbound, ME, 4, "interrupted")
    service.ledger.record(interrupted.name, "grading")              # the service was killed here
    service.cooldown = 0
    assert decided(service) == {"done": "graded", "interrupted": "grade"}


def test_after_the_due_date_the_hidden_checks_join_the_feedback(service):
    graded = submit(service.inbound, ME, 5, "early")
    service.ledger.record(graded.name, "graded", "score 8/8; feedback: visible checks only")
    with Gradebook(f"sqlite:///{service.db}") as gradebook:
        gradebook.add_assignment("01_residual", duedate=datetime.datetime.utcnow() + datetime.timedelta(hours=1))
    assert decided(service) == {"early": "graded"}
    with Gradebook(f"sqlite:///{service.db}") as gradebook:
        gradebook.update_or_create_assignment("01_residual", duedate=datetime.datetime.utcnow() - datetime.timedelta(
            minutes=1))
    service.due_read = 0.0                                           # read the due date again now
    assert [kind for _, kind in service.next_jobs()] == ["complete"]
    service.ledger.record(graded.name, "full feedback", "feedback: all checks")
    assert service.next_jobs() == []


def finished(service, submission, outcome):
    """Let the service record a grading job that ended with `outcome` (a result or an exception)."""
    from concurrent.futures import Future
    job = Future()
    job.set_exception(outcome) if isinstance(outcome, Exception) else job.set_result(outcome)
    service.running[submission.name] = (parse(submission), job, "grade", None)
    service.finish_jobs()


def test_a_submission_that_is_no_notebook_is_recorded_as_not_graded_and_counts_as_no_attempt(service):
    folder = submit(service.inbound, ME, 3, "garbage")
    finished(service, folder, NotGraded("the file is empty; score 0/6; feedback: all checks"))
    (entry,) = service.ledger.entries()
    assert (entry.outcome, entry.detail) == ("not graded", "the file is empty; score 0/6; feedback: all checks")
    assert service.ledger.finished() == {folder.name} and service.history([]) == {}     # never graded again, no attempt


def test_a_submission_whose_grading_failed_tells_its_learner(service):
    folder = submit(service.inbound, ME, 3, "crash")
    (folder / "submission_secret.txt").write_text("the student's secret")
    finished(service, folder, RuntimeError("autograde failed: There was an error processing assignment"))
    assert [e.outcome for e in service.ledger.entries()] == ["failed"]
    (notice,) = (service.inbound.parent / "feedback").glob("*.html")
    assert "This submission of 01_residual was not graded: the grader stopped on it" in notice.read_text()


def test_a_folder_name_that_could_forge_a_ledger_line_is_ignored(service):
    forged = f"{ME}+01_residual+{stamp(1)}+x\tgraded\tscore 8 of 8"
    (service.inbound / forged).mkdir()
    (service.inbound / f"{ME}+01_residual+{stamp(1)}+y\n").mkdir()
    assert service.next_jobs() == [] and service.ledger.entries() == []
    with pytest.raises(ValueError, match="printable"):
        service.ledger.record(forged, "refused")


def test_the_ledger_is_one_line_per_step(tmp_path):
    ledger = Ledger(tmp_path / "ledger")
    ledger.record("ann+01_residual+t+x", "refused", "a reason\nover two lines")
    (line,) = (tmp_path / "ledger").read_text().splitlines()
    assert line.split("\t")[1:] == ["ann+01_residual+t+x", "refused", "a reason over two lines"]
    assert oct((tmp_path / "ledger").stat().st_mode & 0o777) == "0o600"


# --------------------------------------------------------------------------- the feedback's content


def graded_notebook(visible: str | None, hidden: str | None):
    """A graded notebook of one judged test (2 points) as GetGrades leaves it, with its two verdicts."""
    test = new_code_cell("check()", metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": "t",
                                                          "points": 2, "score": 0 if (visible or hidden) else 2}})
    test.metadata[SPLIT] = {"visible": visible, "hidden": hidden}
    message = visible or hidden
    test.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue=message, traceback=[message])] \
        if message else []
    return new_notebook(cells=[test])


def feedback(tmp_path, empty_gradebook, nb, due: datetime.datetime | None):
    shutil.copy(empty_gradebook, tmp_path / "gradebook.db")
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db) as gradebook:
        gradebook.update_or_create_assignment("01_residual", duedate=due)
    resources = {"nbgrader": {"db_url": db, "assignment": "01_residual", "score": 0.0, "max_score": 2.0}}
    return VisibleBeforeDue().preprocess(nb, resources)


def test_before_the_due_date_feedback_shows_the_visible_verdicts_and_says_so(tmp_path, empty_gradebook):
    due = datetime.datetime.utcnow() + datetime.timedelta(days=2)
    nb, resources = feedback(tmp_path, empty_gradebook, graded_notebook(None, "the hidden check failed"), due)
    assert nb.cells[0].source == NOTE.format(due=f"{due:%Y-%m-%d %H:%M}")
    assert nb.cells[1].outputs == [] and nb.cells[1].metadata.nbgrader["score"] == 2
    assert resources["nbgrader"]["score"] == 2.0


def test_a_visible_failure_shows_before_the_due_date(tmp_path, empty_gradebook):
    due = datetime.datetime.utcnow() + datetime.timedelta(days=2)
    nb, resources = feedback(tmp_path, empty_gradebook, graded_notebook("the visible check failed", "hidden too"), due)
    assert [o.evalue for o in nb.cells[1].outputs] == ["the visible check failed"]
    assert resources["nbgrader"]["score"] == 0.0


@pytest.mark.parametrize("when", ["past", "none"])
def test_after_the_due_date_or_without_one_feedback_is_the_whole_grade(tmp_path, empty_gradebook, when):
    due = datetime.datetime.utcnow() - datetime.timedelta(minutes=1) if when == "past" else None
    nb, resources = feedback(tmp_path, empty_gradebook, graded_notebook(None, "the hidden check failed"), due)
    assert len(nb.cells) == 1 and [o.evalue for o in nb.cells[0].outputs] == ["the hidden check failed"]
    assert resources["nbgrader"]["score"] == 0.0


def test_hidden_test_markers_in_a_learners_answer_do_not_break_feedback():
    answer = new_code_cell('print("BEGIN HIDDEN TESTS")', metadata={"nbgrader": {
        "solution": True, "grade": False, "grade_id": "a", "locked": False}})
    test = new_code_cell("assert 1\n### BEGIN HIDDEN TESTS\nassert 2\n### END HIDDEN TESTS", metadata={"nbgrader": {
        "solution": False, "grade": True, "grade_id": "t", "points": 1, "locked": True}})
    nb, _ = ClearHiddenTestsOfTests().preprocess(new_notebook(cells=[answer, test]), {})
    assert nb.cells[0].source == 'print("BEGIN HIDDEN TESTS")'
    assert nb.cells[1].source.strip() == "assert 1"


# --------------------------------------------------------------------------- the whole service, without a hub


@pytest.mark.slow
def test_the_service_grades_releases_early_feedback_and_completes_it_after_the_due_date(tmp_path):
    """A submission whose mistake only a hidden check catches: before the due date its feedback shows full visible
    marks and the note, the gradebook the lower grade; once the due date passes, the service releases the whole."""
    course = coursework.make_course(tmp_path / "course")
    exchange = tmp_path / "exchange"
    inbound = exchange / read_course(course / "course.toml").id / "inbound"
    due = datetime.datetime.utcnow() + datetime.timedelta(minutes=3)
    coursework.run_nbgrader(["db", "assignment", "add", "01_residual", f"--duedate={due:%Y-%m-%d %H:%M:%S} UTC"],
                            course)
    sent = datetime.datetime.utcnow()
    folder = submit_named(inbound, ME, "2099-01-01 10:00:00.000000 UTC", "early")     # its name: 73 years late
    (folder / "residual.ipynb").write_text(submissions.with_replacements("01_residual", HIDDEN_ONLY_MISTAKE,
                                                                         course / "solutions"))
    (folder / "submission_secret.txt").write_text("a secret only the student's cache and the exchange know")
    service = subprocess.Popen([sys.executable, "-m", "addnorm_grading.feedback_service", f"--course={course}",
                                f"--FeedbackService.exchange={exchange}", "--FeedbackService.poll_interval=0.5",
                                "--FeedbackService.due_date_refresh=1"],
                               env=coursework.nbgrader_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ledger = Ledger(course / "feedback-service" / "ledger")
    try:
        graded = wait_for(lambda: [e for e in ledger.entries() if e.outcome in ("graded", "failed")], service)
        assert graded[0].outcome == "graded" and "visible checks only" in graded[0].detail, graded
        html = next((exchange / read_course(course / "course.toml").id / "feedback").glob("*.html")).read_text()
        assert "Before the due date" in html and HIDDEN_ONLY_WORDS not in html
        assert coursework.scores(course)[(ME, "01_residual", "residual")]["code"] < 6
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:     # its time is its receipt time
            submission = gradebook.find_submission("01_residual", ME)
            assert sent <= submission.timestamp <= datetime.datetime.utcnow(), submission.timestamp
            assert submission.total_seconds_late == 0
        passed = datetime.datetime.utcnow() - datetime.timedelta(seconds=5)
        coursework.run_nbgrader(["db", "assignment", "add", "01_residual", f"--duedate={passed:%Y-%m-%d %H:%M:%S} UTC"],
                                course)
        wait_for(lambda: [e for e in ledger.entries() if e.outcome == "full feedback"], service, timeout=120)
        html = next((exchange / read_course(course / "course.toml").id / "feedback").glob("*.html")).read_text()
        assert "Before the due date" not in html and HIDDEN_ONLY_WORDS in " ".join(html.split())
        assert [e.outcome for e in ledger.entries()] == ["received", "grading", "graded", "full feedback"]
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)


@pytest.mark.slow
def test_collect_takes_the_last_received_submission_and_records_its_receipt_time(tmp_path):
    """nbgrader's collect picks the latest submission by its name's time and autograde records timestamp.txt, both
    the student's word: SafeCollect orders by receipt time and writes it into the collected timestamp.txt."""
    course = coursework.make_course(tmp_path / "course")
    exchange = tmp_path / "exchange"
    inbound = exchange / read_course(course / "course.toml").id / "inbound"
    sent = datetime.datetime.utcnow()
    future = submit_named(inbound, "ann", "2099-01-01 10:00:00.000000 UTC", "future")
    (future / "residual.ipynb").write_text('{"received": "first"}')
    past = submit_named(inbound, "ann", "2000-01-01 10:00:00.000000 UTC", "past")
    (past / "residual.ipynb").write_text('{"received": "second"}')
    result = coursework.run_nbgrader(["collect", "01_residual", f"--Exchange.root={exchange}",
                                      "--ExchangeCollect.check_owner=False"], course)
    collected = course / "submitted" / "ann" / "01_residual"
    assert (collected / "residual.ipynb").read_text() == '{"received": "second"}', result.stdout + result.stderr
    when = datetime.datetime.strptime((collected / "timestamp.txt").read_text(), "%Y-%m-%d %H:%M:%S.%f UTC")
    assert sent <= when <= datetime.datetime.utcnow(), when


HIDDEN_ONLY_MISTAKE = [("nn.Dropout(dropout)", "nn.Dropout(0.1)")]     # a hard-coded rate: a hidden check catches it
HIDDEN_ONLY_WORDS = "is the rate hard-coded?"


def wait_for(found, service, timeout: float = 240):
    """Poll `found()` until it returns something; fail with the service's output if it exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = found()
        if result:
            return result
        if service.poll() is not None:
            pytest.fail(f"the service exited ({service.returncode}):\n{service.stdout.read().decode()[-4000:]}")
        time.sleep(0.5)
    service.send_signal(signal.SIGTERM)
    said = service.communicate(timeout=60)[0].decode()
    pytest.fail(f"nothing after {timeout:.0f} s; the service said:\n{said[-4000:]}")


def test_the_service_hands_out_the_next_submission_when_a_job_ends_not_at_its_next_look(service):
    """A worker that has finished gets the next submission at once: the service's wait ends with the job, not
    poll_interval later (with nothing running it waits the whole interval)."""
    import threading
    import time
    from concurrent.futures import Future
    service.poll_interval = 0.3
    started = time.monotonic()
    service.wait_for_work()
    assert time.monotonic() - started >= 0.3
    service.poll_interval = 60.0
    job = Future()
    service.running["a"] = (None, job, "grade", None)
    threading.Timer(0.2, job.set_result, ["score 8/8"]).start()
    started = time.monotonic()
    service.wait_for_work()
    assert job.done() and time.monotonic() - started < 30, "the service slept on past the end of a job"


# --------------------------------------------------------------------------- the HTML pages of a notebook


def test_the_pages_strip_files_prefixes_as_nbconvert_does_with_the_courses_linear_filter():
    """nbconvert's strip_files_prefix takes time quadratic in a markdown cell's length (an attacking learner's cell of
    `[a](` repeated 300,000 times held a worker for what would have been half an hour; 6 s with this one: bench/
    README.md): the course's pages use its own, which changes what nbconvert's changes."""
    from nbconvert.filters.strings import strip_files_prefix as nbconverts
    from traitlets.config.loader import PyFileConfigLoader

    from addnorm_grading.feedback import strip_files_prefix

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert config.HTMLExporter.filters["strip_files_prefix"] == "addnorm_grading.feedback.strip_files_prefix"
    for text in ['<img src="files/a.png">', "<a href='/files/b.csv'>", "[a caption](files/x.png), ![i](/files/y.png)",
                 "[a](files/b) [c](d) [e](files/f)", "no prefix here", "[a](" * 50, "src=files/x"]:
        assert strip_files_prefix(text) == nbconverts(text), text
    assert strip_files_prefix("[a](" * 1000 + "[b](files/c)") == "[a](" * 1000 + "[b](c)"


def test_a_failed_step_is_told_by_the_line_that_names_its_error_not_nbgraders_closing_words():
    from addnorm_grading.feedback_service.grading import _check

    log = ("[AutogradeApp | ERROR] There was an error processing assignment: /c/submitted/alice/01_residual\n"
           "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nKeyError: 'grade_id'\n"
           "[AutogradeApp | ERROR] Please see the the above traceback for details on the specific errors on the "
           "above failures.\n")
    with pytest.raises(RuntimeError, match="autograde failed: KeyError: 'grade_id'"):
        _check("autograde", {"success": False, "log": log})
    _check("autograde", {"success": True, "log": log})                   # a step that succeeded raises nothing
