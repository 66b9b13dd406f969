"""Helpers that several hidden checks share, written once: `make exercises` copies each into the hidden checks that
name it in a `# [shared helpers: …]` block (addnorm_grading.helpers), as it does the visible ones from
addnorm_grading/helper_source.py. Like everything in checks/, this file stays in the instructor's copy.

`_record_calls` and `_refused_calls` observe, in the learner's kernel, for exercise 6's hidden checks (they call
that notebook's `_logits`). `_judge_norms`, `_judge_called`, `_judge_counted` and `_judge_gradient_run` observe for
exercise 1's (they use that notebook's `_linear`, and `torch` from the check's own imports).
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


def _judge_norms(block, gamma, beta, most=8):
    """Exercise 1: give the block's LayerNorm-like modules (a 1-D weight of γ's size, at most `most`) the test's γ and
    β (β where it has one), and return them. Which modules the block shows only says where to load the values: the
    checks verify by the output that the norm it applies got them."""
    norms = []
    with torch.no_grad():
        for module in block.modules():
            weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
            if len(norms) < most and isinstance(weight, torch.Tensor) and tuple(weight.shape) == tuple(gamma.shape):
                weight.copy_(gamma)
                if isinstance(bias, torch.Tensor) and tuple(bias.shape) == tuple(beta.shape):
                    bias.copy_(beta)
                norms.append(module)
    return norms


def _judge_called(block, x, sublayer):
    """Exercise 1: block(x, sublayer), or None when it raises (a block that keeps something from an earlier call may
    fail at another shape)."""
    try:
        return block(x, sublayer)
    except Exception:
        return None


def _judge_counted(f):
    """Exercise 1: a sublayer whose k-th call returns k · f(h), so that a block calling it more than once shows in its
    output."""
    calls = []

    def _judge_counted_sublayer(h):
        calls.append(None)
        return f(h) * len(calls)

    return _judge_counted_sublayer


def _judge_gradient_run(block, norms, x, weight, bias, upstream):
    """Exercise 1: the block on a copy of x that requires a gradient, around the sublayer h ↦ (h + probe) Wᵀ + b
    (probe: a zero leaf, whose gradient is the one that reaches the sublayer's input), and (output · upstream).sum()
    backpropagated: (output, [x's, the probe's, W's and b's gradients], [(γ's, β's gradient) of each of `norms`]), or
    None when the block raises."""
    linear = _linear(weight, bias)
    probe = torch.zeros(x.shape, requires_grad=True)
    x_leaf = x.clone().requires_grad_()
    try:
        out = block(x_leaf, lambda h: linear(h + probe))
        if isinstance(out, torch.Tensor) and out.requires_grad:
            (out * upstream).sum().backward()
    except Exception:
        return None
    norm_grads = []
    for norm in norms:
        bias_ = getattr(norm, "bias", None)
        norm_grads.append((norm.weight.grad, bias_.grad if isinstance(bias_, torch.Tensor) else None))
    return out, [x_leaf.grad, probe.grad, linear.weight.grad, linear.bias.grad], norm_grads
