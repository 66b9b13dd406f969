"""Copying a submission out of the exchange (addnorm_grading.exchange.copy_submission), which the student may change
while it is copied: collect and the feedback service copy as the instructor, so a folder that was checked and
then swapped for a link to an instructor's folder must never be followed. Found by a learner who watched the
copy open their files (inotify) and swapped a folder for a link to the course's checks/ at that moment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from addnorm_grading.course import UploadLimits
from addnorm_grading.exchange import SubmissionTooLarge, copy_submission


def everything_in(folder: Path) -> dict[str, str]:
    """Every file under folder (relative path -> its text)."""
    return {str(path.relative_to(folder)): path.read_text() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def submission(tmp_path: Path) -> tuple[Path, Path]:
    """A student's submission (a notebook, a folder `data` with a file and a folder) and an instructor's folder
    with the same names in it."""
    source = tmp_path / "inbound" / "student1+01_residual+2026-12-07"
    (source / "data" / "checks").mkdir(parents=True)
    (source / "residual.ipynb").write_text("{}")
    (source / "data" / "notes.txt").write_text("mine")
    instructor = tmp_path / "instructor"
    (instructor / "checks").mkdir(parents=True)
    (instructor / "notes.txt").write_text("SECRET notes")
    (instructor / "checks" / "hidden.py").write_text("SECRET check")
    return source, instructor


def test_a_folder_swapped_for_a_link_while_it_is_copied_is_not_followed(submission, tmp_path, monkeypatch):
    """The worst moment: the folder has just been listed, and the student swaps it for a link before its files are
    read. The copy reads the folder it listed, not what the name points to now."""
    source, instructor = submission
    folder = source / "data"
    listed = os.stat(folder).st_ino
    swapped = []
    real_scandir = os.scandir

    def scandir_then_swap(path):
        entries = list(real_scandir(path))
        inode = os.fstat(path).st_ino if isinstance(path, int) else os.stat(path).st_ino
        if inode == listed and not swapped:
            folder.rename(source / ".data")
            folder.symlink_to(instructor)
            swapped.append(True)
        return iter(entries)

    monkeypatch.setattr(os, "scandir", scandir_then_swap)
    copy_submission(str(source), str(tmp_path / "copy"))
    monkeypatch.undo()
    assert swapped, "the copy never listed the folder"
    copied = everything_in(tmp_path / "copy")
    assert copied == {"data/notes.txt": "mine", "residual.ipynb": "{}"}, copied
    assert (tmp_path / "copy" / "data" / "checks").is_dir() and not list((tmp_path / "copy" / "data" / "checks").iterdir())


def test_links_pipes_and_ignored_names_are_left_out(submission, tmp_path):
    source, instructor = submission
    (source / "notes-link.txt").symlink_to(instructor / "notes.txt")
    (source / "checks-link").symlink_to(instructor / "checks")
    os.mkfifo(source / "a-pipe")                     # opened without O_NONBLOCK, the copy would wait for a writer
    (source / ".ipynb_checkpoints").mkdir()
    (source / ".ipynb_checkpoints" / "old.ipynb").write_text("{}")
    copy_submission(str(source), str(tmp_path / "copy"),
                    ignore=lambda folder, names: [name for name in names if name == ".ipynb_checkpoints"])
    assert everything_in(tmp_path / "copy") == {"data/notes.txt": "mine", "residual.ipynb": "{}"}
    assert sorted(os.listdir(tmp_path / "copy")) == ["data", "residual.ipynb"]


def test_a_submission_that_is_itself_a_link_is_not_copied(submission, tmp_path):
    source, instructor = submission
    link = source.parent / "student1+01_residual+2026-12-08"
    link.symlink_to(instructor)
    with pytest.raises(FileNotFoundError, match="symbolic link"):
        copy_submission(str(link), str(tmp_path / "copy"))
    assert not (tmp_path / "copy").exists()


def test_a_submission_past_its_limits_while_copied_is_refused_and_nothing_kept(submission, tmp_path):
    """Checked against course.toml's [uploads] before, it may grow before the copy reads it: counted as copied."""
    source, _ = submission
    (source / "big.bin").write_bytes(b"x" * 5000)
    with pytest.raises(SubmissionTooLarge, match="bytes"):
        copy_submission(str(source), str(tmp_path / "copy"), limits=UploadLimits(files=100, size="4K"))
    assert not (tmp_path / "copy").exists()
    with pytest.raises(SubmissionTooLarge, match="files"):
        copy_submission(str(source), str(tmp_path / "copy"), limits=UploadLimits(files=3, size="1M"))
    assert not (tmp_path / "copy").exists()
    copy_submission(str(source), str(tmp_path / "copy"), limits=UploadLimits(files=5, size="1M"))
    assert set(everything_in(tmp_path / "copy")) == {"big.bin", "data/notes.txt", "residual.ipynb"}
