import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 14)
loss_weights = _weights(_perturbed(addnorm.Transformer(VOCAB, VOCAB, **SMALL), SEED + 14))    # a real model's
real_src, real_tgt = _loss_batch(SEED + 14)
# [observe]
real_model = addnorm.Transformer(VOCAB, VOCAB, **SMALL).eval()
real_model.load_state_dict(loss_weights)
real_loss = teacher_forcing_loss(real_model, real_src, real_tgt)
if isinstance(real_loss, torch.Tensor) and real_loss.requires_grad:
    real_loss.backward()
real_grads = (real_model.generator.weight.grad, real_model.src_embed.tokens.weight.grad)
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
    f"On a real model your loss is {real_loss.item():.5f}, the mean cross-entropy over the non-PAD labels is "
    f"{expected.item():.5f}: average over label positions (tokens), not sum, and not per sequence first")
assert all(isinstance(grad, torch.Tensor) for grad in real_grads), (
    "The loss must be differentiable with respect to the model's weights: no .detach(), no .item() inside")
assert short_inputs and isinstance(short_inputs[-1], torch.Tensor) and short_inputs[-1].dim() == 2 and (
    short_inputs[-1].shape[1] == real_tgt.shape[1] - 2), "The decoder input must be the target without its last position"
