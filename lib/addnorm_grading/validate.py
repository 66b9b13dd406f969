"""`nbgrader validate` wraps a long failure message instead of cutting it (imported by nbgrader_config.py).

nbgrader 0.9.6's Validator cuts every line of an error at `Validator.width` characters and adds "...", so a learner
checking a notebook in a terminal loses the end of the message that says what to fix. nbgrader builds its Validator
itself (in `nbgrader validate` and in JupyterLab's Validate button) and offers no setting for its class, so this
module replaces the one method that cuts, once, when it is imported.
"""

from __future__ import annotations

import textwrap

import nbgrader.validator


def _indent_wrapped(self, text: str) -> str:
    """Validator._indent, wrapping long lines at `width` instead of cutting them."""
    lines = []
    for line in text.split("\n"):
        line = nbgrader.validator.strip_ansi(line)
        lines.extend(textwrap.wrap(line, self.width, initial_indent=self.indent, subsequent_indent=self.indent * 2,
                                   break_long_words=False) or [self.indent])
    return "\n".join(lines)


nbgrader.validator.Validator._indent = _indent_wrapped
