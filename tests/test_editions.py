"""The Chinese editions' catalogs keep up with the English pages: no silent drift, one term one translation.

Fast: the source messages are extracted by Sphinx's gettext builder with execution off (a figure's caption and alt
text, which reach the page only with the cell's output, are read from the cell's metadata), so these run in
`make test-fast`. The built editions themselves are checked in tests/test_site.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import jupytext
import pytest
from jupyter_book.sphinx import build_sphinx
from sphinx_intl.catalog import dump_po, load_po

from addnorm_editions import TRANSLATED, catalogs, terms, traditional

ROOT = Path(__file__).resolve().parent.parent
PO = ROOT / "locales" / TRANSLATED / "LC_MESSAGES"
GLOSSARY = terms.read_terms(ROOT / "glossary.md")


def extract_messages(book: Path, output: Path) -> Path:
    """The book's .pot catalogs, extracted without executing anything; return their folder."""
    overrides = {"nb_execution_mode": "off", "external_toc_path": (book / "_toc.yml").as_posix(),
                 "latex_individualpages": False, "suppress_warnings": ["ref", "mystnb", "toc"]}
    result = build_sphinx(book, output / "pot", noconfig=True, path_config=str(book / "_config.yml"),
                          confoverrides=overrides, doctreedir=output / ".doctrees", builder="gettext",
                          quiet=True, really_quiet=True)
    assert result == 0, f"the gettext build failed: {result}"
    for page in sorted(book.rglob("*.md")):
        figures = figure_messages(page)
        pot = output / "pot" / page.relative_to(book).with_suffix(".pot")
        if figures and pot.exists():
            catalog = load_po(str(pot))
            for message in figures:
                catalog.add(message)
            dump_po(str(pot), catalog)
    return output / "pot"


def figure_messages(page: Path) -> list[str]:
    """The captions and alt texts in a chapter's cell metadata, as Sphinx writes them as messages."""
    if "kernelspec" not in page.read_text(encoding="utf-8")[:400]:
        return []
    found = []
    for cell in jupytext.read(page).cells:
        options = cell.metadata.get("mystnb", {})
        for text in (options.get("figure", {}).get("caption"), options.get("image", {}).get("alt")):
            if text:
                found.append(text.replace("\n", " ").strip())
    return found


@pytest.fixture(scope="module")
def source_messages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return extract_messages(ROOT, tmp_path_factory.mktemp("gettext"))


def test_every_source_message_has_a_current_translation(source_messages: Path) -> None:
    pots = sorted(source_messages.rglob("*.pot"))
    assert len(pots) >= 13 and sum(len(catalogs.messages(pot)) for pot in pots) > 1000, "too few messages extracted"
    stale = catalogs.stale_messages(source_messages, PO)
    assert not stale, (f"{len(stale)} messages have no current translation (README: 'Updating a translation'):\n"
                       + "\n".join(stale[:60]))


def test_figure_captions_and_alt_texts_are_among_the_messages(source_messages: Path) -> None:
    chapter = "chapters/02_layer_normalization"
    figures = figure_messages(ROOT / f"{chapter}.md")
    assert len(figures) >= 10, figures
    assert set(figures) <= set(catalogs.messages(source_messages / f"{chapter}.pot"))


def test_every_translation_keeps_its_markup_and_uses_the_glossary_names() -> None:
    catalogs_found = sorted(PO.rglob("*.po"))
    assert len(catalogs_found) >= 13, catalogs_found
    problems = [problem for po in catalogs_found for problem in catalogs.translation_problems(po, GLOSSARY)]
    assert not problems, f"{len(problems)} translations to mend:\n" + "\n".join(problems[:60])


def test_the_traditional_edition_uses_the_glossarys_traditional_names(tmp_path: Path) -> None:
    assert traditional.derive(PO, tmp_path, GLOSSARY) >= 13
    problems = [problem for po in sorted(tmp_path.rglob("*.po"))
                for problem in catalogs.translation_problems(po, GLOSSARY, script="hant")]
    assert not problems, f"{len(problems)} 繁體 translations miss a glossary name:\n" + "\n".join(problems[:60])


def test_an_edited_english_sentence_is_named_until_it_is_translated(tmp_path: Path) -> None:
    book = tmp_path / "book"
    book.mkdir()
    for name in ("_config.yml", "_toc.yml", "glossary.md", "intro.md"):
        shutil.copy(ROOT / name, book / name)
    for folder in ("_ext", "static", "locales"):
        shutil.copytree(ROOT / folder, book / folder)
    chapter = book / "chapters" / "01_residual_connections.md"
    chapter.parent.mkdir()
    before = "This chapter runs every claim as code, with the course library `addnorm`."
    after = "This chapter runs every claim as code, with the small course library `addnorm`."
    source = (ROOT / "chapters" / chapter.name).read_text(encoding="utf-8")
    assert before in source, "the sentence this test edits is gone: choose another"
    chapter.write_text(source.replace(before, after), encoding="utf-8")
    po_dir = book / "locales" / TRANSLATED / "LC_MESSAGES"
    pot_dir = extract_messages(book, tmp_path / "gettext")

    stale = catalogs.stale_messages(pot_dir, po_dir)
    assert len(stale) == 1 and "chapters/01_residual_connections.po: untranslated" in stale[0], stale
    assert "with the small course library" in stale[0]

    po = po_dir / "chapters" / "01_residual_connections.po"
    catalog = load_po(str(po))
    edited = next(message for message in catalog_messages(pot_dir, chapter.name) if after in message)
    catalog.add(edited, string="本章把每个论断都写成代码来运行，用的是小巧的课程库 `addnorm`。")
    dump_po(str(po), catalog)
    assert catalogs.stale_messages(pot_dir, po_dir) == []


def catalog_messages(pot_dir: Path, chapter: str) -> list[str]:
    return catalogs.messages(pot_dir / "chapters" / Path(chapter).with_suffix(".pot"))


def test_a_fuzzy_translation_counts_as_stale(tmp_path: Path) -> None:
    (tmp_path / "pot").mkdir()
    (tmp_path / "po").mkdir()
    (tmp_path / "pot" / "page.pot").write_text('msgid ""\nmsgstr ""\n\nmsgid "A residual block."\nmsgstr ""\n')
    (tmp_path / "po" / "page.po").write_text('msgid ""\nmsgstr ""\n\n#, fuzzy\nmsgid "A residual block."\n'
                                             'msgstr "一个残差块。"\n', encoding="utf-8")
    assert catalogs.stale_messages(tmp_path / "pot", tmp_path / "po") == [
        f"{tmp_path / 'po' / 'page.po'}: fuzzy (its source changed): 'A residual block.'"]


def test_a_translation_that_drops_a_term_or_its_markup_is_named(tmp_path: Path) -> None:
    po = tmp_path / "page.po"
    po.write_text('msgid ""\nmsgstr ""\n\n'
                  'msgid "Every {term}`sublayer` is wrapped as `x + Sublayer(x)`."\n'
                  'msgstr "每个子模块都包装成 x + Sublayer(x)。"\n', encoding="utf-8")
    problems = " ".join(catalogs.translation_problems(po, GLOSSARY))
    assert "markup changed" in problems and "{term}`sublayer`" in problems and "`x + Sublayer(x)`" in problems
    assert "uses 'sublayer' but not its name 子层" in problems


def test_emphasis_that_renders_as_asterisks_is_named(tmp_path: Path) -> None:
    po = tmp_path / "page.po"
    po.write_text('msgid ""\nmsgstr ""\n\n'
                  'msgid "**The answer.** It is zero."\nmsgstr "**答案。**它是零。"\n\n'
                  'msgid "**Takeaways.** Two."\nmsgstr "**要点**。两条。"\n', encoding="utf-8")
    problems = catalogs.translation_problems(po, GLOSSARY)
    assert problems == [f"{po}: '**The answer.** It is zero.': emphasis shows as asterisks (after 。 or ）a closing "
                        "** needs a space or punctuation next: put the punctuation outside the **)"]


def test_term_forms_and_mentions() -> None:
    assert terms.forms("仅解码器（纯解码器）架构") == ("仅解码器", "仅解码器架构", "纯解码器")
    memory = next(term for term in GLOSSARY if term.english == "memory")
    assert not terms.mentions(memory, "peak memory 6.5 GiB", set())
    assert terms.mentions(memory, "reads the memory", {"memory"})
    residual = next(term for term in GLOSSARY if term.english == "residual connection")
    assert terms.mentions(residual, "Residual connections help.", set())
    assert not terms.mentions(residual, "chapters/01_residual_connections.md", set())


def test_opencc_is_corrected_by_the_glossary() -> None:
    fixes = traditional.corrections(GLOSSARY)
    assert traditional.to_traditional("残差连接让梯度直接流过层归一化。", fixes) == "殘差連接讓梯度直接流過層歸一化。"
