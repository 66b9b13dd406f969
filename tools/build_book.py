"""Build the website, executing every chapter once, warnings as errors (`make book` runs this).

    python tools/build_book.py [BOOK_FOLDER]      (default: this repository)

The chapters are executed first, two at a time on two cores, into Jupyter Book's execution cache; the English
edition is then built by jupyter-book into _build/html from that cache. When the book
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

import yaml

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = "_build/editions"          # each edition's own Sphinx output, doctrees and executed-notebook folder


def build_command(root: Path) -> list[str]:
    """The jupyter-book command that builds the book in root: warnings are errors, every problem is reported."""
    return [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "-W", "-n", "--keep-going"]


def book_environment() -> dict[str, str]:
    return dict(os.environ, TQDM_DISABLE="1", ADDNORM_BOOK_BUILD="1")   # no progress bars; glued values in the text


def build(root: Path = ROOT) -> int:
    """Build the English edition, then the Chinese ones when root has translations; return the exit code."""
    subprocess.call([sys.executable, str(Path(__file__).resolve()), str(root), "--execute"], cwd=root,
                    env=book_environment())
    code = subprocess.call(build_command(root), cwd=root, env=book_environment())
    if code or not (root / "locales").is_dir():
        return code
    return build_translations(root)


def notebook_pages(root: Path) -> list[Path]:
    """The pages of the table of contents that are notebooks (MyST Markdown with a kernel)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    entries = [toc["root"]] + [chapter["file"] for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}])
                               for chapter in part["chapters"]]
    pages = [root / f"{entry}.md" for entry in entries]
    return [page for page in pages if page.is_file() and "kernelspec:" in page.read_text(encoding="utf-8")[:600]]


def execute_notebook(page: Path, notebook, timeout: int):
    """Run one notebook in its folder; return it with its outputs and the seconds it took, or None if it failed."""
    from jupyter_cache.executors.utils import single_nb_execution

    result = single_nb_execution(notebook, cwd=str(page.parent), timeout=timeout, allow_errors=False)
    return (notebook, result.time) if result.err is None else None


def execute_into_the_cache(root: Path) -> None:
    """Execute the notebooks Jupyter Book's cache has no outputs for, as many at a time as there are cores (each
    chapter runs on one thread), into that cache: the build that follows then finds every one there. A notebook
    that fails is left to the build, which executes it again and reports its error."""
    from concurrent.futures import ProcessPoolExecutor

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from myst_nb.core.read import read_myst_markdown_notebook

    cache = get_cache(str(root / "_build" / ".jupyter_cache"))
    timeout = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))["execute"]["timeout"]
    missing = []
    for page in notebook_pages(root):
        notebook = read_myst_markdown_notebook(page.read_text(encoding="utf-8"), path=page)
        try:
            cache.match_cache_notebook(notebook)
        except KeyError:
            missing.append((page.resolve(), notebook))
    with ProcessPoolExecutor(max_workers=min(len(missing), os.cpu_count() or 1) or 1) as pool:
        runs = [pool.submit(execute_notebook, page, notebook, timeout) for page, notebook in missing]
        for (page, _), run in zip(missing, runs):
            if (executed := run.result()) is not None:
                staged = cache.add_nb_to_project(str(page), read_data={"type": "plugin", "name": "myst_nb_md"})
                cache.cache_notebook_bundle(CacheBundleIn(executed[0], staged.uri,
                                                          data={"execution_seconds": executed[1]}),
                                            check_validity=False, overwrite=True)


def sphinx_command(root: Path, edition: str) -> list[str]:
    """This script run again for one edition ("gettext", "zh_Hans" or "zh_Hant") in its own process."""
    return [sys.executable, str(Path(__file__).resolve()), str(root), "--edition", edition]


def build_translations(root: Path) -> int:
    from addnorm_editions import LANGUAGES, TRANSLATED, catalogs, terms, theme, traditional

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
    fixes = traditional.corrections(glossary)
    for language, script in (("zh_Hans", "hans"), ("zh_Hant", "hant")):
        theme.write_theme_catalogs(shared, language, lambda text: traditional.to_traditional(text, fixes))
        (root / EDITIONS / f"{language}.dict").write_text(terms.search_dictionary(glossary, script), encoding="utf-8")
    builds = [subprocess.Popen(sphinx_command(root, language), cwd=root, env=book_environment())
              for language in LANGUAGES]
    if code := max(process.wait() for process in builds):
        return code
    for language, folder in LANGUAGES.items():
        shutil.rmtree(root / "_build" / "html" / folder, ignore_errors=True)
        shutil.copytree(root / EDITIONS / language / "html", root / "_build" / "html" / folder)
    return 0


FRAME_WORDS = {   # the site's own words around the pages: myst-nb's "Show code cell …",
                  # the dropdowns' "Click to show", the search box, the footer
    "zh_Hans": {"nb_code_prompt_show": "显示代码单元格", "nb_code_prompt_hide": "隐藏代码单元格",
                "togglebutton_hint": "点击显示", "togglebutton_hint_hide": "点击隐藏",
                "html_theme_options": {"search_bar_text": "搜索本书……",
                                       "extra_footer": "离线构建：本站的每张图、每个公式和每幅示意图都由本站自己提供。"}},
    "zh_Hant": {"nb_code_prompt_show": "顯示程式碼儲存格", "nb_code_prompt_hide": "隱藏程式碼儲存格",
                "togglebutton_hint": "點擊顯示", "togglebutton_hint_hide": "點擊隱藏",
                "html_theme_options": {"search_bar_text": "搜尋本書……",
                                       "extra_footer": "離線建置：本站的每張圖、每個公式和每幅示意圖都由本站自己提供。"}},
}


def build_edition(root: Path, edition: str) -> int:
    """One Sphinx build from the English build's execution cache: the gettext catalogs, or one Chinese edition."""
    from jupyter_book.sphinx import build_sphinx

    output = root / EDITIONS / edition
    overrides: dict = {"nb_execution_cache_path": str(root / "_build" / ".jupyter_cache"), "nitpicky": True,
                       "external_toc_path": (root / "_toc.yml").as_posix(), "latex_individualpages": False}
    if edition != "gettext":
        overrides |= {"language": edition, "locale_dirs": ["locales/", f"{EDITIONS}/locales/"],
                      "edition_catalogs": str(root / EDITIONS / "locales"), **FRAME_WORDS[edition],
                      "html_search_language": "zh", "html_search_options": {"dict": str(output.with_suffix(".dict"))}}
    result = build_sphinx(root, output / ("pot" if edition == "gettext" else "html"), noconfig=True,
                          path_config=str(root / "_config.yml"), confoverrides=overrides,
                          doctreedir=output / ".doctrees", builder="gettext" if edition == "gettext" else "html",
                          warningiserror=True, keep_going=True, quiet=True)
    return 1 if isinstance(result, Exception) else result


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if "--execute" in arguments:
        sys.exit(execute_into_the_cache(Path(arguments[0]).resolve()))
    if "--edition" in arguments:
        sys.exit(build_edition(Path(arguments[0]).resolve(), arguments[arguments.index("--edition") + 1]))
    sys.exit(build(Path(arguments[0]).resolve() if arguments else ROOT))
