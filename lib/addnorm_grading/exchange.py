"""Collecting submissions from nbgrader's exchange: only what the named student made, and no symbolic link.

The exchange's inbound folder is writable by every student, and `nbgrader submit --student=…` can name anyone, so a
submission folder says whose it is but does not prove it. nbgrader's collect only warns when the owner differs
(`check_owner`), and copies a submission as the instructor with `shutil.copytree`, which follows links: a link to an
instructor file (a solution notebook, the gradebook) would bring that file's content into submitted/ and from there
into autograding.

`refusal(folder, student)` says why a submission is not the named student's own work (None when it is): the folder
is a link or holds one, or a file or folder in it belongs to another Unix user. `SafeCollect` (nbgrader_config.py's
`c.ExchangeFactory.collect`) never collects a refused submission — not the named student's own, or breaking a rule
of what a submission may hold (addnorm_grading.uploads: size, file count, names, notebooks that parse); both checked
with nbgrader's `check_owner` on, its default — (it is logged, and an earlier genuine one of the same student is
collected instead) and copies only regular files and folders. The feedback service
(addnorm_grading.feedback_service) makes the same checks before it grades.

Times: nbgrader's collect takes a submission's time from its folder's name, which the student wrote, to pick the
latest submission and as the time autograde records and compares with the due date. `SafeCollect` uses the
receipt time instead (addnorm_grading.receipts: when the feedback service first saw it, from its ledger, or the
folder's last change) and writes it as the collected submission's timestamp.txt.
"""

from __future__ import annotations

import datetime
import os
import pwd
import shutil

from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import ignore_patterns

from addnorm_grading.feedback_service.ledger import Ledger
from addnorm_grading.course import UploadLimits, read_course
from addnorm_grading.receipts import receipt_time, write_receipt
from addnorm_grading.uploads import folder_problem


def links_in(folder: str) -> list[str]:
    """The symbolic links under folder (files and folders), as paths relative to it."""
    found = []
    for directory, folders, files in os.walk(folder):           # os.walk does not descend into linked folders
        for name in folders + files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                found.append(os.path.relpath(path, folder))
    return sorted(found)


def owner_name(uid: int) -> str:
    """The Unix user name of `uid` (or "uid N" when it has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def refusal(folder: str, student: str) -> str | None:
    """Why the submission `folder` is not `student`'s own work (None: it is): a link, a link inside, or a file or
    folder owned by another Unix user than `student`."""
    try:
        uid = pwd.getpwnam(student).pw_uid
    except KeyError:
        return f"it names {student!r}, who has no Unix user here"
    if os.path.islink(folder):
        return f"the submission is a symbolic link (to {os.path.realpath(folder)}), not a folder {student} submitted"
    links = links_in(folder)
    if links:
        return f"it carries symbolic links ({', '.join(links)})"
    for directory, folders, files in os.walk(folder):
        for path in [directory, *(os.path.join(directory, name) for name in folders + files)]:
            owner = os.lstat(path).st_uid
            if owner != uid:
                where = os.path.relpath(path, folder)
                return (f"it names {student} but {'the folder' if where == '.' else where} belongs to "
                        f"{owner_name(owner)}")
    return None


def copy_submission(src: str, dest: str, ignore=None) -> None:
    """Copy a submission folder's regular files and folders to `dest`, leaving every symbolic link out."""
    def leave_out(directory, names):
        usual = set(ignore(directory, names)) if ignore else set()
        return usual | {name for name in names if os.path.islink(os.path.join(directory, name))}

    shutil.copytree(src, dest, ignore=leave_out)


class SafeCollect(ExchangeCollect):
    """nbgrader's collect, taking no refused submission and copying no symbolic link (see the module's docstring)."""

    def first_seen(self) -> dict[str, datetime.datetime]:
        """When the feedback service first saw each submission (its ledger, if the course has one)."""
        if not hasattr(self, "_first_seen"):
            ledger = Path(self.coursedir.root) / "feedback-service" / "ledger"
            self._first_seen = Ledger(ledger).first_seen() if os.access(ledger, os.R_OK) else {}
        return self._first_seen

    def upload_limits(self) -> UploadLimits:
        """What one submission may hold: course.toml's [uploads]."""
        return read_course(Path(self.coursedir.root) / "course.toml").uploads

    def receipt(self, path: str) -> datetime.datetime:
        """The submission folder's receipt time (addnorm_grading.receipts)."""
        return receipt_time(Path(path), self.first_seen().get(os.path.basename(path)))

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
        record["claimed"] = record["timestamp"]       # the name's time: the student's word, never used
        record["timestamp"] = self.receipt(path)
        if self.check_owner:
            record["refusal"] = refusal(path, record["username"]) or folder_problem(Path(path), self.upload_limits())
            if record["refusal"]:                    # sorted last: an earlier genuine submission is collected instead
                record["timestamp"] = datetime.datetime.min
        return record

    def copy_files(self):
        for record in self.src_records:
            if record.get("refusal"):
                self.log.error("Not collected: %s (%s)", record["filename"], record["refusal"])
        self.src_records = [record for record in self.src_records if not record.get("refusal")]
        super().copy_files()

    def do_copy(self, src, dest, log=None):
        if os.path.islink(src):
            self.log.error("Not collected: the submission %s is a symbolic link (to %s), not a folder the student "
                           "submitted", src, os.path.realpath(src))
            return
        links = links_in(src)
        if links:
            self.log.warning("Submission %s: symbolic links left out, not followed: %s", src, ", ".join(links))
        size = self.get_size(src)
        if size > 1000 * self.coursedir.max_dir_size:
            self.log.error("Directory size is too big")
            raise RuntimeError(f"Directory size is too big. Size is {size}, maximum size is "
                               f"{1000 * self.coursedir.max_dir_size}")
        copy_submission(src, dest, ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                                   max_file_size=self.coursedir.max_file_size, log=self.log))
        write_receipt(Path(dest), self.receipt(src))             # measured after the copy: a change meanwhile counts
        if self.coursedir.groupshared:
            for directory, _, files in os.walk(dest):
                os.chmod(directory, (os.stat(directory).st_mode | 0o2770) & 0o2777)
                for name in files:
                    path = os.path.join(directory, name)
                    os.chmod(path, os.stat(path).st_mode | 0o660)
