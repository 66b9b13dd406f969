import inspect

import torch

# [inputs]
# the visible test's weights again, in a model of the judge's own (the visible checks change `reference`)
diagnosed_reference = _library_model(weights, norm_first=True)
# another model and a batch of 4
torch.manual_seed(SEED + 22)
other_reference = _perturbed(addnorm.Transformer(VOCAB, VOCAB, norm_first=True, **SMALL), SEED + 22)
other_weights = _weights(other_reference)
other_src, other_tgt, other_src_mask, other_tgt_mask = _padded_batch(SEED + 22, batch=4)
# the same model instance called again: on a batch of another size and length, and on the first batch again
later_src, later_tgt, later_src_mask, later_tgt_mask = _padded_batch(SEED + 32, batch=2, tgt_len=4)
# [observe]
# [shared helpers: _record_calls]
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
# [end of shared helpers]


diagnosed = WholeTransformer(VOCAB, VOCAB, norm_first=True, **SMALL).eval()
diagnosed.load_state_dict(weights)                           # addnorm's weights, as in the visible test
_, diagnosed_calls, diagnosed_raised = _record_calls(diagnosed, src, tgt, src_mask, tgt_mask)
other_model = WholeTransformer(VOCAB, VOCAB, norm_first=True, **SMALL).eval()
other_model.load_state_dict(other_weights)
other_logits, other_calls, other_raised = _record_calls(other_model, other_src, other_tgt, other_src_mask, other_tgt_mask)
later_logits, _, later_raised = _record_calls(other_model, later_src, later_tgt, later_src_mask, later_tgt_mask)
again_logits, _, again_raised = _record_calls(other_model, other_src, other_tgt, other_src_mask, other_tgt_mask)
# [diagnose]
_diagnose(diagnosed_reference, src, tgt, src_mask, tgt_mask, diagnosed_calls, diagnosed_raised)
_diagnose(other_reference, other_src, other_tgt, other_src_mask, other_tgt_mask, other_calls, other_raised)
# [check]
# every run against addnorm.Transformer with the same weights (computed here); the same instance twice alike
for raised in (other_raised, later_raised, again_raised):
    assert raised is None, "Your forward raised an exception on the hidden test's inputs (a batch of another size)"
_same_logits(other_logits, _logits(other_reference, other_src, other_tgt, other_src_mask, other_tgt_mask))
_same_logits(later_logits, _logits(other_reference, later_src, later_tgt, later_src_mask, later_tgt_mask))
assert torch.equal(again_logits, other_logits), (
    "Your model gives different logits for the same inputs at two calls (in eval mode): keep nothing from an "
    "earlier call, and no randomness in forward")
