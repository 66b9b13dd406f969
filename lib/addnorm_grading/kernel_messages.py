"""A kernel's iopub messages as nbclient may process them: the learner's kernel writes them, the grader reads them.

nbclient trusts what a kernel sends. A message type it does not know is logged with its name (the learner's text,
escape characters included, on nbgrader's terminal); an error whose `ename` is not a string, or a stream whose
`name` is not one, fails nbformat's validation and stops the grading of the whole notebook; a `status` without an
`execution_state` raises KeyError. `checked(msg)` is what of a message reaches nbclient:

- the kinds nbclient handles, with the fields it reads of the types it reads them as;
- an output that nbformat would refuse becomes a short note in its place (an error stays an error, so a test cell
  that raised still scores zero);
- anything else is dropped, and nothing of it is logged.

The reply on the shell channel is the kernel's too: `checked_reply` is what of it nbclient and nbgrader read (nbgrader
copies an error reply's `ename`, `evalue` and `traceback` into the cell when no error output has that `ename`).

What cannot even be read as a message (a signature that does not match, content nested deeper than the JSON
decoder goes) fails in jupyter_client, before it gets here: `SandboxedExecute` counts that kernel as no longer
answering.

Before any of that, a message takes memory in the grader as it arrives: `KernelClient` is the client nbclient talks
to a kernel through, with no stdin channel (nbclient never reads one, so a kernel's input requests stayed queued in
the grader: 8 × 512 MB took it to 4.4 GB) and no frame larger than MAX_FRAME_BYTES from any channel (ZeroMQ drops
the connection that sends one). What a frame decodes to is capped too (`decoded`): 12 MB of `{},` decoded to 31
times its size, before anything could look at it.
"""

from __future__ import annotations

from typing import Any

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.session import json_unpacker
from nbformat.v4 import output_from_msg
from traitlets import default

OUTPUTS = frozenset({"stream", "display_data", "execute_result", "error", "update_display_data"})
CONTROL = frozenset({"status", "clear_output", "execute_input", "comm_open", "comm_msg", "comm_close"})
EXECUTION_STATES = frozenset({"starting", "busy", "idle"})
MALFORMED_ERROR = {"ename": "MalformedError", "evalue": "the kernel sent an error that is not in nbformat's form",
                   "traceback": []}
MALFORMED_OUTPUT = {"name": "stderr", "text": "[an output that is not in nbformat's form was dropped]\n"}
REPLY_CHARS = 100_000        # of an error reply's text, which nbgrader copies into the cell as an error output
MAX_FRAME_BYTES = 64 << 20   # of one part of a message (an observation is at most 16 MB of text)
MAX_FRAME_VALUES = 1_000_000  # JSON values in one part, counted from above by its commas, braces and brackets


def decoded(frame: bytes) -> Any:
    """One part of a kernel's message (its header, parent header, metadata or content) decoded from JSON, as
    jupyter_client does it; a part with more than MAX_FRAME_VALUES values decodes to {} (a message without a type,
    or an output without its fields: dropped or made a note by `checked`). A value costs tens of bytes once decoded,
    a character of a string one; an output is cut at a million characters anyway."""
    values = frame.count(b",") + frame.count(b"{") + frame.count(b"[")
    return {} if values > MAX_FRAME_VALUES else json_unpacker(frame)


class KernelClient(AsyncKernelClient):
    """nbclient's kernel client without a stdin channel, and with caps on the frames it receives and on what each
    decodes to."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.session.unpack = decoded

    @default("context")
    def _capped_context(self) -> zmq.asyncio.Context:
        context = super()._context_default()
        context.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)      # the default of every socket made from it
        return context

    def start_channels(self, shell=True, iopub=True, stdin=True, hb=True, control=True) -> None:
        """The channels nbclient uses; never stdin (nbclient does not answer input requests)."""
        super().start_channels(shell=shell, iopub=iopub, stdin=False, hb=hb, control=control)


def checked(msg: Any) -> dict | None:
    """`msg` as nbclient may process it, a well-formed stand-in for an output nbformat refuses, or None (dropped)."""
    if not isinstance(msg, dict):
        return None
    header, content, msg_type = msg.get("header"), msg.get("content"), msg.get("msg_type")
    if not (isinstance(header, dict) and isinstance(content, dict) and isinstance(msg_type, str)
            and header.get("msg_type") == msg_type and msg_type in OUTPUTS | CONTROL):
        return None
    content = _plain_fields(content)
    if msg_type == "execute_result":
        content.setdefault("execution_count", None)
    if msg_type == "status" and content.get("execution_state") not in EXECUTION_STATES:
        return None
    if msg_type in OUTPUTS and not _valid_output(msg_type, content):
        if msg_type == "update_display_data":
            return None
        msg_type, content = ("error", MALFORMED_ERROR) if msg_type == "error" else ("stream", MALFORMED_OUTPUT)
    return {**msg, "msg_type": msg_type, "header": {**header, "msg_type": msg_type}, "content": content}


def _plain_fields(content: dict) -> dict:
    """The content with the two fields nbclient reads of every message kept only when they are what it expects:
    an execution count (an integer or None) and a transient display id (a string)."""
    content = dict(content)
    if "execution_count" in content and not (content["execution_count"] is None
                                             or _is_count(content["execution_count"])):
        del content["execution_count"]
    transient = content.get("transient")
    if "transient" in content and not (isinstance(transient, dict) and set(transient) <= {"display_id"}
                                       and isinstance(transient.get("display_id", ""), str)):
        del content["transient"]
    return content


def _is_count(value: Any) -> bool:
    """Whether `value` is an execution count as nbformat writes one (a bool is an int to Python, not to JSON)."""
    return type(value) is int and value >= 0


def _valid_output(msg_type: str, content: dict) -> bool:
    """Whether nbformat makes an output of this message (its schema decides, as when the notebook is written)."""
    as_output = "display_data" if msg_type == "update_display_data" else msg_type
    try:
        output_from_msg({"header": {"msg_type": as_output}, "content": content})
    except Exception:                    # KeyError (a field missing), nbformat's ValidationError, RecursionError
        return False
    return True


def checked_reply(content: Any) -> dict:
    """An execute_reply's content as nbclient and nbgrader read it: a status ("ok", "error" or "aborted"), an
    execution count if it is one, and for an error an ename, an evalue and a traceback of strings, at most
    REPLY_CHARS of them (else the traceback is only its first line)."""
    if not isinstance(content, dict):
        return {"status": "error", **MALFORMED_ERROR}
    status = content.get("status")
    checked = {"status": status if status in ("ok", "error", "aborted") else "error"}
    if _is_count(content.get("execution_count")):
        checked["execution_count"] = content["execution_count"]
    if checked["status"] != "error":
        return checked
    ename, evalue, traceback = (content.get(key) for key in ("ename", "evalue", "traceback"))
    if not (isinstance(ename, str) and isinstance(evalue, str) and isinstance(traceback, list)
            and all(isinstance(line, str) for line in traceback)):
        return {**checked, **MALFORMED_ERROR}
    ename, evalue = ename[:REPLY_CHARS], evalue[:REPLY_CHARS]
    if len(ename) + len(evalue) + sum(map(len, traceback)) > REPLY_CHARS:
        traceback = [f"{ename}: {evalue}"[:REPLY_CHARS]]
    return {**checked, "ename": ename, "evalue": evalue, "traceback": traceback}
