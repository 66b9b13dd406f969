"""What a submission may hold: checked before any of it is stored or graded, refused with what and why.

A submission is a list of members (a path inside it, what kind of thing it is, its size), read from a submission
folder in nbgrader's exchange (`folder_members`) or from an uploaded archive before it is unpacked
(`archive_members`): the same rules hold for both ways in. `problem(members, limits, read)` is the first rule a
submission breaks, as a sentence for the learner, or None:

- at most `[uploads] files` files and folders, and `[uploads] size` bytes in all (course.toml): the sizes are the
  members' own (a folder's lstat, an archive's header), so nothing is read to find out;
- regular files and folders only: no symbolic or hard link, no device, pipe or socket;
- paths that stay inside: relative, without `..`, in printable text (no tab, line break or other control character:
  such a name could end a line of a log or the ledger, or hide a second name in a listing);
- every notebook (`.ipynb`) parses as a JSON object, of the types nbformat's schema gives each field (a source of
  text, a list of outputs, a kernel's name as text, …), each cell's nbgrader metadata, where there is one, an
  object. The judge repairs a notebook whose structure is broken (cells moved, copied, ids missing or repeated,
  flags changed) and says so; a notebook whose fields have the wrong types it cannot read: nbgrader stopped on
  such notebooks with nothing in its log but "see the above traceback", and scored them zero.
"""

from __future__ import annotations

import json
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

from addnorm_grading.course import UploadLimits

FILE, FOLDER, LINK, OTHER = "file", "folder", "link", "other"


@dataclass(frozen=True)
class Member:
    """One thing in a submission: its path inside it (as given), its kind, its size in bytes."""

    path: str
    kind: str
    size: int


def kind_of(mode: int) -> str:
    """A member's kind from an lstat mode."""
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISDIR(mode):
        return FOLDER
    return LINK if stat.S_ISLNK(mode) else OTHER


def folder_members(folder: Path, limits: UploadLimits) -> list[Member]:
    """The members of a submission folder (links not followed). It stops listing one past the file limit: a
    submission of millions of files is refused without all of them being listed."""
    members = []
    for directory, folders, files in os.walk(folder):       # os.walk does not descend into linked folders
        for name in sorted(folders + files):
            path = os.path.join(directory, name)
            info = os.lstat(path)
            kind = LINK if kind_of(info.st_mode) == FILE and info.st_nlink > 1 else kind_of(info.st_mode)
            members.append(Member(os.path.relpath(path, folder), kind, info.st_size if kind == FILE else 0))
            if len(members) > limits.files:
                return members
    return members


def archive_members(archive: tarfile.TarFile) -> list[Member]:
    """The members of an uploaded tar archive, from its headers (nothing unpacked)."""
    members = []
    for info in archive.getmembers():
        kind = FILE if info.isreg() else FOLDER if info.isdir() else LINK if info.issym() or info.islnk() else OTHER
        members.append(Member(info.name, kind, info.size if kind == FILE else 0))
    return members


def path_problem(path: str) -> str | None:
    """Why a member's path is not allowed (None: it is)."""
    if not path.isprintable():
        return f"the name {path!r} holds a character that is not printable text (a tab, a line break or another)"
    if path.startswith("/") or PurePosixPath(path).is_absolute():
        return f"the path {path} is absolute: a submission holds only paths inside it"
    if ".." in PurePosixPath(path).parts:
        return f"the path {path} leads out of the submission (..)"
    if not path or path == "." or PurePosixPath(path).as_posix() != path:
        return f"the path {path!r} is not written plainly (a trailing '/', a '.' or an empty part)"
    return None


def notebook_problem(name: str, text: bytes) -> str | None:
    """Why a notebook file does not parse (None: it does)."""
    try:
        content = json.loads(text)
    except (UnicodeDecodeError, ValueError) as error:
        return f"{name} is not a notebook: it is not JSON ({error})"
    except RecursionError:
        return f"{name} is not a notebook: its JSON is nested too deeply to read"
    if not isinstance(content, dict):
        return f"{name} is not a notebook: it is JSON, but not an object with cells"
    return schema_problem(name, content)


def schema_problem(name: str, content: dict) -> str | None:
    """Where a parsed notebook breaks nbformat's schema, or has nbgrader metadata that is not an object (None: it
    does neither)."""
    import nbformat
    from nbformat.validator import ValidationError

    cells = content.get("cells")
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        return f"{name} is not a notebook nbformat reads: its cells are not a list of cells"
    try:
        nbformat.validate(content)
    except ValidationError as error:
        where = "/".join(map(str, getattr(error, "absolute_path", []))) or "its top level"
        said = str(error).splitlines()[0]
        return f"{name} is not a notebook nbformat reads: at {where}, {said[:200]}"
    except (RecursionError, KeyError, TypeError, ValueError) as error:       # a dict nbformat cannot walk
        return f"{name} is not a notebook nbformat reads ({type(error).__name__})"
    for number, cell in enumerate(cells, 1):
        settings = cell.get("metadata", {}).get("nbgrader")
        if settings is not None and not isinstance(settings, dict):
            return (f"{name} is not a notebook nbgrader reads: cell {number}'s nbgrader metadata is a "
                    f"{type(settings).__name__}, not an object of settings")
    return None


def problem(members: list[Member], limits: UploadLimits, read: Callable[[str], bytes]) -> str | None:
    """The first rule the submission breaks, said for its learner (None: it keeps them all). `read(path)` gives a
    member's bytes; it is called for notebooks only, once the sizes are known to be within the limits."""
    if len(members) > limits.files:
        return f"it holds more than {limits.files} files and folders (the course's limit)"
    for member in members:
        reason = path_problem(member.path)
        if reason:
            return reason
        if member.kind == LINK:
            return f"{member.path} is a link: a submission holds regular files and folders only"
        if member.kind == OTHER:
            return f"{member.path} is not a regular file or folder"
    paths = [member.path for member in members]
    if len(set(paths)) != len(paths):
        twice = sorted({path for path in paths if paths.count(path) > 1})[0]
        return f"the name {twice} is given twice"
    files = {member.path for member in members if member.kind == FILE}
    for member in members:
        parent = str(PurePosixPath(member.path).parent)
        if parent in files:
            return f"{parent} is a file, and {member.path} would be inside it"
    total = sum(member.size for member in members)
    if total > limits.size_bytes:
        return f"its files add up to {total / (1 << 20):.1f} MiB, more than the course's limit of {limits.size}"
    for member in members:
        if member.kind == FILE and member.path.endswith(".ipynb"):
            reason = notebook_problem(member.path, read(member.path))
            if reason:
                return reason
    return None


def folder_problem(folder: Path, limits: UploadLimits) -> str | None:
    """The first rule a submission folder breaks (None: none)."""
    return problem(folder_members(folder, limits), limits, lambda path: (folder / path).read_bytes())
