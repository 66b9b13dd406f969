"""Exercise 3's hidden helpers, run in the judge: the weights the hidden tests give the learner's layers (made here),
the encoder layer's formula on those weights with its common wrong versions, and the checks that name the mistake."""
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


def _check_layer(case, run, norm_first, mask=None):
    """Compare your layer with the formula on the case's weights; name the mistake when it matches a known wrong
    variant. `run` = (its output on case["x"] with its LayerNorms as created, the input after that call, which of its
    LayerNorms have a β, its output once its LayerNorms got the case's trained-looking γ and β)."""
    plain, x_after, biased, trained = run
    x = case["x"]
    form, other = ("Pre-LN", "Post-LN") if norm_first else ("Post-LN", "Pre-LN")
    _unchanged(x, x_after, "the input x")
    assert isinstance(plain, torch.Tensor) and plain.shape == x.shape, (
        f"EncoderLayer must return a tensor of the input's shape {tuple(x.shape)}, got {getattr(plain, 'shape', type(plain).__name__)}")
    assert not _matches(plain, _reference(case, x, mask, not norm_first)), (
        f"With norm_first={norm_first} your layer computes {other}: the two forms are swapped. Post-LN: "
        f"x = LN(x + Sublayer(x)); Pre-LN: x = x + Sublayer(LN(x)).")
    for residual, which in (((False, False), "both sublayers"), ((False, True), "the self-attention sublayer"),
                            ((True, False), "the feed-forward sublayer")):
        assert not _matches(plain, _reference(case, x, mask, norm_first, residual)), (
            f"The residual is forgotten around {which}: each sublayer's input must be added to its output "
            f"({'x + Sublayer(LN(x))' if norm_first else 'LN(x + Sublayer(x))'}).")
    if mask is not None:
        assert not _matches(plain, _reference(case, x, None, norm_first)), (
            "Your layer ignores src_key_padding_mask: pass it to the self-attention, "
            "self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask)")
    expected = _reference(case, x, mask, norm_first)
    assert _matches(plain, expected), (
        f"Your {form} encoder layer differs from "
        f"{'x = x + SelfAttn(LN₁(x)); x + FFN(LN₂(x))' if norm_first else 'x = LN₁(x + SelfAttn(x)); LN₂(x + FFN(x))'}"
        f" by up to {(plain - expected).abs().max().item():.3g}. Use self.self_attn(h, h, h, key_padding_mask=...) "
        f"and self.feed_forward(h), one LayerNorm per sublayer.")
    _check_own_norms(case, trained, biased, lambda norms: _reference(case, x, mask, norm_first, norms=norms), 2)


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
    sublayer 0 (the weights of `_constant_weights`): what dropout did shows in the output.

    Pre-LN: out − x is 0 where dropped and BIG / (1 − p) where kept. Post-LN: out = LN(x + that); the kept elements
    are the large ones of each token. The mask is read from the output, so the order in which random numbers are
    drawn does not matter.
    """
    form, formula = ("Pre-LN", "x + Dropout(Sublayer(LN(x)))") if norm_first else ("Post-LN", "LN(x + Dropout(Sublayer(x)))")
    scaled = BIG / (1 - p)
    assert isinstance(out, torch.Tensor) and out.shape == x.shape, (
        f"EncoderLayer must return a tensor of the input's shape {tuple(x.shape)}, got {getattr(out, 'shape', type(out).__name__)}")
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
