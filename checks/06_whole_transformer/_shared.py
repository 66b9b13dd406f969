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


def _refused(called, labels):
    """Fail when the learner's code called one of addnorm's own versions of the answer (`called`: their indices; advice
    beside the behavioural checks: a refused call raises, so its test fails on the values anyway)."""
    assert not called, (
        "Your code calls addnorm's own version of the answer (addnorm.Transformer's forward, encode or decode, "
        "addnorm.Encoder or addnorm.Decoder, or addnorm.greedy_decode): write it yourself")


def _same(a, b):
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-5)


def _argument(call, index):
    """The index-th argument a recorded call received (None when the call's arguments could not be bound). A call,
    as the kernel recorded it: (arguments bound, returned, output, argument 0, argument 1, …)."""
    return call[3 + index] if call[0] is True else None


def _returned(call):
    return call[1] is True


_MASK_MISSING = {
    "src_key_padding_mask": "An encoder layer received no src_key_padding_mask: the padded positions are attended to. "
                            "Pass src_key_padding_mask on to every encoder layer",
    "tgt_key_padding_mask": "A decoder layer received no tgt_key_padding_mask: pass the target's padding mask on to every "
                            "decoder layer",
    "memory_key_padding_mask": "Padding is not masked in cross-attention: a decoder layer received "
                               "memory_key_padding_mask=None, so it attends to the memory at padded source positions. "
                               "Pass src_key_padding_mask as every decoder layer's memory_key_padding_mask.",
}


def _check_mask(given, expected, name):
    """A mask a layer received must be the padding mask the forward was given (None or all False when there is none).
    Advice: what the kernel recorded picks the words; the points rest on the logits."""
    if expected is None or not expected.any():
        assert given is None or (isinstance(given, torch.Tensor) and not given.any()), (
            "There is no padding, yet a layer received a padding mask that marks some positions as padding. Pass on "
            "the masks forward receives, unchanged (True = padding)")
        return
    assert given is not None, _MASK_MISSING[name]
    assert not (isinstance(given, torch.Tensor) and given.shape == expected.shape and torch.equal(given, ~expected)), (
        "A layer's padding mask is inverted. True marks padding (the torch.nn convention), and the masks forward "
        "receives are already in that convention: pass them on unchanged, with no ~ (and build them as tokens == PAD)")
    assert isinstance(given, torch.Tensor) and given.shape == expected.shape and torch.equal(given, expected), (
        "A layer received a padding mask that is not the one forward was given: pass the masks on unchanged")


def _check_wiring(model, src, tgt, encoder, decoder, generator):
    """What each layer received, against the Transformer's wiring; names the classic mistakes. `model` is the judge's
    addnorm.Transformer with the weights your model had; the records are (arguments, returned, output) per call.
    Advice: the records are what the kernel says; the points rest on the logits."""
    with torch.no_grad():
        embedded = {"source": model.src_embed(src), "target": model.tgt_embed(tgt)}
        twice = {"source": embedded["source"] + model.src_embed.position_table[: src.shape[1]],
                 "target": embedded["target"] + model.tgt_embed.position_table[: tgt.shape[1]]}
    for side, calls in (("source", encoder), ("target", decoder)):
        if not calls or calls[0][0] is not True:
            continue
        assert not _same(_argument(calls[0], 0), twice[side]), (
            "The positional encoding is added twice to the source: self.src_embed(src) already adds it (exercise 5). "
            "Feed self.src_embed(src) to the first layer as it is." if side == "source" else
            "The positional encoding is added twice to the target: self.tgt_embed(tgt) already adds it (exercise 5). "
            "Feed self.tgt_embed(tgt) to the first layer as it is.")
        assert _same(_argument(calls[0], 0), embedded[side]), (
            "The first encoder layer's input must be self.src_embed(src) — the scaled token vectors with their "
            "positional encoding — and nothing else" if side == "source" else
            "The first decoder layer's input must be self.tgt_embed(tgt) — the scaled token vectors with their "
            "positional encoding — and nothing else")
    for kind, calls in (("encoder", encoder), ("decoder", decoder)):
        for k in range(1, len(calls)):
            if _returned(calls[k - 1]):
                assert _same(_argument(calls[k], 0), calls[k - 1][2]), (
                    "An encoder layer must receive the previous layer's output as its x: chain the layers, "
                    "x = layer(x, …)" if kind == "encoder" else
                    "A decoder layer must receive the previous layer's output as its x: chain the layers, "
                    "x = layer(x, memory, …)")
    if len(encoder) != len(model.encoder.layers) or not _returned(encoder[-1]):
        return
    with torch.no_grad():
        memory = encoder[-1][2] if model.encoder.norm is None else model.encoder.norm(encoder[-1][2])
    for k, call in enumerate(decoder):
        given = _argument(call, 1)
        if _same(given, memory):
            continue
        assert not (k and _returned(decoder[k - 1]) and _same(given, decoder[k - 1][2])), (
            "A decoder layer received the previous decoder layer's output as its memory: the memory is not "
            "passed to every layer. Every decoder layer cross-attends to the same tensor, the encoder's final output.")
        assert not _same(given, _argument(call, 0)), (
            "A decoder layer cross-attends to its own input instead of the memory. Every decoder layer gets "
            "the encoder's final output: layer(x, memory, …)")
        assert not any(_returned(earlier) and _same(given, earlier[2]) for earlier in encoder[:-1]), (
            "A decoder layer received an intermediate encoder layer's output: the stacks are not paired layer by "
            "layer. Every decoder layer gets the encoder's final output, the memory.")
        assert not _same(given, embedded["source"]), (
            "A decoder layer received the embedded source as its memory: the encoder's output never reaches the "
            "decoder. The memory is what the last encoder layer returns.")
        assert not (model.encoder.norm is not None and _same(given, encoder[-1][2])), (
            "Pre-LN: the memory is the encoder's output after self.encoder.norm, the final LayerNorm of the stack; "
            "apply it when it is not None")
        raise AssertionError("A decoder layer did not receive the encoder's final output as its memory: pass the "
                             "same memory to every decoder layer")
    if len(decoder) != len(model.decoder.layers) or not _returned(decoder[-1]) or len(generator) != 1:
        return
    with torch.no_grad():
        final = decoder[-1][2] if model.decoder.norm is None else model.decoder.norm(decoder[-1][2])
    assert not (model.decoder.norm is not None and _same(_argument(generator[0], 0), decoder[-1][2])), (
        "Pre-LN: self.decoder.norm, the final LayerNorm of the decoder stack, must come before self.generator")
    assert _same(_argument(generator[0], 0), final), (
        "self.generator must receive the decoder stack's output (after self.decoder.norm when it is not None) and "
        "nothing else")


def _diagnose(model, src, tgt, src_mask, tgt_mask, calls, raised, masks_only=False):
    """Name the classic mistakes from what each layer of your forward received — the masks, and unless masks_only the
    wiring — then fail if the forward raised. `calls` and `raised` are what the kernel recorded: the (encoder,
    decoder, generator) calls, the type name of the exception the forward raised or None; `model` is the judge's
    addnorm.Transformer with the same weights. Skipped when a layer ran more than once. A diagnosis only chooses the
    words of a failing test: it never passes one (the checks on the logits do)."""
    encoder, decoder, generator = calls
    if len(encoder) <= len(model.encoder.layers) and len(decoder) <= len(model.decoder.layers) and len(generator) <= 1:
        for call in encoder:
            _check_mask(_argument(call, 1), src_mask, "src_key_padding_mask")
        for call in decoder:
            _check_mask(_argument(call, 3), src_mask, "memory_key_padding_mask")
            _check_mask(_argument(call, 2), tgt_mask, "tgt_key_padding_mask")
        if not masks_only:
            _check_wiring(model, src, tgt, encoder, decoder, generator)
    assert raised is None, "Your forward raised an exception on the hidden test's inputs (a batch of another size)"


_LOGITS_ADVICE = (
    "Check, in order: the embeddings (self.src_embed(src) already adds the positional encoding: add nothing to it); "
    "src_key_padding_mask to every encoder layer; self.encoder.norm when it is not None; every decoder layer gets the "
    "encoder's final output as memory and src_key_padding_mask as its memory_key_padding_mask; self.decoder.norm when "
    "it is not None; self.generator at the end.")


def _same_logits(got, expected):
    """The hidden tests' comparison of your logits with the reference logits (float32 precision), in literal words."""
    assert isinstance(got, torch.Tensor) and got.shape == expected.shape, (
        "On the hidden test's inputs (other batch sizes and lengths) your forward's logits are not of shape "
        "(batch, tgt_len, tgt_vocab), or not a tensor. Keep nothing from an earlier call; finish with self.generator.")
    assert torch.isfinite(got).all(), (
        "On the hidden test's inputs your logits contain NaN: some query attends to no key at all. Is a padding mask "
        "inverted? True must mark padding (the torch.nn convention), as in the masks your forward receives; pass "
        "them on as given.")
    assert (got - expected).abs().max().item() < 1e-4, (
        "On the hidden test's inputs your logits differ from addnorm.Transformer's with the same weights by more than "
        "1e-4. " + _LOGITS_ADVICE)


def _variant_logits(model, src, tgt, src_mask, tgt_mask, twice=False, final_norms=True, memory_is_source=False):
    """The logits of a forward that passes every mask right but may make one of the wiring mistakes the forward tests
    name (the encoding added twice, the final norms forgotten, the embedded source as memory): the masks test
    checks the masks, and leaves those mistakes to the forward tests."""
    with torch.no_grad():
        embedded = model.src_embed(src) + (model.src_embed.position_table[: src.shape[1]] if twice else 0)
        memory = embedded
        for layer in model.encoder.layers:
            memory = layer(memory, src_mask)
        if model.encoder.norm is not None and final_norms:
            memory = model.encoder.norm(memory)
        if memory_is_source:
            memory = embedded
        x = model.tgt_embed(tgt) + (model.tgt_embed.position_table[: tgt.shape[1]] if twice else 0)
        for layer in model.decoder.layers:
            x = layer(x, memory, tgt_mask, src_mask)
        if model.decoder.norm is not None and final_norms:
            x = model.decoder.norm(x)
        return model.generator(x)


def _masks_reference(model, runs):
    """The one forward of _variant_logits that every run of `runs` matches ((logits, inputs) pairs), or None."""
    variants = [dict(), dict(twice=True), dict(final_norms=False), dict(memory_is_source=True)]
    for variant in variants:
        if all(isinstance(got, torch.Tensor) and _same(got, _variant_logits(model, *inputs, **variant))
               for got, inputs in runs):
            return variant
    return None


def _check_decoded_literally(out, src, max_len, expected):
    """greedy_decode's output on a hidden case against the rules, then against the reference output `expected`."""
    assert isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == src.shape[0], (
        "greedy_decode must return a (batch, length) tensor of token ids, one row per source sequence, for every "
        "batch size")
    assert not out.is_floating_point(), "greedy_decode must return token ids (integers), not scores"
    assert (out[:, 0] == BOS).all(), "Every decoded sequence must start with BOS: begin from a (batch, 1) column of bos, and return it"
    for row in out.tolist():
        if EOS in row:
            assert all(t == EOS for t in row[row.index(EOS):]), (
                "After a sequence's EOS, greedy_decode must append EOS (EOS padding), whatever the model predicts there")
    assert out.shape[1] <= max_len + 1, "greedy_decode returned more than max_len new tokens after BOS"
    finished = (out == EOS).any(dim=1)
    if out.shape[1] < max_len + 1:
        assert finished.all(), (
            "greedy_decode stopped before max_len although a sequence had not produced EOS yet: stop early only "
            "when every sequence has produced EOS")
    if out.shape[1] > 2:
        assert not (out[:, :-1] == EOS).any(dim=1).all(), (
            "greedy_decode went on after every sequence had produced EOS: stop as soon as all of them have")
    assert out.shape == expected.shape and torch.equal(out, expected), (
        "greedy_decode differs from addnorm.greedy_decode on the same model, on the hidden test's sources. At each "
        "step take the argmax of the logits at the LAST position, model(src, prefix, src_key_padding_mask)[:, -1], "
        "and give the model src_key_padding_mask at every step.")


def _reference_gradients(model, src, tgt):
    """The gradient of the reference teacher-forcing loss with respect to every parameter of `model` (by name)."""
    model.zero_grad()
    _reference_loss(model, src, tgt).backward()
    return {name: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
            for name, p in model.named_parameters()}


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
