"""Keep the 简体 translation (locales/zh_Hans) in step with the English pages.

    python tools/translations.py update     after editing a page and `make book`: extract the messages again and
                                            merge them into the catalogs (`make translations` runs this)
    python tools/translations.py check [PO ...]
                                            list what the catalogs still owe: untranslated or fuzzy messages, and
                                            translations that lose markup or a glossary term's Chinese name

`update` reads the English build's execution cache (it executes nothing); a changed message comes back fuzzy,
with the old translation kept as a starting point: edit it, remove the `#, fuzzy` line, and run `check`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sphinx_intl import basic

from addnorm_editions import TRANSLATED, catalogs, terms

ROOT = Path(__file__).resolve().parent.parent
POT = ROOT / "_build" / "editions" / "gettext" / "pot"
PO = ROOT / "locales" / TRANSLATED / "LC_MESSAGES"


def update() -> int:
    build = [sys.executable, str(ROOT / "tools" / "build_book.py"), str(ROOT), "--edition", "gettext"]
    if code := subprocess.call(build, cwd=ROOT):
        return code
    basic.update(str(ROOT / "locales"), str(POT), (TRANSLATED,), line_width=120, ignore_obsolete=True)
    return check([])


def check(paths: list[str]) -> int:
    glossary = terms.read_terms(ROOT / "glossary.md")
    problems = catalogs.stale_messages(POT, PO) if not paths and POT.is_dir() else []
    for po in [Path(path) for path in paths] or sorted(PO.rglob("*.po")):
        problems += catalogs.translation_problems(po, glossary)
        if paths:
            for message in catalogs.read_catalog(po):
                if message.id and (not message.string or message.fuzzy):
                    state = "fuzzy" if message.string else "untranslated"
                    problems.append(f"{po}: {state}: {catalogs.short(message.id)}")
    done = "every message has a current translation that keeps its markup and terms"
    print("\n".join(problems) if problems else done)
    return 1 if problems else 0


if __name__ == "__main__":
    command, *rest = sys.argv[1:] or ["check"]
    if command not in ("update", "check"):
        sys.exit(f"expected 'update' or 'check [PO ...]', got {command!r}")
    sys.exit(update() if command == "update" else check(rest))
