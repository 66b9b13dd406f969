"""nbgrader's exchange plugins for the HTTP exchange service: set them in nbgrader_config.py as

    c.ExchangeFactory.exchange = "addnorm_grading.http_exchange.client.HttpExchange"
    c.ExchangeFactory.release_assignment = "addnorm_grading.http_exchange.client.HttpReleaseAssignment"
    ... (one per action: `configure(c)` sets them all)

and the Assignment List, the formgrader and `nbgrader release_assignment / fetch_assignment / submit / list /
collect / release_feedback / fetch_feedback` use the service. Each request carries the server's own hub token
(`JUPYTERHUB_API_TOKEN`); the service decides who is asking, and a refusal comes back as its message.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import shutil
import tarfile
from pathlib import Path
from urllib.parse import quote

import requests
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.abc import (Exchange, ExchangeCollect, ExchangeFetchAssignment, ExchangeFetchFeedback,
                                   ExchangeList, ExchangeReleaseAssignment, ExchangeReleaseFeedback, ExchangeSubmit)
from nbgrader.utils import parse_utc
from traitlets import Unicode, default

from addnorm_grading.http_exchange.store import generated_feedback, pack_files
from addnorm_grading.uploads import path_problem

TIMEOUT = 120           # seconds: an upload of the course's largest submission on a slow link


def configure(c) -> None:
    """Point every nbgrader exchange action of config `c` at the HTTP exchange."""
    for action, name in [("exchange", "HttpExchange"), ("release_assignment", "HttpReleaseAssignment"),
                         ("fetch_assignment", "HttpFetchAssignment"), ("submit", "HttpSubmit"),
                         ("list", "HttpList"), ("collect", "HttpCollect"),
                         ("release_feedback", "HttpReleaseFeedback"), ("fetch_feedback", "HttpFetchFeedback")]:
        setattr(c.ExchangeFactory, action, f"{__name__}.{name}")


class HttpExchange(Exchange):
    """What every action shares: the service's address, the caller's token, requests and archives."""

    url = Unicode(help="The exchange service's address (default: $ADDNORM_EXCHANGE_URL), e.g. "
                       "http://127.0.0.1:8000/services/exchange/").tag(config=True)
    token = Unicode(help="The hub token sent with each request (default: $JUPYTERHUB_API_TOKEN, the server's "
                         "own)").tag(config=True)
    root = Unicode("", help="Not used: the folder of nbgrader's file exchange, which this one replaces").tag(
        config=True)
    path_includes_course = False

    @default("url")
    def _url_default(self):
        return os.environ.get("ADDNORM_EXCHANGE_URL", "")

    @default("token")
    def _token_default(self):
        return os.environ.get("JUPYTERHUB_API_TOKEN", "")

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        """One request to the service; a refusal or no answer ends the action with the service's reason."""
        if not self.url:
            self.fail("No exchange service address: set ADDNORM_EXCHANGE_URL (or HttpExchange.url)")
        if not self.token:
            self.fail("No hub token to show the exchange: run this in a JupyterHub server (JUPYTERHUB_API_TOKEN)")
        if not self.coursedir.course_id:
            self.fail("No course id specified. Re-run with --course flag.")
        address = f"{self.url.rstrip('/')}/api/{quote(self.coursedir.course_id, safe='')}/{path}"
        try:
            response = requests.request(method, address, timeout=TIMEOUT,
                                        headers={"Authorization": f"token {self.token}"}, **kwargs)
        except requests.RequestException as error:
            self.fail(f"The exchange service at {self.url} does not answer ({error.__class__.__name__}: {error})")
        if response.status_code >= 400:
            try:
                reason = response.json()["message"]
            except (ValueError, KeyError, TypeError):
                reason = f"HTTP {response.status_code} {response.reason}"
            self.fail(f"The exchange refused: {reason}")
        return response

    def ignored(self, name: str) -> bool:
        return any(fnmatch.fnmatch(name, pattern) for pattern in self.coursedir.ignore)

    def pack(self, folder: Path) -> bytes:
        """A folder's regular files as a tar archive, leaving out the course's ignored names, links and (as
        nbgrader's own exchange does) files larger than CourseDirectory.max_file_size."""
        buffer = io.BytesIO()
        self.packed_size = 0
        with tarfile.open(fileobj=buffer, mode="w:") as archive:
            for directory, folders, files in os.walk(folder):
                folders[:] = sorted(name for name in folders
                                    if not self.ignored(name) and not os.path.islink(os.path.join(directory, name)))
                for name in sorted(files):
                    path = Path(directory, name)
                    if self.ignored(name) or path.is_symlink() or not path.is_file():
                        continue
                    size = path.stat().st_size
                    if size > 1000 * self.coursedir.max_file_size:
                        self.log.warning("Left out %s: larger than %d KB", path, self.coursedir.max_file_size)
                        continue
                    archive.add(path, arcname=str(path.relative_to(folder)), recursive=False)
                    self.packed_size += size
        return buffer.getvalue()

    def unpack(self, data: bytes, dest: Path, only_missing: bool = False) -> list[str]:
        """Write an archive from the service into dest: its regular files and folders, at paths inside dest."""
        written = []
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive.getmembers():
                reason = path_problem(member.name)
                if reason or not (member.isfile() or member.isdir()):
                    self.log.warning("Left out %s from the exchange: %s", member.name, reason or "not a file")
                    continue
                path = dest / member.name
                if member.isdir():
                    path.mkdir(parents=True, exist_ok=True)
                    continue
                if only_missing and path.exists():
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                with archive.extractfile(member) as source, open(path, "wb") as target:
                    shutil.copyfileobj(source, target)
                written.append(member.name)
        return written

    def released(self) -> dict[str, list[str]]:
        """The released assignments and their notebooks (and, in self.limits, what a submission may hold)."""
        answer = self.api("GET", "assignments").json()
        self.limits = answer["limits"]
        return {a["assignment_id"]: a["notebooks"] for a in answer["assignments"]}

    def submissions(self, everyone: bool = False, student: str | None = None) -> list[dict]:
        """Submissions the service lists: the caller's own, or (instructors) the class's."""
        params = {} if everyone else {"student": student or self.caller()}
        if self.coursedir.assignment_id:
            params["assignment"] = self.coursedir.assignment_id
        return self.api("GET", "submissions", params=params).json()["submissions"]

    def caller(self) -> str:
        """The hub user this server runs for (the service checks it anyway)."""
        return os.environ.get("JUPYTERHUB_USER") or self.fail("No JUPYTERHUB_USER: run this in a JupyterHub server")

    @staticmethod
    def submission_path(submission: dict) -> str:
        return "/".join(quote(submission[key], safe="") for key in ("assignment_id", "student_id", "timestamp"))

    def local_assignment_dir(self, assignment: str) -> Path:
        return Path(self.assignment_dir, assignment).resolve()

    def init_src(self):
        pass

    def init_dest(self):
        pass

    def copy_files(self):
        pass


class HttpReleaseAssignment(HttpExchange, ExchangeReleaseAssignment):
    """Release: the release folder's files, as the instructor generated them (instructors only)."""

    def init_src(self):
        self.src_path = Path(self.coursedir.format_path(self.coursedir.release_directory, ".",
                                                        self.coursedir.assignment_id))
        if not self.src_path.is_dir():
            self.fail(f"Assignment not found: {self.src_path} (run nbgrader generate_assignment first)")

    def copy_files(self):
        response = self.api("PUT", f"assignments/{quote(self.coursedir.assignment_id, safe='')}",
                            data=self.pack(self.src_path), params={"force": "1"} if self.force else {})
        self.log.info("Released as: %s %s (%d files)", self.coursedir.course_id, self.coursedir.assignment_id,
                      len(response.json()["files"]))


class HttpFetchAssignment(HttpExchange, ExchangeFetchAssignment):
    """Fetch a released assignment into the learner's folder (missing files only, with --replace)."""

    def init_dest(self):
        self.dest_path = self.local_assignment_dir(self.coursedir.assignment_id)
        if self.dest_path.is_dir() and not self.replace_missing_files:
            self.fail(f"You already have a copy of the assignment in this directory: {self.coursedir.assignment_id}")

    def copy_files(self):
        data = self.api("GET", f"assignments/{quote(self.coursedir.assignment_id, safe='')}").content
        written = self.unpack(data, self.dest_path, only_missing=self.replace_missing_files)
        self.log.info("Fetched as: %s %s (%d files)", self.coursedir.course_id, self.coursedir.assignment_id,
                      len(written))


class HttpSubmit(HttpExchange, ExchangeSubmit):
    """Submit the learner's folder of an assignment; the service stores it as theirs, at its own time."""

    def init_src(self):
        self.src_path = self.local_assignment_dir(self.coursedir.assignment_id)
        if not self.src_path.is_dir():
            self.fail(f"Assignment not found at: {self.src_path}")

    def init_dest(self):
        released = self.released()
        if self.coursedir.assignment_id not in released:
            self.fail(f"Assignment not found: {self.coursedir.assignment_id} is not released in "
                      f"{self.coursedir.course_id}")
        self.released_notebooks = released[self.coursedir.assignment_id]

    def check_notebooks(self) -> None:
        """nbgrader's own check: the released notebooks missing (an error with --strict) or extra."""
        submitted = sorted(p.stem for p in self.src_path.glob("*.ipynb"))
        missing = sorted(set(self.released_notebooks) - set(submitted))
        extra = sorted(set(submitted) - set(self.released_notebooks))
        if missing and self.strict:
            self.fail(f"Assignment {self.coursedir.assignment_id} not submitted. There are missing notebooks for "
                      f"the submission: {', '.join(missing)}")
        if missing or extra:
            self.log.warning("Possible missing notebooks (%s) and/or extra notebooks (%s) submitted for assignment "
                             "%s", ", ".join(missing) or "none", ", ".join(extra) or "none",
                             self.coursedir.assignment_id)

    def copy_files(self):
        self.check_notebooks()
        data = self.pack(self.src_path)
        if self.packed_size > self.limits["size_bytes"]:     # the service refuses it too, but only once it is sent
            self.fail(f"Not submitted: its files add up to {self.packed_size / (1 << 20):.1f} MiB, more than the "
                      f"course's limit of {self.limits['size']}")
        params = {} if self.coursedir.student_id in ("", "*") else {"student": self.coursedir.student_id}
        response = self.api("POST", f"submissions/{quote(self.coursedir.assignment_id, safe='')}", data=data,
                            params=params)
        self.timestamp = response.json()["timestamp"]
        self.log.info("Submitted as: %s %s %s", self.coursedir.course_id, self.coursedir.assignment_id,
                      self.timestamp)


class HttpList(HttpExchange, ExchangeList):
    """List released assignments, the learner's own submissions (--cached, as the Assignment List asks) or the
    class's (--inbound, instructors), in nbgrader's own shape; --remove takes a release back."""

    def feedback_info(self, submission: dict) -> dict:
        """The submission's notebooks and feedback, local and in the exchange, as nbgrader's list gives them."""
        local_dir = self.local_assignment_dir(submission["assignment_id"]) / "feedback" / submission["timestamp"]
        notebooks = []
        for notebook in submission["notebooks"]:
            local = local_dir / f"{notebook}.html"
            exchange_sum = submission["feedback"].get(notebook)
            local_sum = _md5(local) if local.is_file() else None
            notebooks.append({"notebook_id": notebook, "path": str(local_dir.parent.parent / f"{notebook}.ipynb"),
                              "has_local_feedback": local_sum is not None,
                              "has_exchange_feedback": exchange_sum is not None,
                              "local_feedback_path": str(local) if local_sum else None,
                              "feedback_updated": bool(local_sum and exchange_sum and local_sum != exchange_sum)})
        has_local = bool(notebooks) and all(nb["has_local_feedback"] for nb in notebooks)
        return {"course_id": self.coursedir.course_id, "student_id": submission["student_id"],
                "assignment_id": submission["assignment_id"], "timestamp": submission["timestamp"],
                "status": "submitted", "path": str(local_dir.parent.parent), "notebooks": notebooks,
                "has_local_feedback": has_local,
                "has_exchange_feedback": bool(notebooks) and all(nb["has_exchange_feedback"] for nb in notebooks),
                "feedback_updated": any(nb["feedback_updated"] for nb in notebooks),
                "local_feedback_path": str(local_dir) if has_local else None}

    def released_info(self) -> list[dict]:
        found = []
        for assignment, notebooks in self.released().items():
            if self.coursedir.assignment_id and assignment != self.coursedir.assignment_id:
                continue
            local = self.local_assignment_dir(assignment)
            status = "fetched" if local.is_dir() else "released"
            found.append({"course_id": self.coursedir.course_id, "assignment_id": assignment, "status": status,
                          "path": str(local),
                          "notebooks": [{"notebook_id": nb, "path": str(local / f"{nb}.ipynb")} for nb in notebooks]})
        return found

    def submitted_info(self) -> list[dict]:
        """Submissions grouped by student and assignment, oldest first in each, as nbgrader's list does."""
        groups: dict[tuple[str, str], list[dict]] = {}
        listed = self.submissions(everyone=self.inbound,
                                  student=None if self.inbound else (self.coursedir.student_id.strip("*") or None))
        for submission in listed:
            groups.setdefault((submission["student_id"], submission["assignment_id"]), []).append(
                self.feedback_info(submission))
        return [{"course_id": self.coursedir.course_id, "student_id": student, "assignment_id": assignment,
                 "status": "submitted", "submissions": sorted(subs, key=lambda s: s["timestamp"])}
                for (student, assignment), subs in sorted(groups.items())]

    def list_files(self):
        if self.inbound or self.cached:
            assignments = self.submitted_info()
            self.log.info("Submitted assignments:")
            for assignment in assignments:
                for info in assignment["submissions"]:
                    self.log.info("%s %s %s %s", info["course_id"], info["student_id"], info["assignment_id"],
                                  info["timestamp"])
        else:
            assignments = self.released_info()
            self.log.info("Released assignments:")
            for info in assignments:
                self.log.info("%s %s%s", info["course_id"], info["assignment_id"],
                              " (already downloaded)" if info["status"] == "fetched" else "")
        return assignments

    def remove_files(self):
        if self.inbound or self.cached:
            self.fail("Submissions are not removed through the exchange: they are the record of what was received")
        assignments = self.released_info()
        for info in assignments:
            self.api("DELETE", f"assignments/{quote(info['assignment_id'], safe='')}")
            info["status"] = "removed"
            self.log.info("Removed: %s %s", info["course_id"], info["assignment_id"])
        return assignments


class HttpCollect(HttpExchange, ExchangeCollect):
    """Collect each student's latest submission (or the latest before the due date) into submitted/, with its
    receipt time as timestamp.txt (instructors only)."""

    def init_src(self):
        everyone = self.submissions(everyone=True)
        student = self.coursedir.student_id.strip("*")
        by_student: dict[str, list[dict]] = {}
        for submission in everyone:
            if not student or submission["student_id"] == student:
                by_student.setdefault(submission["student_id"], []).append(submission)
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gradebook:
            try:
                duedate = gradebook.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                duedate = None
        self.src_records = []
        for submissions in by_student.values():
            latest_first = sorted(submissions, key=lambda s: s["timestamp"], reverse=True)
            on_time = [s for s in latest_first if duedate and parse_utc(s["timestamp"]) <= duedate]
            self.src_records.append(on_time[0] if self.before_duedate and on_time else latest_first[0])

    def copy_files(self):
        if not self.src_records:
            self.log.warning("No submissions of '%s' for course '%s' to collect", self.coursedir.assignment_id,
                             self.coursedir.course_id)
        for record in self.src_records:
            student = record["student_id"]
            dest = Path(self.coursedir.format_path(self.coursedir.submitted_directory, student,
                                                   self.coursedir.assignment_id))
            if dest.is_dir():
                existing = self.coursedir.get_existing_timestamp(str(dest))
                newer = existing is None or parse_utc(record["timestamp"]) > existing
                if not ((self.update and newer) or
                        (self.before_duedate and existing != parse_utc(record["timestamp"]))):
                    self.log.info("Submission already exists, use --update to update: %s %s", student,
                                  self.coursedir.assignment_id)
                    continue
                shutil.rmtree(dest)
                self.log.info("Updating submission: %s %s", student, self.coursedir.assignment_id)
            else:
                self.log.info("Collecting submission: %s %s", student, self.coursedir.assignment_id)
            dest.mkdir(parents=True)
            self.unpack(self.api("GET", f"submissions/{self.submission_path(record)}").content, dest)


class HttpReleaseFeedback(HttpExchange, ExchangeReleaseFeedback):
    """Release each student's generated feedback to the submission it was made from (instructors only)."""

    def copy_files(self):
        for submission, pages in generated_feedback(self.coursedir):
            address = {"assignment_id": submission.assignment, "student_id": submission.student,
                       "timestamp": submission.timestamp}
            self.api("PUT", f"feedback/{self.submission_path(address)}", data=pack_files(pages))
            self.log.info("Releasing feedback for student '%s' on assignment '%s/%s' (%s)", submission.student,
                          self.coursedir.course_id, self.coursedir.assignment_id, submission.timestamp)


class HttpFetchFeedback(HttpExchange, ExchangeFetchFeedback):
    """Fetch the feedback of the learner's own submissions into <assignment>/feedback/<timestamp>/."""

    def copy_files(self):
        fetched = 0
        for submission in self.submissions():
            if not submission["feedback"]:
                continue
            dest = self.local_assignment_dir(submission["assignment_id"]) / "feedback" / submission["timestamp"]
            dest.mkdir(parents=True, exist_ok=True)
            for name in self.unpack(self.api("GET", f"feedback/{self.submission_path(submission)}").content, dest):
                fetched += 1
                self.log.info("Fetched feedback: %s", dest / name)
        if not fetched:
            self.log.warning("No feedback available to fetch for %s", self.coursedir.assignment_id or "any assignment")


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()
