"""The feedback service's ledger: one line per step a submission went through, appended, never rewritten.

    2026-12-01T22:10:03Z<TAB><submission folder><TAB><outcome><TAB><detail>

Outcomes: `received` (the first line of every submission: its receipt time when the service first saw it, to the
microsecond; addnorm_grading.receipts), `grading` (started), then one final outcome: `graded` (score, and whether the feedback shows the visible
checks only; what was repaired in a notebook whose structure was broken), `not graded` (a file that is not a notebook:
the reason, and its score of zero; the learner's feedback says why; it counts as no attempt), `failed` (nbgrader
stopped on it; the learner gets a notice), `refused` (not the named student's own work, or past the
attempt limit), `superseded` (a newer submission came before this one was graded); and, after a due date,
`full feedback` (the hidden checks joined a feedback that showed only the visible ones). A submission with `grading`
and no final outcome was interrupted: it is graded again.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path

from addnorm_grading.receipts import nbgrader_time, parse_nbgrader_time

RECEIVED = "received"
NOT_GRADED = "not graded"
FINAL = ("graded", NOT_GRADED, "failed", "refused", "superseded")
VISIBLE_ONLY = "feedback: visible checks only"
ALL_CHECKS = "feedback: all checks"


@dataclass(frozen=True)
class Entry:
    """One line of the ledger."""

    time: str
    submission: str
    outcome: str
    detail: str


class Ledger:
    """The ledger file (created on the first line)."""

    def __init__(self, path: Path):
        self.path = path

    def record(self, submission: str, outcome: str, detail: str = "") -> None:
        """Append one line (one write call, O_APPEND: a line is never interleaved with another)."""
        if not submission.isprintable() or not outcome.isprintable():
            raise ValueError(f"a ledger line's submission and outcome are printable text, got {submission!r}, "
                             f"{outcome!r}")
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        line = "\t".join([stamp, submission, outcome, " ".join(detail.split())]) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def entries(self) -> list[Entry]:
        """Every complete line, oldest first."""
        if not self.path.is_file():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()
        return [Entry(*line.split("\t", 3)) for line in lines if line.count("\t") >= 3]

    def first_seen(self) -> dict[str, datetime.datetime]:
        """When the service first saw each submission (its `received` line), naive UTC."""
        return {e.submission: parse_nbgrader_time(e.detail)
                for e in self.entries() if e.outcome == RECEIVED}

    def receive(self, submission: str, when: datetime.datetime) -> datetime.datetime:
        """Record that the service received `submission` at `when` (naive UTC), and return it."""
        self.record(submission, RECEIVED, nbgrader_time(when))
        return when

    def finished(self) -> set[str]:
        """The submissions with a final outcome."""
        return {e.submission for e in self.entries() if e.outcome in FINAL}

    def graded(self) -> list[Entry]:
        """The `graded` lines, oldest first."""
        return [e for e in self.entries() if e.outcome == "graded"]

    def waiting_for_hidden(self) -> set[str]:
        """Graded submissions whose feedback showed the visible checks only and has not been completed since."""
        completed = {e.submission for e in self.entries() if e.outcome == "full feedback"}
        return {e.submission for e in self.graded() if VISIBLE_ONLY in e.detail} - completed
