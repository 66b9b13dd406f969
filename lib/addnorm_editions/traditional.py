"""The 繁體 edition's catalogs, derived from the 简体 ones at build time: OpenCC's s2twp (phrase by phrase, Taiwan
usage), then every glossary term put back to the glossary's 繁體 name where OpenCC chose another (s2twp turns
残差连接 into 殘差連線; the glossary says 殘差連接)."""
from __future__ import annotations

from functools import cache
from pathlib import Path

import opencc
from babel.messages import mofile, pofile

from addnorm_editions.catalogs import read_catalog
from addnorm_editions.terms import Term

CONVERSION = "s2twp"


@cache
def converter() -> opencc.OpenCC:
    return opencc.OpenCC(CONVERSION)


def corrections(terms: list[Term]) -> dict[str, str]:
    """OpenCC's rendering of each 简体 name → the glossary's 繁體 name, where the two differ (longest first)."""
    fixes = {}
    for term in terms:
        for name in term.hans:
            converted = converter().convert(name)
            if converted not in term.hant:
                fixes[converted] = term.hant[0]
    return dict(sorted(fixes.items(), key=lambda item: -len(item[0])))


def to_traditional(text: str, fixes: dict[str, str]) -> str:
    text = converter().convert(text)
    for converted, name in fixes.items():
        text = text.replace(converted, name)
    return text


def derive(hans_dir: Path, hant_dir: Path, terms: list[Term]) -> int:
    """Write hant_dir's .po and .mo for every .po under hans_dir; return how many catalogs were written."""
    fixes = corrections(terms)
    written = 0
    for source in sorted(hans_dir.rglob("*.po")):
        catalog = read_catalog(source)
        catalog.locale = "zh_Hant"
        for message in catalog:
            if message.id and message.string:
                message.string = to_traditional(message.string, fixes)
        target = hant_dir / source.relative_to(hans_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as handle:
            pofile.write_po(handle, catalog, width=120)
        with target.with_suffix(".mo").open("wb") as handle:
            mofile.write_mo(handle, catalog)
        written += 1
    return written
