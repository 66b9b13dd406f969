"""The HTTP exchange's store (addnorm_grading.http_exchange.store), without a hub: what it keeps and refuses."""

from __future__ import annotations

import datetime
import re
import io
import tarfile

import pytest

from addnorm_grading.course import LearnerLimits, UploadLimits
from addnorm_grading.http_exchange.store import Refused, Store, Submission, pack_files

LIMITS = UploadLimits(files=10, size="1M")
NOTEBOOK = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
NOON = datetime.datetime(2026, 12, 6, 12, 0, 0)


@pytest.fixture
def store(tmp_path):
    made = Store(tmp_path / "exchange", "addnorm", LIMITS)
    made.release("01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK})))
    return made


def test_a_submission_is_kept_at_its_receipt_time_whatever_it_says(store):
    claimed = pack_files({"residual.ipynb": NOTEBOOK, "timestamp.txt": b"2000-01-01 00:00:00.000000 UTC"})
    submission = store.submit("alice", "01_residual", io.BytesIO(claimed), NOON)
    assert submission == Submission("alice", "01_residual", "2026-12-06 12:00:00.000000 UTC")
    folder = store.submission_folder(submission)
    assert (folder / "timestamp.txt").read_text() == "2026-12-06 12:00:00.000000 UTC"
    assert store.notebooks(submission) == ["residual"]


def test_two_submissions_in_the_same_microsecond_are_both_kept_in_order(store):
    first = store.submit("alice", "01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK})), NOON)
    second = store.submit("alice", "01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK})), NOON)
    assert first.timestamp < second.timestamp
    assert store.submissions("alice") == [first, second]
    assert store.submissions("bob") == []


def test_nothing_is_submitted_to_an_assignment_that_is_not_released(store):
    with pytest.raises(Refused, match="02_layer_norm is not released in addnorm"):
        store.submit("alice", "02_layer_norm", io.BytesIO(pack_files({"a.ipynb": NOTEBOOK})), NOON)


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "..", "a+b", "x" * 101, "tab\there"])
def test_ids_are_single_safe_path_components(store, name):
    with pytest.raises(Refused, match="is not a valid id"):
        store.submit(name, "01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK})), NOON)


def test_a_broken_upload_leaves_nothing_behind(store):
    with pytest.raises(Refused, match="not JSON"):
        store.submit("alice", "01_residual", io.BytesIO(pack_files({"residual.ipynb": b"no json"})), NOON)
    with pytest.raises(Refused, match="not a tar archive"):
        store.submit("alice", "01_residual", io.BytesIO(b"\0" * 10), NOON)
    assert store.submissions() == []
    assert list((store.base / ".incoming").iterdir()) == []


def test_feedback_belongs_to_one_submission_and_replaces_its_earlier_feedback(store):
    submission = store.submit("alice", "01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK})), NOON)
    store.release_feedback(submission, io.BytesIO(pack_files({"residual.html": b"<p>1 of 8</p>"})))
    store.release_feedback(submission, io.BytesIO(pack_files({"residual.html": b"<p>6 of 8</p>"})))
    assert store.feedback_files(submission) == {"residual": b"<p>6 of 8</p>"}
    with pytest.raises(Refused, match="HTML files"):
        store.release_feedback(submission, io.BytesIO(pack_files({"notes.txt": b"x"})))
    with pytest.raises(Refused, match="there is no submission"):
        store.release_feedback(Submission("bob", "01_residual", submission.timestamp),
                               io.BytesIO(pack_files({"residual.html": b"x"})))


def test_a_release_again_replaces_the_files_and_can_be_taken_back(store):
    store.release("01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK, "data.txt": b"1"})))
    assert store.released() == {"01_residual": ["residual"]}
    archive = tarfile.open(fileobj=io.BytesIO(store.released_files("01_residual")))
    assert sorted(archive.getnames()) == ["data.txt", "residual.ipynb"]
    store.unrelease("01_residual")
    assert store.released() == {}
    with pytest.raises(Refused, match="is not released"):
        store.unrelease("01_residual")


def test_a_learner_submits_at_most_once_every_interval_whatever_the_assignment(tmp_path):
    store = Store(tmp_path / "exchange", "addnorm", LIMITS, LearnerLimits(kept="1M", interval=10))
    for assignment in ("01_residual", "02_layer_norm"):
        store.release(assignment, io.BytesIO(pack_files({"a.ipynb": NOTEBOOK})))
    upload = lambda: io.BytesIO(pack_files({"a.ipynb": NOTEBOOK}))                      # noqa: E731
    store.submit("alice", "01_residual", upload(), NOON)
    with pytest.raises(Refused, match="received 4 s ago; submit again in 6 s") as refused:
        store.submit("alice", "02_layer_norm", upload(), NOON + datetime.timedelta(seconds=4))
    assert (refused.value.status, round(refused.value.retry_after)) == (429, 6)
    store.submit("bob", "01_residual", upload(), NOON + datetime.timedelta(seconds=4))       # others are not held up
    store.submit("alice", "02_layer_norm", upload(), NOON + datetime.timedelta(seconds=10))
    assert [s.student for s in store.submissions()] == ["alice", "alice", "bob"]
    assert list((store.base / ".incoming").iterdir()) == []


def test_what_one_learner_keeps_is_capped_and_the_refusal_says_how_much(tmp_path):
    store = Store(tmp_path / "exchange", "addnorm", LIMITS, LearnerLimits(kept="100K", interval=0))
    store.release("01_residual", io.BytesIO(pack_files({"a.ipynb": NOTEBOOK})))
    big = b'{"cells": [], "metadata": {"pad": "' + b"x" * 40_000 + b'"}, "nbformat": 4, "nbformat_minor": 5}'
    for second in (0, 1):
        store.submit("alice", "01_residual", io.BytesIO(pack_files({"a.ipynb": big})), NOON + datetime.timedelta(seconds=second))
    with pytest.raises(Refused, match=r"your 2 submissions kept here hold 0\.1 MiB.*past the 100K each learner may keep") as refused:
        store.submit("alice", "01_residual", io.BytesIO(pack_files({"a.ipynb": big})), NOON + datetime.timedelta(seconds=2))
    assert refused.value.status == 413
    store.submit("bob", "01_residual", io.BytesIO(pack_files({"a.ipynb": big})), NOON + datetime.timedelta(seconds=2))
    assert len(store.submissions("alice")) == 2 and list((store.base / ".incoming").iterdir()) == []


class OneLearnersHub:
    """What JupyterHub's HubAuth answers the exchange service for alice's token (and for no other token)."""

    access_scopes = {"access:services!service=exchange"}

    def get_token(self, handler, in_cookie=False):
        return handler.request.headers.get("Authorization", "").removeprefix("token ")

    async def user_for_token(self, token, sync=False):
        return {"name": "alice", "kind": "user", "groups": []} if token == "alices-token" else None

    def check_scopes(self, scopes, model):
        return scopes == self.access_scopes


def test_the_service_answers_a_submission_that_comes_too_soon_429_with_when_to_try_again(tmp_path):
    """Through the service's own handlers (make_app; the hub's answer for a token stubbed): the second of two
    submissions in a row is refused 429, with a Retry-After header and a message that says how long to wait."""
    import asyncio
    import json

    from tornado.httpclient import AsyncHTTPClient
    from tornado.httpserver import HTTPServer
    from tornado.netutil import bind_sockets

    from addnorm_grading.http_exchange.service import make_app

    store = Store(tmp_path / "exchange", "addnorm", LIMITS, LearnerLimits(kept="1M", interval=30))
    store.release("01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK})))

    async def submit_twice():
        sockets = bind_sockets(0, "127.0.0.1")
        server = HTTPServer(make_app(store, "instructors", "/", OneLearnersHub()))
        server.add_sockets(sockets)
        url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}/api/addnorm/submissions/01_residual"
        client, answers = AsyncHTTPClient(), []
        for _ in range(2):
            answers.append(await client.fetch(url, method="POST", body=pack_files({"residual.ipynb": NOTEBOOK}),
                                              headers={"Authorization": "token alices-token"}, raise_error=False))
        server.stop()
        return answers

    first, second = asyncio.run(submit_twice())
    assert first.code == 201, first.body
    assert second.code == 429 and 29 <= int(second.headers["Retry-After"]) <= 30, (second.code, second.headers)
    assert re.search(r"submit again in (29|30) s \(at most one every 30 s\)", json.loads(second.body)["message"])
    assert len(store.submissions("alice")) == 1


def test_an_assignment_in_the_address_cannot_step_into_another_learners_submission(tmp_path):
    """Found by an attack on `make hub PODS=1`: alice named her own submission's folder, then `/../` and bob's, as the
    assignment of the address (`%2F` is decoded after the route matched): she got bob's notebook and feedback. Both
    are refused now, as no submission (404), and bob's own requests still work."""
    import asyncio
    from urllib.parse import quote

    BOBS = b'{"cells": [], "metadata": {"bob": "his work"}, "nbformat": 4, "nbformat_minor": 5}'

    from tornado.httpclient import AsyncHTTPClient
    from tornado.httpserver import HTTPServer
    from tornado.netutil import bind_sockets

    from addnorm_grading.http_exchange.service import make_app

    store = Store(tmp_path / "exchange", "addnorm", LIMITS)
    store.release("01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK})))
    hers = store.submit("alice", "01_residual", io.BytesIO(pack_files({"residual.ipynb": NOTEBOOK})), NOON)
    his = store.submit("bob", "01_residual", io.BytesIO(pack_files({"residual.ipynb": BOBS})),
                       NOON + datetime.timedelta(seconds=1))
    store.release_feedback(his, io.BytesIO(pack_files({"residual.html": b"bob's feedback"})))
    store.release_feedback(hers, io.BytesIO(pack_files({"residual.html": b"alice's feedback"})))   # her folder exists
    stepping = quote(f"{hers.assignment}+{hers.timestamp}/../bob+01_residual", safe="")

    async def ask(paths):
        sockets = bind_sockets(0, "127.0.0.1")
        server = HTTPServer(make_app(store, "instructors", "/", OneLearnersHub()))
        server.add_sockets(sockets)
        base = f"http://127.0.0.1:{sockets[0].getsockname()[1]}/api/addnorm/"
        client = AsyncHTTPClient()
        answers = [await client.fetch(base + path, headers={"Authorization": "token alices-token"},
                                      raise_error=False) for path in paths]
        server.stop()
        return answers

    timestamp = quote(his.timestamp, safe="")
    theirs = asyncio.run(ask([f"submissions/{stepping}/alice/{timestamp}", f"feedback/{stepping}/alice/{timestamp}"]))
    assert [answer.code for answer in theirs] == [404, 404], [(a.code, a.body) for a in theirs]
    assert all(BOBS not in answer.body and b"bob's feedback" not in answer.body for answer in theirs)
    own = asyncio.run(ask([f"submissions/01_residual/alice/{quote(hers.timestamp, safe='')}"]))
    assert own[0].code == 200                                  # her own submission, named plainly, still comes back
