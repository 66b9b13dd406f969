import torch

# [inputs]
torch.manual_seed(SEED + 15)
# stand-in layers (_ProbeLayer below): the test gives each of the 4 copies its own weights after the stack is made,
# then changes the layer it was given (the copies must not follow); inputs, the gradient that reaches the output
indep_weights = _probe_weights(4)
indep_shift = 0.5 * torch.randn(16, 16)
indep_x, indep_memory, indep_upstream = torch.randn(2, 5, 16), torch.randn(2, 3, 16), torch.randn(2, 5, 16)
indep_other_x, indep_other_memory = torch.randn(2, 5, 16), torch.randn(2, 3, 16)
# [observe]
def _probe_init(self, width):
    torch.nn.Module.__init__(self)
    self.linear = torch.nn.Linear(width, width)
    self.reader = torch.nn.Linear(width, width, bias=False)


def _probe_forward(self, x, memory):
    return x + torch.tanh(self.linear(x) + self.reader(memory.mean(dim=1, keepdim=True)))


class _ProbeLayer(torch.nn.Module):
    """A stand-in layer, x + tanh(x Wᵀ + b + mean(memory) Uᵀ): the test's weights say what it computes."""
    __init__, forward = _probe_init, _probe_forward


def _probe_runs(stack, weights, x, memory, upstream, other_x, other_memory):
    """A stack of stand-in layers with the test's weights in its copies: (its output, the gradients of the target, the
    memory and each copy's W, b and U, its output again on the same inputs, its output on other ones)."""
    copies = list(stack.layers)
    for layer_copy, state in zip(copies, weights):
        layer_copy.load_state_dict(state)
    stack.eval()
    x_in, memory_in = x.clone().requires_grad_(), memory.clone().requires_grad_()
    out = stack(x_in, memory_in)
    (out * upstream).sum().backward()
    grads = [x_in.grad, memory_in.grad] + [p.grad for c in copies
                                           for p in (c.linear.weight, c.linear.bias, c.reader.weight)]
    again = other = None                       # None where it raised
    with torch.no_grad():
        try:
            again = stack(x.clone(), memory.clone())
            other = stack(other_x.clone(), other_memory.clone())
        except Exception:
            pass
    return out.detach(), grads, again, other


indep_layer = _ProbeLayer(16)
indep_stack = _run("Decoder(layer, 4)", Decoder, indep_layer, 4)
with torch.no_grad():
    indep_layer.linear.weight.add_(indep_shift)          # the layer given, changed after the stack was made
indep_run = _probe_runs(indep_stack, indep_weights, indep_x, indep_memory, indep_upstream, indep_other_x,
                        indep_other_memory)
del indep_layer, indep_stack                   # the test's own objects: not observations
# [check]
assert isinstance(indep_run, tuple) and len(indep_run) == 4, SHARED_LAYERS
indep_out, indep_grads, indep_again, indep_other = indep_run
_check_probe_stack(indep_out, indep_x, indep_memory, indep_weights, otherwise=SHARED_LAYERS)
_check_probe_gradients(indep_grads, indep_x, indep_memory, indep_weights, indep_upstream, None, SHARED_GRADIENTS)
assert _close(indep_again, _probe_reference(indep_x, indep_memory, indep_weights)[0]), STACK_STATE
assert _close(indep_other, _probe_reference(indep_other_x, indep_other_memory, indep_weights)[0]), STACK_STATE
