"""The grader's parser survives what killed a grading run on CPython 3.11: a finalizer that parses, run by the
garbage collector while a tree is being built (see addnorm_grading.parsing)."""

import ast
import asyncio
import gc
import io
import logging
import threading
from pathlib import Path

from addnorm_grading import parsing

JUDGE_SOURCE = (Path(__file__).parents[1] / "lib" / "addnorm_grading" / "judge.py").read_text()


async def _fails():
    raise AssertionError()


def _leave_an_unretrieved_task():
    """A finished task whose exception nobody read, kept in a cycle so that only the collector frees it: its
    finalizer logs the exception with its traceback, as nbclient's kernel poll leaves one when a kernel dies."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(_fails())
    loop.run_until_complete(asyncio.sleep(0))
    loop.run_until_complete(asyncio.sleep(0))
    task.itself = task
    loop.close()


def _parse_beside_garbage(parse, rounds=20) -> list[str]:
    """The experiment in a thread of its own: no event loop runs there, whatever an earlier test (a browser's
    session, say) left running in the main thread."""
    failures = []
    thread = threading.Thread(target=lambda: failures.extend(_experiment(parse, rounds)))
    thread.start()
    thread.join()
    return failures


def _experiment(parse, rounds) -> list[str]:
    threshold = gc.get_threshold()
    log, unseen = logging.getLogger("asyncio"), logging.StreamHandler(io.StringIO())
    log.addHandler(unseen)                                   # the finalizer formats the traceback, as nbclient's does
    log.propagate = False
    gc.set_threshold(50)                                    # collections often, as a busy grader has them
    failures = []
    try:
        for _ in range(rounds):
            _leave_an_unretrieved_task()
            try:
                parse(JUDGE_SOURCE)
            except SystemError as error:
                failures.append(str(error))
    finally:
        gc.set_threshold(*threshold)
        log.removeHandler(unseen)
        log.propagate = True
        gc.collect()
    return failures


def test_the_garbage_collector_breaks_a_plain_parse():
    """The experiment reproduces the fault (on the course's Python 3.11), so the test below can fail."""
    failures = _parse_beside_garbage(ast.parse)
    assert failures and all("recursion depth mismatch" in failure for failure in failures)


def test_the_garbage_collector_cannot_break_the_graders_parse():
    assert _parse_beside_garbage(parsing.parse) == []


def test_the_parse_returns_the_tree_and_leaves_the_collector_as_it_was():
    assert isinstance(parsing.parse("x = 1"), ast.Module)
    assert gc.isenabled()
    gc.disable()
    try:
        parsing.parse("x = 1")
        assert not gc.isenabled()
    finally:
        gc.enable()
