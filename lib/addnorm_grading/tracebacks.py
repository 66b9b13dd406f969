"""Error outputs a learner can read: the learner's own frames, the grading machine's paths shortened, long lines
wrapped. Two nbconvert preprocessors, for autograde and feedback (nbgrader_config.py names them)."""

from __future__ import annotations

import re
import textwrap

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Integer

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LIBRARY_FRAME = re.compile(r"(site-packages|dist-packages|[/\\]lib[/\\]python3|[/\\]lib[/\\]addnorm[/\\])")
ABSOLUTE_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\](?:[^\s:,\"'()\x1b/\\]+[/\\])+([^\s:,\"'()\x1b/\\]+)")


class CleanTracebacks(Preprocessor):
    """Keep the learner's own frames in error tracebacks: drop frames inside torch and other installed libraries,
    and shorten the absolute paths of the grading machine to file names."""

    enabled = Bool(True).tag(config=True)      # (nbconvert preprocessors are off unless enabled)

    def _clean(self, traceback):
        kept, hidden = [], 0
        for index, entry in enumerate(traceback):
            plain = ANSI.sub("", entry)
            if 0 < index < len(traceback) - 1 and LIBRARY_FRAME.search(plain):
                hidden += 1
                continue
            kept.append(ABSOLUTE_PATH.sub(r"\1", entry))
        if hidden:
            kept.insert(len(kept) - 1, f"  ({hidden} frame(s) inside torch or other libraries not shown)\n")
        return kept

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = self._clean(output["traceback"])
        return cell, resources


class WrapErrorMessages(Preprocessor):
    """Break long lines of error messages, so that the HTML feedback shows them without horizontal scrolling."""

    enabled = Bool(True).tag(config=True)
    width = Integer(100, help="Wrap error-message lines longer than this many characters.").tag(config=True)

    def _wrap(self, line):
        if len(ANSI.sub("", line)) <= self.width:      # the length on screen, colours aside
            return line
        return "\n".join(textwrap.wrap(line, self.width, subsequent_indent="    ", break_long_words=False))

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = ["\n".join(self._wrap(line) for line in entry.split("\n"))
                                       for entry in output["traceback"]]
        return cell, resources
