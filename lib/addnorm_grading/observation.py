"""What crosses between the learner's kernel and the judge: data that cannot run code when it is loaded.

A judged test runs in two places (`addnorm_grading.judge`). Its *observing* part runs in the learner's kernel: it
calls the learner's code on the inputs the judge made and `observe` sends back what came out — tensors, numbers,
strings, shapes, and the type and text of an exception the code raised. Both directions are `torch.save` of plain
containers, read back with `torch.load(weights_only=True)` (which builds no object but tensors and plain data,
never runs pickled code) and base64 in a JSON display message. Everything read back is capped in size, and the
judge treats it as what it is: what the learner's process says.

This module is imported in the learner's kernel, so the learner's code can replace it: nothing here decides a grade.
"""

from __future__ import annotations

import base64
import io
import linecache
import traceback
import zipfile
from typing import Any

import torch

MIME = "application/vnd.addnorm.observation+json"
OBSERVE_FILE = "<grader: observe>"        # the file name of the observing code in tracebacks
MAX_BYTES = 16 * 1024 * 1024              # the largest observation the judge reads (base64 text)
MAX_PICKLE_BYTES = 512 * 1024             # of it, the pickled structure (its tensors' numbers are stored apart)
MAX_TEXT = 300                            # characters kept of a string from the learner's process
MAX_ITEMS = 1000                          # items kept of a list, tuple or dict from it
MAX_FRAMES = 8                            # source lines kept of the frames an exception passed through
MAX_ELEMENTS = 20_000_000               # numbers in all of one observation's tensors (an expanded tensor: all it shows)
MAX_DEPTH = 12                          # containers inside containers in one observation
MAX_NODES = 100_000                     # containers, strings and numbers in one observation
OBJECT, RAISED = "__addnorm_object__", "__addnorm_raised__"    # markers: an object that is not data; an exception
OBSERVING = "_addnorm_observing"          # set in the learner's namespace while a test observes


class ObservationError(ValueError):
    """An observation that is missing, malformed or too large (the message says which)."""


def encode(values: Any) -> str:
    """Plain data (tensors, numbers, strings, tuples, lists, dicts) as base64 text."""
    buffer = io.BytesIO()
    torch.save(values, buffer)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode(text: Any, limit: int = MAX_BYTES) -> Any:
    """The data of `encode`, loaded without running code; ObservationError if it is not that."""
    if not isinstance(text, str):
        raise ObservationError(f"expected base64 text, got {type(text).__name__}")
    if len(text) > limit:
        raise ObservationError(f"it is {len(text):,} characters long, more than the {limit:,} allowed")
    try:
        raw = base64.b64decode(text, validate=True)
        _check_archive(raw)
        return torch.load(io.BytesIO(raw), weights_only=True)
    except ObservationError:
        raise
    except Exception as error:                     # any malformed payload: never a crash of the batch
        raise ObservationError(f"it cannot be read as data ({type(error).__name__})") from None


def _check_archive(raw: bytes) -> None:
    """`torch.save` stores its archive's files as they are; a compressed one would inflate inside `torch.load`
    (one C call: no time limit stops it) to many times the size this module checked. And the pickle that says how
    the values are nested is read one opcode at a time by torch's pure-Python unpickler, about 1.7 µs each here:
    16 MB of one-byte opcodes would take half a minute. It is capped at MAX_PICKLE_BYTES (at most 0.9 s; a test's
    observation has a few hundred bytes of it, 100,000 numbers in lists 270 kB)."""
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        entries = archive.infolist()
    pickled = sum(entry.file_size for entry in entries if entry.filename.endswith(".pkl"))
    if pickled > MAX_PICKLE_BYTES:
        raise ObservationError(f"its structure is {pickled:,} bytes, more than the {MAX_PICKLE_BYTES:,} allowed")
    packed = [entry.filename for entry in entries if entry.compress_type != zipfile.ZIP_STORED]
    if packed:
        raise ObservationError(f"expected the uncompressed archive torch.save writes, got {len(packed)} "
                               f"compressed file(s) in it")
    if sum(entry.file_size for entry in entries) > len(raw):
        raise ObservationError("its archive says its files are larger than the archive")


def as_data(value: Any, depth: int = 0) -> Any:
    """`value` as plain data: tensors detached and copied, containers capped, other objects replaced by a marker
    that names their type."""
    if isinstance(value, torch.Tensor):                # a subclass becomes a plain tensor: only its numbers cross
        return value.detach().cpu().as_subclass(torch.Tensor).clone().contiguous()
    if value is None or type(value) in (bool, int, float):
        return value
    if type(value) is str:
        return value[:MAX_TEXT]
    if isinstance(value, torch.Size):
        return tuple(int(n) for n in value)
    if isinstance(value, torch.dtype):
        return (OBJECT, str(value))
    if depth < 4 and type(value) in (tuple, list):
        items = [as_data(v, depth + 1) for v in list(value)[:MAX_ITEMS]]
        return tuple(items) if type(value) is tuple else items
    if depth < 4 and type(value) is dict:
        return {str(k)[:MAX_TEXT]: as_data(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}
    return (OBJECT, type(value).__name__[:MAX_TEXT])


def describe(error: BaseException) -> tuple:
    """An exception as data: (RAISED, type name, text, the source lines of the innermost frames that raised it,
    innermost last, the observing line it came from)."""
    frames = traceback.extract_tb(error.__traceback__)
    observing = [f for f in frames if f.filename == OBSERVE_FILE]
    inner = [f for f in frames if f.filename != OBSERVE_FILE][-MAX_FRAMES:]
    lines = tuple((f.line or linecache.getline(f.filename, f.lineno)).strip()[:MAX_TEXT] for f in inner)
    return (RAISED, type(error).__name__[:MAX_TEXT], str(error)[:MAX_TEXT], lines,
            observing[-1].lineno if observing else 0)


def observe(namespace: dict, inputs: str, source: str, names: list[str], resume_at: int = 0) -> None:
    """Run a test's observing code in the learner's namespace, on the judge's inputs, and display what it found:
    the values of `names` that it assigned, and the first exception that stopped it, if any. `resume_at`: when the
    lines before it raise, the observing code goes on from that line (a hidden test's own observations)."""
    for name in names:
        namespace.pop(name, None)
    namespace.update(decode(inputs))
    raised = None
    lines = source.splitlines()
    blocks = [(0, lines[:resume_at]), (resume_at, lines[resume_at:])] if 0 < resume_at < len(lines) else [(0, lines)]
    namespace[OBSERVING] = True                     # the notebooks' `_run` then lets the learner's exception through
    try:
        for start, block in blocks:
            try:                                    # line numbers as in the whole observing code
                exec(compile("\n" * start + "\n".join(block), OBSERVE_FILE, "exec"), namespace)
            except Exception as error:              # the learner's code raised: that is an observation too
                raised = raised or describe(error)
    finally:
        namespace.pop(OBSERVING, None)
    found = {name: as_data(namespace[name]) for name in names if name in namespace}
    from IPython.display import display
    display({MIME: {"observation": encode({"values": found, "raised": raised})}}, raw=True)


def within_limits(data: Any) -> None:
    """Check a decoded observation's size without recursing: nesting depth, count of items, tensor elements (a
    stride-0 or expanded tensor counts every element it presents). ObservationError, saying which, when over."""
    elements, nodes, stack = 0, 0, [(data, 0)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ObservationError(f"it holds more than {MAX_NODES:,} values")
        if isinstance(value, torch.Tensor):
            elements += value.numel()
            if elements > MAX_ELEMENTS:
                raise ObservationError(f"its tensors hold more than {MAX_ELEMENTS:,} numbers")
        elif isinstance(value, (list, tuple, dict)):
            if depth >= MAX_DEPTH:
                raise ObservationError(f"it nests containers more than {MAX_DEPTH} deep")
            items = list(value.items()) if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
        elif not (value is None or isinstance(value, (bool, int, float, str))):
            raise ObservationError(f"it holds a {type(value).__name__}, which is not plain data")


def read(outputs: list) -> dict:
    """The one observation in a cell's outputs: {"values": {...}, "raised": tuple | None}. ObservationError if
    there is none, more than one, or it is malformed or too large."""
    found = [o for o in outputs if o.get("output_type") == "display_data" and MIME in o.get("data", {})]
    if len(found) != 1:
        raise ObservationError("none arrived" if not found else f"{len(found)} arrived instead of one")
    payload = found[0]["data"][MIME]
    if not isinstance(payload, dict) or set(payload) != {"observation"}:
        raise ObservationError("it is not in the expected form")
    data = decode(payload["observation"])
    within_limits(data)
    if not isinstance(data, dict) or set(data) != {"values", "raised"} or not isinstance(data["values"], dict):
        raise ObservationError("it is not in the expected form")
    raised = data["raised"]
    if raised is not None and not (isinstance(raised, tuple) and len(raised) == 5 and raised[0] == RAISED
                                   and all(isinstance(x, str) for x in raised[1:3])
                                   and isinstance(raised[3], tuple) and all(isinstance(x, str) for x in raised[3])
                                   and isinstance(raised[4], int)):
        raise ObservationError("its exception is not in the expected form")
    return data
