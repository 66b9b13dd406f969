import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 14)
loss_weights = _weights(_perturbed(addnorm.Transformer(VOCAB, VOCAB, **SMALL), SEED + 14))    # a real model's
real_src, real_tgt = _loss_batch(SEED + 14)
loss_scale = 0.5 + float(torch.rand(()))                  # the upstream gradient of the loss, drawn too
# [observe]
real_model = addnorm.Transformer(VOCAB, VOCAB, **SMALL).eval()
real_model.load_state_dict(loss_weights)
real_loss = teacher_forcing_loss(real_model, real_src, real_tgt)
if isinstance(real_loss, torch.Tensor) and real_loss.requires_grad:
    (real_loss * loss_scale).backward()
real_grads = [parameter.grad for parameter in real_model.parameters()]      # in the order of addnorm.Transformer's
short_oracle = _ReversingOracle()
teacher_forcing_loss(short_oracle, real_src[:1], real_tgt[:1, :-1])          # one row, no padding: nothing to ignore
short_inputs = [call["tgt"] for call in short_oracle.calls]
del real_model, short_oracle                                                 # not data: not observations
# [check]
judged = _library_model(loss_weights)
expected = _reference_loss(judged, real_src, real_tgt)
assert isinstance(real_loss, torch.Tensor) and real_loss.dim() == 0 and torch.isfinite(real_loss), (
    "Your loss is NaN on a real model: some query attends to no key. Is a padding mask inverted? True must mark "
    "padding: src == PAD (and decoder_input == PAD), not !=.")
assert not torch.allclose(real_loss, _reference_loss(judged, real_src, real_tgt, ignore_padding=False), atol=1e-5), (
    "Your loss counts the PAD label positions: ignore them with F.cross_entropy(…, ignore_index=PAD)")
assert torch.allclose(real_loss, expected, atol=1e-5, rtol=1e-5), (
    "On a real model your loss differs from the mean cross-entropy over the non-PAD labels by more than 1e-5: "
    "average over label positions (tokens), not sum, and not per sequence first")
# the gradient, by value, for every parameter: autograd here on the reference loss, with the same weights
reference_grads = _reference_gradients(_library_model(loss_weights), real_src, real_tgt)
assert isinstance(real_grads, list) and len(real_grads) == len(reference_grads), (
    "The grader could not read the gradient of your loss for every parameter of the model")
for got, reference_grad in zip(real_grads, reference_grads.values(), strict=True):
    got = got if got is not None else torch.zeros_like(reference_grad)
    assert isinstance(got, torch.Tensor) and got.shape == reference_grad.shape, (
        "The grader could not read the gradient of your loss for every parameter of the model")
    assert (got - loss_scale * reference_grad).abs().max().item() <= 1e-5 + 1e-3 * reference_grad.abs().max().item(), (
        "The gradient of your loss with respect to the model's weights differs from the gradient of the mean "
        "cross-entropy over the non-PAD labels: compute the loss with torch from the model's logits, with no "
        ".detach(), no .item() and no torch.no_grad() inside (a term such as 0 * logits.sum() gives gradients that "
        "exist and are wrong)")
assert short_inputs and isinstance(short_inputs[-1], torch.Tensor) and short_inputs[-1].dim() == 2 and (
    short_inputs[-1].shape[1] == real_tgt.shape[1] - 2), "The decoder input must be the target without its last position"
