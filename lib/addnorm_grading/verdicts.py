"""What a graded notebook keeps once its tests have started: the verdicts, and nothing else the kernel produced.

The learner's kernel runs untrusted code, and what it prints, displays or updates can carry anything it saw while the
tests ran (a test's source, its inputs). So a graded notebook keeps the outputs its cells had when the first test
started; from there on a test cell holds exactly its verdict — no output (pass) or one error output whose `ename`
is "AssertionError" and whose `evalue` and `traceback` are the message — and every other code cell no output.

A judged test's two verdicts, visible and hidden, are also kept apart in its cell's metadata (`SPLIT`), so that
feedback can show the visible ones alone (`visible_only`) while the gradebook holds the full grade.
"""

from __future__ import annotations

import copy

from nbformat.v4 import new_output

STILL_TO_WRITE = "a cell this test needs still says YOUR CODE HERE"   # what an unwritten solution cell raises
SPLIT = "addnorm_verdicts"    # a judged test cell's metadata: {"visible": message or None, "hidden": message or None}
MESSAGE_LIMIT = 2000          # characters of a verdict's message (a runaway message is cut, and says so)


def is_test_cell(cell) -> bool:
    """A graded (autograder) code cell: nbgrader's metadata says grade and it is code."""
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("grade"))


def verdict_outputs(message: str | None) -> list:
    """A test cell's outputs for a verdict: none when it passed, else one AssertionError with the message."""
    if message is None:
        return []
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + " … (message cut)"
    return [new_output("error", ename="AssertionError", evalue=message, traceback=[message])]


def record_split(cell, visible: str | None, hidden: str | None) -> None:
    """Keep a judged test's visible and hidden verdicts (None: passed) apart, in its cell's metadata."""
    cell.metadata[SPLIT] = {"visible": visible, "hidden": hidden}


def visible_only(nb):
    """A copy of a graded notebook whose judged test cells show their visible verdict alone (hidden ones left out).

    A test cell without the split (a test that was not judged, or did not run) keeps its outputs."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if is_test_cell(cell) and SPLIT in cell.metadata:
            cell.outputs = verdict_outputs(cell.metadata[SPLIT]["visible"])
    return nb


def message_from_outputs(outputs: list) -> str | None:
    """The verdict of a test cell that ran in the learner's kernel: its first error, as one message (None: passed).

    An AssertionError keeps its text; any other error is named, "NameError: name 'x' is not defined".
    """
    for output in outputs:
        if output.get("output_type") == "error":
            name, value = str(output.get("ename", "Error")), str(output.get("evalue", ""))
            if name == "AssertionError":
                return value or "a test failed (an assertion without a message)"
            if name == "NotImplementedError" and not value:
                return f"{name}: {STILL_TO_WRITE}"
            if name in ("CellTimeoutError", "KeyboardInterrupt"):
                return f"{name}: this test did not finish in time (the code under test ran too long: an endless loop?)"
            return f"{name}: {value}" if value else name
    return None


GRADER_FAILURES = {                 # errors that the grading side writes, never the kernel
    "KernelDied": "the kernel stopped while running this test (the code exited, killed its own process, or ran out "
                  "of memory or processes)",
    "KernelUnresponsive": "the kernel stopped answering while running this test",
    "CellTimeoutError": "this test did not finish in time (the code under test ran too long: an endless loop?)",
    "NotebookTimeout": "not run: this notebook's time limit (for all its cells together) was spent before it",
}
BUDGET_SPENT = "NotebookTimeout"     # a cell not run because its notebook's budget was spent (execute.BudgetedExecute)


def kernel_failure(outputs: list) -> str | None:
    """Why a cell gave no result, when the grading side knows it: a timeout or a kernel that died (else None)."""
    for output in outputs:
        if output.get("output_type") == "error" and output.get("ename") in GRADER_FAILURES:
            return f"{output['ename']}: {GRADER_FAILURES[output['ename']]}"
    return None
