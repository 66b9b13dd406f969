import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 14)
# stand-in layers (_ProbeLayer below), each copy of the stack given its own weights: a stack of 3 without norm, one
# of 4 with a norm of the test's γ and β; an input with padding, the gradient that reaches the output, another input
probe_weights, normed_weights = _probe_weights(3), _probe_weights(4)
probe_x, probe_mask, probe_upstream = torch.randn(3, 5, 16), _padding(3, 5), torch.randn(3, 5, 16)
probe_other_x, probe_other_mask = torch.randn(2, 7, 16), _padding(2, 7)
normed_x, normed_mask, normed_upstream = torch.randn(2, 6, 16), _padding(2, 6), torch.randn(2, 6, 16)
normed_other_x = torch.randn(4, 3, 16)
normed_gamma, normed_beta = 1 + 0.5 * torch.randn(16), 0.5 * torch.randn(16)
start_x = torch.randn(2, 4, 16)                                  # the copies as made: each a copy of `layer`
# [observe]
def _probe_init(self, width):
    torch.nn.Module.__init__(self)
    self.linear = torch.nn.Linear(width, width)


def _probe_forward(self, x, src_key_padding_mask=None):
    keep = 1.0 if src_key_padding_mask is None else (~src_key_padding_mask).to(x.dtype)[..., None]
    return x + torch.tanh(self.linear(x)) * keep


class _ProbeLayer(torch.nn.Module):
    """A stand-in layer, x + tanh(x Wᵀ + b), zero at padding positions: the test's weights say what it computes."""
    __init__, forward = _probe_init, _probe_forward


def _probe_runs(stack, weights, x, mask, upstream, other_x, other_mask):
    """A stack of stand-in layers with the test's weights in its copies: (its output, the gradients of the input and
    of each copy's W and b, its output again on the same input, its output on another input)."""
    copies = list(stack.layers)
    for layer_copy, state in zip(copies, weights):
        layer_copy.load_state_dict(state)
    stack.eval()
    x_in = x.clone().requires_grad_()
    out = stack(x_in, src_key_padding_mask=mask)
    (out * upstream).sum().backward()
    grads = [x_in.grad] + [p.grad for c in copies for p in (c.linear.weight, c.linear.bias)]
    again = other = None                       # None where it raised
    with torch.no_grad():
        try:
            again = stack(x.clone(), src_key_padding_mask=mask)
            other = stack(other_x.clone(), src_key_padding_mask=other_mask)
        except Exception:
            pass
    return out.detach(), grads, again, other


library_encoder = isinstance(encoder, addnorm.Encoder) or isinstance(pre_encoder, addnorm.Encoder)
probe_stack = _run("Encoder(layer, 3)", Encoder, _ProbeLayer(16), 3)
probe_run = _probe_runs(probe_stack, probe_weights, probe_x, probe_mask, probe_upstream, probe_other_x,
                        probe_other_mask)
normed_norm = addnorm.LayerNorm(16)
with torch.no_grad():
    normed_norm.weight.copy_(normed_gamma)
    normed_norm.bias.copy_(normed_beta)
normed_stack = _run("Encoder(layer, 4, norm)", Encoder, _ProbeLayer(16), 4, normed_norm)
normed_run = _probe_runs(normed_stack, normed_weights, normed_x, normed_mask, normed_upstream, normed_other_x, None)
start_layer = _ProbeLayer(16)
start_layer.load_state_dict(probe_weights[0])
start_stack = _run("Encoder(layer, 2)", Encoder, start_layer, 2).eval()
with torch.no_grad():
    start_out = _run("Encoder(layer, 2)(x)", start_stack, start_x.clone())
del start_layer, start_stack, probe_stack, normed_stack, normed_norm   # the test's own objects: not observations
# [check]
assert not library_encoder, "Your Encoder is (a subclass of) addnorm.Encoder: write it yourself"
for run, (x_, weights_, mask_, norm_, upstream_, other_x_, other_mask_) in (
        (probe_run, (probe_x, probe_weights, probe_mask, None, probe_upstream, probe_other_x, probe_other_mask)),
        (normed_run, (normed_x, normed_weights, normed_mask, (normed_gamma, normed_beta), normed_upstream,
                      normed_other_x, None))):
    assert isinstance(run, tuple) and len(run) == 4, STACK_DIFFERS
    out_, grads_, again_, other_ = run
    _check_probe_stack(out_, x_, weights_, mask_, norm_)
    _check_probe_gradients(grads_, x_, weights_, mask_, norm_, upstream_)
    # the same stack again: the same input, then another size
    assert _close(again_, _probe_reference(x_, weights_, mask_, norm_)[0]), STACK_STATE
    assert _close(other_, _probe_reference(other_x_, weights_, other_mask_, norm_)[0]), STACK_STATE
# every copy starts as a copy of `layer`: Encoder(layer, 2) applies layer's function twice
assert _close(start_out, _probe_reference(start_x, probe_weights[:1], order=[0, 0])[0]), (
    "Encoder(layer, 2) must hold 2 copies of `layer`, each starting with its weights, applied one after the other: "
    "self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers)).")
