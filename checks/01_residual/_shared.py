"""Exercise 1's hidden helpers, run in the judge: the connection's formula in float64 (its output, and the gradients of
(output · upstream).sum()), its common wrong versions, and the messages the checks give.

Every point rests on values the learner's code computed on the judge's inputs (the sublayer's weights, the γ and β
given to the block's LayerNorm, the upstream gradient), compared with the formula computed here in float64 at a stated
tolerance. What the kernel says about the block (which modules it owns, their names, counts) only chooses which
message to give. Every message is a literal: it says nothing the kernel said."""
import torch
import torch.nn.functional as F

JUDGE_EPS = 1e-5                 # addnorm's LayerNorm: the one the exercise gives
JUDGE_ATOL = 1e-4                # float32 from the learner's code against the float64 formula: atol + 1e-4·|value|
JUDGE_BIG = 1000.0               # what the sublayer outputs everywhere in the dropout checks


def _judge_ln(t, gamma=None, beta=None):
    """LayerNorm in float64, at γ = 1 and β = 0 unless they are given."""
    t = t.double()
    return F.layer_norm(t, t.shape[-1:], None if gamma is None else gamma.double(),
                        None if beta is None else beta.double(), eps=JUDGE_EPS)


def _judge_close(out, value, atol=JUDGE_ATOL):
    """`out` (from the learner's code) a finite floating tensor of value's shape, within atol + 1e-4·|value|."""
    return (isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(value.shape) and out.is_floating_point()
            and bool(torch.isfinite(out).all()) and torch.allclose(out.double(), value.double(), atol=atol, rtol=1e-4))


def _judge_linear(weight, bias):
    """The test's sublayer h ↦ h Wᵀ + b, in float64."""
    return lambda h: F.linear(h.double(), weight.double(), bias.double())


def _judge_formula(x, f, norm_first, gamma=None, beta=None, variant="right"):
    """The connection in float64 around the sublayer f, its LayerNorm at (γ, β) (1 and 0 if not given); `variant`
    reproduces a common mistake."""
    x = x.double()
    ln = lambda t: _judge_ln(t, gamma, beta)
    if variant == "swapped":
        norm_first = not norm_first
    if norm_first:
        return {"right": lambda: x + f(ln(x)), "no_residual": lambda: f(ln(x)), "sum_normalized": lambda: ln(x + f(ln(x))),
                "from_normalized": lambda: ln(x) + f(ln(x)), "swapped": lambda: x + f(ln(x))}[variant]()
    return {"right": lambda: ln(x + f(x)), "no_residual": lambda: ln(f(x)), "never_normalized": lambda: x + f(x),
            "input_normalized": lambda: ln(x) + f(x), "swapped": lambda: ln(x + f(x))}[variant]()


def _judge_gradients(x, weight, bias, gamma, beta, norm_first, upstream):
    """The connection in float64 around h ↦ h Wᵀ + b, its LayerNorm at (γ, β), and the gradients of
    (output · upstream).sum(): [x, the sublayer's input (through the sublayer only), γ, β, W, b]."""
    x64, g64, b64, w64, c64 = (t.double().clone().requires_grad_() for t in (x, gamma, beta, weight, bias))
    probe = torch.zeros(x.shape, dtype=torch.float64, requires_grad=True)
    f = lambda h: F.linear(h + probe, w64, c64)
    ln = lambda t: F.layer_norm(t, t.shape[-1:], g64, b64, eps=JUDGE_EPS)
    out = x64 + f(ln(x64)) if norm_first else ln(x64 + f(x64))
    (out * upstream.double()).sum().backward()
    return out.detach(), [x64.grad, probe.grad, g64.grad, b64.grad, w64.grad, c64.grad]


JUDGE_IN_PLACE = ("Your code changed the input x in place (an in-place operation such as x += …, x.sub_(…) or x[...] = …): the "
                  "caller's tensor is corrupted. Compute a new tensor instead (x = x + …).")
JUDGE_NOT_A_TENSOR = "AddNorm must return a tensor of the input's shape (..., d_model), for any leading shape"
JUDGE_MISTAKES = {
    False: {"swapped": "With norm_first=False your AddNorm computes x + F(LN(x)): that is Pre-LN, the two forms are "
                       "swapped. Post-LN (the 2017 paper) normalizes after the addition: LN(x + F(x)).",
            "no_residual": "Your Post-LN output is LN(F(x)): the residual is forgotten. Add the input back before "
                           "normalizing: LN(x + F(x)).",
            "never_normalized": "Your Post-LN output is x + F(x), never normalized: apply the LayerNorm after the "
                                "addition, LN(x + F(x)).",
            "input_normalized": "Your Post-LN output is LN(x) + F(x): only the input is normalized. Normalize the sum: "
                                "LN(x + F(x))."},
    True: {"swapped": "With norm_first=True your AddNorm computes LN(x + F(x)): that is Post-LN, the two forms are "
                      "swapped. Pre-LN normalizes the sublayer's input and adds to the un-normalized stream: x + F(LN(x)).",
           "no_residual": "Your Pre-LN output is F(LN(x)): the residual is forgotten. Add the input back: x + F(LN(x)).",
           "sum_normalized": "Your Pre-LN output is LN(x + F(LN(x))): the sum is normalized too. In Pre-LN the residual "
                             "stream itself is never normalized: x + F(LN(x)).",
           "from_normalized": "Your Pre-LN output is LN(x) + F(LN(x)): the residual adds the normalized input. Pre-LN "
                              "adds the sublayer's output to x itself, the un-normalized stream: x + F(LN(x)) (keep x; "
                              "normalize a copy)."},
}
JUDGE_DIFFERS = {
    False: "AddNorm(norm_first=False) should compute LN(x + F(x)), calling the sublayer once on x itself; yours differs "
           "from that by more than 1e-4 on inputs the notebook does not show. Compute it as "
           "self.norm(x + self.dropout(sublayer(x))).",
    True: "AddNorm(norm_first=True) should compute x + F(LN(x)), calling the sublayer once on LN(x); yours differs from "
          "that by more than 1e-4 on inputs the notebook does not show. Compute it as "
          "x + self.dropout(sublayer(self.norm(x))).",
}
JUDGE_NO_NORM = "Your AddNorm owns no LayerNorm: create one in __init__ (self.norm = LayerNorm(d_model))"
JUDGE_OWN_NORM = {
    False: "Once γ and β are trained (≠ 1 and 0), your Post-LN output is not γ·normalize(x + F(x)) + β: normalize with "
           "the LayerNorm your module owns (self.norm), not a fresh one or a functional call",
    True: "Once γ and β are trained (≠ 1 and 0), your Pre-LN output is not x + F(γ·normalize(x) + β): normalize the "
          "sublayer's input with the LayerNorm your module owns (self.norm), not a fresh one or a functional call",
}
JUDGE_STATE = ("Called again on the same block — another input of the same shape, another leading shape, or the first "
               "input once more — your AddNorm fails or gives another answer than the formula: it keeps something "
               "from an earlier call. Compute everything from this call's x and sublayer and the block's own LayerNorm.")
JUDGE_LIBRARY = ("Your AddNorm is (a subclass of) addnorm.AddNorm, the library's version of the answer, and its output is "
                 "wrong here: write the connection yourself")


def _judge_check_connection(out, x, f, norm_first, gamma=None, beta=None, owns_norm=True):
    """`out` = AddNorm(norm_first)(x, f) with its LayerNorm at (γ, β) (1 and 0 if not given): the formula in float64,
    the common wrong versions named. `owns_norm` (what the kernel said: advice only) chooses the message."""
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(x.shape), JUDGE_NOT_A_TENSOR
    if _judge_close(out, _judge_formula(x, f, norm_first, gamma, beta)):
        return
    for variant, message in JUDGE_MISTAKES[norm_first].items():
        assert not _judge_close(out, _judge_formula(x, f, norm_first, gamma, beta, variant)), message
    if gamma is not None:
        assert owns_norm, JUDGE_NO_NORM
        assert not _judge_close(out, _judge_formula(x, f, norm_first)), JUDGE_OWN_NORM[norm_first]
    assert False, JUDGE_DIFFERS[norm_first]


def _judge_check_any_form(out, x, f, norm_first, gamma=None, beta=None, owns_norm=True):
    """The shapes test's check: `out` is the connection of either form (which form is the Post-LN and Pre-LN tests'
    business) with the block's LayerNorm at (γ, β); else the form asked for, its mistakes named. Returns the form
    that matched."""
    for form in (norm_first, not norm_first):
        if _judge_close(out, _judge_formula(x, f, form, gamma, beta)):
            return form
    _judge_check_connection(out, x, f, norm_first, gamma, beta, owns_norm)
    return norm_first


# ---- dropout, read from the output: the sublayer outputs JUDGE_BIG everywhere, x is normalized already
JUDGE_DROPOUT_INPUT = {
    False: "In training mode your Post-LN AddNorm feeds the sublayer an input with many zeros: dropout is applied to "
           "the sublayer's input. Apply it to the sublayer's output, before the addition: LN(x + Dropout(F(x))).",
    True: "In training mode your Pre-LN AddNorm feeds the sublayer an input with many zeros: dropout is applied to "
          "the sublayer's input. Apply it to the sublayer's output, before the addition: x + Dropout(F(LN(x))).",
}
JUDGE_DROPOUT_NONE = ("In training mode your AddNorm drops none of the sublayer's output: apply self.dropout "
                      "(nn.Dropout(dropout), created in __init__) to the sublayer's output.")
JUDGE_DROPOUT_RATE = ("Your AddNorm dropped a share of the sublayer's output more than 7 points away from the dropout rate "
                      "it was given: is the rate hard-coded? Use the dropout argument: nn.Dropout(dropout), applied once.")
JUDGE_DROPOUT_SCALE = ("The kept elements of the sublayer's output must be scaled by 1/(1 − p), and the rest be 0 "
                       "(nn.Dropout does both); yours are not. Use nn.Dropout(dropout) on the sublayer's output, once.")
JUDGE_DROPOUT_WHERE = {
    False: "In training mode your Post-LN output is not LN(x + Dropout(F(x))): apply nn.Dropout(dropout) once, to the "
           "sublayer's output only (not to the residual x), with the kept elements scaled by 1/(1 − p) (nn.Dropout "
           "does it).",
    True: "In training mode your Pre-LN output is not x + Dropout(F(LN(x))): apply nn.Dropout(dropout) once, to the "
          "sublayer's output only (not to the residual x), with the kept elements scaled by 1/(1 − p) (nn.Dropout "
          "does it).",
}
JUDGE_DROPOUT_RESIDUAL = {
    False: "With norm_first=False, dropout also hits the residual path: with a sublayer that outputs zeros the output "
           "changed in training mode. Apply dropout to the sublayer's output only, before the addition: "
           "LN(x + Dropout(F(x))).",
    True: "With norm_first=True, dropout also hits the residual path: with a sublayer that outputs zeros the output "
          "changed in training mode. Apply dropout to the sublayer's output only, before the addition: "
          "x + Dropout(F(LN(x))).",
}
JUDGE_DROPOUT_ZERO_EVAL = {
    False: "With norm_first=False and a sublayer that outputs zeros, AddNorm should return LN(x); yours does not, even "
           "with dropout off — see the Post-LN test above.",
    True: "With norm_first=True and a sublayer that outputs zeros, AddNorm should return x; yours does not, even with "
          "dropout off — see the Pre-LN test above.",
}
JUDGE_DROPOUT_NEVER = ("AddNorm(dropout=0.5) in training mode gives identical outputs twice: the dropout is never "
                       "applied. Apply self.dropout to the sublayer's output.")


def _judge_check_dropout(norm_first, p, out, fed, x):
    """`out` = AddNorm(d, dropout=p, norm_first)(x, sublayer) in training mode, the sublayer outputting JUDGE_BIG
    everywhere; `fed`: the inputs the sublayer received.

    Pre-LN: out − x is 0 where dropped, BIG / (1 − p) where kept. Post-LN: out = LN(x + that); the kept elements are
    the large ones of each token, so the mask is read from the output, whatever the order of random calls.
    """
    assert isinstance(fed, (list, tuple)) and len(fed) == 1 and isinstance(fed[0], torch.Tensor), (
        "AddNorm must call the sublayer exactly once, in training mode too")
    assert (fed[0] == 0).float().mean() < 0.05, JUDGE_DROPOUT_INPUT[norm_first]
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(x.shape), JUDGE_NOT_A_TENSOR
    out, x = out.double(), x.double()
    scaled = JUDGE_BIG / (1 - p)
    if norm_first:
        kept = (out - x - scaled).abs() < 1e-3 * scaled
        dropped = (out - x).abs() < 1e-3
        expected = x + kept * scaled
    else:
        kept = out > (out.amax(dim=-1, keepdim=True) + out.amin(dim=-1, keepdim=True)) / 2
        if torch.allclose(out, _judge_ln(x), atol=1e-3):          # LN(x + K) = LN(x): none dropped
            kept = torch.ones_like(kept)
        dropped = ~kept
        expected = _judge_ln(x + kept * scaled)
    rate = dropped.float().mean().item()
    assert rate > 0.01, JUDGE_DROPOUT_NONE
    assert abs(rate - p) < 0.07, JUDGE_DROPOUT_RATE
    if norm_first:
        assert bool((kept | dropped).all()), JUDGE_DROPOUT_SCALE
    assert torch.allclose(out, expected, atol=1e-3, rtol=1e-3), JUDGE_DROPOUT_WHERE[norm_first]


# ---- gradients, by value
JUDGE_GRAD_OUTPUT = {
    False: "In eval mode, with the test's γ and β in your LayerNorm, your Post-LN output is not LN(x + F(x)) (by more "
           "than 1e-4), so its gradients cannot be right either: see the Post-LN test above.",
    True: "In eval mode, with the test's γ and β in your LayerNorm, your Pre-LN output is not x + F(LN(x)) (by more "
          "than 1e-4), so its gradients cannot be right either: see the Pre-LN test above.",
}
JUDGE_GRAD_INPUT = ("The gradient that reaches the input x through your AddNorm differs from the formula's by more than "
                    "1e-4: keep every step inside the autograd graph (no torch.no_grad(), .detach(), .data or .item() "
                    "in forward), and add the input itself, not a copy made outside the graph.")
JUDGE_GRAD_SUBLAYER = ("The gradient that reaches the sublayer's input (and its weights) through your AddNorm differs "
                       "from the formula's by more than 1e-4: the sublayer's output must be used as it is, inside the "
                       "autograd graph (no .detach(), .data or torch.no_grad()), once.")
JUDGE_GRAD_NORM = ("The gradients that reach the LayerNorm's γ and β differ from the formula's by more than 1e-4 "
                   "(they are zero, missing, or wrong): normalize with self.norm(...) as it is, so that γ and β are "
                   "trained (not self.norm.weight.detach(), .data, or a copy).")


def _judge_check_gradients(run, x, weight, bias, gamma, beta, norm_first, upstream):
    """`run` = (output, [x.grad, the sublayer input's gradient, W.grad, b.grad], [(γ.grad, β.grad) of each LayerNorm
    the block showed]) of AddNorm in eval mode with (γ, β) in its LayerNorms, on (output · upstream).sum()."""
    expected, (gx, gh, gg, gb, gw, gc) = _judge_gradients(x, weight, bias, gamma, beta, norm_first, upstream)
    assert isinstance(run, (list, tuple)) and len(run) == 3, JUDGE_GRAD_OUTPUT[norm_first]
    out, grads, norm_grads = run
    assert _judge_close(out, expected), JUDGE_GRAD_OUTPUT[norm_first]
    assert isinstance(grads, (list, tuple)) and len(grads) == 4, JUDGE_GRAD_INPUT
    assert all(_judge_close(got, want) for got, want in zip(grads[1:], (gh, gw, gc))), JUDGE_GRAD_SUBLAYER
    assert _judge_close(grads[0], gx), JUDGE_GRAD_INPUT
    assert isinstance(norm_grads, (list, tuple)) and any(
        isinstance(pair, (list, tuple)) and len(pair) == 2 and _judge_close(pair[0], gg) and _judge_close(pair[1], gb)
        for pair in norm_grads), JUDGE_GRAD_NORM
