"""The judge: a test's verdict decided in the grading process, on what the learner's kernel observed.

A judged test cell is written in sections, each a comment line that starts it:

    import torch                          (before the first section: imports, run in both places)
    # [inputs]                            what the test feeds the learner's code: made here, by the judge
    # [observe]                           the learner's code runs on the inputs (in the kernel, the sandbox)
    # [check]                             the verdict: references, comparisons, messages (here)

In JupyterLab the cell simply runs from top to bottom. When grading, `Judge.trial` runs the inputs here and writes
the code two kernels run (`Trial.visible_code`, `Trial.hidden_code`); `Trial.verdicts` reads back what they observed
(`addnorm_grading.observation`) and runs the checks here, on the judge's own inputs and the observations. A test's
hidden part, in the same sections, lives in the instructor's copy only: checks/<assignment>/<grade_id>.py beside
solutions/ (never in this package, which the sandbox can read), with inputs drawn from `SEED`, a keyed hash of the
course's secret and the test's name (`addnorm_grading.secret`: checks/secret, made by `make secret`, never committed).

Two kernels, so that nothing a kernel saw of a hidden test can come back:
- the *visible* kernel runs the learner's cells and the visible observing lines, on the visible inputs; the visible
  checks read its observations, and their messages may quote its values (it never saw anything hidden);
- the *hidden* kernel, a fresh one, runs the learner's cells and the visible and hidden observing lines on all the
  inputs; the hidden checks (and a `# [diagnose]`) read its observations, and their messages are the instructor's
  words only: a message that is not, whole, a string written in the course's own code (a value formatted into it)
  is replaced by HIDDEN_FAILED, and an exception there is told without its type, text or line.

The judge never runs learner code and never trusts an input read back from the kernel; no point rests on what a
kernel says about itself, only on values computed from the judge's inputs. Strings from a kernel (a name, an
exception's text) are quoted only where they are, whole, in the learner's own cells. Judging one test has limits
(`Limits`: CPU seconds, and the size of what is read back and of the text scanned for quoting).
"""

from __future__ import annotations

import ast
import builtins
import io
import signal
import threading
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from addnorm_grading import observation, secret
from addnorm_grading.observation import ObservationError
from addnorm_grading.parsing import parse
from addnorm_grading.quoting import evaluate, opaque, quoted_strings, redact, run_call, strings_in
from addnorm_grading.sections import Sections, assigned_names
from addnorm_grading.verdicts import GRADER_FAILURES, STILL_TO_WRITE

CHECKS = "checks"                          # the hidden checks' folder, in the course folder beside solutions/
SHARED = "_shared.py"                      # checks/<assignment>/_shared.py: hidden helpers its checks share
SAFETY_LINE = 25                           # a hidden line this long never appears in a message, whatever happens
NOT_CHECKED = "the grader could not check what your code returned (a value of an unexpected type or shape)"
HIDDEN_FAILED = ("a hidden test of this cell failed: your code gives a wrong result on inputs you have not seen "
                 "(check every case the exercise describes, not only the visible test's)")
HIDDEN_RAISED = "your code raised an exception in a hidden test of this cell"
HIDDEN_NO_RESULT = "the grader got no result from your code in a hidden test of this cell"
CPU_SECONDS = 20.0                         # the judge's CPU time for one test cell's checks (SandboxedExecute.judge_seconds)
MAX_LEARNER_TEXT = 200_000                 # characters of the learner's cells that quoting scans
MAX_QUOTED = 100                           # strings of the kernel's that one message may quote (each looked up)
TOO_MANY_QUOTED = ("this test's message would quote more than 100 names or strings from your code's objects; "
                   "the grader does not show it (make the objects this test checks smaller)")
TRACEBACK_LINES = 50                       # lines of an exception's traceback looked up in the learner's cells


class JudgeTimeout(BaseException):
    """Judging one test took more CPU time than allowed (a BaseException: checks' `except Exception` let it by)."""


@contextmanager
def cpu_limit(seconds: float | None):
    """Raise JudgeTimeout in this block once the process has used `seconds` of CPU time in it (main thread only;
    elsewhere, and with None, no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise JudgeTimeout()

    previous = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


# a dead kernel or a timeout, said by the grading side, whole (`verdicts.kernel_failure`): a message that only ends
# with these words may have been written by the hidden kernel (a type name of its choosing before them)
GRADER_MESSAGES = {f"{name}: {words}" for name, words in GRADER_FAILURES.items()}


class JudgeError(RuntimeError):
    """A mistake in the instructor's test or checks (not the learner's): the message says where."""


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
    """The judge of one course: its checks/ folder and secret. One per grading process."""

    def __init__(self, course_root: Path):
        self.root = Path(course_root) / CHECKS
        self._secret: bytes | None = None

    @property
    def secret(self) -> bytes:
        """The course's secret (`addnorm_grading.secret.SecretMissing`, naming the command that makes one, if none)."""
        if self._secret is None:
            self._secret = secret.read(self.root)
        return self._secret

    def hidden_source(self, assignment: str, name: str) -> str:
        """checks/<assignment>/<name>.py ('' when there is none)."""
        path = self.root / assignment / f"{name}.py"
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    def judges(self, source: str) -> bool:
        """Whether a test cell is written in sections (then this judge decides its verdict)."""
        return Sections.parse(source).judged

    def trial(self, assignment: str, grade_id: str, source: str, helpers: str = "", submission: str = "") -> "Trial":
        """Prepare one test: its inputs made, its two kernels' code written. `source` is the instructor's test cell,
        `helpers` the notebook's locked helpers cell, whose `# [check]` section (helpers the checks use) runs here
        too; the rest of it ran in the kernels, as a cell of the notebook. `submission`: the notebook's
        `secret.submission_digest`, which the hidden inputs are drawn with."""
        where = f"{assignment}/{grade_id}"
        visible = Sections.parse(source)
        shared_helpers = Sections.parse(helpers)
        hidden_text = self.hidden_source(assignment, grade_id)
        shared = self.hidden_source(assignment, SHARED[:-3])
        hidden = Sections.parse(hidden_text)
        for kind in ("inputs", "observe"):
            clash = set(assigned_names(visible.parts[kind])) & set(assigned_names(hidden.parts[kind]))
            if clash:
                raise JudgeError(f"checks/{assignment}/{grade_id}.py: its {kind} assign {sorted(clash)}, which the "
                                 f"visible test's {kind} assign too (the visible checks would see the hidden values)")
        helper_code = shared_helpers.preamble + "\n" + shared_helpers.parts["check"]
        # the visible checks' namespace knows nothing hidden; the hidden one is made the same way, then the hidden parts
        public = {"__name__": "addnorm_judge"}
        for part, code in (("helpers", helper_code), ("preamble", visible.preamble), ("inputs", visible.parts["inputs"])):
            _run(code, public, f"{where} {part}")
        namespace = {"__name__": "addnorm_judge",
                     "SEED": secret.seed_for(self.secret, assignment, grade_id, submission)}
        for part, code in (("helpers", helper_code), ("preamble", visible.preamble), (SHARED, shared),
                           ("hidden preamble", hidden.preamble), ("inputs", visible.parts["inputs"]),
                           ("hidden inputs", hidden.parts["inputs"])):
            _run(code, namespace, f"{where} {part}")
        visible_inputs = {name: observation.as_data(public[name]) for name in assigned_names(visible.parts["inputs"])}
        inputs = {name: observation.as_data(namespace[name])
                  for name in assigned_names(visible.parts["inputs"] + "\n" + hidden.parts["inputs"])}
        visible_observing = visible.preamble + "\n" + visible.parts["observe"]
        head = "\n".join((visible.preamble, hidden.preamble, visible.parts["observe"]))
        observing = head + "\n" + hidden.parts["observe"]
        names = assigned_names(observing)
        shadowed = sorted(set(names) & set(inputs))
        if shadowed:
            raise JudgeError(f"{where}: its observing lines assign {shadowed}, which are inputs (the "
                             f"checks would read the kernel's values in place of the judge's): give them new names")
        visible_names = assigned_names(visible_observing)
        resume_at = head.count("\n") + 1 if hidden.parts["diagnose"].strip() else 0   # a diagnosis needs its observations
        visible_code = _kernel_code(visible_inputs, visible_observing, visible_names, 0)
        hidden_code = _kernel_code(inputs, observing, names, resume_at)
        hidden_lines = {line.strip() for line in (hidden_text + "\n" + shared).splitlines()
                        if len(line.strip()) >= SAFETY_LINE}
        # the visible verdict may complete a kernel's cut text to one of these: never to a hidden observing string
        messages = {text for code in (visible_observing, helpers) for text in _strings(code) if len(text) >= 20}
        words = set().union(*(_strings(code) for code in (source, helpers, hidden_text, shared)))
        return Trial(where, visible, hidden, public, namespace, visible_names, names, visible_observing.splitlines(),
                     observing.splitlines(), head.count("\n") + 1, visible_code, hidden_code, hidden_lines, messages,
                     words | {NOT_CHECKED, HIDDEN_FAILED, HIDDEN_RAISED, HIDDEN_NO_RESULT, STILL_TO_WRITE})


def _still_to_write(raised: tuple) -> bool:
    """Whether what a kernel raised is an exercise's untouched `raise NotImplementedError()`."""
    _, kind, text, _, _ = raised
    return kind == "NotImplementedError" and not text


def _kernel_code(inputs: dict, observing: str, names: list[str], resume_at: int) -> str:
    """What one kernel runs for a test: the observing lines on the inputs, and the report of what they found."""
    return ("from addnorm_grading.observation import observe as _addnorm_observe\n"
            f"_addnorm_observe(globals(), {observation.encode(inputs)!r}, {observing!r}, {names!r}, {resume_at})\n")


def _strings(code: str) -> set[str]:
    """Every string literal of a piece of the course's code (its messages, as the instructor wrote them)."""
    try:
        tree = parse(code)
    except SyntaxError:
        return set()
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


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
class Observed:
    """What one kernel sent back for a test: its values, every string in them (a message may quote one only if the
    learner wrote it), and the exception that stopped its observing lines, if any; `error` when nothing readable
    arrived."""

    values: dict = field(default_factory=dict)
    raised: tuple | None = None
    strings: set = field(default_factory=set)
    error: str | None = None


@dataclass
class Trial:
    """One test being judged: the judge's namespaces (its inputs), and the code the two kernels run to observe."""

    name: str
    visible: Sections
    hidden: Sections
    public: dict                          # the visible checks' namespace: helpers, preamble, visible inputs
    namespace: dict                       # the hidden checks': the same, and the hidden parts and SEED
    visible_names: list[str]
    names: list[str]
    visible_observing_lines: list[str]
    observing_lines: list[str]
    visible_lines: int                    # the hidden kernel's observing lines 1 … this many are the visible test's
    visible_code: str
    hidden_code: str
    hidden_lines: set[str]
    messages: set[str] = field(default_factory=set)   # the course's own long strings: guards' messages, quoted whole
    words: set[str] = field(default_factory=set)      # every string of the course's code: what a hidden message may be
    errors: list[str] = field(default_factory=list)   # checks that crashed on what was observed (for the grading log)

    def verdicts(self, visible_outputs: list, hidden_outputs: list, learner_text: str,
                 visible_failure: str | None = None, hidden_failure: str | None = None,
                 cpu_seconds: float | None = CPU_SECONDS) -> Verdicts:
        """Judge what the two kernels' outputs hold. `learner_text`: the learner's own cells, the only source a
        quoted string may come from; `*_failure`: why a kernel gave no result (a timeout, a dead kernel), if known;
        `cpu_seconds`: the judge's CPU time for this test (past it, both verdicts fail and say so)."""
        learner_text = learner_text[:MAX_LEARNER_TEXT]
        try:
            with cpu_limit(cpu_seconds):
                return Verdicts(self._visible(visible_outputs, learner_text, visible_failure),
                                *self._hidden(hidden_outputs, learner_text, hidden_failure))
        except JudgeTimeout:
            message = (f"the grader stopped checking this test: judging what your code returned took more than "
                       f"{cpu_seconds:g} s of CPU time")
            self.errors.append(f"{self.name}: the checks ran out of CPU time ({cpu_seconds:g} s)")
            return Verdicts(message, message)

    def _observed(self, outputs: list, names: list[str], learner_text: str) -> Observed:
        try:
            data = observation.read(outputs)
        except ObservationError as error:
            return Observed(error=str(error))
        values = {name: opaque(data["values"][name]) for name in names if name in data["values"]}
        return Observed(values, data["raised"], strings_in(list(values.values())))

    def _visible(self, outputs: list, learner_text: str, failure: str | None) -> str | None:
        """The visible verdict, on the visible kernel's observations; its messages may quote them."""
        seen = self._observed(outputs, self.visible_names, learner_text)
        if seen.error is not None:
            return failure or f"the grader got no result from your code in this test ({seen.error})"
        namespace = dict(self.public, **seen.values)
        if seen.raised is not None:
            return self._raised_message(seen.raised, learner_text, namespace, seen.strings)
        return self._check(self.visible.parts["check"], namespace, seen.strings, learner_text)

    def _hidden(self, outputs: list, learner_text: str, failure: str | None) -> tuple[str | None, bool]:
        """The hidden verdict, on the hidden kernel's observations, and whether a diagnosis gave it; its messages are
        the instructor's words only (`_words`)."""
        seen = self._observed(outputs, self.names, learner_text)
        if seen.error is not None:
            return self._words(failure) if failure else HIDDEN_NO_RESULT, False
        if seen.raised is not None and _still_to_write(seen.raised):
            return STILL_TO_WRITE, False        # a cell still to write: said before any diagnosis of the rest
        namespace = dict(self.namespace, **seen.values)
        namespace["visible_check"] = lambda **bindings: exec(
            compile(self.visible.parts["check"], f"<{self.name}: check>", "exec"), dict(namespace, **bindings))
        diagnosis = self._diagnose(namespace)
        if diagnosis:
            return diagnosis, True
        if seen.raised is not None and seen.raised[4] <= self.visible_lines:
            return self._hidden_raised(seen.raised, namespace), False
        verdict = self._words(self._check(self.visible.parts["check"], namespace, set()))
        if verdict is None and seen.raised is not None:
            return self._hidden_raised(seen.raised, namespace), False
        return verdict or self._words(self._check(self.hidden.parts["check"], namespace, set())), False

    def _words(self, message: str | None) -> str | None:
        """A hidden verdict's message as the instructor wrote it: kept when it is, whole, a string of the course's
        code (or a grader's own failure); anything else (a value formatted into it) becomes HIDDEN_FAILED."""
        if message is None:
            return None
        if message in self.words or message in GRADER_MESSAGES:
            return message
        return HIDDEN_FAILED

    def _hidden_raised(self, raised: tuple, namespace: dict) -> str:
        """An exception in the hidden kernel, told without its type, text or line: which call (the instructor's
        `_run` words, when they are the instructor's own) and the hint."""
        helper = run_call(self.observing_lines, raised[4])
        if helper is not None:
            what, hint = (evaluate(node, namespace) for node in helper)
            what, hint = (part if part in self.words else "" for part in (what, hint))
            if what:
                return f"{what} raised an exception in a hidden test of this cell. {hint}".strip()
        return HIDDEN_RAISED

    def _diagnose(self, namespace: dict) -> str | None:
        """A hidden diagnosis: the message of its first failing assertion, which the cell shows in place of the
        visible one. Anything else it runs into (an observation missing because the learner's code raised) says
        nothing."""
        if not self.hidden.parts["diagnose"].strip():
            return None
        try:
            exec(compile(self.hidden.parts["diagnose"], f"<{self.name}: diagnose>", "exec"), dict(namespace))
        except AssertionError as error:
            return self._words(str(error) or "a check failed")
        except Exception:
            return None
        return None

    def _check(self, source: str, namespace: dict, strings: set[str], learner_text: str = "") -> str | None:
        """Run checks in the judge: None when they pass, else the message of the first that fails."""
        try:
            exec(compile(source, f"<{self.name}: check>", "exec"), namespace)
        except AssertionError as error:
            return self._safe(str(error) or "a check failed", strings, learner_text)
        except Exception as error:             # an observation of an unexpected kind, or a mistake in the check
            # for the grading log: the class only, which is the judge's; its text may hold what a kernel chose
            self.errors.append(f"{self.name}: {type(error).__name__} in a check")
            return NOT_CHECKED
        return None

    def _raised_message(self, raised: tuple, learner_text: str, namespace: dict, strings: set[str]) -> str:
        """What to say of an exception the learner's code raised in the visible kernel: which call raised what, where.

        A call written `_run(what, function, *args, hint=...)` (the notebooks' helper) gets the message that helper
        gives in JupyterLab, with `what` and `hint` evaluated here, on the judge's inputs and the observations."""
        _, kind, text, lines, at = raised
        known = isinstance(getattr(builtins, kind, None), type) and issubclass(getattr(builtins, kind), BaseException)
        name = kind if known or (kind and kind in learner_text) else "an exception"
        theirs = next((line for line in reversed(lines[-TRACEBACK_LINES:]) if line and line in learner_text), "")
        where = f" at `{theirs}`" if theirs else ""
        said = text.rstrip(".") if text and (text in learner_text or text in self.messages) else ""
        if not said and len(text) >= 20:              # a course message, cut to the kernel's length: quote it whole
            said = next((m.rstrip(".") for m in sorted(self.messages) if m.startswith(text)), "")
        if kind == "NotImplementedError" and not text:
            said = STILL_TO_WRITE
        helper = run_call(self.visible_observing_lines, at)
        if helper is not None:
            what, hint = (evaluate(node, namespace) for node in helper)
            if what:
                message = f"{what} raised {name}{where}" + (f": {said}. " if said else ". ") + (hint or "")
                return self._safe(message.strip(), strings, learner_text)
        lines_ = self.visible_observing_lines
        call = without_comment(lines_[at - 1]) if 0 < at <= len(lines_) else ""
        what = f"`{call}`" if call else "Your code"
        return self._safe(f"{what} raised {name}{where}" + (f": {said}" if said else ""), set(), learner_text)

    def _safe(self, message: str, strings: set[str], learner_text: str = "") -> str:
        """The message with no string of the kernel's (`strings`) that is not, whole, in the learner's cells, and no
        line of the hidden test — except a line the learner wrote in their own cells: blanking it would tell them
        that their guess is a hidden line. A message that would quote more than MAX_QUOTED of the kernel's strings
        is not shown (each costs a look-up in the learner's text)."""
        quoted = quoted_strings(message, strings)
        if len(quoted) > MAX_QUOTED:
            return TOO_MANY_QUOTED
        message = redact(message, {text for text in quoted if text not in learner_text})
        for line in self.hidden_lines:
            if line not in learner_text:
                message = message.replace(line, "…")
        return message
