"""Each component checked alone: the learner's against addnorm's on the same weights and inputs, with the reference
standing in for the learner's other pieces inside it (so one LayerNorm mistake is not blamed on every layer).

A module is compared in eval mode, in training mode (dropout p = 0) and by its gradients (of the input and of every
parameter, paired by order of use); AddNorm and the encoder and decoder layers also by where their dropout acts
(p = 0.5 in training mode, the same random draws: exercise 1's placement check).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import addnorm
from addnorm_grading.capstone.learner import Learner, short
from addnorm_grading.capstone.matching import Mismatch, copy_weights, trained_looking

FORWARD_TOLERANCE = 1e-4
GRADIENT_TOLERANCE = 1e-3
D_MODEL, HEADS, D_FF, LAYERS = 16, 2, 32, 3


@dataclass
class Outcome:
    status: str                    # "matches", "differs", "missing", "raises"
    difference: float | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "matches"


class Differs(Exception):
    """A check found the learner's component different; the message says where."""


def largest(a, b, what: str) -> float:
    """The largest absolute difference of two tensors; Differs when the learner's is not one of the same shape."""
    if not isinstance(b, torch.Tensor) or b.shape != a.shape:
        raise Differs(f"{what}: expected a tensor of shape {tuple(a.shape)}, got "
                      f"{tuple(b.shape) if isinstance(b, torch.Tensor) else type(b).__name__}")
    if not torch.isfinite(b).all():
        return float("inf")
    return (a.double() - b.double()).abs().max().item()


def compare_modules(reference, yours, call, inputs, seed=0) -> float:
    """The largest difference of the outputs, in eval mode and in training mode; when they match, raises Differs if
    the gradients (of the floating-point inputs and of every parameter) differ, or if the two cannot be paired."""
    reference = trained_looking(reference, seed)
    try:
        matched = copy_weights(reference, yours, lambda m: call(m, *inputs))
    except Mismatch as error:
        raise Differs(f"its parameters do not pair with addnorm's: {error}") from None
    worst = 0.0
    for training in (False, True):
        outputs = [call(model.train(training), *inputs) for model in (reference, yours)]
        worst = max(worst, largest(outputs[0], outputs[1], f"its output in {'training' if training else 'eval'} mode"))
    if worst > FORWARD_TOLERANCE:
        return worst
    weights = torch.randn(outputs[0].shape, generator=torch.Generator().manual_seed(seed + 1))
    floats = [x for x in inputs if x.is_floating_point()]
    grads = []
    for model in (reference, yours):
        for x in floats:
            x.grad = None
        model.zero_grad()
        (call(model, *inputs) * weights).sum().backward()
        grads.append([x.grad for x in floats])
    if any(b.grad is None for _, b in matched):
        raise Differs("one of its parameters gets no gradient")
    relative = lambda a, b, what: largest(a, b, what) / max(1.0, a.abs().max().item())
    gradient = max([relative(a, b, "the gradient of its input") for a, b in zip(*grads)]
                   + [relative(a.grad, b.grad, "a parameter's gradient") for a, b in matched])
    if gradient > GRADIENT_TOLERANCE:
        raise Differs(f"its gradients differ from addnorm's (largest relative difference {gradient:.2g})")
    return worst


def same_draws(reference, yours, call, inputs, where: str, seed=6) -> None:
    """Where the dropout acts: with p = 0.5 in training mode and the same random draws, the two must agree."""
    try:
        copy_weights(trained_looking(reference, seed), yours, lambda m: call(m, *inputs))
    except Mismatch as error:
        raise Differs(f"its parameters do not pair with addnorm's: {error}") from None
    outputs = []
    for model in (reference, yours):
        torch.manual_seed(seed)
        outputs.append(call(model.train(), *inputs))
    if largest(outputs[0], outputs[1], "its output with dropout") > FORWARD_TOLERANCE:
        raise Differs(f"its dropout acts elsewhere than on each sublayer's output, or at another rate ({where})")


def tensor(*shape, seed, scale=1.0, offset=0.0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale + offset
    return x.requires_grad_()


def check_add_norm(learner: Learner) -> float:
    AddNorm = learner.component("AddNorm")
    learner.bind("01_residual", LayerNorm=addnorm.LayerNorm)
    sublayer = trained_looking(torch.nn.Linear(D_MODEL, D_MODEL), 3)
    x = tensor(2, 5, D_MODEL, seed=4)
    call = lambda m, x: m(x, sublayer)
    worst = 0.0
    for norm_first in (False, True):
        worst = max(worst, compare_modules(addnorm.AddNorm(D_MODEL, 0.0, norm_first),
                                           AddNorm(D_MODEL, 0.0, norm_first), call, [x], seed=5))
        same_draws(addnorm.AddNorm(D_MODEL, 0.5, norm_first), AddNorm(D_MODEL, 0.5, norm_first), call, [x],
                   f"norm_first={norm_first}")
    return worst


def check_layer_norm(learner: Learner) -> float:
    LayerNorm = learner.component("LayerNorm")
    worst = 0.0
    # a large mean; a variance below eps; a single vector and a 4-D batch (the last axis, whatever the rank)
    for shape, seed, scale, offset in (((3, 4, D_MODEL), 7, 3.0, 5.0), ((3, 4, D_MODEL), 8, 0.01, 0.0),
                                       ((D_MODEL,), 21, 1.0, 0.0), ((2, 3, 2, D_MODEL), 22, 1.0, 0.0)):
        x = tensor(*shape, seed=seed, scale=scale, offset=offset)
        worst = max(worst, compare_modules(addnorm.LayerNorm(D_MODEL), LayerNorm(D_MODEL), lambda m, x: m(x), [x], seed))
    return worst


def check_encoder_layer(learner: Learner) -> float:
    EncoderLayer = learner.component("EncoderLayer")
    learner.bind("03_encoder_stack", LayerNorm=addnorm.LayerNorm)
    x, padding = tensor(2, 6, D_MODEL, seed=9), torch.zeros(2, 6, dtype=torch.bool)
    padding[1, 4:] = True
    worst = 0.0
    for norm_first in (False, True):
        for mask in (None, padding):
            worst = max(worst, compare_modules(addnorm.EncoderLayer(D_MODEL, HEADS, D_FF, 0.0, norm_first),
                                               EncoderLayer(D_MODEL, HEADS, D_FF, 0.0, norm_first),
                                               lambda m, x: m(x, mask), [x], seed=10))
        same_draws(addnorm.EncoderLayer(D_MODEL, HEADS, D_FF, 0.5, norm_first),
                   EncoderLayer(D_MODEL, HEADS, D_FF, 0.5, norm_first), lambda m, x: m(x), [x], f"norm_first={norm_first}")
    return worst


def check_encoder(learner: Learner) -> float:
    Encoder, worst = learner.component("Encoder"), 0.0
    x = tensor(2, 6, D_MODEL, seed=11)
    for norm_first in (False, True):
        layer = lambda: addnorm.EncoderLayer(D_MODEL, HEADS, D_FF, 0.0, norm_first)
        norm = lambda: addnorm.LayerNorm(D_MODEL) if norm_first else None
        worst = max(worst, compare_modules(addnorm.Encoder(layer(), LAYERS, norm()), Encoder(layer(), LAYERS, norm()),
                                           lambda m, x: m(x), [x], seed=12))
    return worst


def check_causal_mask(learner: Learner) -> float:
    causal_mask = learner.component("causal_mask")
    for n in (4, 7, 1):
        yours, right = causal_mask(n), addnorm.causal_mask(n)
        if not isinstance(yours, torch.Tensor) or yours.dtype != torch.bool or yours.shape != right.shape:
            raise Differs(f"causal_mask({n}) should be a boolean ({n}, {n}) tensor, got "
                          f"{getattr(yours, 'dtype', type(yours).__name__)} {tuple(getattr(yours, 'shape', ()))}")
        wrong = int((yours != right).sum())
        if wrong:
            raise Differs(f"causal_mask({n}) has {wrong} of {n * n} entries wrong (True marks a blocked key j > i)")
    return 0.0


def check_decoder_layer(learner: Learner) -> float:
    DecoderLayer = learner.component("DecoderLayer")
    learner.bind("04_decoder_stack", LayerNorm=addnorm.LayerNorm, causal_mask=addnorm.causal_mask)
    x, memory, worst = tensor(2, 5, D_MODEL, seed=13), tensor(2, 7, D_MODEL, seed=14), 0.0
    for norm_first in (False, True):
        worst = max(worst, compare_modules(addnorm.DecoderLayer(D_MODEL, HEADS, D_FF, 0.0, norm_first),
                                           DecoderLayer(D_MODEL, HEADS, D_FF, 0.0, norm_first),
                                           lambda m, x, memory: m(x, memory), [x, memory], seed=15))
        same_draws(addnorm.DecoderLayer(D_MODEL, HEADS, D_FF, 0.5, norm_first),
                   DecoderLayer(D_MODEL, HEADS, D_FF, 0.5, norm_first), lambda m, x, memory: m(x, memory),
                   [x, memory], f"norm_first={norm_first}")
    return worst


def check_decoder(learner: Learner) -> float:
    Decoder, worst = learner.component("Decoder"), 0.0
    x, memory = tensor(2, 5, D_MODEL, seed=16), tensor(2, 7, D_MODEL, seed=17)
    for norm_first in (False, True):
        layer = lambda: addnorm.DecoderLayer(D_MODEL, HEADS, D_FF, 0.0, norm_first)
        norm = lambda: addnorm.LayerNorm(D_MODEL) if norm_first else None
        worst = max(worst, compare_modules(addnorm.Decoder(layer(), LAYERS, norm()), Decoder(layer(), LAYERS, norm()),
                                           lambda m, x, memory: m(x, memory), [x, memory], seed=18))
    return worst


def check_sinusoidal_encoding(learner: Learner) -> float:
    encoding = learner.component("sinusoidal_encoding")
    return max(largest(addnorm.sinusoidal_encoding(n, d), encoding(n, d), f"sinusoidal_encoding({n}, {d})")
               for n, d in ((50, 16), (7, 6), (1, 2)))


def check_embedding(learner: Learner) -> float:
    Embedding = learner.component("Embedding")
    learner.bind("05_positional_encoding", sinusoidal_encoding=addnorm.sinusoidal_encoding)
    tokens = torch.randint(0, 20, (3, 9), generator=torch.Generator().manual_seed(19))
    return compare_modules(addnorm.Embedding(20, D_MODEL, 12, 0.0), Embedding(20, D_MODEL, 12), lambda m, t: m(t),
                           [tokens], seed=20)


CHECKS = {"AddNorm": check_add_norm, "LayerNorm": check_layer_norm, "EncoderLayer": check_encoder_layer,
          "Encoder": check_encoder, "causal_mask": check_causal_mask, "DecoderLayer": check_decoder_layer,
          "Decoder": check_decoder, "sinusoidal_encoding": check_sinusoidal_encoding, "Embedding": check_embedding}


def check(name: str, learner: Learner) -> Outcome:
    """One component's outcome; whatever the learner's code does, an Outcome (never an exception)."""
    if learner.component(name) is None:
        return Outcome("missing")
    try:
        difference = CHECKS[name](learner)
    except Differs as error:
        return Outcome("differs", None, str(error))
    except NotImplementedError:
        return Outcome("raises", None, "not written yet (NotImplementedError)")
    except Exception as error:
        return Outcome("raises", None, short(error))
    status = "matches" if difference <= FORWARD_TOLERANCE else "differs"
    return Outcome(status, difference)
