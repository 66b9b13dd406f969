"""The course's constants, read from `course.toml` (the one place they are written).

    course = read_course()                       # the course.toml at or above the working directory
    course.id, course.exchange, course.sandbox.memory, course.students

The sandbox limits can be overridden for one run by the environment variables named in course.toml
(`ADDNORM_SANDBOX_MEMORY=8G nbgrader autograde …`); `read_course` applies them.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path

FILE_NAME = "course.toml"
OVERRIDES = {"memory": "ADDNORM_SANDBOX_MEMORY", "processes": "ADDNORM_SANDBOX_PROCESSES",
             "scratch": "ADDNORM_SANDBOX_SCRATCH", "threads": "ADDNORM_SANDBOX_THREADS",
             "file_size": "ADDNORM_SANDBOX_FILE_SIZE"}


class CourseFileError(SystemExit):
    """course.toml is missing or incomplete. A SystemExit, so that nbgrader stops with this message: traitlets logs
    and skips a configuration file that raises an ordinary exception, and nbgrader would then grade with its own
    defaults, outside the sandbox."""


@dataclass(frozen=True)
class SandboxLimits:
    """What one sandboxed grading kernel may use, and the user it runs as when the grader is root."""

    user: str
    memory: str          # e.g. "4G": address space of each kernel process
    processes: int       # processes and threads in one sandbox
    scratch: str         # size of each of the two RAM disks
    threads: int         # torch (OpenMP) threads
    file_size: str       # the largest file the kernel may write


@dataclass(frozen=True)
class UploadLimits:
    """What one submission may hold (addnorm_grading.uploads)."""

    files: int           # files and folders
    size: str            # e.g. "32M": all its files together

    @property
    def size_bytes(self) -> int:
        return size_in_bytes(self.size)


@dataclass(frozen=True)
class LearnerLimits:
    """What one learner may keep in the HTTP exchange, all their submissions together, and how often they may add
    one (course.toml's [exchange]): a full disk or a flood of uploads is not one learner's to cause."""

    kept: str            # e.g. "512M": all of one learner's stored submissions together
    interval: float      # seconds from one of a learner's submissions to their next

    @property
    def kept_bytes(self) -> int:
        return size_in_bytes(self.kept)


def size_in_bytes(size: str) -> int:
    """'256M' -> 268435456 (suffixes K, M, G; none: bytes)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(size[:-1]) * units[size[-1].upper()] if size[-1].upper() in units else int(size)


@dataclass(frozen=True)
class Course:
    """The course: its id, nbgrader's exchange folder, the sandbox and upload limits, the class hub's users, the
    JupyterHub group of its instructors and what a learner may keep (the HTTP exchange), its folder."""

    id: str
    exchange: Path
    sandbox: SandboxLimits
    uploads: UploadLimits
    instructor: str
    students: tuple[str, ...]
    instructors_group: str
    learner_limits: LearnerLimits
    root: Path           # the folder course.toml is in: the course folder

    @property
    def hub_users(self) -> tuple[str, ...]:
        """The instructor, then the students."""
        return (self.instructor, *self.students)


def find_course_file(start: Path | None = None) -> Path:
    """The course.toml in `start` (default: the working directory) or the nearest folder above it."""
    start = (start or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / FILE_NAME).is_file():
            return folder / FILE_NAME
    raise CourseFileError(f"no {FILE_NAME} in {start} or any folder above it: run this in a course folder "
                            f"(one with nbgrader_config.py, {FILE_NAME} and solutions/)")


def with_environment(limits: SandboxLimits, environ: dict[str, str] | None = None) -> SandboxLimits:
    """`limits` with every ADDNORM_SANDBOX_* variable that is set taking the place of its value."""
    environ = os.environ if environ is None else environ
    changes = {}
    for name, variable in OVERRIDES.items():
        if environ.get(variable):
            value, whole_number = environ[variable], isinstance(getattr(limits, name), int)
            if whole_number and not value.isdigit():
                raise CourseFileError(f"{variable} must be a whole number, got {value!r}")
            changes[name] = int(value) if whole_number else value
    return replace(limits, **changes)


def read_course(path: Path | str | None = None) -> Course:
    """The course described by `path` (a course.toml; default: the one found from the working directory)."""
    path = Path(path) if path is not None else find_course_file()
    try:
        with open(path, "rb") as file:
            data = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CourseFileError(f"cannot read the course's constants from {path}: {error} (a course folder holds "
                              f"{FILE_NAME} beside nbgrader_config.py and solutions/)") from None
    try:
        course, sandbox, uploads, hub = data["course"], data["sandbox"], data["uploads"], data["hub"]
        exchange = data["exchange"]
        learners = LearnerLimits(kept=exchange["kept"], interval=float(exchange["interval"]))
        limits = SandboxLimits(**{f.name: sandbox[f.name] for f in fields(SandboxLimits)})
        return Course(id=course["id"], exchange=Path(course["exchange"]), sandbox=with_environment(limits),
                      uploads=UploadLimits(**{f.name: uploads[f.name] for f in fields(UploadLimits)}),
                      instructor=hub["instructor"], students=tuple(hub["students"]),
                      instructors_group=exchange["instructors"], learner_limits=learners, root=path.resolve().parent)
    except KeyError as missing:
        raise CourseFileError(f"{path} has no {missing}: it needs [course] id and exchange, [sandbox] "
                         f"{', '.join(f.name for f in fields(SandboxLimits))}, [uploads] files and size, [hub] "
                         f"instructor and students, and [exchange] instructors, kept and interval"
                         ) from None
