"""The HTTP exchange's store (addnorm_grading.http_exchange.store), without a hub: what it keeps and refuses."""

from __future__ import annotations

import datetime
import io
import tarfile

import pytest

from addnorm_grading.course import UploadLimits
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
