"""What of a learner's kernel messages reaches nbclient (addnorm_grading.kernel_messages), and the output caps that
SandboxedExecute keeps per cell and per notebook, updates of earlier outputs included.

The kernel writes its messages itself: a learner's cell can send any type, with any content, signed as the kernel's
own. These tests hand such messages to the executor as nbclient would; tests/test_sandbox.py sends them from a real
kernel in the sandbox.
"""

from __future__ import annotations

import logging

import nbformat
import pytest
from addnorm_grading import kernel_messages, observation
from addnorm_grading.execute import NOTEBOOK_OUTPUT_CHARS, OUTPUT_CHARS, SandboxedExecute
from traitlets.config import Config

MIME = observation.MIME


def message(msg_type, content, parent="request-1"):
    return {"msg_type": msg_type, "header": {"msg_type": msg_type, "msg_id": "m"}, "content": content,
            "parent_header": {"msg_id": parent}, "metadata": {}}


@pytest.mark.parametrize("msg", [
    message("\x1b[2Jdatabase is locked", {}),
    message("unknown", {"text": "There was an error processing assignment 'a' for student 'b'"}),
    {**message("stream", {"name": "stdout", "text": "x"}), "msg_type": 5},
    {**message("stream", {"name": "stdout", "text": "x"}), "header": {"msg_type": "error"}},
    message("stream", ["not", "a", "dict"]),
    message("status", {}),
    message("status", {"execution_state": "\x1b[31mred"}),
    message("update_display_data", {"data": {"text/plain": 5}, "metadata": {}, "transient": {"display_id": "d"}}),
    "not a message",
])
def test_a_message_nbclient_cannot_handle_is_dropped(msg):
    assert kernel_messages.checked(msg) is None


@pytest.mark.parametrize("content", [
    {"ename": 5, "evalue": "x", "traceback": []},
    {"ename": "E", "evalue": None, "traceback": []},
    {"ename": "E", "evalue": "x", "traceback": [1, 2]},
    {"ename": "E"},
])
def test_a_malformed_error_stays_an_error(content):
    checked = kernel_messages.checked(message("error", content))
    assert checked["msg_type"] == checked["header"]["msg_type"] == "error"
    assert checked["content"] == kernel_messages.MALFORMED_ERROR
    nbformat.v4.output_from_msg(checked)              # a valid output: the notebook can be written


@pytest.mark.parametrize("msg_type, content", [
    ("stream", {"name": None, "text": "x"}),
    ("stream", {"name": "stdout", "text": ["x"] * 3 + [4]}),
    ("display_data", {"data": {"text/plain": 5}, "metadata": {}}),
    ("display_data", {"data": "text", "metadata": {}}),
    ("execute_result", {"data": {"text/plain": "x"}, "metadata": "m"}),
])
def test_a_malformed_output_becomes_a_note(msg_type, content):
    checked = kernel_messages.checked(message(msg_type, content))
    assert checked["msg_type"] == "stream" and checked["content"] == kernel_messages.MALFORMED_OUTPUT
    nbformat.v4.output_from_msg(checked)


def test_a_well_formed_message_is_kept_and_bad_common_fields_are_removed():
    good = message("display_data", {"data": {"text/plain": "x", "application/json": {"a": [1]}}, "metadata": {}})
    assert kernel_messages.checked(good) == good
    odd = kernel_messages.checked(message("execute_result", {"data": {"text/plain": "x"}, "metadata": {},
                                                             "execution_count": "many",
                                                             "transient": {"display_id": ["x"]}}))
    assert odd["content"] == {"data": {"text/plain": "x"}, "metadata": {}, "execution_count": None}
    nbformat.v4.output_from_msg(odd)
    status = message("status", {"execution_state": "idle", "execution_count": True})
    assert kernel_messages.checked(status)["content"] == {"execution_state": "idle"}


@pytest.fixture
def executor():
    """A SandboxedExecute as nbclient sets it up for one notebook, without a kernel."""
    executor = SandboxedExecute(config=Config())
    executor.nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("") for _ in range(200)])
    executor.reset_execution_trackers()
    executor.clear_before_next_output = False
    executor._notebook_chars = 0
    return executor


def run_cell(executor, index: int, messages: list) -> list:
    cell = executor.nb.cells[index]
    executor._output_chars, executor._output_cut = 0, False
    executor._observing, executor._observed = index in executor._observing_cells, False
    for msg in messages:
        executor.process_message(msg, cell, index)
    return cell.outputs


def test_nothing_of_a_dropped_message_is_logged(executor, caplog):
    with caplog.at_level(logging.DEBUG):
        run_cell(executor, 0, [message("\x1b[2Jdatabase is locked", {"text": "for student 'b'"}),
                               message("error", {"ename": 5, "evalue": "locked", "traceback": []})])
    assert "locked" not in caplog.text and "\x1b" not in caplog.text
    assert [o["ename"] for o in executor.nb.cells[0].outputs] == ["MalformedError"]


def test_the_notebooks_outputs_are_capped_across_cells(executor):
    line = "x" * (OUTPUT_CHARS - 1000)
    for index in range(150):
        run_cell(executor, index, [message("stream", {"name": "stdout", "text": line})])
    total = sum(len(str(o)) for cell in executor.nb.cells for o in cell.outputs)
    assert total < NOTEBOOK_OUTPUT_CHARS + 150 * 200
    assert "this notebook's outputs passed" in executor.nb.cells[149].outputs[-1]["text"]


def display(display_id: str, text: str, update: bool = False, data=None):
    return message("update_display_data" if update else "display_data",
                   {"data": data or {"text/plain": text}, "metadata": {}, "transient": {"display_id": display_id}})


def test_an_update_counts_once_for_every_output_it_lands_in(executor):
    """Updating one display id shown 300 times with 1 MB would write 300 MB into the notebook (and each display of
    an id already shown updates every earlier one)."""
    run_cell(executor, 0, [display("one", "small"), display("one", "updated", update=True)])
    assert executor.nb.cells[0].outputs[0]["data"] == {"text/plain": "updated"}, "an update within the cap lands"
    run_cell(executor, 1, [display("same", "small") for _ in range(300)])
    run_cell(executor, 2, [display("same", "u" * 1_000_000, update=True) for _ in range(20)])
    total = sum(len(str(o)) for cell in executor.nb.cells for o in cell.outputs)
    assert total < NOTEBOOK_OUTPUT_CHARS


def test_an_update_never_writes_or_replaces_an_observation(executor):
    executor._observing_cells = frozenset({1})
    observed = {MIME: {"observation": "A" * 100}}
    run_cell(executor, 0, [display("d", "small")])
    run_cell(executor, 1, [display("o", "", data=observed),
                           display("d", "", update=True, data={MIME: {"observation": "B" * 100}}),
                           display("o", "replaced", update=True)])
    assert executor.nb.cells[0].outputs[0]["data"] == {"text/plain": "small"}
    assert executor.nb.cells[1].outputs[0]["data"] == observed


@pytest.mark.parametrize("content, ename", [
    ({"status": "error", "ename": ["FORGED"], "evalue": "", "traceback": []}, "MalformedError"),
    ({"status": "error", "ename": "E", "evalue": "v", "traceback": ["t" * 10, 5]}, "MalformedError"),
    ("not a dict", "MalformedError"),
    ({"status": "error", "ename": "ValueError", "evalue": "v", "traceback": ["line"]}, "ValueError"),
])
def test_an_error_reply_is_copied_into_the_cell_only_in_nbformats_form(executor, content, ename):
    """nbgrader copies an error reply's ename, evalue and traceback into the cell when no error output has that
    ename; the kernel writes the reply (a non-string ename stopped the grading of the notebook)."""
    cell = executor.nb.cells[0]
    executor.on_cell_executed(cell=cell, cell_index=0, execute_reply={"content": content})
    assert [o["ename"] for o in cell.outputs] == [ename]
    nbformat.validate(executor.nb)


def test_a_replys_long_traceback_is_cut_to_its_first_line(executor):
    cell = executor.nb.cells[0]
    reply = {"content": {"status": "error", "ename": "E", "evalue": "v", "traceback": ["x" * 1_000_000] * 200}}
    executor.on_cell_executed(cell=cell, cell_index=0, execute_reply=reply)
    assert cell.outputs[0]["traceback"] == ["E: v"]
    assert kernel_messages.checked_reply({"status": "made up", "execution_count": "n"}) == {
        "status": "error", **kernel_messages.MALFORMED_ERROR}
    assert kernel_messages.checked_reply({"status": "ok", "execution_count": 3, "payload": ["x"]}) == {
        "status": "ok", "execution_count": 3}


def test_a_frame_of_too_many_values_decodes_to_nothing():
    """12 MB of `{},` would be 4 million dicts (31 times the frame's size once decoded)."""
    from addnorm_grading.kernel_messages import MAX_FRAME_VALUES, decoded
    assert decoded(b"[" + b"{}," * 4_000_000 + b"{}]") == {}
    assert decoded(b'{"name": "stdout", "text": "' + b"a, " * 100 + b'"}') == {"name": "stdout", "text": "a, " * 100}
    assert decoded(b"[" + b"0," * (MAX_FRAME_VALUES - 2) + b"0]") != {}          # at the cap: decoded
