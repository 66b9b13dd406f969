"""Helpers that several hidden checks share, written once: `make exercises` copies each into the hidden checks that
name it in a `# [shared helpers: …]` block (addnorm_grading.helpers), as it does the visible ones from
addnorm_grading/helper_source.py. Like everything in checks/, this file stays in the instructor's copy.

`_record_calls` and `_refused_calls` observe, in the learner's kernel, for exercise 6's hidden checks (they call
that notebook's `_logits`).
"""

import inspect


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
