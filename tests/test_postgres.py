"""The gradebook in PostgreSQL (addnorm_grading.postgres): a cluster from Debian's package, made by nbgrader's own
Gradebook, that keeps what was committed across a restart and lets in no one without the password."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
from nbgrader.api import Gradebook

from addnorm_grading.postgres import Cluster, server_programs

pytestmark = pytest.mark.slow
OWNER = "nobody" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name    # PostgreSQL refuses root


@pytest.fixture(scope="module")
def cluster():
    server_programs()                                  # says what to install if it is missing
    top = Path(tempfile.mkdtemp(prefix="addnorm-postgres-"))
    os.chmod(top, 0o711)                               # the owner must reach its folder
    made = Cluster(top / "postgres", OWNER)
    made.create()
    yield made
    if made.running():
        made.stop()
    shutil.rmtree(top)


def test_nbgraders_gradebook_is_made_in_it_and_survives_a_restart(cluster):
    with Gradebook(cluster.url(), "addnorm") as gradebook:           # nbgrader makes the tables (its migrations)
        gradebook.add_assignment("01_residual")
        gradebook.add_student("ann")
    cluster.restart()                                                 # PostgreSQL restarted
    with Gradebook(cluster.url(), "addnorm") as gradebook:
        assert [a.name for a in gradebook.assignments] == ["01_residual"]
        assert [s.id for s in gradebook.students] == ["ann"]
    with psycopg.connect(cluster.url(driver="")) as connection:        # upgraded by nbgrader's alembic
        assert connection.execute("select version_num from alembic_version").fetchone()[0]


def test_no_one_connects_without_the_password(cluster):
    wrong = cluster.url(driver="").replace(cluster.password_file.read_text().strip(), "guess")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong)
    no_password = f"postgresql://addnorm@127.0.0.1:{cluster.port}/gradebook"
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(no_password, connect_timeout=5)


def test_only_its_owner_can_read_the_password_and_the_data(cluster):
    for path, mode in [(cluster.folder, 0o700), (cluster.password_file, 0o600), (cluster.data, 0o700)]:
        info = path.stat()
        assert stat.S_IMODE(info.st_mode) == mode, (path, oct(info.st_mode))
        assert pwd.getpwuid(info.st_uid).pw_name == OWNER
    if os.geteuid() == 0:                              # another user (a learner) cannot read the password
        result = subprocess.run(["runuser", "-u", "daemon", "--", "cat", str(cluster.password_file)],
                                capture_output=True, text=True)
        assert result.returncode != 0 and "Permission denied" in result.stderr


def test_the_feedback_service_grades_into_it_across_a_restart(cluster, tmp_path):
    """The course's gradebook in PostgreSQL (CourseDirectory.db_url): the service's workers grade into it, the service
    reads its due dates from it, and PostgreSQL restarted between two submissions loses and doubles nothing."""
    from test_feedback_service import ME, submit, wait_for

    from addnorm_grading import coursework, submissions
    from addnorm_grading.course import read_course
    from addnorm_grading.feedback_service.ledger import Ledger

    course = coursework.make_course(tmp_path / "course")
    with open(course / "nbgrader_config.py", "a") as config:    # an instructor's own setting, never committed
        config.write(f"\nc.CourseDirectory.db_url = {cluster.url()!r}\n")
    coursework.run_nbgrader(["generate_assignment", "01_residual", "--force"], course)
    exchange = tmp_path / "exchange"
    inbound = exchange / read_course(course / "course.toml").id / "inbound"
    correct = submissions.solution_text("01_residual", course / "solutions")
    service = subprocess.Popen([sys.executable, "-m", "addnorm_grading.feedback_service", f"--course={course}",
                                f"--FeedbackService.exchange={exchange}", "--FeedbackService.poll_interval=0.5",
                                "--FeedbackService.cooldown=0", "--FeedbackService.settle=0.5"],
                               env=coursework.nbgrader_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    ledger = Ledger(course / "feedback-service" / "ledger")
    try:
        for attempt in (1, 2):
            folder = submit(inbound, ME, 0, f"attempt{attempt}")
            (folder / "residual.ipynb").write_text(correct)
            (folder / "submission_secret.txt").write_text("the student's secret")
            wait_for(lambda: len(ledger.graded()) == attempt or any(e.outcome == "failed" for e in ledger.entries()),
                     service)
            if attempt == 1:
                cluster.restart()                                   # PostgreSQL restarted mid-run
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=60)
    assert [e.outcome for e in ledger.entries() if e.outcome != "received"] == ["grading", "graded"] * 2
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as sqlite:   # make_course's, before the setting
        assert sqlite.find_assignment("01_residual").submissions == []      # nothing was graded into it
    with Gradebook(cluster.url(), "addnorm") as gradebook:
        submission = gradebook.find_submission("01_residual", ME)
        assert submission.code_score == submission.max_code_score > 0          # the written answer waits for a person
        assert len(gradebook.find_assignment("01_residual").submissions) == 1


def test_make_hubs_command_makes_starts_and_stops_it_and_says_so(capsys):
    """`python -m addnorm_grading.postgres up|down FOLDER --owner USER`, as make hub and make hub-down run it: safe
    to run twice; it never prints the password; root as the owner is refused with the reason."""
    from addnorm_grading.postgres import main

    top = Path(tempfile.mkdtemp(prefix="addnorm-postgres-"))
    os.chmod(top, 0o711)
    folder = top / "postgres"
    try:
        for action in ("up", "up", "down", "down"):
            main([action, str(folder), "--owner", OWNER])
        said = capsys.readouterr().out.splitlines()
        assert [line.split(": ", 1)[1].split(" (")[0] for line in said] == ["made and started", "running",
                                                                            "stopped", "stopped"]
        assert Cluster(folder, OWNER).password_file.read_text().strip() not in "\n".join(said)
        with pytest.raises(SystemExit):
            main(["up", str(top / "other"), "--owner", "root"])
        assert "PostgreSQL refuses to run as root" in capsys.readouterr().err
    finally:
        if (folder / "data").is_dir() and Cluster(folder, OWNER).running():
            Cluster(folder, OWNER).stop()
        shutil.rmtree(top)
