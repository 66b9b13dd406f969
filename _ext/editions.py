"""The site's three editions linked page to page: English at the root, 简体中文 in zh-hans/, 繁體中文 in zh-hant/.

Every page gets a visible language switch above its text and `<link rel="alternate" hreflang>` for each edition
(the same page path in each), and the Chinese editions a CJK font stack from the reader's own fonts (no web
font is downloaded). Nothing is added to a book without translations (no locales/ folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx

# (Sphinx language, folder in the site, html lang, the edition's name in its own language)
EDITIONS = [("en", "", "en", "English"), ("zh_Hans", "zh-hans/", "zh-Hans", "简体中文"),
            ("zh_Hant", "zh-hant/", "zh-Hant", "繁體中文")]
CJK_FONTS = """<style>
:root:lang(zh-Hans) { --pst-font-family-base: system-ui, "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC",
  "Microsoft YaHei", sans-serif; }
:root:lang(zh-Hant) { --pst-font-family-base: system-ui, "Noto Sans CJK TC", "Source Han Sans TC", "PingFang TC",
  "Microsoft JhengHei", sans-serif; }
.edition-switch { margin: 0 0 1rem; font-size: 0.9rem; }
.edition-switch a, .edition-switch span { margin-right: 0.9rem; }
</style>"""


def site_root(app: Sphinx, pagename: str) -> str:
    """The relative path from this page up to the English edition's root folder."""
    up = "../" * pagename.count("/")
    return up if (app.config.language or "en") == "en" else up + "../"


def link_editions(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    if app.builder.format != "html" or not (Path(app.srcdir) / "locales").is_dir():
        return
    root, current = site_root(app, pagename), app.config.language or "en"
    links, alternates = [], []
    for language, folder, lang, name in EDITIONS:
        href = f"{root}{folder}{pagename}.html"
        alternates.append(f'<link rel="alternate" hreflang="{lang}" href="{href}">')
        if language == current:
            links.append(f'<span lang="{lang}" aria-current="page">{name}</span>')
        else:
            links.append(f'<a lang="{lang}" hreflang="{lang}" href="{href}">{name}</a>')
    context["metatags"] = context.get("metatags", "") + "\n" + "\n".join(alternates) + "\n" + CJK_FONTS
    switch = f'<nav class="edition-switch" aria-label="Language / 语言 / 語言">{"".join(links)}</nav>\n'
    context["body"] = switch + context.get("body", "")


def theme_words(app: Sphinx, config: Any) -> None:
    """sphinx-book-theme's Chinese catalog, from the folder where tools/build_book.py merged it under the edition's
    language name (the theme ships it as zh_CN / zh_TW, which Sphinx does not look for)."""
    if config.edition_catalogs:
        app.add_message_catalog("booktheme", config.edition_catalogs)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("edition_catalogs", "", "env")
    app.connect("config-inited", theme_words)
    app.connect("html-page-context", link_editions)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
