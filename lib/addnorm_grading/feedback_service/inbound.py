"""The submissions in nbgrader's inbound folder: `<student>+<assignment>+<timestamp>[+<random>]` folders.

In nbgrader's file exchange the timestamp in a name is what the student's `nbgrader submit` wrote: it is kept as
`claimed`, shown, and never used; the service decides with the receipt time (addnorm_grading.receipts). In the HTTP
exchange's store (addnorm_grading.http_exchange) the exchange service wrote the name, from its own clock and the
hub's token: there the name's time is the receipt time (`stamped_by_exchange`)."""

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
    claimed: datetime.datetime        # the name's time, naive UTC: written by the student, never trusted
    received: datetime.datetime | None = None      # its receipt time (addnorm_grading.receipts), once known
    stamped_by_exchange: bool = False      # the HTTP exchange's store: the name's time is the service's clock

    @property
    def order(self) -> tuple[datetime.datetime, str]:
        """Its place among submissions: by receipt time, and in a tie (one clock tick) by folder name."""
        return (self.received, self.name)

    @property
    def name(self) -> str:
        """The folder's name: what the ledger records."""
        return self.path.name

    @property
    def key(self) -> tuple[str, str]:
        """(student, assignment): submissions with the same key are graded one after another."""
        return self.student, self.assignment


def parse(path: Path, stamped_by_exchange: bool = False) -> Submission | None:
    """The submission a folder name describes (the student id may itself hold a '+'; the random string nbgrader
    adds may be missing), or None if it is none. A name with a tab, a line break or any other unprintable character
    is none: anybody can make a folder in the inbound folder, and such a name could write a line of its own into the
    ledger."""
    if not path.name.isprintable():
        return None
    for parts in (path.name.rsplit("+", 3), path.name.rsplit("+", 2)):
        if len(parts) < 3:
            continue
        student, assignment, stamp = parts[:3]
        try:
            timestamp = parse_utc(stamp)
        except (ValueError, OverflowError):
            continue
        return Submission(path, student, assignment, timestamp, stamped_by_exchange=stamped_by_exchange)
    return None


def submissions(inbound: Path, stamped_by_exchange: bool = False) -> list[Submission]:
    """Every submission in the inbound folder, in the order of their names."""
    if not inbound.is_dir():
        return []
    found = [parse(path, stamped_by_exchange) for path in sorted(inbound.iterdir())]
    return [s for s in found if s is not None]
