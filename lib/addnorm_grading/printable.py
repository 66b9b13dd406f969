"""Text that a submission chose, made safe for a terminal: its control characters shown, never obeyed.

A kernel's output, a file name in a submission folder: either can hold escape sequences (clear the screen, set the
terminal's title) or a line break followed by a line that looks like nbgrader's own. `printable` is for a whole
log that is shown again (grade_class); `PrintableFormatter` is nbgrader's log formatter with every value it logs
(`Copying %s -> %s`, `Skipping unknown notebook: %s`) shown that way, line breaks included.
"""

from __future__ import annotations

import os
import re

from tornado.log import LogFormatter

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")    # control characters but tab and newline
ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")         # and those too: a value logged is one line


def _shown(match: re.Match) -> str:
    return f"\\x{ord(match.group()):02x}"


def printable(text: str) -> str:
    """A log, safe on a terminal: its control characters (escape sequences a kernel may have sent) shown."""
    return CONTROL.sub(_shown, text)


def one_line(value):
    """A value about to be logged: a string or path with every control character shown; anything else as it is."""
    text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    return ANY_CONTROL.sub(_shown, text) if isinstance(text, str) else value


class PrintableFormatter(LogFormatter):
    """nbgrader's log formatter (tornado's), with the values of each message shown as one printable line: the
    message's own text is nbgrader's, the values (file names above all) may be a submission's."""

    def format(self, record):
        if isinstance(record.args, tuple):
            record.args = tuple(one_line(value) for value in record.args)
        return super().format(record)
