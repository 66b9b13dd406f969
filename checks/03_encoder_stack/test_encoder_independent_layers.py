import torch

# [inputs]
torch.manual_seed(SEED + 15)
# stand-in layers (_ProbeLayer below): the test gives each of the 4 copies its own weights after the stack is made,
# then changes the layer it was given (the copies must not follow); inputs, the gradient that reaches the output
indep_weights = _probe_weights(4)
indep_shift = 0.5 * torch.randn(16, 16)
indep_x, indep_mask, indep_upstream = torch.randn(2, 5, 16), _padding(2, 5), torch.randn(2, 5, 16)
indep_other_x, indep_other_mask = torch.randn(2, 5, 16), _padding(2, 5)
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


indep_layer = _ProbeLayer(16)
indep_stack = _run("Encoder(layer, 4)", Encoder, indep_layer, 4)
with torch.no_grad():
    indep_layer.linear.weight.add_(indep_shift)          # the layer given, changed after the stack was made
indep_run = _probe_runs(indep_stack, indep_weights, indep_x, indep_mask, indep_upstream, indep_other_x,
                        indep_other_mask)
del indep_layer, indep_stack                   # the test's own objects: not observations
# [check]
assert isinstance(indep_run, tuple) and len(indep_run) == 4, SHARED_LAYERS
indep_out, indep_grads, indep_again, indep_other = indep_run
_check_probe_stack(indep_out, indep_x, indep_weights, indep_mask, otherwise=SHARED_LAYERS)
_check_probe_gradients(indep_grads, indep_x, indep_weights, indep_mask, None, indep_upstream, SHARED_GRADIENTS)
assert _close(indep_again, _probe_reference(indep_x, indep_weights, indep_mask)[0]), STACK_STATE
assert _close(indep_other, _probe_reference(indep_other_x, indep_weights, indep_other_mask)[0]), STACK_STATE
