"""The class on the course hub at a small size: bench/class_load.py with 4 students and the feedback service killed
while it grades (the bench with --students 30 is the full measurement; its docstring says what it does).

It passes when every student got their feedback (each submission graded once: the ledger, the gradebook and the
exchange agree, also across the kill and the hub's restart of the service), a submission in another student's name
and one carrying a symbolic link were refused and changed no grade, and the instructor's formgrader, reloaded in a
real browser throughout, showed no error page. Needs root (the hub creates Unix users): skipped otherwise.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the course hub creates Unix users: run the tests as root"),
]

ROOT = Path(__file__).resolve().parent.parent
LAST_LINE = re.compile(r"class load: (?P<with>\d+)/(?P<all>\d+) submissions with feedback; submit-to-feedback median "
                       r"(?P<median>[\d.]+) s, max (?P<max>[\d.]+) s; hub API p95 (?P<p95>[\d.]+) s; peak memory "
                       r"(?P<memory>[\d.]+) GiB; workers (?P<workers>\d+), (?P<rate>[\d.]+) submissions/min")


def test_four_students_get_their_feedback_though_the_service_is_killed_mid_grade():
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "class_load.py"), "--students", "4",
                             "--kill-midway"], capture_output=True, text=True, timeout=1200)
    output = result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines, output[-4000:]
    measured = LAST_LINE.fullmatch(lines[-1])
    assert measured, f"the last line is not the summary:\n{output[-4000:]}"
    assert result.returncode == 0, f"the class load found problems:\n{result.stdout[-4000:]}"
    assert measured["with"] == measured["all"] == "4", lines[-1]
    assert int(measured["workers"]) == os.cpu_count() and float(measured["rate"]) > 0, lines[-1]
    restart = re.search(r"the hub restarted it after (\d+) s", result.stdout)
    assert "killed the feedback service" in result.stdout and restart, result.stdout[-3000:]
    # the submissions in flight at the kill wait for the hub to notice (it polls its services every 30 s)
    assert float(measured["median"]) < 60 + int(restart[1]) and float(measured["max"]) < 300, lines[-1]
    assert "in student2's name: refused" in result.stdout and "with a symbolic link: refused" in result.stdout
    assert "0 error pages" in result.stdout, result.stdout[-2000:]
