import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 14)
# stand-in layers (_ProbeLayer below), each copy of the stack given its own weights: a stack of 3 without norm, one
# of 4 with a norm of the test's γ and β; a target and a memory, the gradient that reaches the output, other inputs
probe_weights, normed_weights = _probe_weights(3), _probe_weights(4)
probe_x, probe_memory, probe_upstream = torch.randn(3, 5, 16), torch.randn(3, 4, 16), torch.randn(3, 5, 16)
probe_other_x, probe_other_memory = torch.randn(2, 7, 16), torch.randn(2, 9, 16)
normed_x, normed_memory, normed_upstream = torch.randn(2, 6, 16), torch.randn(2, 6, 16), torch.randn(2, 6, 16)
normed_other_x, normed_other_memory = torch.randn(4, 3, 16), torch.randn(4, 2, 16)
normed_gamma, normed_beta = 1 + 0.5 * torch.randn(16), 0.5 * torch.randn(16)
start_x, start_memory = torch.randn(2, 4, 16), torch.randn(2, 3, 16)     # the copies as made: each a copy of `layer`
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


library_decoder = (isinstance(decoder, addnorm.Decoder) or isinstance(pre_decoder, addnorm.Decoder)
                   or any(isinstance(m, addnorm.DecoderLayer) for m in layers + pre_layers))
probe_stack = _run("Decoder(layer, 3)", Decoder, _ProbeLayer(16), 3)
probe_run = _probe_runs(probe_stack, probe_weights, probe_x, probe_memory, probe_upstream, probe_other_x,
                        probe_other_memory)
normed_norm = addnorm.LayerNorm(16)
with torch.no_grad():
    normed_norm.weight.copy_(normed_gamma)
    normed_norm.bias.copy_(normed_beta)
normed_stack = _run("Decoder(layer, 4, norm)", Decoder, _ProbeLayer(16), 4, normed_norm)
normed_run = _probe_runs(normed_stack, normed_weights, normed_x, normed_memory, normed_upstream, normed_other_x,
                         normed_other_memory)
start_layer = _ProbeLayer(16)
start_layer.load_state_dict(probe_weights[0])
start_stack = _run("Decoder(layer, 2)", Decoder, start_layer, 2).eval()
with torch.no_grad():
    start_out = _run("Decoder(layer, 2)(x, memory)", start_stack, start_x.clone(), start_memory.clone())
del start_layer, start_stack, probe_stack, normed_stack, normed_norm   # the test's own objects: not observations
# [check]
assert not library_decoder, (
    "Your Decoder reuses addnorm's Decoder or DecoderLayer, the library's version: write them yourself")
for run, (x_, memory_, weights_, norm_, upstream_, other_x_, other_memory_) in (
        (probe_run, (probe_x, probe_memory, probe_weights, None, probe_upstream, probe_other_x, probe_other_memory)),
        (normed_run, (normed_x, normed_memory, normed_weights, (normed_gamma, normed_beta), normed_upstream,
                      normed_other_x, normed_other_memory))):
    assert isinstance(run, tuple) and len(run) == 4, STACK_DIFFERS
    out_, grads_, again_, other_ = run
    _check_probe_stack(out_, x_, memory_, weights_, norm_)
    _check_probe_gradients(grads_, x_, memory_, weights_, upstream_, norm_)
    # the same stack again: the same inputs, then other lengths
    assert _close(again_, _probe_reference(x_, memory_, weights_, norm_)[0]), STACK_STATE
    assert _close(other_, _probe_reference(other_x_, other_memory_, weights_, norm_)[0]), STACK_STATE
# every copy starts as a copy of `layer`: Decoder(layer, 2) applies layer's function twice
assert _close(start_out, _probe_reference(start_x, start_memory, probe_weights[:1], order=[0, 0])[0]), (
    "Decoder(layer, 2) must hold 2 copies of `layer`, each starting with its weights, applied one after the other: "
    "self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers)).")
