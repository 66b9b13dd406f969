import addnorm
import torch
import torch.nn.functional as F

# [inputs]
torch.manual_seed(SEED + 14)
stack_case = _layer_case(16, 4, 32, torch.randn(2, 4, 16))      # the weights `layer` has before it is copied
attn_names, ffn_names = list(stack_case["attn"]), list(stack_case["ffn"])
upstream = torch.randn(2, 4, 16)                                # the gradient that reaches the output
padding = torch.tensor([[False, False, False, True], [False, False, False, False]])
padded = stack_case["x"].clone()
padded[0, 3] = torch.randn(16) * 5                              # new content at the padding position
post_stack_cases = [_layer_case(16, 4, 32) for _ in range(2)]  # a Post-LN stack of 2: each copy its own weights
final_bias = torch.full((16,), 0.25)                            # the β of the norm it is given
# [observe]
library_encoder = isinstance(encoder, addnorm.Encoder) or isinstance(pre_encoder, addnorm.Encoder)
depths = []
for num_layers in (1, 6):
    deep_layer = EncoderLayer(16, 4, 32, norm_first=True)
    _load_sublayers(deep_layer, stack_case["attn"], stack_case["ffn"])
    deep = _run(f"Encoder(layer, {num_layers})", Encoder, deep_layer, num_layers).eval()
    depths.append(len(deep.layers))
# every copy's given sublayers, in the order of the test's names
copied = [[m.self_attn.state_dict()[k] for k in attn_names] + [m.feed_forward.state_dict()[k] for k in ffn_names]
          for m in deep.layers]
grad_out = _run("Encoder(layer, 6)(x)", deep, stack_case["x"].clone())
(grad_out * upstream).sum().backward()
grads = [[p.grad for p in m.parameters()] for m in deep.layers]
with torch.no_grad():
    masked = _run("Encoder(layer, 6)(x, src_key_padding_mask=mask)", deep, stack_case["x"].clone(),
                  src_key_padding_mask=padding)
    masked_changed = deep(padded.clone(), src_key_padding_mask=padding)
final_norm = LayerNorm(16)
with torch.no_grad():
    final_norm.bias.copy_(final_bias)
post_layer = EncoderLayer(16, 4, 32)
post_stack = _run("Encoder(layer, 2, norm)", Encoder, post_layer, 2, final_norm).eval()
for post_copy, post_weights in zip(post_stack.layers, post_stack_cases):
    _load_sublayers(post_copy, post_weights["attn"], post_weights["ffn"])
del post_weights                               # the test's own data: not an observation
with torch.no_grad():
    post_out = _run("Encoder(layer, 2, norm)(x)", post_stack, stack_case["x"].clone())
    post_first = post_stack.layers[0](stack_case["x"].clone())
    post_stacked = post_stack.layers[1](post_first)
# [check]
assert not library_encoder, "Your Encoder is (a subclass of) addnorm.Encoder: write it yourself"
for num_layers, depth in zip((1, 6), depths, strict=True):
    assert depth == num_layers, f"Encoder(layer, {num_layers}) must hold {num_layers} layers"
# every copy starts with the weights of `layer`
given_names = [f"self_attn.{k}" for k in attn_names] + [f"feed_forward.{k}" for k in ffn_names]
given = [stack_case["attn"][k] for k in attn_names] + [stack_case["ffn"][k] for k in ffn_names]
for tensors in copied:
    for name, a, b in zip(given_names, tensors, given, strict=True):
        assert torch.equal(a, b), f"every layer of the stack must start as a copy of `layer`; {name} differs"
# every layer's output feeds the next: each layer's parameters receive a gradient (however the layer is called)
reached = _layers_that_got_gradients(grads)
assert reached == 6, (
    f"Only {reached} of the 6 layers of Encoder(layer, 6) had a gradient reach their weights: the others are skipped "
    f"or their output is thrown away. Chain them all: x = layer(x, ...) for every layer in self.layers.")
# the padding mask reaches every layer: padding content must not reach the real tokens through the stack
assert torch.allclose(masked[0, :3], masked_changed[0, :3], atol=1e-5), (
    "Through the whole encoder, padding leaks into the real tokens: pass src_key_padding_mask to every layer")
# a Post-LN stack of 2 with a norm given: the norm still comes once, at the end
once_at_the_end = ("Encoder(layer, 2, norm) must return norm(layers[1](layers[0](x))) whatever the layers' form: the "
                   "norm once, after the last layer")
assert _matches(post_out, F.layer_norm(post_stacked, (16,), None, final_bias, eps=1e-5), atol=1e-5), once_at_the_end
# where your layer computes the formula, the whole stack is checked against the formula too, on the test's weights
first_expected = _reference(post_stack_cases[0], stack_case["x"])
if _matches(post_first, first_expected):
    expected = F.layer_norm(_reference(post_stack_cases[1], first_expected), (16,), None, final_bias, eps=1e-5)
    assert _matches(post_out, expected, atol=1e-5), once_at_the_end
