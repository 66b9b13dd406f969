"""Exercise 4's hidden helpers, run in the judge: the weights the hidden tests give the learner's decoder layers (made
here), the decoder layer's formula on those weights with its common wrong versions, and the checks that name the
mistake. The Post-LN and Pre-LN tests share their inputs (`_form_inputs`) and their checks (`_check_form`)."""
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


def _check_layer(case, run, norm_first, own_mask):
    """Compare your layer with the formula on the case's weights; name the mistake when it matches a known wrong
    variant. `run` = (its output on the case's x and memory with its LayerNorms as created, that x and that memory
    after the call, which of its LayerNorms have a β, its output once its LayerNorms got the case's trained-looking γ
    and β); `own_mask`: what your causal_mask returned for the case's target length (None if it raised)."""
    plain, x_after, memory_after, biased, trained = run
    x, memory = case["x"], case["memory"]
    form, other = ("Pre-LN", "Post-LN") if norm_first else ("Post-LN", "Pre-LN")
    modules = _sublayers(case)
    reference = lambda **wrong: _reference(case, x, memory, **dict(dict(norm_first=norm_first), **wrong), modules=modules)
    _unchanged(x, x_after, "the target x")
    _unchanged(memory, memory_after, "the memory")
    assert isinstance(plain, torch.Tensor) and plain.shape == x.shape, (
        f"DecoderLayer must return a tensor of the target's shape {tuple(x.shape)}, got {getattr(plain, 'shape', type(plain).__name__)}")
    assert not _matches(plain, reference(causal=False)), (
        "Your self-attention has no causal mask: every position sees the future. Pass "
        "attn_mask=causal_mask(tgt_len) to self.self_attn.")
    assert not _matches(plain, reference(norm_first=not norm_first)), (
        f"With norm_first={norm_first} your layer computes {other}: the two forms are swapped. Post-LN: "
        f"x = LN(x + Sublayer(x)); Pre-LN: x = x + Sublayer(LN(x)).")
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
    assert _matches(plain, expected), (
        f"Your {form} decoder layer differs from the formula by up to {(plain - expected).abs().max().item():.3g}. "
        f"Three sublayers, in order: masked self-attention self.self_attn(h, h, h, attn_mask=causal_mask(n)), "
        f"cross-attention self.cross_attn(h, memory, memory), self.feed_forward(h), each with its own LayerNorm "
        f"and residual.")
    _check_own_norms(case, trained, biased, lambda norms: reference(norms=norms), 3)


def _norm_with(case, index, has_bias):
    """The LayerNorm formula with the γ and β the test gave the layer's index-th LayerNorm (1 and 0 past MAX_NORMS)."""
    d = case["d_model"]
    gamma = case["gammas"][index] if index < MAX_NORMS else torch.ones(d)
    beta = (case["betas"][index] if index < MAX_NORMS else torch.zeros(d)) if has_bias else None
    return lambda t: F.layer_norm(t, t.shape[-1:], gamma, beta, eps=1e-5)


def _check_own_norms(case, out, biased, reference, count):
    """With a distinct γ and β in each LayerNorm, the layer must match the formula with each sublayer normalized by
    its own LayerNorm (in any order of creation); a LayerNorm used twice, or one never applied, shows."""
    norms = [_norm_with(case, i, bool(has_bias)) for i, has_bias in enumerate(list(biased)[:MAX_TRIED])]
    for choice in itertools.product(range(len(norms)), repeat=count):
        if _matches(out, reference([norms[i] for i in choice])):
            assert len(set(choice)) == count, (
                "Your layer normalizes two sublayers with the same LayerNorm (its γ and β), so another LayerNorm "
                "is never applied: give each sublayer its own LayerNorm, created in __init__, and use each once.")
            return
    assert False, (
        f"With trained γ and β (a different pair in each of your {len(biased)} LayerNorm(s)) your layer differs from "
        f"the formula: normalize each sublayer with its own LayerNorm, created in __init__ (not a fresh LayerNorm or "
        f"a functional call in forward), with its γ and β.")


def _check_dropout(out, x, norm_first, p, name):
    """`out`: the layer in training mode on x (normalized already), `name` outputting BIG everywhere and the other
    sublayers 0 (the weights of `_constant_weights`): what dropout did shows in the output.

    Pre-LN: out − x is 0 where dropped and BIG / (1 − p) where kept. Post-LN: out = LN(x + that); the kept elements
    are the large ones of each token. The mask is read from the output, so the order in which random numbers are
    drawn does not matter.
    """
    form, formula = ("Pre-LN", "x + Dropout(Sublayer(LN(x)))") if norm_first else ("Post-LN", "LN(x + Dropout(Sublayer(x)))")
    scaled = BIG / (1 - p)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
        f"DecoderLayer must return a tensor of the target's shape {tuple(x.shape)}, got {getattr(out, 'shape', type(out).__name__)}")
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
    assert rate > 0.01, (
        f"With dropout={p}, in training mode, your {form} layer drops none of the output of {name}: apply "
        f"nn.Dropout(dropout) to every sublayer's output, before the addition: {formula} (dropout on the "
        f"sublayer's input does not count).")
    assert abs(rate - p) < 0.07, (
        f"With dropout={p} your layer dropped {rate:.0%} of the output of {name} instead of about {p:.0%}: is the "
        f"rate hard-coded, or is dropout applied twice? Use nn.Dropout(dropout), once per sublayer.")
    if norm_first:
        assert (kept | dropped).all(), (
            f"With dropout={p} the kept elements of {name}'s output must be scaled by 1/(1 − p) and the rest be "
            f"0 (nn.Dropout does both); yours are not. Apply nn.Dropout(dropout) once to each sublayer's output.")
    assert torch.allclose(out, expected, atol=1e-3, rtol=1e-3), (
        f"In training mode your {form} layer is not {formula} around {name}: apply nn.Dropout(dropout) once, "
        f"to the sublayer's output only (not to the residual x), then add.")


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
    assert isinstance(zero_out, torch.Tensor) and zero_out.shape == x.shape, (
        f"DecoderLayer must return a tensor of the target's shape {tuple(x.shape)}, got {getattr(zero_out, 'shape', type(zero_out).__name__)}")
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
