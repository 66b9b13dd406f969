"""Exercise 4's hidden helpers, run in the judge: the weights the hidden tests give the learner's decoder layers (made
here), the decoder layer's formula on those weights with its common wrong versions, and the checks that name the
mistake. The Post-LN and Pre-LN tests share their inputs (`_form_inputs`) and their checks (`_check_form`).

Every point rests on values the learner's code computed on these inputs, compared with the formula computed here
(tolerance 1e-4; the stand-in stacks against float64). Every message is a literal: it says nothing the kernel said."""
import itertools

import addnorm
import torch
import torch.nn.functional as F

MAX_NORMS = 6            # the trained-looking (γ, β) pairs given to a layer's own LayerNorms, in order (3 are used)
MAX_TRIED = 6            # the LayerNorms of a layer tried as the norm of each sublayer, at most this many
SUBLAYERS = ("self_attn", "cross_attn", "feed_forward")
BIG = 1000.0             # what the active sublayer outputs everywhere in the dropout checks


def _state(module):
    """A module's weights as a plain dict of tensors (what crosses to the learner's kernel)."""
    return {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}


def _layer_case(d_model, num_heads, d_ff, x=None, memory=None):
    """One layer's test weights: its given sublayers' (addnorm's MultiHeadAttention twice and FeedForward at a random
    initialization), and a trained-looking γ and β (≠ 1 and 0) for each of its own LayerNorms, in order."""
    return dict(d_model=d_model, num_heads=num_heads, d_ff=d_ff, x=x, memory=memory,
                attn=_state(addnorm.MultiHeadAttention(d_model, num_heads)),
                cross=_state(addnorm.MultiHeadAttention(d_model, num_heads)),
                ffn=_state(addnorm.FeedForward(d_model, d_ff)),
                gammas=[1 + 0.5 * torch.randn(d_model) for _ in range(MAX_NORMS)],
                betas=[0.5 * torch.randn(d_model) for _ in range(MAX_NORMS)])


def _constant_weights(d_model, num_heads, d_ff, active=None, value=0.0):
    """(self_attn, cross_attn, feed_forward) weights that are all zero: every sublayer outputs zeros, except
    `active`, which outputs `value` everywhere (its last bias)."""
    attn, cross = ({k: torch.zeros_like(v) for k, v in _state(addnorm.MultiHeadAttention(d_model, num_heads)).items()}
                   for _ in range(2))
    ffn = {k: torch.zeros_like(v) for k, v in _state(addnorm.FeedForward(d_model, d_ff)).items()}
    last_bias = {"self_attn": attn["out_proj.bias"], "cross_attn": cross["out_proj.bias"],
                 "feed_forward": ffn["linear2.bias"]}
    if active is not None:
        last_bias[active].fill_(value)
    return attn, cross, ffn


def _sublayers(case):
    """The case's self-attention, cross-attention and feed-forward network, built here with its weights."""
    attn = addnorm.MultiHeadAttention(case["d_model"], case["num_heads"])
    cross = addnorm.MultiHeadAttention(case["d_model"], case["num_heads"])
    ffn = addnorm.FeedForward(case["d_model"], case["d_ff"])
    for module, weights in ((attn, case["attn"]), (cross, case["cross"]), (ffn, case["ffn"])):
        module.load_state_dict(weights)
        module.eval()
    return attn, cross, ffn


def _future(n):
    """The causal mask: True above the diagonal, where query i may not attend to key j > i."""
    return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)


def _reference(case, x, memory, norm_first=False, residual=True, causal=True, cross_to_memory=True, norms=None,
               memory_as_query=False, modules=None):
    """The decoder layer's formula on the case's sublayer weights, LayerNorms at γ = 1, β = 0 (or `norms`, one
    function per sublayer); the other arguments make its common wrong versions."""
    attn, cross, ffn = modules or _sublayers(case)
    ln = lambda t: F.layer_norm(t, t.shape[-1:], eps=1e-5)
    future = _future(x.shape[1]) if causal else None
    source = (lambda h: memory) if cross_to_memory else (lambda h: h)
    cross_attend = ((lambda h: cross(memory, h, h)) if memory_as_query
                    else (lambda h: cross(h, source(h), source(h))))
    sublayers = (lambda h: attn(h, h, h, attn_mask=future), cross_attend, ffn)
    with torch.no_grad():
        for f, norm in zip(sublayers, norms or (ln, ln, ln), strict=True):
            if norm_first:
                x = (x if residual else 0) + f(norm(x))
            else:
                x = norm((x if residual else 0) + f(x))
    return x


def _matches(out, value, atol=1e-4):
    return isinstance(out, torch.Tensor) and out.shape == value.shape and torch.allclose(out, value, atol=atol, rtol=1e-4)


X_IN_PLACE = ("Your code changed the target x in place (an in-place operation such as x += …, x.sub_(…) or x[...] = …): "
              "the caller's tensor is corrupted. Compute a new tensor instead, x = x + ….")
MEMORY_IN_PLACE = ("Your code changed the memory in place (an in-place operation such as x += …, x.sub_(…) or x[...] = "
                   "…): the caller's tensor is corrupted. Compute a new tensor instead (x = x + …).")
NOT_A_TENSOR = "DecoderLayer must return a tensor of the target's shape (batch, tgt_len, d_model)"
SWAPPED = {False: "With norm_first=False your layer computes Pre-LN: the two forms are swapped. Post-LN: "
                  "x = LN(x + Sublayer(x)); Pre-LN: x = x + Sublayer(LN(x)).",
           True: "With norm_first=True your layer computes Post-LN: the two forms are swapped. Post-LN: "
                 "x = LN(x + Sublayer(x)); Pre-LN: x = x + Sublayer(LN(x))."}
DIFFERS = {False: "Your Post-LN decoder layer differs from the formula by more than 1e-4 (on the test's weights). Three "
                  "sublayers, in order: masked self-attention self.self_attn(h, h, h, attn_mask=causal_mask(n)), "
                  "cross-attention self.cross_attn(h, memory, memory), self.feed_forward(h), each with its own "
                  "LayerNorm and residual.",
           True: "Your Pre-LN decoder layer differs from the formula by more than 1e-4 (on the test's weights). Three "
                 "sublayers, in order: masked self-attention self.self_attn(h, h, h, attn_mask=causal_mask(n)), "
                 "cross-attention self.cross_attn(h, memory, memory), self.feed_forward(h), each with its own "
                 "LayerNorm and residual."}
STATE = ("Called again, on another input or at another target or memory length, your decoder layer fails or no "
         "longer computes the formula (or answers the same input differently): it keeps something from an earlier "
         "call, a causal mask made for another length perhaps. Compute everything from this call's arguments "
         "(x, memory) and the layer's weights.")


MASK_NOT_A_TENSOR = "causal_mask(n) must return an (n, n) tensor, for every n (1 included)"
MASK_DTYPE = ("causal_mask must return a boolean tensor (True = blocked, the torch.nn convention MultiHeadAttention "
              "uses). For a float mask of 0 and -inf, attn_mask would mean something else.")
MASK_INVERTED = ("Your causal mask is inverted: True must mark the positions that may NOT be attended to — the future, "
                 "j > i, above the diagonal. Yours blocks the past and the position itself and lets the future through.")
MASK_PAST = "Your mask blocks the past (below the diagonal) instead of the future: query i must not see keys j > i"
MASK_DIAGONAL = ("Your mask also blocks the diagonal: a position must be able to attend to itself (triu with "
                 "diagonal=1)")
MASK_WRONG = "causal_mask(n) should be True exactly above the diagonal, for every n (1 included)"


def _check_hidden_mask(mask, n):
    """Your causal_mask(n) against the causal mask, the common wrong ones named."""
    expected = _future(n)
    assert isinstance(mask, torch.Tensor) and tuple(mask.shape) == (n, n), MASK_NOT_A_TENSOR
    assert mask.dtype == torch.bool, MASK_DTYPE
    if n > 1:
        assert not torch.equal(mask, ~expected), MASK_INVERTED
        assert not torch.equal(mask, expected.T), MASK_PAST
        assert not torch.equal(mask, expected | torch.eye(n, dtype=torch.bool)), MASK_DIAGONAL
    assert torch.equal(mask, expected), MASK_WRONG


MASK_AT_WORK = ("Given your causal mask as attn_mask, MultiHeadAttention does not compute causal attention (tolerance "
                "1e-5): the mask must be boolean, True above the diagonal, the positions that may not be attended to.")


def _check_mask_at_work(weights, q, out):
    """The attention's output on q with your mask (computed in your kernel) against the causal attention here."""
    attention = addnorm.MultiHeadAttention(q.shape[-1], 4).eval()
    attention.load_state_dict(weights)
    with torch.no_grad():
        expected = attention(q, q, q, attn_mask=_future(q.shape[1]))
    assert _matches(out, expected, atol=1e-5), MASK_AT_WORK


def _same_input(x, after, message):
    """An input, read back after the call: unchanged (not modified in place)."""
    assert isinstance(after, torch.Tensor) and after.shape == x.shape and torch.equal(after, x), message


def _check_layer(case, run, norm_first, own_mask):
    """Compare your layer with the formula on the case's weights; name the mistake when it matches a known wrong
    variant. `run` = (its output on the case's x and memory with its LayerNorms as created, that x and that memory
    after the call, which of its LayerNorms have a β, its output once its LayerNorms got the case's trained-looking γ
    and β); `own_mask`: what your causal_mask returned for the case's target length (None if it raised)."""
    plain, x_after, memory_after, biased, trained = run
    x, memory = case["x"], case["memory"]
    modules = _sublayers(case)
    reference = lambda **wrong: _reference(case, x, memory, **dict(dict(norm_first=norm_first), **wrong), modules=modules)
    _same_input(x, x_after, X_IN_PLACE)
    _same_input(memory, memory_after, MEMORY_IN_PLACE)
    assert isinstance(plain, torch.Tensor) and plain.shape == x.shape, NOT_A_TENSOR
    assert not _matches(plain, reference(causal=False)), (
        "Your self-attention has no causal mask: every position sees the future. Pass "
        "attn_mask=causal_mask(tgt_len) to self.self_attn.")
    assert not _matches(plain, reference(norm_first=not norm_first)), SWAPPED[norm_first]
    assert not _matches(plain, reference(residual=False)), (
        "The residual connections are forgotten: each sublayer's input must be added to its output.")
    assert not _matches(plain, reference(cross_to_memory=False)), (
        "Your cross-attention attends to the decoder's own states: its keys and values must be the encoder's "
        "output, self.cross_attn(h, memory, memory).")
    if x.shape == memory.shape:
        assert not _matches(plain, reference(memory_as_query=True)), (
            "Your cross-attention uses the memory as the query: the queries come from the decoder, the keys and "
            "values from the encoder's output, self.cross_attn(h, memory, memory).")
    expected = reference()
    if not _matches(plain, expected):
        n = x.shape[1]
        assert isinstance(own_mask, torch.Tensor) and own_mask.shape == (n, n) and torch.equal(own_mask, _future(n)), (
            "Your decoder layer is wrong, and so is causal_mask, which it uses: fix what the causal_mask test reports first")
    assert _matches(plain, expected), DIFFERS[norm_first]
    _check_own_norms(case, trained, biased, lambda norms: reference(norms=norms), 3)


NO_CAUSAL = ("Your self-attention has no causal mask: every position sees the future. Pass "
             "attn_mask=causal_mask(tgt_len) to self.self_attn.")
CAUSAL_DIFFERS = ("With the test's weights your decoder layer differs from the causal formula by more than 1e-4 (its "
                  "LayerNorms as created): masked self-attention self.self_attn(h, h, h, attn_mask=causal_mask(tgt_len)), "
                  "cross-attention self.cross_attn(h, memory, memory) without a mask, then self.feed_forward(h), each "
                  "with its residual and LayerNorm.")


def _with_others(case, others):
    """The case, with the other (x, memory) pairs the same layer is called on later."""
    return dict(case, others=others)


def _check_calls(case, calls, norm_first, message=STATE):
    """The same layer instance called again: `calls` = (its output on the case's x and memory a second time, then its
    outputs on each of case["others"] (other lengths), in order), with its LayerNorms as created."""
    assert isinstance(calls, (list, tuple)) and len(calls) == 1 + len(case["others"]), message
    modules = _sublayers(case)
    pairs = [(case["x"], case["memory"])] + list(case["others"])
    for (x, memory), out in zip(pairs, calls):
        assert _matches(out, _reference(case, x, memory, norm_first, modules=modules)), message


def _check_causal(case, out, norm_first):
    """Your layer (LayerNorms as created) on the case's weights against the causal formula; no mask named."""
    x, memory = case["x"], case["memory"]
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, NOT_A_TENSOR
    modules = _sublayers(case)
    assert not _matches(out, _reference(case, x, memory, norm_first, causal=False, modules=modules)), NO_CAUSAL
    assert _matches(out, _reference(case, x, memory, norm_first, modules=modules)), CAUSAL_DIFFERS


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
    sublayers 0 (the weights of `_constant_weights`): what dropout did shows in the output.

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


def _form_inputs(norm_first, x, memory):
    """The hidden inputs of the Post-LN (norm_first=False) or Pre-LN test, from the current random state: the layer
    cases (the visible test's x and memory first, each case its own weights and trained-looking γ and β), the case
    whose sublayers output zeros, and the dropout case (one sublayer at a time outputs BIG everywhere)."""
    cases = [_layer_case(32, 4, 64, x, memory), _layer_case(24, 3, 40, torch.randn(3, 8, 24), torch.randn(3, 3, 24))]
    if not norm_first:        # the memory as long as the target: a cross-attention that takes its queries from it shows
        cases.append(_layer_case(24, 3, 40, torch.randn(2, 5, 24), torch.randn(2, 5, 24)))
    zero = dict(x=torch.randn(2, 4, 24) * 3 + 1, memory=torch.randn(2, 5, 24), weights=_constant_weights(24, 3, 40))
    dropout = dict(p=0.6 if norm_first else 0.3, x=F.layer_norm(torch.randn(4, 8, 64), (64,)),   # LN(x) ≈ x already
                   memory=torch.randn(4, 6, 64), weights=[_constant_weights(64, 4, 64, name, BIG) for name in SUBLAYERS])
    return cases, zero, dropout


def _check_form(norm_first, cases, runs, own_masks, zero, zero_out, dropout, dropout_runs):
    """The hidden checks of the Post-LN or Pre-LN test, on what the layer returned for `_form_inputs`' inputs."""
    for case, run, own_mask in zip(cases, runs, own_masks or [None] * len(cases), strict=True):
        _check_layer(case, run, norm_first, own_mask)
    x = zero["x"]
    assert isinstance(zero_out, torch.Tensor) and zero_out.shape == x.shape, NOT_A_TENSOR
    if norm_first:
        assert torch.allclose(zero_out, x, atol=1e-5), (
            "With sublayers that output zeros a Pre-LN decoder layer must return x unchanged (the identity path); "
            "yours changes it: is a residual forgotten, or the stream itself normalized?")
    else:
        assert zero_out.abs().max() > 1e-3, (
            "With sublayers that output zeros your Post-LN decoder layer outputs zeros: the residual is forgotten.")
        assert torch.allclose(zero_out, F.layer_norm(x, x.shape[-1:], eps=1e-5), atol=1e-4), (
            "With sublayers that output zeros a Post-LN decoder layer must return LN(x)")
    # training mode: dropout on each sublayer's output, at the rate given
    for name, out in zip(SUBLAYERS, dropout_runs, strict=True):
        _check_dropout(out, dropout["x"], norm_first, dropout["p"], name)


# ---- the stack, checked on stand-in layers: `_ProbeLayer` (defined in the hidden observing code), its formula here
# A stand-in layer is (x, memory) ↦ x + tanh(x Wᵀ + b + mean(memory) Uᵀ), the mean over the memory's positions: the
# test gives each copy in self.layers its own W, b and U, so what the stack does with its layers and its memory shows.
PROBE_WIDTH = 16


def _probe_weights(count):
    """Distinct weights for `count` stand-in layers, as state dicts of _ProbeLayer(PROBE_WIDTH)."""
    return [{"linear.weight": 0.4 * torch.randn(PROBE_WIDTH, PROBE_WIDTH), "linear.bias": 0.3 * torch.randn(PROBE_WIDTH),
             "reader.weight": 0.4 * torch.randn(PROBE_WIDTH, PROBE_WIDTH)} for _ in range(count)]


def _probe_reference(x, memory, weights, norm=None, upstream=None, order=None, memory_of=None):
    """The stack of stand-in layers (in `order`, default each once in turn) in float64, then `norm` = (γ, β) once if
    given. `memory_of(h, memory)`: the memory each layer is given (default: the memory, unchanged), and the memory
    after it (common mistakes). With `upstream`, also the gradients of (output · upstream).sum() for x, the memory,
    and every layer's W, b and U (in order)."""
    grad = upstream is not None
    x = x.double().clone().requires_grad_(grad)
    memory = memory.double().clone().requires_grad_(grad)
    leaves = [[w[k].double().clone().requires_grad_(grad) for k in ("linear.weight", "linear.bias", "reader.weight")]
              for w in weights]
    h, given = x, memory
    for k in (order if order is not None else range(len(weights))):
        weight, bias, reader = leaves[k]
        read = given if memory_of is None else memory_of(h, given)[0]
        h = h + torch.tanh(h @ weight.T + bias + read.mean(dim=1, keepdim=True) @ reader.T)
        given = given if memory_of is None else memory_of(h, given)[1]
    if norm is not None:
        h = F.layer_norm(h, h.shape[-1:], norm[0].double(), norm[1].double(), eps=1e-5)
    if not grad:
        return h.detach(), None
    (h * upstream.double()).sum().backward()
    return h.detach(), [x.grad, memory.grad] + [t.grad for triple in leaves for t in triple]


def _close(out, value, atol=1e-4):
    """`out` (float32, from your code) within atol + 1e-4·|value| of the float64 reference `value`."""
    return (isinstance(out, torch.Tensor) and out.shape == value.shape and out.dtype == torch.float32
            and torch.allclose(out.double(), value, atol=atol, rtol=1e-4))


STACK_NOT_A_TENSOR = "Decoder must return a tensor of the target's shape (batch, tgt_len, d_model)"
STACK_OWN_MEMORY = ("Your decoder gives each layer its own input as the memory, layer(x, x): cross-attention must read "
                    "the encoder's output. Call layer(x, memory) with the memory you were given.")
STACK_PASSED_ON = ("Your decoder passes each layer's output on as the next layer's memory: every decoder layer "
                   "cross-attends to the same, final encoder output. Call layer(x, memory) with the memory you were "
                   "given, unchanged.")
STACK_NOT_CHAINED = ("Your decoder gives every layer the original target x: only the last layer's work survives. Chain "
                     "them: x = layer(x, memory) inside the loop.")
STACK_FIRST_REPEATED = ("Your decoder runs its first layer again and again: loop over the copies, for layer in "
                        "self.layers: x = layer(x, memory).")
STACK_NORM_IGNORED = ("Decoder(layer, n, norm) ignores its norm: store it in __init__ (self.norm = norm) and apply it "
                      "once after the last layer: return x if self.norm is None else self.norm(x).")
STACK_NORM_EVERY_LAYER = ("Decoder(layer, n, norm) applies the norm after every layer: apply it once, after the last "
                          "layer.")
STACK_DIFFERS = ("With the test's own layers (each copy in self.layers given its own weights), Decoder(layer, n) differs "
                 "from layers[n-1](…layers[0](x, memory)…, memory) (then norm once, if given) by more than 1e-4: each "
                 "layer takes the previous layer's output and the same memory, with nothing else in between or after.")
STACK_GRADIENTS = ("The gradients that reach the target, the memory and the layers' weights through your decoder differ "
                   "from those of the chained layers by more than 1e-4: call every layer on the previous layer's output "
                   "and the memory, inside the autograd graph (no torch.no_grad(), .detach() or .data in forward).")
STACK_STATE = ("Called again, on another input or at another length, your decoder gives another answer than the chained "
               "layers (or another answer for the same input): it keeps something from an earlier call.")
SHARED_LAYERS = ("Your layers are not independent copies: weights given to one copy in self.layers also changed "
                 "another, or the layer you were given is still used. [layer] * num_layers puts the same layer in the "
                 "list again and again; make independent copies: copy.deepcopy(layer).")
SHARED_GRADIENTS = ("The gradient that reaches each copy's weights differs from that layer's own gradient by more than "
                    "1e-4: the copies share weights, so their gradients add up. Use copy.deepcopy(layer) for each.")


def _check_probe_stack(out, x, memory, weights, norm=None, otherwise=STACK_DIFFERS):
    """A stack of stand-in layers' output, against the formula; the common wrong stacks named."""
    n = len(weights)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, STACK_NOT_A_TENSOR
    if _close(out, _probe_reference(x, memory, weights, norm)[0]):
        return
    assert not _close(out, _probe_reference(x, memory, weights, norm, memory_of=lambda h, m: (h, m))[0]), STACK_OWN_MEMORY
    assert not _close(out, _probe_reference(x, memory, weights, norm, memory_of=lambda h, m: (m, h))[0]), STACK_PASSED_ON
    if n > 1:
        assert not _close(out, _probe_reference(x, memory, weights, norm, order=[n - 1])[0]), STACK_NOT_CHAINED
        assert not _close(out, _probe_reference(x, memory, weights, norm, order=[0] * n)[0]), STACK_FIRST_REPEATED
    if norm is not None:
        assert not _close(out, _probe_reference(x, memory, weights, None)[0]), STACK_NORM_IGNORED
        h = x.double()
        for w in weights:
            h = F.layer_norm(_probe_reference(h, memory, [w])[0], h.shape[-1:], norm[0].double(), norm[1].double(),
                             eps=1e-5)
        assert not _close(out, h), STACK_NORM_EVERY_LAYER
    assert False, otherwise


def _check_probe_gradients(grads, x, memory, weights, upstream, norm=None, message=STACK_GRADIENTS):
    """The gradients your stack passed back (target, memory, then each copy's W, b and U), by value."""
    expected = _probe_reference(x, memory, weights, norm, upstream)[1]
    assert isinstance(grads, (list, tuple)) and len(grads) == len(expected), message
    for got, want in zip(grads, expected):
        assert _close(got, want), message
