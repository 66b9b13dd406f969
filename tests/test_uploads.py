"""What a submission may hold (addnorm_grading.uploads): each bad upload refused with its reason, before anything of
it is stored; the feedback service refuses it, tells its learner, and goes on with the others."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from addnorm_grading.course import UploadLimits, read_course
from addnorm_grading.uploads import archive_members, folder_problem, problem

ROOT = Path(__file__).resolve().parent.parent
LIMITS = read_course(ROOT / "course.toml").uploads
NOTEBOOK = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def submission(tmp_path: Path) -> Path:
    """A submission folder that keeps every rule: a notebook and nbgrader's two files."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "residual.ipynb").write_text(NOTEBOOK)
    (folder / "timestamp.txt").write_text("2026-12-05 10:00:00.000000 UTC")
    (folder / "submission_secret.txt").write_text("secret")
    return folder


def test_a_good_submission_keeps_every_rule(tmp_path):
    assert folder_problem(submission(tmp_path), LIMITS) is None


def test_the_course_limits_are_read_from_course_toml():
    assert LIMITS.files > 3 and LIMITS.size_bytes >= 1 << 20


@pytest.mark.parametrize("name", ["tab\there.ipynb", "line\nbreak.ipynb", "bell\x07.txt"])
def test_a_name_outside_printable_text_is_refused(tmp_path, name):
    folder = submission(tmp_path)
    (folder / name).write_text("x")
    assert "not printable text" in folder_problem(folder, LIMITS)


def test_ten_thousand_files_are_refused_without_listing_them_all(tmp_path):
    folder = submission(tmp_path)
    many = folder / "many"
    many.mkdir()
    for i in range(10_000):
        (many / f"{i}.txt").touch()
    assert folder_problem(folder, LIMITS) == f"it holds more than {LIMITS.files} files and folders (the course's limit)"


def test_a_one_gibibyte_file_is_refused_unread(tmp_path):
    folder = submission(tmp_path)
    with open(folder / "big.bin", "wb") as big:           # sparse: takes no disk, and is never read
        big.truncate(1 << 30)
    reason = folder_problem(folder, LIMITS)
    assert reason.startswith("its files add up to 1024.0 MiB, more than the course's limit of"), reason


def test_links_and_special_files_are_refused(tmp_path):
    folder = submission(tmp_path)
    (folder / "answers.ipynb").symlink_to("/etc/passwd")
    assert folder_problem(folder, LIMITS) == "answers.ipynb is a link: a submission holds regular files and folders only"
    (folder / "answers.ipynb").unlink()
    os.link(folder / "residual.ipynb", folder / "hard.ipynb")       # a hard link is refused too
    assert "is a link" in folder_problem(folder, LIMITS)
    (folder / "hard.ipynb").unlink()
    os.mkfifo(folder / "pipe")
    assert folder_problem(folder, LIMITS) == "pipe is not a regular file or folder"


@pytest.mark.parametrize("content, said", [(b"this is not json", "it is not JSON"), (b"\xff\xfe", "it is not JSON"),
                                           (b"[1, 2]", "not an object with cells"), (b"", "it is not JSON")])
def test_a_notebook_that_does_not_parse_is_refused(tmp_path, content, said):
    folder = submission(tmp_path)
    (folder / "residual.ipynb").write_bytes(content)
    reason = folder_problem(folder, LIMITS)
    assert reason.startswith("residual.ipynb is not a notebook") and said in reason, reason


def with_cell(**fields) -> bytes:
    """A notebook of one code cell with `fields` in place of the cell's own."""
    cell = {"cell_type": "code", "execution_count": None, "id": "a1", "metadata": {}, "outputs": [], "source": "1"}
    return json.dumps({"cells": [{**cell, **fields}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


@pytest.mark.parametrize("content, said", [
    (with_cell(source=["x = 1\n", 7]), "at cells/0/source"),                         # the attacking helper's
    (with_cell(outputs={"not": "a list"}), "at cells/0/outputs, {'not': 'a list'} is not of type 'array'"),
    (with_cell(metadata={"nbgrader": "x"}), "cell 1's nbgrader metadata is a str, not an object of settings"),
    (with_cell(metadata={"nbgrader": ["grade"]}), "cell 1's nbgrader metadata is a list"),
    (b'{"cells": 3, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "its cells are not a list of cells"),
])
def test_a_notebook_whose_fields_have_the_wrong_types_is_refused_with_where(tmp_path, content, said):
    folder = submission(tmp_path)
    (folder / "residual.ipynb").write_bytes(content)
    reason = folder_problem(folder, LIMITS)
    assert reason is not None and reason.startswith("residual.ipynb is not a notebook") and said in reason, reason


def test_a_notebook_the_judge_repairs_is_not_refused(tmp_path):
    """Missing and repeated cell ids, a cell of the learner's own: the judge repairs or keeps them (structure.py)."""
    folder = submission(tmp_path)
    released = json.loads((ROOT / "exercises" / "01_residual" / "residual.ipynb").read_text())
    released["cells"][1]["id"] = released["cells"][0]["id"]
    del released["cells"][2]["id"]
    released["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["my notes"]})
    (folder / "residual.ipynb").write_text(json.dumps(released))
    assert folder_problem(folder, LIMITS) is None


def archive(*members: tuple[tarfile.TarInfo, bytes]) -> tarfile.TarFile:
    """An uploaded tar archive holding `members` (each a header and its bytes), opened for reading."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for info, content in members:
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    data.seek(0)
    return tarfile.open(fileobj=data)


def member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


@pytest.mark.parametrize("name, said", [("../outside.ipynb", "leads out of the submission (..)"),
                                        ("sub/../../x.ipynb", "leads out of the submission (..)"),
                                        ("/etc/cron.d/job", "is absolute"),
                                        ("a\tb.ipynb", "not printable text")])
def test_an_archive_with_a_path_outside_is_refused(name, said):
    tar = archive((member("residual.ipynb"), NOTEBOOK.encode()), (member(name), b"{}"))
    assert said in problem(archive_members(tar), LIMITS, lambda path: tar.extractfile(path).read())


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_an_archive_with_a_link_is_refused(kind):
    tar = archive((member("residual.ipynb"), NOTEBOOK.encode()), (member("grades.db", kind, "/etc/passwd"), b""))
    assert problem(archive_members(tar), LIMITS, lambda path: b"") == (
        "grades.db is a link: a submission holds regular files and folders only")


def test_an_archive_is_judged_by_the_same_rules_as_a_folder():
    tar = archive((member("residual.ipynb"), b"not json"))
    reason = problem(archive_members(tar), LIMITS, lambda path: tar.extractfile(path).read())
    assert reason.startswith("residual.ipynb is not a notebook: it is not JSON")
    small = UploadLimits(files=1, size="1K")
    tar = archive((member("residual.ipynb"), NOTEBOOK.encode()), (member("data.bin"), b"x" * 2048))
    assert problem(archive_members(tar), small, lambda path: b"").startswith("it holds more than 1 files")
    assert problem(archive_members(tar), UploadLimits(files=5, size="1K"), lambda path: b"").startswith(
        "its files add up to")
