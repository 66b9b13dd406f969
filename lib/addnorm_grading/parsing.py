"""Parsing Python source into a syntax tree, safely inside the grader.

CPython 3.11 counts its depth while it builds a tree in one counter per interpreter. If the cyclic garbage collector
runs while `ast.parse` builds a tree, a finalizer it calls may parse too: an asyncio task whose exception was never
retrieved (nbclient leaves one when a kernel dies) logs that exception, and formatting a 3.11 traceback parses its
lines to place the `^^^` marks. The inner parse resets the counter, and the outer one ends with
`SystemError: AST constructor recursion depth mismatch` (CPython gh-106905). The grader parses the course's code
while such tasks wait to be collected, so it parses with the collector paused."""

from __future__ import annotations

import ast
import gc
import threading

_PAUSING = threading.RLock()     # one thread at a time pauses and resumes the collector


def parse(source: str) -> ast.Module:
    """`ast.parse(source)`, with no garbage collection (and so no finalizer) while the tree is built."""
    with _PAUSING:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return ast.parse(source)
        finally:
            if was_enabled:
                gc.enable()
