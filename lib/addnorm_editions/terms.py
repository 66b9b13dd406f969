"""The glossary's terms with their Chinese names: one term, one translation, in both scripts.

Each entry of glossary.md is a term line followed by its names,
    <span lang="zh-Hant">層歸一化（層正規化）</span> · <span lang="zh-Hans">层归一化</span>
a name in brackets being a second common form. A translation may use any of a term's forms; the first is the one
the 繁體 edition is corrected to."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

NAMES = re.compile(r'^\s+<span lang="zh-Hant">(?P<hant>[^<]+)</span> · <span lang="zh-Hans">(?P<hans>[^<]+)</span>',
                   re.MULTILINE)
# Terms that are also everyday words ("peak memory"): only a {term} reference to them counts as the term.
EVERYDAY_WORDS = {"memory"}


@dataclass(frozen=True)
class Term:
    english: str
    hans: tuple[str, ...]   # the accepted 简体 forms, the main one first
    hant: tuple[str, ...]   # the accepted 繁體 forms, the main one first


def forms(name: str) -> tuple[str, ...]:
    """'仅解码器（纯解码器）架构' → ('仅解码器', '仅解码器架构', '纯解码器'): before the bracket, without it, in it."""
    head = name.split("（")[0]
    whole = re.sub(r"（[^）]*）", "", name)
    inside = [part for bracket in re.findall(r"（([^）]*)）", name) for part in re.split("[，；]", bracket)]
    found = [head, whole, *inside]
    return tuple(dict.fromkeys(form.strip() for form in found if form.strip()))


def read_terms(glossary: Path) -> list[Term]:
    """Every term of glossary.md with its 简体 and 繁體 forms."""
    text = glossary.read_text(encoding="utf-8")
    terms = []
    for match in NAMES.finditer(text):
        english = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        terms.append(Term(english, forms(match["hans"]), forms(match["hant"])))
    if not terms:
        raise ValueError(f"{glossary}: no term names found (expected lines like {NAMES.pattern!r})")
    return terms


def mentions(term: Term, prose: str, references: set[str]) -> bool:
    """Does this English prose (code and math removed) use the term, or refer to it with {term}?"""
    if term.english.lower() in references:
        return True
    if term.english in EVERYDAY_WORDS:
        return False
    words = re.escape(term.english).replace(r"\ ", r"[\s-]+").replace(r"\-", r"[\s-]?")
    # not inside a word, a path or a dotted name (encoder.norm, chapters/01_residual_connections)
    return re.search(rf"(?<![\w/.]){words}(?:s|es)?(?![\w/]|\.\w)", prose, re.IGNORECASE) is not None


def search_dictionary(terms: list[Term], script: str) -> str:
    """jieba's user dictionary (one word and a frequency per line) of every Chinese form in one script."""
    words = {form for term in terms for form in getattr(term, script) if re.search(r"[\u4e00-\u9fff]", form)}
    return "".join(f"{word} 100000 n\n" for word in sorted(words))
