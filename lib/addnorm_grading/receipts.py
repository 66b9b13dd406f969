"""When a submission was received: a clock no student sets, never a time the student wrote.

nbgrader takes a submission's time from its folder's name and its `timestamp.txt`, both written by the student's
own `nbgrader submit` (nbgrader#1104): a name dated 2000 passed the feedback service's cooldown, and a name or a
`timestamp.txt` claiming an on-time submission would pass a due date. Here the time of a submission is its
**receipt time**: the last inode change (ctime) of its folder or of anything in it. The kernel sets it, from the
exchange machine's clock, at every change (a file written, a hard link made, a folder renamed into inbound), and no
user can set it back (touch and utime set the other two times). When the feedback service first sees a submission
it records that time in its ledger (`received`); a file changed after that makes the submission that much later,
never earlier. (The service's own clock at first sight would be up to a poll interval late: a submission made a
second before the due date would be late.) A submission the service never saw (it was down, or the instructor
collects by hand) has its change time alone.

That time decides cooldown, superseding and lateness: the service and collect write it into the collected
submission's `timestamp.txt`, which is what nbgrader's autograde records as the submission's time in the gradebook
and compares with the due date.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

NBGRADER_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"      # how nbgrader writes a time (nbgrader.utils.get_utc_timestamp)


def from_epoch(seconds: float) -> datetime.datetime:
    """A POSIX time as naive UTC, the way nbgrader keeps times."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).replace(tzinfo=None)


def change_time(folder: Path) -> datetime.datetime:
    """The last inode change of `folder` or of anything in it (links not followed), naive UTC."""
    latest = os.lstat(folder).st_ctime
    for directory, folders, files in os.walk(folder):       # os.walk does not descend into linked folders
        for name in folders + files:
            latest = max(latest, os.lstat(os.path.join(directory, name)).st_ctime)
    return from_epoch(latest)


def receipt_time(folder: Path, first_seen: datetime.datetime | None = None) -> datetime.datetime:
    """The submission's receipt time: its last change, and never earlier than what the service recorded."""
    changed = change_time(folder)
    return max(changed, first_seen) if first_seen else changed


def nbgrader_time(when: datetime.datetime) -> str:
    """A time as nbgrader writes it in timestamp.txt."""
    return when.strftime(NBGRADER_FORMAT)


def parse_nbgrader_time(text: str) -> datetime.datetime:
    """A time as nbgrader writes it, read back (naive UTC); ValueError when `text` is not one."""
    return datetime.datetime.strptime(text, NBGRADER_FORMAT)


def write_receipt(collected: Path, when: datetime.datetime) -> None:
    """Replace the student's timestamp.txt in a collected submission by its receipt time."""
    (collected / "timestamp.txt").write_text(nbgrader_time(when))
