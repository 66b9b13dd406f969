"""The exchange service: a JupyterHub-managed HTTP service that knows who is asking.

Every request carries a JupyterHub token (`Authorization: token …`; in a learner's server, its
`JUPYTERHUB_API_TOKEN`), which the service asks the hub about (JupyterHub's service authentication, `HubAuth`): the
caller's name and groups come from the hub, never from the request. A learner submits only as themselves, and lists
and fetches only their own submissions and feedback; releasing, collecting and releasing feedback need the
instructors' group (course.toml's `[exchange] instructors`). Uploads are tar archives, refused before anything is
stored when they break a rule (addnorm_grading.uploads; the body itself is capped before it is read into a file).
A submission's time is the service's clock when its upload was complete.

    GET    api/<course>/assignments                               released assignments, their notebooks, the limits
    GET    api/<course>/assignments/<a>                           fetch (a tar archive)
    PUT    api/<course>/assignments/<a>[?force=1]                 release (again)      (instructors)
    DELETE api/<course>/assignments/<a>                           take back a release  (instructors)
    POST   api/<course>/submissions/<a>[?student=<s>]             submit: answers the receipt time
    GET    api/<course>/submissions?student=<s>[&assignment=<a>]  list one student's: own or instructors
    GET    api/<course>/submissions[?assignment=<a>]              everyone's (instructors)
    GET    api/<course>/submissions/<a>/<s>/<timestamp>           one submission (a tar archive): own or instructors
    PUT    api/<course>/feedback/<a>/<s>/<timestamp>              release its feedback  (instructors)
    GET    api/<course>/feedback/<a>/<s>/<timestamp>              its feedback (a tar archive): own or instructors

Refusals are JSON `{"message": …}` with 400 (a bad upload or id), 401 (no valid token), 403 (not yours, not an
instructor), 404 (nothing there), 409 (released already), 413 (too large, or past what a learner may keep: course.toml's
`[exchange] kept`) or 429 (sooner than `[exchange] interval` after the learner's last submission; Retry-After says
when to try again).

    python -m addnorm_grading.http_exchange --store DIR [--course-file course.toml] [--port 10102]
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import inspect
import json
import logging
import os
import signal
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tornado import ioloop, web

from addnorm_grading.course import read_course
from addnorm_grading.http_exchange.store import Refused, Store, Submission, pack, pack_files

if TYPE_CHECKING:
    from jupyterhub.services.auth import HubAuth   # in the hub's environment, not the course's .venv

log = logging.getLogger("addnorm.exchange")
SLACK = 1 << 20          # tar headers and padding on top of the course's size limit, in bytes
NO_BODY = 64 << 10       # the most a request that uploads nothing may carry
TOKEN_CACHE = 5          # seconds the hub's answer about a token is kept: a revoked token or a removed
                         # instructor counts within this time (HubAuth's default is 300)


def unless_refused(method):
    """A handler method that does nothing when its request was refused while its body arrived (tornado calls the
    method once the body has ended all the same)."""
    @functools.wraps(method)
    async def guarded(self, *args):
        if self._finished:
            return
        result = method(self, *args)
        if inspect.isawaitable(result):
            await result
    return guarded


class ApiError(web.HTTPError):
    """A refusal with a message for whoever asked."""

    def __init__(self, status: int, message: str, retry_after: float | None = None):
        super().__init__(status, reason=None)
        self.message, self.retry_after = message, retry_after


@web.stream_request_body
class ExchangeHandler(web.RequestHandler):
    """A request from a hub user: `self.caller` is their name, `self.is_instructor` whether they are in the
    instructors' group. Bodies are streamed (tornado reads none before `prepare` has checked the token); a request
    that takes no upload is refused past NO_BODY bytes of one."""

    def initialize(self, store: Store, hub_auth: HubAuth, instructors: str):
        self.store, self.hub_auth, self.instructors = store, hub_auth, instructors
        self.body_size = 0

    def data_received(self, chunk: bytes):
        self.body_size += len(chunk)
        if self.body_size > NO_BODY and not self._finished:
            self.send_error(413, exc_info=(ApiError, ApiError(413, "this request takes no upload"), None))

    async def prepare(self):
        token = self.hub_auth.get_token(self, in_cookie=False)
        if not token:
            raise ApiError(401, "no JupyterHub token: send your server's JUPYTERHUB_API_TOKEN as "
                                "'Authorization: token …'")
        model = await self.hub_auth.user_for_token(token, sync=False)
        if model is None:
            raise ApiError(401, "the JupyterHub token is not valid (expired or revoked): log in to the hub again")
        if not self.hub_auth.check_scopes(self.hub_auth.access_scopes, model):
            raise ApiError(403, f"{model['name']}'s token may not use the exchange (it needs the scope "
                                f"{' or '.join(sorted(self.hub_auth.access_scopes))})")
        if model.get("kind", "user") != "user":
            raise ApiError(403, "the exchange answers users, not services")
        self.caller = model["name"]
        self.is_instructor = self.instructors in model.get("groups", [])
        declared = self.request.headers.get("Content-Length", "0")
        if not self.takes_upload() and (not declared.isdigit() or int(declared) > NO_BODY):
            raise ApiError(413, "this request takes no upload")

    def takes_upload(self) -> bool:
        return False

    def course_store(self, course: str) -> Store:
        if course != self.store.course:
            raise ApiError(404, f"this exchange serves the course {self.store.course}, not {course}")
        return self.store

    def require_instructor(self, what: str) -> None:
        if not self.is_instructor:
            raise ApiError(403, f"only the course's instructors ({self.instructors}) may {what}; "
                                f"{self.caller} is not one")

    def require_self_or_instructor(self, student: str, what: str) -> None:
        if student != self.caller and not self.is_instructor:
            raise ApiError(403, f"{self.caller} may {what} only their own, not {student}'s")

    def write_json(self, value, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(value))

    def write_archive(self, data: bytes) -> None:
        self.set_header("Content-Type", "application/x-tar")
        self.finish(data)

    def write_error(self, status_code: int, **kwargs):
        error = kwargs.get("exc_info", (None, None))[1]
        message = error.message if isinstance(error, ApiError) else self._reason
        if isinstance(error, ApiError) and error.retry_after is not None:      # when a learner may submit again
            self.set_header("Retry-After", str(max(1, round(error.retry_after))))
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message}))

    def refused(self, error: Refused, status: int | None = None):
        log.warning("%s refused for %s: %s", self.request.path, getattr(self, "caller", "?"), error)
        raise ApiError(status or error.status, str(error), error.retry_after)


@web.stream_request_body
class UploadHandler(ExchangeHandler):
    """A handler whose PUT or POST body is an archive: written to a temporary file as it arrives, and refused as
    soon as it is larger than the course allows (a declared length at once, a streamed one when it passes)."""

    put_needs = "upload this"           # what a PUT does, said when a learner tries it (instructors only)

    def takes_upload(self) -> bool:
        return self.request.method in ("PUT", "POST")

    def cap(self) -> int:
        return self.store.limits.size_bytes * (10 if self.request.method == "PUT" else 1) + SLACK

    async def prepare(self):
        self.body_file = None
        await super().prepare()
        if self.request.method not in ("PUT", "POST"):
            return
        if self.request.method == "PUT":
            self.require_instructor(self.put_needs)            # before a byte of the body is kept
        declared = self.request.headers.get("Content-Length")
        limit = self.store.limits.size
        if declared is not None and int(declared) > self.cap():
            raise ApiError(413, f"not stored: the upload is {int(declared) / (1 << 20):.1f} MiB, more than the "
                                f"course's limit of {limit}")
        self.body_file = tempfile.TemporaryFile(dir=self.store.base / ".incoming")
        self.body_size = 0

    def data_received(self, chunk: bytes):
        if self.body_file is None:
            return super().data_received(chunk)
        if self._finished:
            return
        self.body_size += len(chunk)
        if self.body_size > self.cap():                     # answered now; tornado closes the connection after
            log.warning("%s refused for %s: an upload over %s", self.request.path, self.caller, self.store.limits.size)
            error = ApiError(413, f"not stored: the upload is more than the course's limit of {self.store.limits.size}")
            self.send_error(413, exc_info=(ApiError, error, None))
            return
        self.body_file.write(chunk)

    def body(self):
        self.body_file.seek(0)
        return self.body_file

    async def in_thread(self, work, *args):
        """Run a store's upload (parse, check, unpack) off the event loop: a slow archive delays no one else."""
        return await ioloop.IOLoop.current().run_in_executor(None, work, *args)

    def on_finish(self):
        if getattr(self, "body_file", None) is not None:
            self.body_file.close()


class AssignmentsHandler(ExchangeHandler):
    @unless_refused
    def get(self, course):
        store = self.course_store(course)
        limits = {"files": store.limits.files, "size": store.limits.size, "size_bytes": store.limits.size_bytes}
        self.write_json({"assignments": [{"assignment_id": a, "notebooks": nbs} for a, nbs in store.released().items()],
                         "limits": limits})


class AssignmentHandler(UploadHandler):
    put_needs = "release an assignment"

    @unless_refused
    def get(self, course, assignment):
        try:
            self.write_archive(self.course_store(course).released_files(assignment))
        except Refused as error:
            self.refused(error, 404)

    @unless_refused
    async def put(self, course, assignment):
        self.require_instructor("release an assignment")
        store = self.course_store(course)
        if assignment in store.released() and not self.get_argument("force", None):
            raise ApiError(409, f"{assignment} is released already; release it again with --force")
        try:
            files = await self.in_thread(store.release, assignment, self.body())
        except Refused as error:
            self.refused(error)
        log.info("%s released %s (%d files)", self.caller, assignment, len(files))
        self.write_json({"assignment_id": assignment, "files": files})

    @unless_refused
    def delete(self, course, assignment):
        self.require_instructor("take back a release")
        try:
            self.course_store(course).unrelease(assignment)
        except Refused as error:
            self.refused(error, 404)
        self.write_json({"assignment_id": assignment, "released": False})


class SubmitHandler(UploadHandler):
    @unless_refused
    async def post(self, course, assignment):
        received = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)   # the body is complete
        student = self.get_argument("student", self.caller)
        if student != self.caller:
            raise ApiError(403, f"{self.caller} may submit only as themselves, not as {student}: the exchange "
                                f"takes the submitting student from the hub's token")
        try:
            submission = await self.in_thread(self.course_store(course).submit, self.caller, assignment,
                                              self.body(), received)
        except Refused as error:
            self.refused(error)
        log.info("received %s", submission.folder_name)
        self.write_json({"student_id": submission.student, "assignment_id": assignment,
                         "timestamp": submission.timestamp}, status=201)


class SubmissionsHandler(ExchangeHandler):
    @unless_refused
    def get(self, course):
        store = self.course_store(course)
        student = self.get_argument("student", None)
        if student is None:                                          # everyone's: the instructors' list and collect
            self.require_instructor("list or collect the submissions of the class")
        else:
            self.require_self_or_instructor(student, "list submissions")
        listed = []
        for submission in store.submissions(student, self.get_argument("assignment", None)):
            feedback = store.feedback_files(submission)
            listed.append({"student_id": submission.student, "assignment_id": submission.assignment,
                           "timestamp": submission.timestamp, "notebooks": store.notebooks(submission),
                           "feedback": {nb: hashlib.md5(html).hexdigest() for nb, html in feedback.items()}})
        self.write_json({"submissions": listed})


class SubmissionHandler(ExchangeHandler):
    @unless_refused
    def get(self, course, assignment, student, timestamp):
        self.require_self_or_instructor(student, "download submissions")
        store = self.course_store(course)
        try:
            folder = store.submission_folder(Submission(student, assignment, timestamp))
        except Refused as error:
            self.refused(error, 404)
        self.write_archive(pack(folder))


class FeedbackHandler(UploadHandler):
    put_needs = "release feedback"

    def submission(self, assignment, student, timestamp) -> Submission:
        """The submission the address names; a name that is no id names none (404)."""
        try:
            return Submission(student, assignment, timestamp)
        except Refused as error:
            self.refused(error, 404)

    @unless_refused
    def get(self, course, assignment, student, timestamp):
        self.require_self_or_instructor(student, "fetch feedback")
        feedback = self.course_store(course).feedback_files(self.submission(assignment, student, timestamp))
        if not feedback:
            raise ApiError(404, f"no feedback has been released for {student}'s {assignment} of {timestamp}")
        self.write_archive(pack_files({f"{nb}.html": html for nb, html in feedback.items()}))

    @unless_refused
    async def put(self, course, assignment, student, timestamp):
        self.require_instructor("release feedback")
        try:
            files = await self.in_thread(self.course_store(course).release_feedback,
                                         self.submission(assignment, student, timestamp), self.body())
        except Refused as error:
            self.refused(error)
        self.write_json({"student_id": student, "assignment_id": assignment, "files": files})


def make_app(store: Store, instructors: str, prefix: str, hub_auth: HubAuth | None = None) -> web.Application:
    """The service's tornado application, its routes under `prefix` (the hub's /services/<name>/)."""
    if hub_auth is None:
        from jupyterhub.services.auth import HubAuth      # the hub's environment has it (the handlers need only this)
        hub_auth = HubAuth(cache_max_age=TOKEN_CACHE)
    settings = {"store": store, "hub_auth": hub_auth, "instructors": instructors}
    part = r"([^/]+)"
    api = prefix.rstrip("/") + "/api/" + part
    return web.Application([
        (api + r"/assignments", AssignmentsHandler, settings),
        (api + rf"/assignments/{part}", AssignmentHandler, settings),
        (api + r"/submissions", SubmissionsHandler, settings),
        (api + rf"/submissions/{part}", SubmitHandler, settings),
        (api + rf"/submissions/{part}/{part}/{part}", SubmissionHandler, settings),
        (api + rf"/feedback/{part}/{part}/{part}", FeedbackHandler, settings),
    ])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m addnorm_grading.http_exchange", description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="the service's folder (made 0700)")
    parser.add_argument("--course-file", type=Path, default=None, help="the course's course.toml")
    parser.add_argument("--url", default=os.environ.get("JUPYTERHUB_SERVICE_URL"),
                        help="where to listen (default: JUPYTERHUB_SERVICE_URL, set by the hub)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    course = read_course(args.course_file)
    store = Store(args.store, course.id, course.uploads, course.learner_limits)
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    if not args.url:
        parser.error("where to listen: --url http://127.0.0.1:10102, or JUPYTERHUB_SERVICE_URL from the hub")
    where = urlsplit(args.url)
    app = make_app(store, course.instructors_group, prefix)
    app.listen(where.port, address=where.hostname, max_body_size=course.uploads.size_bytes * 10 + SLACK)
    log.info("exchange for %s on %s:%d%s", course.id, where.hostname, where.port, prefix)
    loop = ioloop.IOLoop.current()
    for stop in (signal.SIGTERM, signal.SIGINT):          # the hub stops its services with SIGINT, then SIGTERM
        signal.signal(stop, lambda *_: loop.add_callback_from_signal(loop.stop))
    loop.start()
    log.info("exchange stopped")
