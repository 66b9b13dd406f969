"""The judge: a test's verdict decided in the grading process, on what the learner's kernel observed.

A judged test cell is written in sections, each a comment line that starts it:

    import torch                          (before the first section: imports, run in both places)
    # [inputs]                            what the test feeds the learner's code: made here, by the judge
    # [observe]                           the learner's code runs on the inputs (in the kernel, the sandbox)
    # [check]                             the verdict: references, comparisons, messages (here)

In JupyterLab the cell simply runs from top to bottom. When grading, `Judge.trial` runs the inputs here, sends them
with the observing code to the kernel (the kernel code of a `Trial`), and `Trial.verdicts` reads back what the
kernel observed (`addnorm_grading.observation`) and runs the checks here, on the judge's own inputs and the
observations. A test's hidden part, in the same sections, lives in the instructor's copy only:
checks/<assignment>/<grade_id>.py beside solutions/ (never in this package, which the sandbox can read); only its
observing code reaches the kernel, with inputs drawn from the course's secret seed (checks/secret_seed, `SEED` in
the hidden inputs).

The judge never runs learner code and never trusts an input read back from the kernel. Strings from the kernel
(a name, an exception's text) are quoted in a message only where they appear in the learner's own cells.
"""

from __future__ import annotations

import ast
import builtins
import io
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from addnorm_grading import observation
from addnorm_grading.observation import ObservationError
from addnorm_grading.quoting import evaluate, opaque, run_call, strings_not_in
from addnorm_grading.sections import Sections, assigned_names
from addnorm_grading.verdicts import STILL_TO_WRITE

CHECKS = "checks"                          # the hidden checks' folder, in the course folder beside solutions/
SEED_FILE = "secret_seed"                  # checks/secret_seed: one integer, the course's secret
SHARED = "_shared.py"                      # checks/<assignment>/_shared.py: hidden helpers its checks share
SAFETY_LINE = 25                           # a hidden line this long never appears in a message, whatever happens
NOT_CHECKED = "the grader could not check what your code returned (a value of an unexpected type or shape)"


class JudgeError(RuntimeError):
    """A mistake in the instructor's test or checks (not the learner's): the message says where."""


def read_seed(course_root: Path) -> int:
    path = course_root / CHECKS / SEED_FILE
    try:
        return int(path.read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError) as error:
        raise JudgeError(f"{path}: expected one integer, the course's secret seed for hidden inputs ({error})") from None


def without_comment(line: str) -> str:
    """A line of code, stripped, without its trailing comment."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip()).readline))
    except (tokenize.TokenError, IndentationError):
        return line.strip()
    comment = next((token for token in tokens if token.type == tokenize.COMMENT), None)
    return line.strip()[: comment.start[1]].rstrip() if comment else line.strip()


def _run(source: str, namespace: dict, where: str) -> None:
    """Run instructor code in the judge's namespace; a crash is the instructor's mistake, said with where."""
    try:
        exec(compile(source, f"<{where}>", "exec"), namespace)
    except Exception as error:
        raise JudgeError(f"{where} raised {type(error).__name__}: {error}") from error


class Judge:
    """The judge of one course: its checks/ folder and secret seed. One per grading process."""

    def __init__(self, course_root: Path):
        self.root = Path(course_root) / CHECKS
        self._seed: int | None = None

    @property
    def seed(self) -> int:
        if self._seed is None:
            self._seed = read_seed(self.root.parent)
        return self._seed

    def hidden_source(self, assignment: str, name: str) -> str:
        """checks/<assignment>/<name>.py ('' when there is none)."""
        path = self.root / assignment / f"{name}.py"
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    def judges(self, source: str) -> bool:
        """Whether a test cell is written in sections (then this judge decides its verdict)."""
        return Sections.parse(source).judged

    def trial(self, assignment: str, grade_id: str, source: str, helpers: str = "") -> "Trial":
        """Prepare one test: its inputs made, its kernel code written. `source` is the instructor's test cell,
        `helpers` the notebook's locked helpers cell, whose `# [check]` section (helpers the checks use) runs here
        too; the rest of it ran in the kernel, as a cell of the notebook."""
        visible = Sections.parse(source)
        shared_helpers = Sections.parse(helpers)
        hidden_text = self.hidden_source(assignment, grade_id)
        shared = self.hidden_source(assignment, SHARED[:-3])
        hidden = Sections.parse(hidden_text)
        namespace = {"__name__": "addnorm_judge", "SEED": self.seed}
        for part, code in (("helpers", shared_helpers.preamble + "\n" + shared_helpers.parts["check"]),
                           ("preamble", visible.preamble), (SHARED, shared), ("hidden preamble", hidden.preamble),
                           ("inputs", visible.parts["inputs"]), ("hidden inputs", hidden.parts["inputs"])):
            _run(code, namespace, f"{assignment}/{grade_id} {part}")
        for kind in ("inputs", "observe"):
            clash = set(assigned_names(visible.parts[kind])) & set(assigned_names(hidden.parts[kind]))
            if clash:
                raise JudgeError(f"checks/{assignment}/{grade_id}.py: its {kind} assign {sorted(clash)}, which the "
                                 f"visible test's {kind} assign too (the visible checks would see the hidden values)")
        inputs = {name: observation.as_data(namespace[name])
                  for name in assigned_names(visible.parts["inputs"] + "\n" + hidden.parts["inputs"])}
        head = "\n".join((visible.preamble, hidden.preamble, visible.parts["observe"]))
        observing = head + "\n" + hidden.parts["observe"]
        names = assigned_names(observing)
        shadowed = sorted(set(names) & set(inputs))
        if shadowed:
            raise JudgeError(f"{assignment}/{grade_id}: its observing lines assign {shadowed}, which are inputs (the "
                             f"checks would read the kernel's values in place of the judge's): give them new names")
        resume_at = head.count("\n") + 1 if hidden.parts["diagnose"].strip() else 0   # a diagnosis needs its observations
        code = ("from addnorm_grading.observation import observe as _addnorm_observe\n"
                f"_addnorm_observe(globals(), {observation.encode(inputs)!r}, {observing!r}, {names!r}, {resume_at})\n")
        hidden_lines = {line.strip() for line in (hidden_text + "\n" + shared).splitlines()
                        if len(line.strip()) >= SAFETY_LINE}
        messages = {node.value for code in (observing, helpers) for node in ast.walk(ast.parse(code))
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 20}
        return Trial(f"{assignment}/{grade_id}", visible, hidden, namespace, names, observing.splitlines(),
                     head.count("\n") + 1, code, hidden_lines, messages)


@dataclass
class Verdicts:
    """A test's two verdicts (None: passed), and the one message its cell shows: the visible verdict's, unless a
    hidden diagnosis (a `# [diagnose]` section) named the mistake more precisely."""

    visible: str | None
    hidden: str | None
    diagnosed: bool = False

    @property
    def message(self) -> str | None:
        if self.diagnosed or self.visible is None:
            return self.hidden
        return self.visible


@dataclass
class Trial:
    """One test being judged: the judge's namespace (its inputs), and the code the kernel runs to observe."""

    name: str
    visible: Sections
    hidden: Sections
    namespace: dict
    names: list[str]
    observing_lines: list[str]
    visible_observing_lines: int          # observing lines 1 … this many are the visible test's
    kernel_code: str
    hidden_lines: set[str]
    messages: set[str] = field(default_factory=set)   # the course's own strings (observing code, helpers): guards' messages
    errors: list[str] = field(default_factory=list)   # checks that crashed on what was observed (for the grading log)

    def verdicts(self, outputs: list, learner_text: str, failure: str | None = None) -> Verdicts:
        """Judge what the kernel's outputs hold. `learner_text`: the learner's own cells, the only source a quoted
        string may come from; `failure`: why the kernel gave no result (a timeout, a dead kernel), if known."""
        try:
            data = observation.read(outputs)
        except ObservationError as error:
            message = failure or f"the grader got no result from your code in this test ({error})"
            return Verdicts(message, message)
        values = {name: opaque(data["values"][name]) for name in self.names if name in data["values"]}
        unsafe = strings_not_in(list(values.values()), learner_text)     # the values; their names are the course's
        namespace = dict(self.namespace, **values)
        namespace["visible_check"] = lambda **bindings: exec(
            compile(self.visible.parts["check"], f"<{self.name}: check>", "exec"), dict(namespace, **bindings))
        raised = data["raised"]
        diagnosis = self._diagnose(namespace, unsafe)
        if raised is None:
            return Verdicts(self._check(self.visible.parts["check"], namespace, unsafe),
                            diagnosis or self._check(self.hidden.parts["check"], namespace, unsafe), bool(diagnosis))
        message = self._raised_message(raised, learner_text, namespace, unsafe)
        if raised[4] > self.visible_observing_lines:          # raised in the hidden test's observing lines
            return Verdicts(self._check(self.visible.parts["check"], namespace, unsafe), diagnosis or message,
                            bool(diagnosis))
        return Verdicts(message, diagnosis or message, bool(diagnosis))

    def _diagnose(self, namespace: dict, unsafe: set[str]) -> str | None:
        """A hidden diagnosis: the message of its first failing assertion, which the cell shows in place of the
        visible one. Anything else it runs into (an observation missing because the learner's code raised) says
        nothing."""
        if not self.hidden.parts["diagnose"].strip():
            return None
        try:
            exec(compile(self.hidden.parts["diagnose"], f"<{self.name}: diagnose>", "exec"), dict(namespace))
        except AssertionError as error:
            return self._safe(str(error) or "a check failed", unsafe)
        except Exception:
            return None
        return None

    def _check(self, source: str, namespace: dict, unsafe: set[str]) -> str | None:
        """Run checks in the judge: None when they pass, else the message of the first that fails."""
        try:
            exec(compile(source, f"<{self.name}: check>", "exec"), namespace)
        except AssertionError as error:
            return self._safe(str(error) or "a check failed", unsafe)
        except Exception as error:             # an observation of an unexpected kind, or a mistake in the check
            self.errors.append(f"{self.name}: {type(error).__name__}: {str(error)[:200]}")
            return NOT_CHECKED
        return None

    def _raised_message(self, raised: tuple, learner_text: str, namespace: dict, unsafe: set[str]) -> str:
        """What to say of an exception the learner's code raised while observing: which call raised what, where.

        A call written `_run(what, function, *args, hint=...)` (the notebooks' helper) gets the message that helper
        gives in JupyterLab, with `what` and `hint` evaluated here, on the judge's inputs and the observations."""
        _, kind, text, lines, at = raised
        known = isinstance(getattr(builtins, kind, None), type) and issubclass(getattr(builtins, kind), BaseException)
        name = kind if known or (kind and kind in learner_text) else "an exception"
        theirs = [line for line in lines if line and line in learner_text]
        where = f" at `{theirs[-1]}`" if theirs else ""
        said = text.rstrip(".") if text and (text in learner_text or text in self.messages) else ""
        if not said and len(text) >= 20:              # a course message, cut to the kernel's length: quote it whole
            said = next((m.rstrip(".") for m in sorted(self.messages) if m.startswith(text)), "")
        if kind == "NotImplementedError" and not text:
            said = STILL_TO_WRITE
        helper = run_call(self.observing_lines, at)
        if helper is not None:
            what, hint = (evaluate(node, namespace) for node in helper)
            if what:
                message = f"{what} raised {name}{where}" + (f": {said}. " if said else ". ") + (hint or "")
                return self._safe(message.strip(), unsafe)
        call = without_comment(self.observing_lines[at - 1]) if 0 < at <= len(self.observing_lines) else ""
        what = "Your code" if at > self.visible_observing_lines or not call else f"`{call}`"
        return self._safe(f"{what} raised {name}{where}" + (f": {said}" if said else ""), set())

    def _safe(self, message: str, unsafe: set[str]) -> str:
        """The message with no string the learner's process made up and no line of the hidden test."""
        for text in sorted(unsafe, key=len, reverse=True):
            message = message.replace(text, "…")
        for line in self.hidden_lines:
            message = message.replace(line, "…")
        return message


