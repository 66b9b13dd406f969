import inspect

import torch

# [inputs]
hidden_src, hidden_tgt, hidden_src_mask, hidden_tgt_mask = _padded_batch(SEED + 23, batch=6, tgt_len=7)
memory_padding_changed = hidden_src.masked_fill(hidden_src_mask, 11)
first_changed = hidden_tgt.clone()
first_changed[:, 1] = 3 + (hidden_tgt[:, 1] - 2) % 10
torch.manual_seed(SEED + 33)
future_changed = hidden_tgt.clone()                     # new target tokens at positions 3 and later
future_changed[:, 3:] = torch.randint(3, VOCAB, (hidden_tgt.shape[0], hidden_tgt.shape[1] - 3))
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
                             _logits(masked_model, hidden_src, first_changed, hidden_src_mask, hidden_tgt_mask),
                             _logits(masked_model, hidden_src, future_changed, hidden_src_mask, future_changed == PAD)))
del run_weights                                # the test's own data: not an observation
# [diagnose]
for (case_norm_first, case_weights), calls, (raised, *_) in zip(hidden_mask_cases, hidden_mask_calls,
                                                                hidden_mask_runs, strict=True):
    _diagnose(_library_model(case_weights, norm_first=case_norm_first), hidden_src, hidden_tgt, hidden_src_mask,
              hidden_tgt_mask, calls, raised, masks_only=True)
# [check]
# every run against a forward computed here with addnorm's parts and the same weights, which passes every mask as
# given (and may make one of the wiring mistakes the forward tests name: those cost points there, not here)
for (case_norm_first, case_weights), (raised, *runs) in zip(hidden_mask_cases, hidden_mask_runs, strict=True):
    assert raised is None, "Your forward raised an exception on the hidden test's inputs (a batch of another size)"
    assert all(isinstance(run, torch.Tensor) and torch.isfinite(run).all() for run in runs), (
        "Your logits contain NaN (or are not a tensor) on the hidden test's inputs: some query attends to no key at "
        "all. Is a padding mask inverted? True marks padding; pass the masks on as forward receives them.")
    logits_run, padding_run, first_run, future_run = runs
    judged_inputs = [(hidden_src, hidden_tgt, hidden_src_mask, hidden_tgt_mask),
                     (memory_padding_changed, hidden_tgt, hidden_src_mask, hidden_tgt_mask),
                     (hidden_src, first_changed, hidden_src_mask, hidden_tgt_mask),
                     (hidden_src, future_changed, hidden_src_mask, future_changed == PAD)]
    if _masks_reference(_library_model(case_weights, norm_first=case_norm_first), list(zip(runs, judged_inputs))) is None:
        assert _same(padding_run, logits_run), (
            "Padding is attended to: new tokens at padded source positions change the logits. Pass "
            "src_key_padding_mask to every encoder layer, and to every decoder layer as its memory_key_padding_mask.")
        assert _same(future_run[:, :3], logits_run[:, :3]), (
            "Changing the target tokens at positions 3 and later changed the logits at positions 0–2: the decoder sees "
            "the future. Feed self.tgt_embed(tgt) to the first decoder layer, and let the memory come from the source alone.")
        assert not _same(first_run[:, 2:], logits_run[:, 2:]), (
            "Later positions ignore the earlier target tokens: the decoder's input must be self.tgt_embed(tgt)")
        raise AssertionError(
            "On the hidden test's inputs your logits are not those of a Transformer that passes the masks as given "
            "(addnorm's parts, the same weights): pass src_key_padding_mask to every encoder layer, and every decoder "
            "layer tgt_key_padding_mask and src_key_padding_mask as its memory_key_padding_mask; make the forward "
            "tests pass first.")
