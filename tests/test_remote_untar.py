"""A grading worker unpacks what the feedback service sends it (addnorm_grading.feedback_service.remote.untar):
the same rules with tarfile's "data" filter (Python 3.11.4 and later) and without it (Debian 12's 3.11.2, which
`make hub` builds its environment from, has no filters): files and folders come out as they went in; a link, an
absolute path or a `..` path is refused and writes nothing outside the folder."""

from __future__ import annotations

import io
import tarfile

import pytest

from addnorm_grading.feedback_service import remote


@pytest.fixture(params=["with the data filter", "without filters"])
def python(request, monkeypatch):
    if request.param == "without filters":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python has no extraction filters")
    return request.param


def archive(*members: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", size: int = 1) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, size if kind == tarfile.REGTYPE else 0
    return info


def test_files_and_folders_come_out_as_they_went_in(python, tmp_path):
    sent = tmp_path / "sent"
    (sent / "autograded" / "ada" / "01_residual").mkdir(parents=True)
    (sent / "autograded" / "ada" / "01_residual" / "residual.ipynb").write_text('{"cells": []}')
    (sent / "course.toml").write_text("[course]\n")
    remote.untar(remote.tar(sent), tmp_path / "got")
    assert (tmp_path / "got" / "autograded" / "ada" / "01_residual" / "residual.ipynb").read_text() == '{"cells": []}'
    assert (tmp_path / "got" / "course.toml").read_text() == "[course]\n"


@pytest.mark.parametrize("bad", [member("../outside"), member("/tmp/absolute-from-a-job"),
                                 member("notebook.ipynb", tarfile.SYMTYPE, "/etc/passwd"),
                                 member("hard.ipynb", tarfile.LNKTYPE, "../../outside")],
                         ids=["dot-dot", "absolute", "symbolic link", "hard link"])
def test_a_link_or_a_path_out_of_the_folder_is_refused(python, tmp_path, bad):
    folder = tmp_path / "job" / "got"
    with pytest.raises(ValueError, match="not unpacked"):
        remote.untar(archive(bad), folder)
    assert not (tmp_path / "job" / "outside").exists() and not (tmp_path / "outside").exists()
    assert not (folder / "notebook.ipynb").is_symlink()
