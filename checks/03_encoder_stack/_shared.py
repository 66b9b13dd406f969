"""Exercise 3's hidden helpers, run in the judge: the weights the hidden tests give the learner's layers (made here),
the encoder layer's formula on those weights with its common wrong versions, and the checks that name the mistake.

Every point rests on values the learner's code computed on these inputs, compared with the formula computed here
(tolerance 1e-4; the stand-in stacks against float64). Every message is a literal: it says nothing the kernel said."""
import itertools

import addnorm
import torch
import torch.nn.functional as F

MAX_NORMS = 4            # the trained-looking (γ, β) pairs given to a layer's own LayerNorms, in order (2 are used)
MAX_TRIED = 8            # the LayerNorms of a layer tried as the norm of each sublayer, at most this many
SUBLAYERS = ("self_attn", "feed_forward")
BIG = 1000.0             # what the active sublayer outputs everywhere in the dropout checks


def _state(module):
    """A module's weights as a plain dict of tensors (what crosses to the learner's kernel)."""
    return {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}


def _layer_case(d_model, num_heads, d_ff, x=None):
    """One layer's test weights: its given sublayers' (addnorm's MultiHeadAttention and FeedForward at a random
    initialization), and a trained-looking γ and β (≠ 1 and 0) for each of its own LayerNorms, in order."""
    return dict(d_model=d_model, num_heads=num_heads, d_ff=d_ff, x=x,
                attn=_state(addnorm.MultiHeadAttention(d_model, num_heads)),
                ffn=_state(addnorm.FeedForward(d_model, d_ff)),
                gammas=[1 + 0.5 * torch.randn(d_model) for _ in range(MAX_NORMS)],
                betas=[0.5 * torch.randn(d_model) for _ in range(MAX_NORMS)])


def _constant_weights(d_model, num_heads, d_ff, active=None, value=0.0):
    """(self_attn, feed_forward) weights that are all zero: both sublayers output zeros, except `active`, which
    outputs `value` everywhere (its last bias)."""
    attn = {k: torch.zeros_like(v) for k, v in _state(addnorm.MultiHeadAttention(d_model, num_heads)).items()}
    ffn = {k: torch.zeros_like(v) for k, v in _state(addnorm.FeedForward(d_model, d_ff)).items()}
    if active == "self_attn":
        attn["out_proj.bias"].fill_(value)
    if active == "feed_forward":
        ffn["linear2.bias"].fill_(value)
    return attn, ffn


def _sublayers(case):
    """The case's self-attention and feed-forward network, built here with its weights."""
    attn = addnorm.MultiHeadAttention(case["d_model"], case["num_heads"])
    ffn = addnorm.FeedForward(case["d_model"], case["d_ff"])
    attn.load_state_dict(case["attn"])
    ffn.load_state_dict(case["ffn"])
    return attn.eval(), ffn.eval()


def _reference(case, x, mask=None, norm_first=False, residual=(True, True), norms=None):
    """The encoder layer's formula on the case's sublayer weights, LayerNorms at γ = 1, β = 0 (or `norms`, one
    function per sublayer); `residual` drops the residual of a sublayer (a common mistake)."""
    attn, ffn = _sublayers(case)
    ln = lambda t: F.layer_norm(t, t.shape[-1:], eps=1e-5)
    sublayers = (lambda h: attn(h, h, h, key_padding_mask=mask), ffn)
    with torch.no_grad():
        for f, keep, norm in zip(sublayers, residual, norms or (ln, ln), strict=True):
            if norm_first:
                x = (x if keep else 0) + f(norm(x))
            else:
                x = norm((x if keep else 0) + f(x))
    return x


def _matches(out, value, atol=1e-4):
    return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out, value, atol=atol, rtol=1e-4)


IN_PLACE = ("Your code changed the input x in place (an in-place operation such as x += …, x.sub_(…) or x[...] = …): the "
            "caller's tensor is corrupted. Compute a new tensor instead (x = x + …).")
NOT_A_TENSOR = "EncoderLayer must return a tensor of the input's shape (batch, seq, d_model)"
SWAPPED = {False: "With norm_first=False your layer computes Pre-LN: the two forms are swapped. Post-LN: "
                  "x = LN(x + Sublayer(x)); Pre-LN: x = x + Sublayer(LN(x)).",
           True: "With norm_first=True your layer computes Post-LN: the two forms are swapped. Post-LN: "
                 "x = LN(x + Sublayer(x)); Pre-LN: x = x + Sublayer(LN(x))."}
NO_RESIDUAL = {False: "The residual is forgotten around a sublayer: each sublayer's input must be added to its output "
                      "(LN(x + Sublayer(x))).",
               True: "The residual is forgotten around a sublayer: each sublayer's input must be added to its output "
                     "(x + Sublayer(LN(x)))."}
NO_MASK = ("Your layer ignores src_key_padding_mask: pass it to the self-attention, "
           "self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask)")
DIFFERS = {False: "Your Post-LN encoder layer differs from x = LN₁(x + SelfAttn(x)); LN₂(x + FFN(x)) by more than 1e-4 "
                  "(on the test's weights). Use self.self_attn(h, h, h, key_padding_mask=...) and self.feed_forward(h), "
                  "one LayerNorm per sublayer.",
           True: "Your Pre-LN encoder layer differs from x = x + SelfAttn(LN₁(x)); x + FFN(LN₂(x)) by more than 1e-4 "
                 "(on the test's weights). Use self.self_attn(h, h, h, key_padding_mask=...) and self.feed_forward(h), "
                 "one LayerNorm per sublayer."}
STATE = ("Called again, on another input, at another size or with another padding mask, your layer fails or no "
         "longer computes the formula (or answers the same input differently): it keeps something from an earlier "
         "call. Compute everything from this call's arguments (x, src_key_padding_mask) and the layer's weights.")


def _same_input(x, after):
    """The input, read back after the call: unchanged (not modified in place)."""
    assert isinstance(after, torch.Tensor) and after.shape == x.shape and torch.equal(after, x), IN_PLACE


def _check_layer(case, run, norm_first, mask=None):
    """Compare your layer with the formula on the case's weights (tolerance 1e-4); name the mistake when it matches a
    known wrong variant. `run` = (its output on case["x"] with its LayerNorms as created, the input after that call,
    which of its LayerNorms have a β, its output once its LayerNorms got the case's trained-looking γ and β)."""
    plain, x_after, biased, trained = run
    x = case["x"]
    _same_input(x, x_after)
    assert isinstance(plain, torch.Tensor) and plain.shape == x.shape, NOT_A_TENSOR
    assert not _matches(plain, _reference(case, x, mask, not norm_first)), SWAPPED[norm_first]
    for residual in ((False, False), (False, True), (True, False)):
        assert not _matches(plain, _reference(case, x, mask, norm_first, residual)), NO_RESIDUAL[norm_first]
    if mask is not None:
        assert not _matches(plain, _reference(case, x, None, norm_first)), NO_MASK
    assert _matches(plain, _reference(case, x, mask, norm_first)), DIFFERS[norm_first]
    _check_own_norms(case, trained, biased, lambda norms: _reference(case, x, mask, norm_first, norms=norms), 2)


def _with_others(case, others, mask=None):
    """The case, with the other (input, padding mask) pairs the same layer is called on later, and the mask of its
    first call."""
    return dict(case, others=others, mask=mask)


def _check_calls(case, calls, norm_first):
    """The same layer instance called again: `calls` = (its output on case["x"] a second time, then its outputs on
    each of case["others"] (other sizes, other masks), in order), with its LayerNorms as created."""
    assert isinstance(calls, (list, tuple)) and len(calls) == 1 + len(case["others"]), STATE
    again, *others = calls
    plain = _reference(case, case["x"], case.get("mask"), norm_first)
    assert _matches(again, plain), STATE
    for (x, mask), out in zip(case["others"], others):
        assert _matches(out, _reference(case, x, mask, norm_first)), STATE


def _norm_with(case, index, has_bias):
    """The LayerNorm formula with the γ and β the test gave the layer's index-th LayerNorm (1 and 0 past MAX_NORMS)."""
    d = case["d_model"]
    gamma = case["gammas"][index] if index < MAX_NORMS else torch.ones(d)
    beta = (case["betas"][index] if index < MAX_NORMS else torch.zeros(d)) if has_bias else None
    return lambda t: F.layer_norm(t, t.shape[-1:], gamma, beta, eps=1e-5)


SAME_NORM = ("Your layer normalizes two sublayers with the same LayerNorm (its γ and β), so another LayerNorm "
             "is never applied: give each sublayer its own LayerNorm, created in __init__, and use each once.")
OWN_NORMS = ("With trained γ and β (a different pair in each of your LayerNorms) your layer differs from the formula by "
             "more than 1e-4: normalize each sublayer with its own LayerNorm, created in __init__ (not a fresh LayerNorm "
             "or a functional call in forward), with its γ and β.")


def _check_own_norms(case, out, biased, reference, count):
    """With a distinct γ and β in each LayerNorm, the layer must match the formula with each sublayer normalized by
    its own LayerNorm (in any order of creation); a LayerNorm used twice, or one never applied, shows."""
    assert isinstance(biased, (list, tuple)), OWN_NORMS
    norms = [_norm_with(case, i, has_bias is True) for i, has_bias in enumerate(list(biased)[:MAX_TRIED])]
    for choice in itertools.product(range(len(norms)), repeat=count):
        if _matches(out, reference([norms[i] for i in choice])):
            assert len(set(choice)) == count, SAME_NORM
            return
    assert False, OWN_NORMS


DROPOUT_NONE = {False: "In training mode your Post-LN layer drops none of a sublayer's output: apply nn.Dropout(dropout) "
                       "to every sublayer's output, before the addition: LN(x + Dropout(Sublayer(x))) (dropout on the "
                       "sublayer's input does not count).",
                True: "In training mode your Pre-LN layer drops none of a sublayer's output: apply nn.Dropout(dropout) "
                      "to every sublayer's output, before the addition: x + Dropout(Sublayer(LN(x))) (dropout on the "
                      "sublayer's input does not count)."}
DROPOUT_RATE = ("Your layer dropped a share of a sublayer's output more than 7 points away from the dropout rate it "
                "was given: is the rate hard-coded, or is dropout applied twice? Use nn.Dropout(dropout), once per "
                "sublayer.")
DROPOUT_SCALE = ("The kept elements of a sublayer's output must be scaled by 1/(1 − p) and the rest be 0 "
                 "(nn.Dropout does both); yours are not. Apply nn.Dropout(dropout) once to each sublayer's output.")
DROPOUT_WHERE = {False: "In training mode your Post-LN layer is not LN(x + Dropout(Sublayer(x))) around each sublayer: "
                        "apply nn.Dropout(dropout) once, to the sublayer's output only (not to the residual x), then add.",
                 True: "In training mode your Pre-LN layer is not x + Dropout(Sublayer(LN(x))) around each sublayer: "
                       "apply nn.Dropout(dropout) once, to the sublayer's output only (not to the residual x), then add."}


def _check_dropout(out, x, norm_first, p, name):
    """`out`: the layer in training mode on x (normalized already), `name` outputting BIG everywhere and the other
    sublayer 0 (the weights of `_constant_weights`): what dropout did shows in the output.

    Pre-LN: out − x is 0 where dropped and BIG / (1 − p) where kept. Post-LN: out = LN(x + that); the kept elements
    are the large ones of each token. The mask is read from the output, so the order in which random numbers are
    drawn does not matter.
    """
    scaled = BIG / (1 - p)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, NOT_A_TENSOR
    if norm_first:
        kept = (out - x - scaled).abs() < 1e-3 * scaled
        dropped = (out - x).abs() < 1e-2
        expected = x + kept * scaled
    else:
        kept = out > (out.amax(dim=-1, keepdim=True) + out.amin(dim=-1, keepdim=True)) / 2
        if torch.allclose(out, F.layer_norm(x, x.shape[-1:], eps=1e-5), atol=1e-3):     # LN(x + K) = LN(x): none dropped
            kept = torch.ones_like(kept)
        dropped = ~kept
        expected = F.layer_norm(x + kept * scaled, x.shape[-1:], eps=1e-5)
    rate = dropped.float().mean().item()
    assert rate > 0.01, DROPOUT_NONE[norm_first]
    assert abs(rate - p) < 0.07, DROPOUT_RATE
    if norm_first:
        assert (kept | dropped).all(), DROPOUT_SCALE
    assert torch.allclose(out, expected, atol=1e-3, rtol=1e-3), DROPOUT_WHERE[norm_first]


# ---- the stack, checked on stand-in layers: `_ProbeLayer` (defined in the hidden observing code), its formula here
# A stand-in layer is x ↦ x + tanh(x Wᵀ + b) · keep, keep = 0 at padding positions (1 without a mask): the test gives
# each copy in self.layers its own W and b, so what the stack does with its layers shows in its output.
PROBE_WIDTH = 16


def _probe_weights(count):
    """Distinct weights for `count` stand-in layers, as state dicts of _ProbeLayer(PROBE_WIDTH)."""
    return [{"linear.weight": 0.4 * torch.randn(PROBE_WIDTH, PROBE_WIDTH), "linear.bias": 0.3 * torch.randn(PROBE_WIDTH)}
            for _ in range(count)]


def _padding(batch, seq):
    """A key-padding mask with padding at the end of every sequence but the first (True = padding)."""
    lengths = [seq] + [int(n) for n in torch.randint(1, seq, (batch - 1,))]
    return torch.arange(seq)[None, :] >= torch.tensor(lengths)[:, None]


def _probe_reference(x, weights, mask=None, norm=None, upstream=None, order=None):
    """The stack of stand-in layers (in `order`, default each once in turn) in float64, then `norm` = (γ, β) once if
    given; with `upstream`, also the gradients of (output · upstream).sum() for x, every layer's W and b (in order),
    and the norm's γ and β."""
    x = x.double().clone().requires_grad_(upstream is not None)
    leaves = [[w["linear.weight"].double().clone().requires_grad_(upstream is not None),
               w["linear.bias"].double().clone().requires_grad_(upstream is not None)] for w in weights]
    keep = 1.0 if mask is None else (~mask).double()[..., None]
    h = x
    for k in (order if order is not None else range(len(weights))):
        weight, bias = leaves[k]
        h = h + torch.tanh(h @ weight.T + bias) * keep
    norm_leaves = []
    if norm is not None:
        norm_leaves = [norm[0].double().clone().requires_grad_(upstream is not None),
                       norm[1].double().clone().requires_grad_(upstream is not None)]
        h = F.layer_norm(h, h.shape[-1:], norm_leaves[0], norm_leaves[1], eps=1e-5)
    if upstream is None:
        return h.detach(), None
    (h * upstream.double()).sum().backward()
    return h.detach(), [x.grad] + [t.grad for pair in leaves for t in pair] + [t.grad for t in norm_leaves]


def _close(out, value, atol=1e-4):
    """`out` (float32, from your code) within atol + 1e-4·|value| of the float64 reference `value`."""
    return (isinstance(out, torch.Tensor) and out.shape == value.shape and out.dtype == torch.float32
            and torch.allclose(out.double(), value, atol=atol, rtol=1e-4))


STACK_NOT_CHAINED = ("Your encoder gives every layer the original input x: only the last layer's work survives. Chain "
                     "them: x = layer(x, ...) inside the loop, so that layer k's output is layer k+1's input.")
STACK_FIRST_REPEATED = "Your encoder runs its first layer again and again: loop over the copies, for layer in self.layers."
STACK_NO_MASK = "Through the whole encoder, padding leaks into the real tokens: pass src_key_padding_mask to every layer."
STACK_NORM_IGNORED = ("Encoder(layer, n, norm) ignores its norm: store it in __init__ (self.norm = norm) and apply it "
                      "once after the last layer: return x if self.norm is None else self.norm(x).")
STACK_NORM_EVERY_LAYER = ("Encoder(layer, n, norm) applies the norm after every layer: apply it once, after the last "
                          "layer.")
STACK_DIFFERS = ("With the test's own layers (each copy in self.layers given its own weights), Encoder(layer, n) differs "
                 "from layers[n-1](…layers[0](x)…) (then norm once, if given) by more than 1e-4: chain the copies in "
                 "order, each once, give each the padding mask, and add nothing else.")
STACK_GRADIENTS = ("The gradients that reach the input and the layers' weights through your encoder differ from those of "
                   "the chained layers by more than 1e-4: call every layer on the previous layer's output, inside the "
                   "autograd graph (no torch.no_grad(), .detach() or .data in forward).")
STACK_STATE = ("Called again, on another input or at another size, your encoder gives another answer than the chained "
               "layers (or another answer for the same input): it keeps something from an earlier call.")
SHARED_LAYERS = ("Your layers are not independent copies: weights given to one copy in self.layers also changed "
                 "another, or the layer you were given is still used. [layer] * num_layers puts the same layer in the "
                 "list again and again; make independent copies: copy.deepcopy(layer).")
SHARED_GRADIENTS = ("The gradient that reaches each copy's weights differs from that layer's own gradient by more than "
                    "1e-4: the copies share weights, so their gradients add up. Use copy.deepcopy(layer) for each.")


def _check_probe_stack(out, x, weights, mask=None, norm=None, otherwise=STACK_DIFFERS):
    """A stack of stand-in layers' output, against the formula; the common wrong stacks named."""
    n = len(weights)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, NOT_A_TENSOR
    if _close(out, _probe_reference(x, weights, mask, norm)[0]):
        return
    if n > 1:
        assert not _close(out, _probe_reference(x, weights, mask, norm, order=[n - 1])[0]), STACK_NOT_CHAINED
        assert not _close(out, _probe_reference(x, weights, mask, norm, order=[0] * n)[0]), STACK_FIRST_REPEATED
    if mask is not None:
        assert not _close(out, _probe_reference(x, weights, None, norm)[0]), STACK_NO_MASK
    if norm is not None:
        assert not _close(out, _probe_reference(x, weights, mask, None)[0]), STACK_NORM_IGNORED
        h = x.double()
        for w in weights:
            h = F.layer_norm(_probe_reference(h, [w], mask)[0], h.shape[-1:], norm[0].double(), norm[1].double(),
                             eps=1e-5)
        assert not _close(out, h), STACK_NORM_EVERY_LAYER
    assert False, otherwise


def _check_probe_gradients(grads, x, weights, mask, norm, upstream, message=STACK_GRADIENTS):
    """The gradients your stack passed back (input, then each copy's W and b, then the norm's γ and β), by value."""
    expected = _probe_reference(x, weights, mask, norm, upstream)[1][:1 + 2 * len(weights)]   # not the norm's own
    assert isinstance(grads, (list, tuple)) and len(grads) == len(expected), message
    for got, want in zip(grads, expected):
        assert _close(got, want), message
