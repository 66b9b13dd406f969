"""The submissions in nbgrader's inbound folder: `<student>+<assignment>+<timestamp>+<random>` folders."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from nbgrader.utils import parse_utc


@dataclass(frozen=True)
class Submission:
    """One submission folder in the exchange's inbound folder, as its name describes it."""

    path: Path
    student: str
    assignment: str
    timestamp: datetime.datetime      # naive UTC, as nbgrader keeps times

    @property
    def name(self) -> str:
        """The folder's name: what the ledger records."""
        return self.path.name

    @property
    def key(self) -> tuple[str, str]:
        """(student, assignment): submissions with the same key are graded one after another."""
        return self.student, self.assignment


def parse(path: Path) -> Submission | None:
    """The submission a folder name describes (the student id may itself hold a '+'), or None if it is none. A name
    with a tab, a line break or any other unprintable character is none: anybody can make a folder in the inbound
    folder, and such a name could write a line of its own into the ledger."""
    if not path.name.isprintable():
        return None
    parts = path.name.rsplit("+", 3)
    if len(parts) != 4:
        return None
    student, assignment, stamp, _ = parts
    try:
        timestamp = parse_utc(stamp)
    except (ValueError, OverflowError):
        return None
    return Submission(path, student, assignment, timestamp)


def submissions(inbound: Path) -> list[Submission]:
    """Every submission in the inbound folder, oldest first."""
    if not inbound.is_dir():
        return []
    found = [parse(path) for path in inbound.iterdir()]
    return sorted((s for s in found if s is not None), key=lambda s: (s.timestamp, s.name))
