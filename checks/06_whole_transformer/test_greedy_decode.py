import addnorm
import torch

# [inputs]
# sources for the stand-in: batches of 1, 5, 4 and 6, decoded to at most 8, 6, 1 and 3 tokens
scripted_cases = [(_padded_batch(SEED + 25, batch=batch)[::2], max_len) for batch, max_len in ((1, 8), (5, 6), (4, 1), (6, 3))]
# addnorm.Transformers with perturbed weights (EOS likelier, never, always) and their sources
model_cases = [(_weights(_decoding_model(SEED + seed, eos_bias)), _padded_batch(SEED + seed, batch=batch)[::2], max_len)
               for eos_bias, seed, batch, max_len in ((1.0, 15, 6, 8), (-100.0, 17, 3, 5), (100.0, 18, 4, 7))]
# [observe]
# [shared helpers: _refused_calls]
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
# [end of shared helpers]


library_decoding = [(addnorm, "greedy_decode"), (addnorm.transformer, "greedy_decode"), (addnorm.transformer, "greedy_search")]
is_library_decode = greedy_decode is addnorm.greedy_decode
scripted_runs = []
for (case_src, case_mask), case_len in scripted_cases:
    scripted_runs.append(_refused_calls(lambda: greedy_decode(_ScriptedReverser(), case_src, case_len, BOS, EOS, case_mask),
                                        library_decoding))
model_runs = []
for case_weights, (case_src, case_mask), case_len in model_cases:
    decoding_model = addnorm.Transformer(VOCAB, VOCAB, **SMALL).eval()
    decoding_model.load_state_dict(case_weights)
    model_runs.append(_refused_calls(lambda: greedy_decode(decoding_model, case_src, case_len, BOS, EOS, case_mask),
                                     library_decoding))
del library_decoding, decoding_model, case_weights                 # not observations
# [check]
assert not is_library_decode, "greedy_decode is addnorm's, the library's version of the answer: write it yourself"
judged_models = [(_ScriptedReverser(), sources, max_len) for sources, max_len in scripted_cases]
judged_models += [(_library_model(weights), sources, max_len) for weights, sources, max_len in model_cases]
for (judged_model, (sources, sources_mask), max_len), (out, called, raised) in zip(
        judged_models, scripted_runs + model_runs, strict=True):
    _refused(called, DECODE_LIBRARY)
    assert raised is None, "greedy_decode raised an exception on a hidden case (another batch size or max_len)"
    _check_decoded_literally(out, sources, max_len, addnorm.greedy_decode(judged_model, sources, max_len, BOS, EOS, sources_mask))
