"""Exercise 6's hidden helpers, run in the judge: the models the hidden tests decode with (made here), what each
layer of your forward received against the Transformer's wiring (from the calls the kernel recorded, compared with
tensors computed here on addnorm's modules with the same weights), the reference loss and the exact match of trained
weights, and the refusal of addnorm's own versions of the answer."""
import builtins

import addnorm
import torch
import torch.nn.functional as F
from addnorm.lab.tasks import BOS, EOS, PAD

FORWARD_LIBRARY = ["addnorm.Transformer.forward", "addnorm.Transformer.encode", "addnorm.Transformer.decode",
                   "addnorm.Encoder.forward", "addnorm.Decoder.forward"]
DECODE_LIBRARY = ["addnorm.greedy_decode", "addnorm.transformer.greedy_decode", "addnorm.transformer.greedy_search"]


def _library_model(weights, norm_first=False, vocab=VOCAB, config=SMALL):
    """addnorm.Transformer with these weights, in eval mode (the judge's own copy of a model)."""
    model = addnorm.Transformer(vocab, vocab, norm_first=norm_first, **config)
    model.load_state_dict(weights)
    return model.eval()


def _decoding_model(seed, eos_bias=0.0):
    """An addnorm.Transformer with perturbed weights that never predicts PAD or BOS; eos_bias shifts EOS's score."""
    torch.manual_seed(seed)
    model = _perturbed(addnorm.Transformer(VOCAB, VOCAB, **SMALL), seed)
    with torch.no_grad():
        model.generator.bias[PAD] = model.generator.bias[BOS] = -100.0
        model.generator.bias[EOS] += eos_bias
    return model


def _kind(name):
    """An exception's type name from the kernel, quoted only if it is one of Python's own."""
    known = isinstance(name, str) and isinstance(getattr(builtins, name, None), type) and issubclass(
        getattr(builtins, name), BaseException)
    return name if known else "an exception"


def _refused(called, labels):
    """Fail when the learner's code called one of addnorm's own versions of the answer (`called`: their indices)."""
    assert not called, f"Your code calls {labels[called[0]]}, the library's version of the answer: write it yourself"


def _same(a, b):
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-5)


def _argument(call, index):
    """The index-th argument a recorded call received (None when the call's arguments could not be bound). A call,
    as the kernel recorded it: (arguments bound, returned, output, argument 0, argument 1, …)."""
    return call[3 + index] if call[0] is True else None


def _returned(call):
    return call[1] is True


def _check_mask(given, expected, where, name):
    """A mask a layer received must be the padding mask the forward was given (None or all False when there is none)."""
    if expected is None or not expected.any():
        assert given is None or (isinstance(given, torch.Tensor) and not given.any()), (
            f"{where}: there is no padding, yet its {name} marks some positions as padding. Pass on the masks "
            f"forward receives, unchanged (True = padding)")
        return
    assert given is not None, (
        f"{where} received no {name}: the padded positions are attended to. Pass src_key_padding_mask on"
        if name == "src_key_padding_mask" else
        f"{where} received no tgt_key_padding_mask: pass the target's padding mask on to every decoder layer"
        if name == "tgt_key_padding_mask" else
        f"Padding is not masked in cross-attention: {where} received memory_key_padding_mask=None, so it attends to "
        f"the memory at padded source positions. Pass src_key_padding_mask as every decoder layer's memory_key_padding_mask.")
    assert not (isinstance(given, torch.Tensor) and given.shape == expected.shape and torch.equal(given, ~expected)), (
        f"{where}: the {name} is inverted. True marks padding (the torch.nn convention), and the masks forward "
        f"receives are already in that convention: pass them on unchanged, with no ~ (and build them as tokens == PAD)")
    assert isinstance(given, torch.Tensor) and given.shape == expected.shape and torch.equal(given, expected), (
        f"{where} received a {name} that is not the one forward was given: pass the masks on unchanged")


def _check_wiring(model, src, tgt, encoder, decoder, generator):
    """What each layer received, against the Transformer's wiring; names the classic mistakes. `model` is the judge's
    addnorm.Transformer with the weights your model had; the records are (arguments, returned, output) per call."""
    with torch.no_grad():
        embedded = {"source": model.src_embed(src), "target": model.tgt_embed(tgt)}
        twice = {"source": embedded["source"] + model.src_embed.position_table[: src.shape[1]],
                 "target": embedded["target"] + model.tgt_embed.position_table[: tgt.shape[1]]}
    for side, calls in (("source", encoder), ("target", decoder)):
        if not calls or calls[0][0] is not True:
            continue
        embed = "self.src_embed(src)" if side == "source" else "self.tgt_embed(tgt)"
        assert not _same(_argument(calls[0], 0), twice[side]), (
            f"The positional encoding is added twice to the {side}: {embed} already adds it (exercise 5). Feed {embed} "
            f"to the first layer as it is.")
        assert _same(_argument(calls[0], 0), embedded[side]), (
            f"The first {'encoder' if side == 'source' else 'decoder'} layer's input must be {embed} — the scaled "
            f"token vectors with their positional encoding — and nothing else")
    for kind, calls in (("encoder", encoder), ("decoder", decoder)):
        for k in range(1, len(calls)):
            if _returned(calls[k - 1]):
                assert _same(_argument(calls[k], 0), calls[k - 1][2]), (
                    f"{kind} layer {k} must receive layer {k - 1}'s output as its x: chain the layers, x = layer(x, …)")
    if len(encoder) != len(model.encoder.layers) or not _returned(encoder[-1]):
        return
    with torch.no_grad():
        memory = encoder[-1][2] if model.encoder.norm is None else model.encoder.norm(encoder[-1][2])
    for k, call in enumerate(decoder):
        given = _argument(call, 1)
        if _same(given, memory):
            continue
        assert not (k and _returned(decoder[k - 1]) and _same(given, decoder[k - 1][2])), (
            f"Decoder layer {k} received the previous decoder layer's output as its memory: the memory is not "
            f"passed to every layer. Every decoder layer cross-attends to the same tensor, the encoder's final output.")
        assert not _same(given, _argument(call, 0)), (
            f"Decoder layer {k} cross-attends to its own input instead of the memory. Every decoder layer gets "
            f"the encoder's final output: layer(x, memory, …)")
        assert not any(_returned(earlier) and _same(given, earlier[2]) for earlier in encoder[:-1]), (
            f"Decoder layer {k} received an intermediate encoder layer's output: the stacks are not paired layer by "
            f"layer. Every decoder layer gets the encoder's final output, the memory.")
        assert not _same(given, embedded["source"]), (
            f"Decoder layer {k} received the embedded source as its memory: the encoder's output never reaches the "
            f"decoder. The memory is what the last encoder layer returns.")
        assert not (model.encoder.norm is not None and _same(given, encoder[-1][2])), (
            "Pre-LN: the memory is the encoder's output after self.encoder.norm, the final LayerNorm of the stack; "
            "apply it when it is not None")
        raise AssertionError(f"Decoder layer {k} did not receive the encoder's final output as its memory: pass the "
                             f"same memory to every decoder layer")
    if len(decoder) != len(model.decoder.layers) or not _returned(decoder[-1]) or len(generator) != 1:
        return
    with torch.no_grad():
        final = decoder[-1][2] if model.decoder.norm is None else model.decoder.norm(decoder[-1][2])
    assert not (model.decoder.norm is not None and _same(_argument(generator[0], 0), decoder[-1][2])), (
        "Pre-LN: self.decoder.norm, the final LayerNorm of the decoder stack, must come before self.generator")
    assert _same(_argument(generator[0], 0), final), (
        "self.generator must receive the decoder stack's output (after self.decoder.norm when it is not None) and "
        "nothing else")


def _diagnose(model, src, tgt, src_mask, tgt_mask, calls, raised, what, masks_only=False):
    """Name the classic mistakes from what each layer of your forward received — the masks, and unless masks_only the
    wiring — then fail if the forward raised. `calls` and `raised` are what the kernel recorded: the (encoder,
    decoder, generator) calls, the type name of the exception the forward raised or None; `model` is the judge's
    addnorm.Transformer with the same weights. Skipped when a layer ran more than once."""
    encoder, decoder, generator = calls
    if len(encoder) <= len(model.encoder.layers) and len(decoder) <= len(model.decoder.layers) and len(generator) <= 1:
        for k, call in enumerate(encoder):
            _check_mask(_argument(call, 1), src_mask, f"encoder layer {k}", "src_key_padding_mask")
        for k, call in enumerate(decoder):
            _check_mask(_argument(call, 3), src_mask, f"decoder layer {k}", "memory_key_padding_mask")
            _check_mask(_argument(call, 2), tgt_mask, f"decoder layer {k}", "tgt_key_padding_mask")
        if not masks_only:
            _check_wiring(model, src, tgt, encoder, decoder, generator)
    assert raised is None, f"{what}: your forward raised {_kind(raised)}"


def _reference_loss(model, src, tgt, ignore_padding=True):
    """The teacher-forcing loss, written out (ignore_padding=False: the mistake of counting PAD labels)."""
    logits = model(src, tgt[:, :-1], src == PAD, tgt[:, :-1] == PAD)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1),
                           ignore_index=PAD if ignore_padding else -100)


@torch.no_grad()
def _reference_exact_match(model, task):
    """Exact match on the held-out split, decoded by addnorm.greedy_decode with the model's weights."""
    model.eval()
    batch = task.held_out_batch()
    out = addnorm.greedy_decode(model, batch.src, batch.tgt_out.shape[1], BOS, EOS, batch.src_padding_mask)
    correct = 0
    for output, target in zip(out[:, 1:].tolist(), batch.tgt_out.tolist()):
        target = target[: target.index(EOS) + 1]
        correct += output[: len(target)] == target
    return correct / len(batch.src)
