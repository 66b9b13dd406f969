import addnorm
import torch

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


library_forward = _refused_calls(lambda: _logits(model, src, tgt, src_mask, tgt == PAD),
                                 [(addnorm.Transformer, "forward"), (addnorm.Transformer, "encode"),
                                  (addnorm.Transformer, "decode"), (addnorm.Encoder, "forward"),
                                  (addnorm.Decoder, "forward")])[1]
subclasses_library = isinstance(model, addnorm.Transformer)
# [check]
_refused(library_forward, FORWARD_LIBRARY)
assert not subclasses_library, "WholeTransformer must not subclass addnorm.Transformer: write forward yourself"
