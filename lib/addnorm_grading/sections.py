"""A judged test's code, cut at its section comments: `# [inputs]`, `# [observe]`, `# [check]` (see
`addnorm_grading.judge`), and the names each section assigns."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from addnorm_grading.parsing import parse

SECTION = re.compile(r"^# \[(inputs|observe|diagnose|check)\]")
KINDS = ("inputs", "observe", "diagnose", "check")          # diagnose: a hidden test's checks that speak first


@dataclass
class Sections:
    """A test's code, cut at its section comments: preamble (imports), then each kind's lines in order."""

    preamble: str = ""
    parts: dict[str, str] = field(default_factory=lambda: {kind: "" for kind in KINDS})

    @classmethod
    def parse(cls, source: str) -> "Sections":
        sections, current, lines = cls(), None, {kind: [] for kind in (None, *KINDS)}
        for line in source.splitlines():
            match = SECTION.match(line)
            if match:
                current = match.group(1)
            else:
                lines[current].append(line)
        sections.preamble = "\n".join(lines[None])
        sections.parts = {kind: "\n".join(lines[kind]) for kind in KINDS}
        return sections

    @property
    def judged(self) -> bool:
        """Whether the source is written in sections at all (an observing part is what makes a test judged)."""
        return bool(self.parts["observe"].strip())


def assigned_names(source: str) -> list[str]:
    """The names a piece of code assigns in its own scope (=, for, with … as, :=), in order of first appearance;
    not the variables of comprehensions, lambdas, functions or classes it defines."""
    names = []

    class Visitor(ast.NodeVisitor):
        def visit_Name(self, node):
            if isinstance(node.ctx, ast.Store) and node.id not in names:
                names.append(node.id)

        def skip(self, node):
            pass

        visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda = skip
        visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = skip

    Visitor().visit(parse(source))
    return names
