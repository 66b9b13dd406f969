"""The test helpers that several exercises share, written once: `make exercises` copies each into the helpers cell
(grade id test_helpers) of every solution notebook that names it (`addnorm_grading.helpers`), so the released
notebooks, the learner's JupyterLab and the judge all read the same text. Edit them here, never in a notebook.

They are notebook code: `_withhold` and `_run` run in the learner's kernel (the helpers cell's `# [observe]`
part), `_is_normalized`, `_unchanged` and `_count_message` in the judge (its `# [check]` part); `_record_calls` and
`_refused_calls` are exercise 6's hidden checks' observing helpers (they call that notebook's `_logits`).
"""

import inspect

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


def _record_calls(model, src, tgt, src_mask, tgt_mask):
    """Run the model, recording what every encoder and decoder layer received (by name, in a fixed order) and
    returned, and the generator's input: (logits or None, (encoder, decoder, generator) calls, the type name of the
    exception the forward raised or None). A call is a flat tuple: (whether its arguments could be bound, whether it
    returned, its output, then its arguments in that order)."""
    names = {"encoder": ("x", "src_key_padding_mask"),
             "decoder": ("x", "memory", "tgt_key_padding_mask", "memory_key_padding_mask"), "generator": ("input",)}
    calls = {"encoder": [], "decoder": [], "generator": []}

    def _spy(kind, module):
        signature = inspect.signature(module.forward)

        def _record_arguments(module, args, kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                calls[kind].append([True, False, None, *(bound.arguments.get(name) for name in names[kind])])
            except TypeError:
                calls[kind].append([False, False, None, *(None for _ in names[kind])])

        def _record_output(module, args, kwargs, output):
            calls[kind][-1][1:3] = [True, output]

        return [module.register_forward_pre_hook(_record_arguments, with_kwargs=True),
                module.register_forward_hook(_record_output, with_kwargs=True)]

    hooks = [hook for kind, stack in (("encoder", model.encoder), ("decoder", model.decoder))
             for layer in stack.layers for hook in _spy(kind, layer)] + _spy("generator", model.generator)
    out, raised = None, None
    try:
        out = _logits(model, src, tgt, src_mask, tgt_mask)
    except Exception as exception:          # diagnosed in the judge from what ran before it
        raised = type(exception).__name__
    finally:
        for hook in hooks:
            hook.remove()
    return out, tuple([tuple(call) for call in calls[kind]] for kind in ("encoder", "decoder", "generator")), raised


def _refused_calls(run, methods):
    """run() with each (owner, name) of `methods` refused (replaced by a function that raises): (what run returned or
    None, the indices of the methods it called, the type name of the exception it raised or None)."""
    called, saved = [], [(owner, name, getattr(owner, name)) for owner, name in methods]

    def _refusal(index):
        def _refuse(*args, **kwargs):
            called.append(index)
            raise AssertionError("refused: the library's version of the answer")
        return _refuse

    out, raised = None, None
    try:
        for index, (owner, name, _) in enumerate(saved):
            setattr(owner, name, _refusal(index))
        out = run()
    except Exception as exception:
        raised = type(exception).__name__
    finally:
        for owner, name, method in saved:
            setattr(owner, name, method)
    return out, called, raised
