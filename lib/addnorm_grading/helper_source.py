"""The test helpers that several exercises share, written once: `make exercises` copies each into the helpers cell
(grade id test_helpers) of every solution notebook that names it (`addnorm_grading.helpers`), so the released
notebooks, the learner's JupyterLab and the judge all read the same text. Edit them here, never in a notebook.

They are notebook code: `_withhold` and `_run` run in the learner's kernel (the helpers cell's `# [observe]`
part), `_is_normalized`, `_unchanged` and `_count_message` in the judge (its `# [check]` part). Helpers that only hidden
checks share live in the instructor's copy, checks/_helpers.py, never in this package (the sandbox can read it).
"""

import torch


def _withhold(functions, message):
    """From here on, calling any of `functions` — however it was imported or wrapped — fails with `message`.

    These are the library's (or torch's) own versions of what this exercise asks you to write; their code is
    replaced, so a class that delegates to them fails here, with the message, instead of passing unnoticed.
    """
    scope = {}
    exec(f"def _withheld(*args, **kwargs):\n    raise AssertionError({message!r})", scope)
    for function in functions:
        function.__code__ = scope["_withheld"].__code__


def _run(what, function, *args, hint="", **kwargs):
    """Call function(*args, **kwargs); turn a crash into one short message that names the line that raised it."""
    import traceback

    if globals().get("_addnorm_observing"):       # being graded: the grader writes that message itself
        return function(*args, **kwargs)
    try:
        return function(*args, **kwargs)
    except AssertionError:
        raise
    except Exception as error:
        helpers = _run.__code__.co_filename                       # this cell: the tests' helpers, not your code
        yours = [frame for frame in traceback.extract_tb(error.__traceback__)[1:] if frame.filename != helpers
                 and ("ipykernel" in frame.filename or frame.filename.startswith("<"))]
        where = f" at `{yours[-1].line}`" if yours and yours[-1].line else ""
        message = f"{what} raised {type(error).__name__}{where}: {str(error).rstrip('.')}. {hint}".strip()
        raise AssertionError(message) from None


def _is_normalized(t):
    """True when every token (last axis) of t has mean 0 and variance 1, as a LayerNorm at γ = 1, β = 0 leaves it."""
    t = t.detach().double()
    return bool(t.mean(dim=-1).abs().max() < 1e-3 and (t.var(dim=-1, correction=0) - 1).abs().max() < 1e-2)


def _unchanged(before, after, what):
    """Fail when a tensor the tests passed in was modified in place."""
    assert torch.equal(before, after), (
        f"Your code changed {what} in place (an in-place operation such as x += …, x.sub_(…) or x[...] = …): "
        f"the caller's tensor is corrupted. Compute a new tensor instead (x = x + …).")


def _count_message(what, expected, got, fewer, more):
    """A parameter-count message that tells "fewer" from "more"."""
    if got < expected:
        return f"{what} should have {expected} parameters, yours has {got}: fewer. {fewer}"
    return f"{what} should have {expected} parameters, yours has {got}: more. {more}"
