"""The words of the site's frame (search box, buttons, navigation) in each Chinese edition.

Sphinx, pydata-sphinx-theme and sphinx-book-theme ship Chinese catalogs under other language names (zh_CN, zh_TW,
zh) than the editions' (zh_Hans, zh_Hant), so Sphinx would not find them. They are merged here into the editions'
own catalog folder, the simplified-only pydata one converted for 繁體."""
from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pydata_sphinx_theme
import sphinx
import sphinx_book_theme
from babel.messages import mofile
from babel.messages.catalog import Catalog

from addnorm_editions.catalogs import read_catalog

SPHINX_LOCALE = Path(sphinx.__file__).parent / "locale"
PYDATA_LOCALE = Path(pydata_sphinx_theme.__file__).parent / "locale"
BOOK_LOCALE = Path(sphinx_book_theme.__file__).parent / "theme" / "sphinx_book_theme" / "static" / "locales"
SHIPPED = {"zh_Hans": "zh_CN", "zh_Hant": "zh_TW"}   # the name each one ships its Chinese catalogs under


def sources(language: str) -> dict[str, list[tuple[Path, bool]]]:
    """Each catalog's shipped .po files, first one wins, and whether each is in simplified characters only."""
    shipped = SHIPPED[language]
    return {"sphinx": [(SPHINX_LOCALE / shipped / "LC_MESSAGES" / "sphinx.po", False),
                       (PYDATA_LOCALE / "zh" / "LC_MESSAGES" / "sphinx.po", True)],
            "booktheme": [(BOOK_LOCALE / shipped / "LC_MESSAGES" / "booktheme.po", False)]}


def write_theme_catalogs(folder: Path, language: str, to_traditional: Callable[[str], str]) -> None:
    """Write folder/<language>/LC_MESSAGES/{sphinx,booktheme}.mo and Sphinx's search-page words (sphinx.js)."""
    messages = folder / language / "LC_MESSAGES"
    messages.mkdir(parents=True, exist_ok=True)
    for name, parts in sources(language).items():
        merged = Catalog(locale=language, domain=name)
        for po, simplified in parts:
            for message in read_catalog(po):
                if message.id and message.string and message.id not in merged:
                    convert = simplified and language == "zh_Hant"
                    merged.add(message.id, to_traditional(message.string) if convert else message.string)
        with (messages / f"{name}.mo").open("wb") as handle:
            mofile.write_mo(handle, merged)
    shutil.copy(SPHINX_LOCALE / SHIPPED[language] / "LC_MESSAGES" / "sphinx.js", messages / "sphinx.js")
