"""Regenerate exercises/ (the learner versions) from solutions/ (the instructor versions) with nbgrader.

`make exercises` runs this. It runs `nbgrader generate_assignment` for every assignment in a temporary course
directory — so no gradebook.db is left in the repository — and copies what nbgrader releases (the notebooks, and
any other file in solutions/<id>/) into exercises/<id>/, replacing what was there. Commit the result.

    .venv/bin/python tools/generate_exercises.py           # rewrite exercises/
    .venv/bin/python tools/generate_exercises.py --check   # exit 1 if exercises/ is out of date
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grading import EXERCISES, assignments, make_course  # noqa: E402


def differences(released: Path, committed: Path) -> list[str]:
    """Files that differ between two release trees (relative paths), both ways."""
    found = []
    for base, other in ((released, committed), (committed, released)):
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            rel = path.relative_to(base)
            twin = other / rel
            if not twin.exists():
                found.append(f"{rel} ({'missing from exercises/' if base == released else 'not generated'})")
            elif base == released and not filecmp.cmp(path, twin, shallow=False):
                found.append(f"{rel} (differs)")
    return found


def main(argv: list[str] | None = None) -> int:
    """Generate every assignment; copy into exercises/ (or compare with --check). Return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with exercises/ instead of writing it")
    args = parser.parse_args(argv)
    ids = sorted({a for a, _ in assignments()})
    with tempfile.TemporaryDirectory(prefix="addnorm-generate-") as tmp:
        course = make_course(Path(tmp) / "course")
        stale = []
        for assignment in ids:
            released, target = course / "exercises" / assignment, EXERCISES / assignment
            if args.check:
                stale += [f"{assignment}/{d}" for d in differences(released, target)]
                continue
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(released, target)
            for path in sorted(target.rglob("*")):
                if path.is_file():
                    path.chmod(0o644)
                    print(f"wrote {path.relative_to(EXERCISES.parent)}")
    extra = sorted(p.name for p in EXERCISES.iterdir() if p.is_dir() and p.name not in ids) if EXERCISES.exists() else []
    if extra:
        print("note: exercises/ has folders with no instructor version in solutions/:", ", ".join(extra))
    if stale:
        print("exercises/ is out of date (run `make exercises`):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
