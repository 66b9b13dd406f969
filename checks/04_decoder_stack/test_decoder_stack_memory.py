import addnorm
import torch

# [inputs]
torch.manual_seed(SEED + 14)
deep_cases = [_layer_case(16, 4, 32) for _ in range(4)]         # each copy its own weights, as after training
deep_x, deep_memory = torch.randn(1, 3, 16), torch.randn(1, 2, 16)
grad_x, grad_memory = torch.randn(2, 3, 16), torch.randn(2, 4, 16)
upstream = torch.randn(2, 3, 16)                                # the gradient that reaches the output
# [observe]
library_decoder = (isinstance(decoder, addnorm.Decoder) or isinstance(pre_decoder, addnorm.Decoder)
                   or any(isinstance(m, addnorm.DecoderLayer) for m in layers + pre_layers))
depths, deep_outs, deep_chained, deep_first = [], [], [], []
for num_layers in (1, 4):
    deep = _run(f"Decoder(layer, {num_layers})", Decoder, DecoderLayer(16, 4, 32, norm_first=True), num_layers).eval()
    deep_layers = list(deep.layers)
    depths.append(len(deep_layers))
    for deep_layer, deep_weights in zip(deep_layers, deep_cases):
        _load_sublayers(deep_layer, deep_weights["attn"], deep_weights["cross"], deep_weights["ffn"])
    with torch.no_grad():
        deep_outs.append(_run(f"Decoder(layer, {num_layers})(x, memory)", deep, deep_x.clone(), deep_memory.clone(),
                              hint=_SHAPES))
        h = deep_x.clone()
        for deep_layer in deep_layers:
            h = deep_layer(h, deep_memory.clone())
        deep_chained.append(h)
        deep_first.append(deep_layers[0](deep_x.clone(), deep_memory.clone()))
del deep_weights                               # the test's own data: not an observation
# every layer's output feeds the next, and every layer reads the memory: gradients reach each layer and the memory
grad_memory_in = grad_memory.clone().requires_grad_()
grad_out = _run("Decoder(layer, 4)(x, memory)", deep, grad_x.clone(), grad_memory_in, hint=_SHAPES)
(grad_out * upstream).sum().backward()
grads = [[p.grad for p in m.parameters()] for m in deep.layers]
memory_grad = grad_memory_in.grad
# [check]
assert not library_decoder, (
    "Your Decoder reuses addnorm's Decoder or DecoderLayer, the library's version: write them yourself")
for num_layers, depth, deep_out, chained_out, first_out in zip((1, 4), depths, deep_outs, deep_chained, deep_first,
                                                              strict=True):
    assert depth == num_layers, f"Decoder(layer, {num_layers}) must hold {num_layers} layers"
    each_takes = f"Decoder(layer, {num_layers}): each layer must take the previous layer's output and the same memory"
    assert _matches(deep_out, chained_out, atol=1e-5), each_takes
    # where your layer computes the formula, the whole stack is checked against the formula too, on the test's weights
    if _matches(first_out, _reference(deep_cases[0], deep_x, deep_memory, norm_first=True)):
        expected = deep_x
        for case in deep_cases[:num_layers]:
            expected = _reference(case, expected, deep_memory, norm_first=True)
        assert _matches(deep_out, expected), each_takes
reached = _layers_that_got_gradients(grads)
assert reached == 4, (
    f"Only {reached} of the 4 layers of Decoder(layer, 4) had a gradient reach their weights: the others are skipped "
    f"or their output is thrown away. Chain them all: x = layer(x, memory) for every layer in self.layers.")
assert memory_grad is not None and memory_grad.abs().sum() > 0, (
    "No gradient reached the memory: the decoder's layers must cross-attend to it, layer(x, memory).")
