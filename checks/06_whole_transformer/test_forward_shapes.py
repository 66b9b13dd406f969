import addnorm
import torch

# [inputs]
# a model of the judge's whose output projection has weight 0 and a bias drawn from the course's secret: whatever the
# stacks compute, forward must return that bias at every position (batch, tgt_len, tgt_vocab of hidden sizes)
torch.manual_seed(SEED + 20)
shape_vocab = VOCAB + int(torch.randint(0, 8, ()))
shape_reference = _perturbed(addnorm.Transformer(VOCAB, shape_vocab, **SMALL), SEED + 20)
shape_reference.generator.weight.data.zero_()
shape_reference.generator.bias.data.copy_(torch.randn(shape_vocab))
shape_weights = _weights(shape_reference)
shape_src, shape_tgt, shape_src_mask, shape_tgt_mask = _padded_batch(
    SEED + 20, batch=int(torch.randint(1, 7, ())), tgt_len=int(torch.randint(2, 9, ())))
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
shape_model = WholeTransformer(VOCAB, shape_vocab, **SMALL).eval()
shape_model.load_state_dict(shape_weights)
shape_logits = [_logits(shape_model, shape_src, shape_tgt, shape_src_mask, shape_tgt_mask),
                _logits(shape_model, shape_src, shape_tgt, None, None)]
del shape_model                                  # not data: not an observation
# [check]
_refused(library_forward, FORWARD_LIBRARY)
assert not subclasses_library, "WholeTransformer must not subclass addnorm.Transformer: write forward yourself"
shape_bias = shape_weights["generator.bias"]
for logits in shape_logits:
    assert isinstance(logits, torch.Tensor) and tuple(logits.shape) == (*shape_tgt.shape, shape_vocab), (
        "On the hidden test's inputs (other batch sizes, lengths and a larger target vocabulary) forward must return "
        "logits of shape (batch, tgt_len, tgt_vocab). Did you finish with self.generator?")
    assert logits.is_floating_point(), "forward must return scores (floats), not token ids: no argmax inside forward"
    assert torch.allclose(logits, shape_bias.expand_as(logits), atol=1e-5), (
        "With the hidden test's weights (self.generator's weight all zero, its bias b) your forward should return b "
        "at every position: its logits are not self.generator's output. Finish with self.generator(x), the output "
        "projection, and return what it returns.")
