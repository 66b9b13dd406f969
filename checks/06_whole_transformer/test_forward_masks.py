import inspect

import torch

# [inputs]
hidden_src, hidden_tgt, hidden_src_mask, hidden_tgt_mask = _padded_batch(SEED + 23, batch=6, tgt_len=7)
memory_padding_changed = hidden_src.masked_fill(hidden_src_mask, 11)
first_changed = hidden_tgt.clone()
first_changed[:, 1] = 3 + (hidden_tgt[:, 1] - 2) % 10
hidden_mask_cases = []
for hidden_norm_first in (False, True):
    torch.manual_seed(SEED + 23)
    hidden_mask_cases.append((hidden_norm_first, _weights(_perturbed(
        addnorm.Transformer(VOCAB, VOCAB, norm_first=hidden_norm_first, **SMALL), SEED + 23))))
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


hidden_mask_runs, hidden_mask_calls = [], []            # (the calls apart: an observation is at most 4 deep)
for run_norm_first, run_weights in hidden_mask_cases:
    masked_model = WholeTransformer(VOCAB, VOCAB, norm_first=run_norm_first, **SMALL).eval()
    masked_model.load_state_dict(run_weights)
    run_logits, run_calls, run_raised = _record_calls(masked_model, hidden_src, hidden_tgt, hidden_src_mask,
                                                      hidden_tgt_mask)
    hidden_mask_calls.append(run_calls)
    hidden_mask_runs.append((run_raised, run_logits,
                             _logits(masked_model, memory_padding_changed, hidden_tgt, hidden_src_mask, hidden_tgt_mask),
                             _logits(masked_model, hidden_src, first_changed, hidden_src_mask, hidden_tgt_mask)))
del run_weights                                # the test's own data: not an observation
# [diagnose]
for (case_norm_first, case_weights), calls, (raised, *_) in zip(hidden_mask_cases, hidden_mask_calls,
                                                                hidden_mask_runs, strict=True):
    _diagnose(_library_model(case_weights, norm_first=case_norm_first), hidden_src, hidden_tgt, hidden_src_mask,
              hidden_tgt_mask, calls, raised, f"norm_first={case_norm_first}", masks_only=True)
# [check]
for (case_norm_first, case_weights), calls, (raised, logits_run, padding_run, first_run) in zip(
        hidden_mask_cases, hidden_mask_calls, hidden_mask_runs, strict=True):
    assert torch.allclose(padding_run, logits_run, atol=1e-5), (
        "Padding is not masked in cross-attention: new tokens at padded source positions change the decoder's output. "
        "Pass src_key_padding_mask as every decoder layer's memory_key_padding_mask.")
    assert not torch.allclose(first_run[:, 2:], logits_run[:, 2:], atol=1e-5), (
        "Later positions ignore the earlier target tokens: the decoder's input must be self.tgt_embed(tgt)")
