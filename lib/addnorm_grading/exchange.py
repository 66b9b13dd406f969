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
collected instead) and copies only regular files and folders, each read through the descriptor of the folder
that was opened (`copy_submission`: a folder swapped for a link while it is copied is never followed). The feedback service
(addnorm_grading.feedback_service) makes the same checks before it grades.

Times: nbgrader's collect takes a submission's time from its folder's name, which the student wrote, to pick the
latest submission and as the time autograde records and compares with the due date. `SafeCollect` uses the
receipt time instead (addnorm_grading.receipts: when the feedback service first saw it, from its ledger, or the
folder's last change) and writes it as the collected submission's timestamp.txt.
"""

from __future__ import annotations

import datetime
import errno
import os
import pwd
import shutil
import stat

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


class SubmissionTooLarge(RuntimeError):
    """A submission that grew past course.toml's [uploads] while it was being copied (it was checked before)."""


def copy_submission(src: str, dest: str, ignore=None, limits: UploadLimits | None = None) -> None:
    """Copy a submission folder's regular files and folders to `dest` (a new folder), never through a symbolic link.

    A submission folder is the student's to change while it is copied: a folder checked and found free of links can
    be swapped for a link to an instructor's folder between the moment a copy lists it and the moment it reads it
    (a learner can watch the copy open their files). So each folder is opened with O_NOFOLLOW and read through its
    descriptor, each file opened with O_NOFOLLOW relative to its folder's descriptor: what a name points to after
    the folder was opened is never reached. Links, devices, pipes and sockets are left out; `ignore` is nbgrader's
    (folder path, names) -> names to leave out; past `limits`, SubmissionTooLarge (and dest is removed)."""
    root = _open_nofollow(src, None, os.O_DIRECTORY)
    if root is None:
        raise FileNotFoundError(f"{src} is not a folder (or it is a symbolic link)")
    budget = {"files": limits.files if limits else None, "bytes": limits.size_bytes if limits else None}
    Path(dest).parent.mkdir(parents=True, exist_ok=True)            # as shutil.copytree does
    try:
        _copy_folder(root, src, Path(dest), ignore, budget)
    except SubmissionTooLarge:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(root)


def _open_nofollow(name: str, folder: int | None, flags: int) -> int | None:
    """A descriptor of `name` (relative to the folder descriptor `folder`), or None when it is a link, is not of the
    kind asked for, or has gone."""
    try:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags, dir_fd=folder)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.ENXIO):
            return None
        raise


def _spend(budget: dict, files: int, size: int, where: str) -> None:
    """Count one file or folder (and its bytes) against what a submission may hold."""
    for key, amount in (("files", files), ("bytes", size)):
        if budget[key] is not None:
            budget[key] -= amount
            if budget[key] < 0:
                raise SubmissionTooLarge(f"the submission grew past its limit of {key} while it was copied "
                                         f"(at {where})")


def _copy_folder(folder: int, shown: str, dest: Path, ignore, budget: dict) -> None:
    """Copy the open folder `folder` (its path `shown`, for `ignore` and messages) into the new folder dest."""
    dest.mkdir()
    names = sorted(entry.name for entry in os.scandir(folder))
    left_out = set(ignore(shown, names)) if ignore else set()
    for name in names:
        if name in left_out:
            continue
        try:
            kind = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(kind):
            child = _open_nofollow(name, folder, os.O_DIRECTORY)
            if child is not None:
                try:
                    _spend(budget, 1, 0, os.path.join(shown, name))
                    _copy_folder(child, os.path.join(shown, name), dest / name, ignore, budget)
                finally:
                    os.close(child)
        elif stat.S_ISREG(kind):
            child = _open_nofollow(name, folder, os.O_NONBLOCK)      # a FIFO put there meanwhile: no wait
            if child is not None:
                try:
                    _copy_file(child, dest / name, budget, os.path.join(shown, name))
                finally:
                    os.close(child)
    info = os.fstat(folder)
    os.chmod(dest, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))


def _copy_file(source: int, dest: Path, budget: dict, where: str) -> None:
    """Copy the open file `source` (a regular file, checked on the descriptor itself) to the new file dest."""
    info = os.fstat(source)
    if not stat.S_ISREG(info.st_mode):
        return
    _spend(budget, 1, info.st_size, where)
    charged, copied = info.st_size, 0                  # bytes counted against the budget, bytes copied
    with open(source, "rb", closefd=False) as reader, open(dest, "xb") as writer:
        while chunk := reader.read(1 << 20):
            copied += len(chunk)
            if copied > charged:                       # the file grew after it was measured: count the growth
                _spend(budget, 0, copied - charged, where)
                charged = copied
            writer.write(chunk)
    os.chmod(dest, stat.S_IMODE(info.st_mode) | stat.S_IRUSR | stat.S_IWUSR)
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))


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
                                                   max_file_size=self.coursedir.max_file_size, log=self.log),
                        self.upload_limits())
        write_receipt(Path(dest), self.receipt(src))             # measured after the copy: a change meanwhile counts
        if self.coursedir.groupshared:
            for directory, _, files in os.walk(dest):
                os.chmod(directory, (os.stat(directory).st_mode | 0o2770) & 0o2777)
                for name in files:
                    path = os.path.join(directory, name)
                    os.chmod(path, os.stat(path).st_mode | 0o660)
