"""The course's secret: a random value made once per course folder and never committed; hidden inputs come from it.

The hidden checks draw their inputs from `SEED` (`torch.manual_seed(SEED + 3)`). `SEED` is not the secret: each
test of each submission gets its own, a keyed hash (HMAC-SHA256) of the secret, the test's name and the digest of
the notebook's code as graded (`submission_digest`), so no hidden input, and no number of a hidden test, reveals the
secret or another test's inputs; and what a submission learns of its hidden inputs (through a side channel, or by
the verdicts it got) is worth nothing to a changed one. The same notebook graded again gets the same inputs.

    make secret                                   # checks/secret for this repository's course (once)
    python -m addnorm_grading.secret [COURSE]     # the same for a course folder of your own
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sys
from pathlib import Path

from addnorm_grading.sandbox import staged_files

FILE = "secret"               # checks/secret: the secret as hex text, readable by its owner only
BYTES = 32                    # 256 random bits
MIN_BYTES = 16                # a secret of fewer than 128 bits is refused
COMMAND = "make secret"       # what the refusal tells the instructor to run (the Makefile calls main())
SEED_BITS = 62                # SEED + a small offset stays a valid torch seed


class SecretMissing(RuntimeError):
    """The course folder has no usable secret (the message names the command that makes one)."""


def make(checks: Path, replace: bool = False) -> Path:
    """Write a new random secret into `checks`/secret (unless one is there and `replace` is false); return its path."""
    path = Path(checks) / FILE
    if path.exists() and not replace:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(secrets.token_hex(BYTES) + "\n")
    path.chmod(0o600)
    return path


def read(checks: Path) -> bytes:
    """The secret of the course whose hidden checks are in `checks`; SecretMissing if there is none, or it is short."""
    path = Path(checks) / FILE
    how = (f"run `{COMMAND}` in the course's repository, or `python -m addnorm_grading.secret {path.parent.parent}` "
           "for a course folder of your own")
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise SecretMissing(f"the course has no secret for its hidden inputs ({path} is missing): {how}") from None
    except (OSError, UnicodeError) as error:
        raise SecretMissing(f"{path} cannot be read ({error}): {how}") from None
    try:
        value = bytes.fromhex(text)
    except ValueError:
        value = b""
    if len(value) < MIN_BYTES:
        raise SecretMissing(f"{path} must hold at least {MIN_BYTES * 2} hexadecimal digits ({MIN_BYTES * 8} random "
                            f"bits); it holds {len(text)} characters: {how}")
    return value


def seed_for(secret: bytes, assignment: str, grade_id: str, submission: str = "") -> int:
    """The `SEED` of one hidden test: HMAC-SHA256(secret, "assignment/grade_id/submission"), cut to SEED_BITS bits.
    `submission`: the `submission_digest` of the notebook graded ("" for a test outside one)."""
    message = f"{assignment}/{grade_id}" + (f"/{submission}" if submission else "")
    digest = hmac.new(secret, message.encode("utf-8"), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


def submission_digest(nb, folder: Path | None = None) -> str:
    """What identifies a submission for its hidden inputs: SHA-256 of its code cells as graded (after nbgrader has
    put the locked cells and tests back: what the learner wrote is what differs), and of every other file of its
    `folder` that its kernels get (`sandbox.staged_files`: a cell may run code from one), each part's length first."""
    digest = hashlib.sha256()

    def part(data: bytes) -> None:
        digest.update(len(data).to_bytes(8, "big") + data)

    for cell in nb.cells:
        if cell.cell_type == "code":
            part(cell.source.encode("utf-8"))
    for path in staged_files(folder) if folder else []:
        part(str(path.relative_to(folder)).encode("utf-8", "surrogateescape"))
        if path.is_symlink():                         # the link itself, never what it points to
            part(b"link:" + os.readlink(path).encode("utf-8", "surrogateescape"))
        elif path.is_file():                          # a regular file, read in pieces (it may be large)
            digest.update(path.stat().st_size.to_bytes(8, "big"))
            with path.open("rb") as file:
                for chunk in iter(lambda: file.read(1 << 20), b""):
                    digest.update(chunk)
        else:                                         # a FIFO or a device: never opened
            part(b"special")
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    """Make the secret of a course folder (default: the one here or above) if it has none; say where it is."""
    from addnorm_grading.coursework import CHECKS, course_root

    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print("usage: python -m addnorm_grading.secret [COURSE FOLDER]", file=sys.stderr)
        return 2
    course = Path(args[0]).resolve() if args else course_root()
    checks = course / CHECKS
    existed = (checks / FILE).exists()
    path = make(checks)
    read(checks)                               # an old, short or broken one is reported, not kept silently
    print(f"{path}: {'kept the secret already there' if existed else 'a new secret'} (never commit it; keep it "
          "beside the hidden checks, out of learners' reach)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
