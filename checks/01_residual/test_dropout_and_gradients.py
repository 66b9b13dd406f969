import torch
import torch.nn.functional as F

# [inputs]
torch.manual_seed(SEED + 13)
x_wide = torch.randn(4, 6, 8) * 3 + 1
weight_z, bias_z = torch.randn(8, 8) / 3, torch.randn(8) / 3
torch.manual_seed(SEED + 23)
# normalized already: LN(x_unit) ≈ x_unit
x_unit = F.layer_norm(torch.randn(32, 64), (64,))
# a sublayer that outputs `big` everywhere: what is dropped, and how the rest is scaled, shows in the output
big = 1000.0
grid = [(False, 0.3), (False, 0.6), (True, 0.3), (True, 0.6)]
# [observe]
zero_runs = []
for norm_first_z in (False, True):
    block_z = AddNorm(8, dropout=0.5, norm_first=norm_first_z)
    linear_z = _linear(weight_z, bias_z)
    with torch.no_grad():
        zero_runs.append((block_z.eval()(x_wide, lambda h: torch.zeros_like(h)),
                          block_z.train()(x_wide, lambda h: torch.zeros_like(h)),
                          block_z(x_wide, linear_z), block_z(x_wide, linear_z)))
dropout_runs = []
for norm_first_d, p in grid:
    block_d = AddNorm(64, dropout=p, norm_first=norm_first_d).train()
    recorder = _Recorder(lambda h: torch.full_like(h, big))
    with torch.no_grad():
        out_d = _run(f"AddNorm(64, dropout={p}, norm_first={norm_first_d}) in training mode", block_d, x_unit, recorder)
    dropout_runs.append((out_d, recorder.inputs))
# [check]
for norm_first, (evaluated, trained, once, twice) in zip((False, True), zero_runs, strict=True):
    expected = x_wide if norm_first else F.layer_norm(x_wide, (8,), eps=1e-5)
    assert torch.allclose(evaluated, expected, atol=1e-5), (
        f"With norm_first={norm_first} and a sublayer that outputs zeros, AddNorm should return "
        f"{'x' if norm_first else 'LN(x)'}; yours does not, even with dropout off — see the "
        f"{'Pre-LN' if norm_first else 'Post-LN'} test above.")
    assert torch.allclose(trained, expected, atol=1e-5), (
        f"With norm_first={norm_first}, dropout also hits the residual path: with a zero sublayer the output "
        f"changed. Apply dropout to the sublayer's output only, before the addition: "
        f"{'x + Dropout(F(LN(x)))' if norm_first else 'LN(x + Dropout(F(x)))'}.")
    assert not torch.equal(once, twice), (
        f"AddNorm(dropout=0.5, norm_first={norm_first}) in training mode gives identical outputs twice: "
        "the dropout is never applied. Apply self.dropout to the sublayer's output.")


def _check_dropout(norm_first, p, out, fed, x):
    """`out` = AddNorm(d, dropout=p, norm_first)(x, sublayer) in training mode, the sublayer outputting `big`
    everywhere; `fed`: the inputs the sublayer received.

    Pre-LN: out − x is 0 where dropped, big / (1 − p) where kept. Post-LN: out = LN(x + that); the kept elements
    are the large ones of each token, so the mask is read from the output, whatever the order of random calls.
    """
    form = "Pre-LN" if norm_first else "Post-LN"
    d = x.shape[-1]
    assert len(fed) == 1 and (fed[0] == 0).float().mean() < 0.05, (
        f"In training mode your {form} AddNorm feeds the sublayer an input with many zeros: dropout is applied to "
        f"the sublayer's input. Apply it to the sublayer's output, before the addition: "
        f"{'x + Dropout(F(LN(x)))' if norm_first else 'LN(x + Dropout(F(x)))'}.")
    scaled = big / (1 - p)
    if norm_first:
        kept = (out - x - scaled).abs() < 1e-3 * scaled
        dropped = (out - x).abs() < 1e-3
        expected = x + kept * scaled
    else:
        middle = (out.amax(dim=-1, keepdim=True) + out.amin(dim=-1, keepdim=True)) / 2
        kept = out > middle
        if torch.allclose(out, F.layer_norm(x, (d,), eps=1e-5), atol=1e-3):     # LN(x + K) = LN(x): none dropped
            kept = torch.ones_like(kept)
        dropped = ~kept
        expected = F.layer_norm(x + kept * scaled, (d,), eps=1e-5)
    rate = dropped.float().mean().item()
    assert rate > 0.01, (
        f"AddNorm(dropout={p}) in training mode drops none of the sublayer's output: apply self.dropout "
        f"(nn.Dropout(dropout), created in __init__) to the sublayer's output.")
    assert abs(rate - p) < 0.07, (
        f"AddNorm(dropout={p}) dropped {rate:.0%} of the sublayer's output instead of about {p:.0%}: is the rate "
        f"hard-coded? Use the dropout argument: nn.Dropout(dropout).")
    if norm_first:
        assert (kept | dropped).all(), (
            f"With dropout={p} the kept elements of the sublayer's output must be scaled by 1/(1 − p) = "
            f"{1 / (1 - p):.3g}, and the rest be 0 (nn.Dropout does both); yours are not. Use nn.Dropout(dropout) "
            f"on the sublayer's output, once.")
    assert torch.allclose(out, expected, atol=1e-3, rtol=1e-3), (
        f"In training mode your {form} output is not "
        f"{'x + Dropout(F(LN(x)))' if norm_first else 'LN(x + Dropout(F(x)))'}: apply nn.Dropout(dropout) once, "
        f"to the sublayer's output only, with the kept elements scaled by 1/(1 − p) (nn.Dropout does it).")


for (norm_first, p), (out, fed) in zip(grid, dropout_runs, strict=True):
    _check_dropout(norm_first, p, out, fed, x_unit)
