"""What a judged test may quote of the learner's process: strings from the kernel only where the learner's own
cells hold them; objects that are not data only by their type name; a failed `_run(...)` call by the instructor's
own words for it, evaluated in the judge."""

from __future__ import annotations

import ast
import re

from addnorm_grading.observation import OBJECT
from addnorm_grading.parsing import parse


def run_call(lines: list[str], at: int) -> tuple[ast.expr, ast.expr | None] | None:
    """The (what, hint) argument nodes of the `_run(...)` call in the statement at line `at`, if it has one."""
    try:
        tree = parse("\n".join(lines))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_run" and node.args
                and node.lineno <= at <= (node.end_lineno or node.lineno)):
            hint = next((k.value for k in node.keywords if k.arg == "hint"), None)
            return node.args[0], hint
    return None


def evaluate(node: ast.expr | None, namespace: dict) -> str:
    """An argument of the instructor's `_run` call, evaluated in the judge (its text, or '' if it cannot be)."""
    if node is None:
        return ""
    try:
        value = eval(compile(ast.Expression(node), "<judge: _run>", "eval"), dict(namespace))
    except Exception:
        return ""
    return value if isinstance(value, str) else ""


class Opaque:
    """Stands in the judge for an object of the learner's that is not data: it has that object's type name and
    nothing else (so a check's `type(x).__name__` reads as in the kernel; the name is quoted only if it is the
    learner's)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def opaque(value):
    """An observation with each marker of a non-data object replaced by an Opaque of that type name."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == OBJECT and isinstance(value[1], str):
        try:
            return type(value[1], (Opaque,), {})()
        except (TypeError, ValueError):
            return Opaque()
    if isinstance(value, list):
        return [opaque(v) for v in value]
    if isinstance(value, tuple):
        return tuple(opaque(v) for v in value)
    if isinstance(value, dict):
        return {k: opaque(v) for k, v in value.items()}
    return value


def strings_in(value) -> set[str]:
    """Every distinct string inside an observation (names, object markers' type names), however short."""
    found, stack = set(), [value]
    while stack:                                   # observations are already capped in depth and size
        item = stack.pop()
        if isinstance(item, str):
            found.add(item)
        elif isinstance(item, Opaque):
            found.add(type(item).__name__)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return found


def quoted_strings(message: str, strings: set[str]) -> list[str]:
    """The strings of an observation that a message holds: the only ones worth looking up in the learner's text.
    Looking in the message (a few thousand characters) first keeps the cost of an observation of many distinct
    strings small; each look-up in the learner's text (up to 200,000 characters) can take a millisecond."""
    return [text for text in strings if text and text in message]


def redact(message: str, unsafe: set[str]) -> str:
    """The message with every string of `unsafe` replaced by "…": wherever it is quoted ('x', "x", `x`), and where
    it stands alone as a word or name (for strings of two characters or more: a one-letter word of the instructor's
    sentence stays)."""
    texts = sorted((text for text in unsafe if text in message), key=len, reverse=True)
    if not texts:
        return message
    quoted = "|".join(f"{q}{re.escape(t)}{q}" for t in texts for q in ("'", '"', "`"))
    alone = "|".join(rf"(?<![\w]){re.escape(t)}(?![\w])" for t in texts if len(t) >= 2)
    pattern = re.compile("|".join(part for part in (quoted, alone) if part))
    return pattern.sub(lambda match: "…", message)
