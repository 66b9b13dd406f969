"""Build the website, executing every chapter once, warnings as errors (`make book` runs this).

    python tools/build_book.py [BOOK_FOLDER]      (default: this repository)

The English edition is built by jupyter-book into _build/html, executing the chapters into its cache. When the book
has translations (locales/), three Sphinx builds then read that cache and execute nothing: the gettext builder
extracts the source messages (and the build fails when one has no current translation), then the 简体 edition
(locales/zh_Hans) and the 繁體 edition (derived from it with OpenCC) are built side by side and copied into
_build/html/zh-hans and _build/html/zh-hant.

Jupyter Book's execution cache does not notice a change in an imported module: the Makefile's `book` target
drops the cache when a file under lib/ changes, and on CI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = "_build/editions"          # each edition's own Sphinx output, doctrees and executed-notebook folder


def build_command(root: Path) -> list[str]:
    """The jupyter-book command that builds the book in root: warnings are errors, every problem is reported."""
    return [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "-W", "-n", "--keep-going"]


def book_environment() -> dict[str, str]:
    return dict(os.environ, TQDM_DISABLE="1", ADDNORM_BOOK_BUILD="1")   # no progress bars; glued values in the text


def build(root: Path = ROOT) -> int:
    """Build the English edition, then the Chinese ones when root has translations; return the exit code."""
    code = subprocess.call(build_command(root), cwd=root, env=book_environment())
    if code or not (root / "locales").is_dir():
        return code
    return build_translations(root)


def sphinx_command(root: Path, edition: str) -> list[str]:
    """This script run again for one edition ("gettext", "zh_Hans" or "zh_Hant") in its own process."""
    return [sys.executable, str(Path(__file__).resolve()), str(root), "--edition", edition]


def build_translations(root: Path) -> int:
    import sphinx

    from addnorm_editions import LANGUAGES, TRANSLATED, catalogs, terms, traditional

    if code := subprocess.call(sphinx_command(root, "gettext"), cwd=root, env=book_environment()):
        return code
    stale = catalogs.stale_messages(root / EDITIONS / "gettext" / "pot", root / "locales" / TRANSLATED / "LC_MESSAGES")
    if stale:
        print("\n".join(stale) + f"\n{len(stale)} messages have no current translation: see the README,"
              " 'Updating a translation'", file=sys.stderr)
        return 1
    glossary = terms.read_terms(root / "glossary.md")
    shared = root / EDITIONS / "locales"
    traditional.derive(root / "locales" / TRANSLATED / "LC_MESSAGES", shared / "zh_Hant" / "LC_MESSAGES", glossary)
    for language, script in (("zh_Hans", "hans"), ("zh_Hant", "hant")):
        sphinx_messages = Path(sphinx.__file__).parent / "locale" / SPHINX_CATALOGS[language]
        (shared / language / "LC_MESSAGES").mkdir(parents=True, exist_ok=True)
        shutil.copy(sphinx_messages / "LC_MESSAGES" / "sphinx.mo", shared / language / "LC_MESSAGES" / "sphinx.mo")
        (root / EDITIONS / f"{language}.dict").write_text(terms.search_dictionary(glossary, script), encoding="utf-8")
    builds = [subprocess.Popen(sphinx_command(root, language), cwd=root, env=book_environment())
              for language in LANGUAGES]
    if code := max(process.wait() for process in builds):
        return code
    for language, folder in LANGUAGES.items():
        shutil.rmtree(root / "_build" / "html" / folder, ignore_errors=True)
        shutil.copytree(root / EDITIONS / language / "html", root / "_build" / "html" / folder)
    return 0


SPHINX_CATALOGS = {"zh_Hans": "zh_CN", "zh_Hant": "zh_TW"}   # Sphinx's own words ("Search", …) in each script


def build_edition(root: Path, edition: str) -> int:
    """One Sphinx build from the English build's execution cache: the gettext catalogs, or one Chinese edition."""
    from jupyter_book.sphinx import build_sphinx

    output = root / EDITIONS / edition
    overrides: dict = {"nb_execution_cache_path": str(root / "_build" / ".jupyter_cache"), "nitpicky": True,
                       "external_toc_path": (root / "_toc.yml").as_posix(), "latex_individualpages": False}
    if edition != "gettext":
        overrides |= {"language": edition, "locale_dirs": ["locales/", f"{EDITIONS}/locales/"],
                      "html_search_language": "zh", "html_search_options": {"dict": str(output.with_suffix(".dict"))}}
    result = build_sphinx(root, output / ("pot" if edition == "gettext" else "html"), noconfig=True,
                          path_config=str(root / "_config.yml"), confoverrides=overrides,
                          doctreedir=output / ".doctrees", builder="gettext" if edition == "gettext" else "html",
                          warningiserror=True, keep_going=True, quiet=True)
    return 1 if isinstance(result, Exception) else result


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if "--edition" in arguments:
        sys.exit(build_edition(Path(arguments[0]).resolve(), arguments[arguments.index("--edition") + 1]))
    sys.exit(build(Path(arguments[0]).resolve() if arguments else ROOT))
