"""What a translation catalog still owes its source: messages with no current translation, translations that drop
a piece of markup or whose emphasis shows as asterisks, and translations that do not use a glossary term's Chinese
name.

A catalog is Sphinx's: one `.pot` per page extracted by the gettext builder (the source messages), one `.po` per page
under locales/zh_Hans/LC_MESSAGES (sphinx-intl keeps it: `make translations`). Each problem names the page's
catalog and the message, so a maintainer can find it."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from babel.messages import pofile
from markdown_it import MarkdownIt

from addnorm_editions.terms import Term, mentions

ROLE = re.compile(r"\{(?P<name>[\w:-]+)\}`(?P<body>[^`]*)`")
CODE = re.compile(r"(?<![`}])(`+)(?P<code>[^`]+?)\1(?!`)")
MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s][^$]*?\$", re.DOTALL)
LINK_TARGET = re.compile(r"\]\((?P<target>[^)\s]+)\)")
URL = re.compile(r"https?://[^\s)>\]]+")
HTML_TAG = re.compile(r"</?[a-z][^>]*>")
KEPT_WORDS = 4            # a message of at most this many English words may be kept as it is (a name, a term)
CITATION = re.compile(r"\b(?:19|20)\d\d[a-z]?\b")   # a reference keeps its authors, title and year
TITLE = re.compile(r"\b(?:19|20)\d\d[a-z]?,\s*\*[^*]+\*")   # "Xiong et al. 2020, *On Layer Normalization…*"
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
MARKDOWN = MarkdownIt()                                 # CommonMark, as MyST parses a message's inline text


def read_catalog(path: Path):
    with path.open("rb") as handle:
        return pofile.read_po(handle, abort_invalid=True)


def messages(pot: Path) -> list[str]:
    return [message.id for message in read_catalog(pot) if message.id]


def stale_messages(pot_dir: Path, po_dir: Path) -> list[str]:
    """Every source message in pot_dir with no current translation in po_dir: missing, empty or fuzzy."""
    problems = []
    for pot in sorted(pot_dir.rglob("*.pot")):
        name = pot.relative_to(pot_dir).with_suffix(".po")
        po_path = po_dir / name
        translations = read_catalog(po_path) if po_path.exists() else None
        for message_id in messages(pot):
            entry = translations.get(message_id) if translations is not None else None
            if entry is None or not entry.string:
                problems.append(f"{po_dir / name}: untranslated: {short(message_id)}")
            elif entry.fuzzy:
                problems.append(f"{po_dir / name}: fuzzy (its source changed): {short(message_id)}")
    return problems


def short(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[:width] + "…")


def markup(text: str) -> Counter:
    """What a translation must keep as it is: roles (a {term}'s target, not its shown words), inline code,
    math, link targets, URLs and HTML tags."""
    kept: Counter = Counter()
    for role in ROLE.finditer(text):
        body = role["body"]
        kept[f"{{{role['name']}}}`{target(body) if role['name'] in ('term', 'numref', 'ref', 'doc') else body}`"] += 1
    text = ROLE.sub(" ", text)
    kept.update(f"`{code['code']}`" for code in CODE.finditer(text))
    text = CODE.sub(" ", text)
    kept.update(MATH.findall(text))
    kept.update(LINK_TARGET.findall(text))
    kept.update(URL.findall(text))
    kept.update(HTML_TAG.findall(text))
    return kept


def literal_double_asterisks(text: str) -> int:
    """How many `**` a message shows as text once rendered (a lone `*`, as in f*, may be meant). CommonMark closes
    `**` only after a letter, or before a space or punctuation: `**要点。**正文` shows its asterisks (write
    `**要点**。正文`)."""
    tokens = MARKDOWN.parseInline(text)
    return sum(child.content.count("**") for token in tokens for child in token.children or []
               if child.type == "text")


def prose(text: str) -> str:
    """The words of a message: roles (but a reference's shown words), inline code, math, links' targets and HTML
    tags removed."""
    text = ROLE.sub(lambda role: " " + shown_words(role["name"], role["body"]) + " ", text)
    for pattern in (CODE, MATH, LINK_TARGET, URL, HTML_TAG):
        text = pattern.sub(" ", text)
    return text


def target(body: str) -> str:
    """What a role points to: the <label> of `shown words <label>`, or the whole body."""
    return body[body.rindex("<") + 1:-1] if body.endswith(">") and "<" in body else body


def shown_words(role: str, body: str) -> str:
    """The words a role shows in the text: a term's own words, or a reference's words before its <label>."""
    if "<" in body and body.endswith(">"):
        return body[:body.rindex("<")]
    return body if role == "term" else ""


def looks_like_formula(text: str) -> bool:
    """A display formula (LaTeX commands, no sentence), which a translation keeps as it is."""
    return re.search(r"\\[A-Za-z]+", text) is not None and re.search(r"[A-Za-z][.!?;:,]\s", text) is None


def term_references(text: str) -> set[str]:
    """The glossary terms a message refers to with {term}, lower-cased."""
    return {target(role["body"]).lower() for role in ROLE.finditer(text) if role["name"] == "term"}


def translation_problems(po: Path, terms: list[Term], script: str = "hans") -> list[str]:
    """Each translation in po that drops or adds markup, holds no Chinese, or does not use a term's Chinese name."""
    problems = []
    for entry in read_catalog(po):
        if not entry.id or not entry.string:
            continue
        where = f"{po}: {short(entry.id)}"
        lost, added = markup(entry.id) - markup(entry.string), markup(entry.string) - markup(entry.id)
        if lost or added:
            problems.append(f"{where}: markup changed (lost {sorted(lost)}, added {sorted(added)})")
        if literal_double_asterisks(entry.string) > literal_double_asterisks(entry.id):
            problems.append(f"{where}: emphasis shows as asterisks (after 。 or ）a closing ** needs a space or "
                            "punctuation next: put the punctuation outside the **)")
        english = TITLE.sub(" ", prose(entry.id))
        if entry.string == entry.id:      # kept as it is: a name, a citation, a formula, a glossary entry's term
            words = re.findall(r"(?<![\\\w])[A-Za-z]{2,}", english)      # LaTeX commands are not words
            if len(words) > KEPT_WORDS and not CITATION.search(english) and not looks_like_formula(entry.id):
                problems.append(f"{where}: left in English")
            continue
        if re.search(r"[A-Za-z]{3}", english) and not CJK.search(prose(entry.string)):
            problems.append(f"{where}: the translation holds no Chinese")
        references = term_references(entry.id)
        for term in terms:
            names = getattr(term, script)
            if mentions(term, english, references) and not any(name in entry.string for name in names):
                problems.append(f"{where}: uses '{term.english}' but not its name {names[0]}")
    return problems
