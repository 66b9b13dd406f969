"""The exchange service's files: released assignments, submissions at their receipt times, feedback per submission.

    <root>/<course>/outbound/<assignment>/...                          released by the instructor
    <root>/<course>/inbound/<student>+<assignment>+<receipt>/...       one folder per submission
    <root>/<course>/feedback/<student>+<assignment>+<receipt>/<notebook>.html

The layout is nbgrader's exchange folder's, so the feedback service and collect read it as they read that one, but
only the service's own Unix user can: nobody reaches it except through the service, which knows who is asking.
A submission's `<receipt>` is the service's clock when the upload was complete (nbgrader's time format), never a
time the learner wrote. Everything arrives as a tar archive, checked before any of it is stored
(`addnorm_grading.uploads`: size, file count, links, paths, names, notebooks that parse), unpacked into a hidden
folder and renamed into place: a reader sees a whole submission or none.
"""

from __future__ import annotations

import datetime
import glob
import io
import os
import shutil
import tarfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nbgrader.exchange.abc import ExchangeReleaseFeedback
from traitlets import Unicode

from addnorm_grading.course import LearnerLimits, UploadLimits
from addnorm_grading.receipts import nbgrader_time, parse_nbgrader_time
from addnorm_grading.uploads import archive_members, problem

NAME_RULE = "letters, digits, '_', '-', '.' and '@' (hub names may be e-mail addresses), not starting with '.'"


class Refused(Exception):
    """A request the store does not carry out; the message says why, for the learner or instructor, and `status`
    the HTTP status the service answers with."""

    def __init__(self, message: str, status: int = 400, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


def check_name(kind: str, name: str) -> str:
    """An assignment or student id as a single safe path component (else Refused)."""
    if not name or name.startswith(".") or len(name) > 100 or not all(c.isalnum() or c in "_-.@" for c in name):
        raise Refused(f"the {kind} {name!r} is not a valid id ({NAME_RULE})")
    return name


def is_receipt(timestamp: str) -> bool:
    """Whether `timestamp` is a time as the exchange writes it (nbgrader's format): nothing else names a folder."""
    try:
        return len(timestamp) < 40 and nbgrader_time(parse_nbgrader_time(timestamp)) == timestamp
    except ValueError:
        return False


@dataclass(frozen=True)
class Submission:
    """One submission in the store: whose, which assignment, its receipt time (nbgrader's format)."""

    student: str
    assignment: str
    timestamp: str

    def __post_init__(self):
        """Its student and assignment are single safe path components (else Refused): a name from the request's
        address, where tornado has already decoded `%2F` to `/`, can never step into another learner's folder."""
        check_name("student", self.student)
        check_name("assignment", self.assignment)

    @property
    def folder_name(self) -> str:
        return f"{self.student}+{self.assignment}+{self.timestamp}"

    @classmethod
    def from_folder_name(cls, name: str) -> "Submission":
        student, assignment, timestamp = name.split("+", 2)
        return cls(student, assignment, timestamp)


def read_archive(upload: IO[bytes], limits: UploadLimits) -> tarfile.TarFile:
    """An uploaded tar archive, checked against the upload rules from its headers (else Refused)."""
    try:
        archive = tarfile.open(fileobj=upload, mode="r:")
        members = archive_members(archive)
    except (tarfile.TarError, EOFError, OSError) as error:
        raise Refused(f"the upload is not a tar archive ({error})") from None

    def read(path: str) -> bytes:
        return archive.extractfile(path).read()

    reason = problem(members, limits, read)
    if reason:
        raise Refused(f"not stored: {reason}")
    return archive


def pack(folder: Path) -> bytes:
    """A folder's regular files as an uncompressed tar archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as archive:
        for path in files_in(folder):
            archive.add(folder / path, arcname=path, recursive=False)
    return buffer.getvalue()


def pack_files(files: dict[str, bytes]) -> bytes:
    """Named contents as an uncompressed tar archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as archive:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def files_in(folder: Path) -> list[str]:
    """The regular files under folder, as relative paths (links are never followed or listed)."""
    found = []
    for directory, _, files in os.walk(folder):
        for name in files:
            path = Path(directory, name)
            if path.is_file() and not path.is_symlink():
                found.append(str(path.relative_to(folder)))
    return sorted(found)


def folder_size(folder: Path) -> int:
    """The bytes of the regular files under folder (the files `files_in` lists)."""
    return sum((folder / path).stat().st_size for path in files_in(folder))


class Store:
    """One course's exchange files under `root` (made 0700: the service's user alone reads them)."""

    def __init__(self, root: Path, course: str, limits: UploadLimits, learner_limits: LearnerLimits | None = None):
        self.course = check_name("course", course)
        self.limits, self.learner_limits = limits, learner_limits
        self.storing = threading.Lock()      # one learner's two uploads at once: the limits hold for both
        self.base = Path(root) / course
        for part in ("outbound", "inbound", "feedback", ".incoming"):
            (self.base / part).mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)

    # --- writing: unpack a checked archive beside its place, then rename it into place ---------------------------
    def _unpack(self, archive: tarfile.TarFile) -> Path:
        """A checked archive's regular files and folders, in a new hidden folder; a member that cannot be written
        where it says (a name used twice, a file where a folder is) is refused, and nothing of it is left."""
        staging = self.base / ".incoming" / uuid.uuid4().hex
        staging.mkdir()
        member = None
        try:
            for member in archive.getmembers():   # checked already: regular files and folders, relative paths inside
                path = staging / member.name
                if member.isdir():
                    path.mkdir(parents=True, exist_ok=True)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with archive.extractfile(member) as source, open(path, "xb") as target:
                        shutil.copyfileobj(source, target)
        except (OSError, tarfile.TarError) as error:
            shutil.rmtree(staging, ignore_errors=True)
            raise Refused(f"not stored: {member.name if member else 'a member'} cannot be written where it says "
                          f"({error.__class__.__name__}: a name given twice, or a file where a folder is)") from None
        return staging

    def _replace(self, staging: Path, place: Path) -> None:
        old = None
        if place.exists():
            old = self.base / ".incoming" / uuid.uuid4().hex
            place.rename(old)
        staging.rename(place)
        if old is not None:
            shutil.rmtree(old)

    def release(self, assignment: str, upload: IO[bytes]) -> list[str]:
        """Release (or release again) an assignment: its files, as the learners will fetch them."""
        archive = read_archive(upload, UploadLimits(files=self.limits.files * 10, size=self.limits.size))
        place = self.base / "outbound" / check_name("assignment", assignment)
        self._replace(self._unpack(archive), place)
        return files_in(place)

    def unrelease(self, assignment: str) -> None:
        place = self.base / "outbound" / check_name("assignment", assignment)
        if not place.is_dir():
            raise Refused(f"{assignment} is not released")
        shutil.rmtree(place)

    def submit(self, student: str, assignment: str, upload: IO[bytes], received: datetime.datetime) -> Submission:
        """Store a learner's submission at its receipt time (the service's clock, naive UTC)."""
        check_name("student", student)
        if not (self.base / "outbound" / check_name("assignment", assignment)).is_dir():
            raise Refused(f"{assignment} is not released in {self.course}: nothing to submit it to")
        archive = read_archive(upload, self.limits)
        staging = self._unpack(archive)
        if (staging / "timestamp.txt").is_dir():
            shutil.rmtree(staging)
            raise Refused("not stored: timestamp.txt is a folder; the exchange writes that file itself")
        with self.storing:
            try:
                self._within_learner_limits(student, received, folder_size(staging))
            except Refused:
                shutil.rmtree(staging)
                raise
            submission = Submission(student, assignment, nbgrader_time(received))
            place = self.base / "inbound" / submission.folder_name
            while place.exists():                          # two uploads within a microsecond: the later one is later
                received += datetime.timedelta(microseconds=1)
                submission = Submission(student, assignment, nbgrader_time(received))
                place = self.base / "inbound" / submission.folder_name
            (staging / "timestamp.txt").write_text(submission.timestamp)   # the receipt, whatever the archive held
            staging.rename(place)
        return submission

    def _within_learner_limits(self, student: str, received: datetime.datetime, size: int) -> None:
        """Refuse a submission that comes sooner than `interval` after the learner's last one (429, with when to
        try again), or that takes what they keep past `kept` (413)."""
        if self.learner_limits is None:
            return
        theirs = self.submissions(student)
        if theirs:
            last = max(parse_nbgrader_time(s.timestamp) for s in theirs)
            wait = self.learner_limits.interval - (received - last).total_seconds()
            if wait > 0:
                raise Refused(f"not stored: your last submission was received {(received - last).total_seconds():.0f}"
                              f" s ago; submit again in {wait:.0f} s (at most one every "
                              f"{self.learner_limits.interval:g} s)", status=429, retry_after=wait)
        kept = sum(folder_size(self.base / "inbound" / s.folder_name) for s in theirs)
        if kept + size > self.learner_limits.kept_bytes:
            raise Refused(f"not stored: your {len(theirs)} submissions kept here hold {kept / 2**20:.1f} MiB, and this "
                          f"one ({size / 2**20:.1f} MiB) would take them past the {self.learner_limits.kept} each "
                          f"learner may keep; ask the instructor to remove old ones", status=413)

    def release_feedback(self, submission: Submission, upload: IO[bytes]) -> list[str]:
        """Keep the feedback of one submission (HTML files named after its notebooks)."""
        self.submission_folder(submission)
        archive = read_archive(upload, UploadLimits(files=self.limits.files, size=self.limits.size))
        names = [member.name for member in archive.getmembers() if member.isfile()]
        if not names or not all(name.endswith(".html") and "/" not in name for name in names):
            raise Refused("feedback is the HTML files of one submission's notebooks, in the archive's top level")
        place = self.base / "feedback" / submission.folder_name
        self._replace(self._unpack(archive), place)
        return files_in(place)

    # --- reading ---------------------------------------------------------------------------------------------------
    def released(self) -> dict[str, list[str]]:
        """Each released assignment and its notebooks."""
        outbound = self.base / "outbound"
        return {folder.name: sorted(p.stem for p in folder.glob("*.ipynb"))
                for folder in sorted(outbound.iterdir()) if folder.is_dir()}

    def released_files(self, assignment: str) -> bytes:
        place = self.base / "outbound" / check_name("assignment", assignment)
        if not place.is_dir():
            raise Refused(f"{assignment} is not released in {self.course}")
        return pack(place)

    def submissions(self, student: str | None = None, assignment: str | None = None) -> list[Submission]:
        """The submissions in the store (of one student, of one assignment), oldest first."""
        found = []
        for folder in (self.base / "inbound").iterdir():
            submission = Submission.from_folder_name(folder.name)
            if (student is None or submission.student == student) and \
                    (assignment is None or submission.assignment == assignment):
                found.append(submission)
        return sorted(found, key=lambda s: (s.student, s.assignment, s.timestamp))

    def submission_folder(self, submission: Submission) -> Path:
        place = self.base / "inbound" / submission.folder_name
        if not is_receipt(submission.timestamp) or not place.is_dir():
            raise Refused(f"there is no submission of {submission.assignment} by {submission.student} at "
                          f"{submission.timestamp}")
        return place

    def notebooks(self, submission: Submission) -> list[str]:
        return sorted(p.stem for p in self.submission_folder(submission).glob("*.ipynb"))

    def feedback_files(self, submission: Submission) -> dict[str, bytes]:
        """The feedback released for one submission: {notebook id: HTML}."""
        place = self.base / "feedback" / submission.folder_name
        if not is_receipt(submission.timestamp) or not place.is_dir():
            return {}
        return {p.stem: p.read_bytes() for p in sorted(place.glob("*.html"))}


def generated_feedback(coursedir) -> list[tuple[Submission, dict[str, bytes]]]:
    """The feedback nbgrader generated for the course's assignment (of coursedir.student_id, if one is named; none
    of student_id_exclude): each with the submission its timestamp.txt names, and its pages {file name: HTML}."""
    student = coursedir.student_id.strip("*") or "*"
    pattern = coursedir.format_path(coursedir.feedback_directory, student, coursedir.assignment_id)
    excluded = set(filter(None, coursedir.student_id_exclude.split(",")))
    found = []
    for folder in map(Path, sorted(glob.glob(pattern))):
        pages = {page.name: page.read_bytes() for page in sorted(folder.glob("*.html"))}
        if folder.parent.name in excluded or not pages:
            continue
        timestamp = (folder / "timestamp.txt").read_text().strip()
        found.append((Submission(folder.parent.name, coursedir.assignment_id, timestamp), pages))
    return found


class StoreReleaseFeedback(ExchangeReleaseFeedback):
    """nbgrader's release_feedback straight into the store, for the feedback service, which runs as the store's
    Unix user on the exchange's machine (`Exchange.root` is the store's folder): each student's generated feedback
    goes to the submission its timestamp.txt names."""

    root = Unicode("", help="The HTTP exchange's store (the exchange service's --store)").tag(config=True)

    def init_src(self):
        pass

    def init_dest(self):
        from addnorm_grading.course import read_course
        limits = read_course(Path(self.coursedir.root) / "course.toml").uploads
        self.store = Store(Path(self.root), self.coursedir.course_id, limits)

    def copy_files(self):
        for submission, pages in generated_feedback(self.coursedir):
            try:
                self.store.release_feedback(submission, io.BytesIO(pack_files(pages)))
            except Refused as error:
                self.fail(f"Feedback of {submission.folder_name} not released: {error}")
            self.log.info("Released feedback of %s into the exchange's store", submission.folder_name)
