"""The decoder-only variants (addnorm.variants.modern): shapes, the parameter counts chapter 7 states,
causality, no biases in the modern block, the SwiGLU formula, RoPE on queries and keys only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import addnorm
from addnorm.variants.modern import (DecoderOnly, GPTBlock, ModernBlock, SwiGLU, gpt_2017, llama_style,
                                     matching_swiglu_width)
from addnorm.variants.rope import RotaryMultiHeadAttention

# chapter 7's configuration
VOCAB, D, HEADS, LAYERS, D_FF = 11, 64, 4, 2, 256


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("build", [lambda: gpt_2017(VOCAB, D, HEADS, LAYERS, D_FF),
                                   lambda: gpt_2017(VOCAB, D, HEADS, LAYERS, D_FF, norm_first=True),
                                   lambda: llama_style(VOCAB, D, HEADS, LAYERS, matching_swiglu_width(D, D_FF))])
def test_language_models_give_next_token_logits_at_every_position(build):
    model = build()
    assert isinstance(model, DecoderOnly)
    assert model(torch.randint(0, VOCAB, (3, 7))).shape == (3, 7, VOCAB)


def test_blocks_keep_the_shape_and_reject_a_wrong_width():
    x = torch.randn(2, 5, D)
    for block in (GPTBlock(D, HEADS, D_FF), GPTBlock(D, HEADS, D_FF, norm_first=True), ModernBlock(D, HEADS, 174)):
        assert block(x).shape == x.shape
        with pytest.raises(ValueError, match=r"\(batch, seq, 64\)"):
            block(torch.randn(2, 5, 32))


def test_parameter_counts_match_the_chapter():
    width = matching_swiglu_width(D, D_FF)
    assert width == 174                                          # the width chapter 7 prints
    old, new = GPTBlock(D, HEADS, D_FF), ModernBlock(D, HEADS, width)
    assert count(old) == 4 * (D * D + D) + 2 * D * D_FF + D_FF + D + 4 * D
    assert count(new) == 4 * D * D + 3 * D * width + 2 * D
    assert abs(count(old) - count(new)) / count(old) < 0.002
    n_old, n_new = count(gpt_2017(VOCAB, D, HEADS, LAYERS, D_FF)), count(llama_style(VOCAB, D, HEADS, LAYERS, width))
    assert (n_old, n_new) == (101_387, 101_312)                  # the counts chapter 7 glues
    assert abs(n_old - n_new) / n_old < 0.002
    # the matching width is the best integer for any configuration
    for d, d_ff in [(32, 64), (128, 512), (48, 200)]:
        target = count(GPTBlock(d, 4, d_ff))
        best = min(range(d_ff // 2, d_ff), key=lambda h: abs(count(ModernBlock(d, 4, h)) - target))
        assert abs(matching_swiglu_width(d, d_ff) - best) <= 1


@pytest.mark.parametrize("build", [lambda: gpt_2017(VOCAB, D, HEADS, LAYERS, D_FF),
                                   lambda: llama_style(VOCAB, D, HEADS, LAYERS, 174)])
def test_a_future_token_changes_no_earlier_output(build):
    torch.manual_seed(0)
    model = build().eval()
    tokens = torch.randint(0, VOCAB, (2, 9))
    changed = tokens.clone()
    changed[:, 5] = (changed[:, 5] + 1) % VOCAB
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert torch.allclose(before[:, :5], after[:, :5], atol=1e-6), "an earlier position saw a later token"
    assert (before[:, 5:] - after[:, 5:]).abs().max() > 1e-3


def test_the_modern_block_has_no_bias_and_uses_rmsnorm_rope_and_swiglu():
    model = llama_style(VOCAB, D, HEADS, LAYERS, 174)
    assert [name for name, _ in model.named_parameters() if "bias" in name] == []
    assert not any(isinstance(m, addnorm.LayerNorm) for m in model.modules())
    assert isinstance(model.norm, addnorm.RMSNorm)               # the final norm of a Pre-norm stack
    for block in model.layers:
        assert isinstance(block.self_attn, RotaryMultiHeadAttention) and isinstance(block.feed_forward, SwiGLU)
        assert block.add_norm_1.norm_first and isinstance(block.add_norm_1.norm, addnorm.RMSNorm)
    assert model.layers[0].self_attn.q_proj.weight is not model.layers[1].self_attn.q_proj.weight
    same = torch.full((1, 4), 3)
    embedded = model.embed(same)[0]
    assert torch.equal(embedded[0], embedded[3])                 # no position added at the input


def test_the_2017_block_has_biases_and_sinusoidal_positions():
    model = gpt_2017(VOCAB, D, HEADS, LAYERS, D_FF)
    assert model.norm is None and model.head.bias is not None    # Post-LN: no final norm
    assert model.layers[0].self_attn.q_proj.bias is not None
    assert isinstance(gpt_2017(VOCAB, D, HEADS, LAYERS, D_FF, norm_first=True).norm, addnorm.LayerNorm)
    embedded = model.embed(torch.full((1, 4), 3))[0]
    assert not torch.allclose(embedded[0], embedded[3])


def test_swiglu_computes_its_formula():
    torch.manual_seed(0)
    ffn = SwiGLU(8, 6)
    assert ffn.w.bias is None and ffn.v.bias is None and ffn.w2.bias is None
    x = torch.randn(2, 3, 8)
    a, b = x @ ffn.w.weight.T, x @ ffn.v.weight.T
    expected = (a * torch.sigmoid(a) * b) @ ffn.w2.weight.T      # W₂ (SiLU(W x) ⊙ V x)
    assert torch.allclose(ffn(x), expected, atol=1e-6)
    with_bias = SwiGLU(8, 6, bias=True)
    assert count(with_bias) == 3 * 8 * 6 + 6 + 6 + 8


def test_rope_rotates_queries_and_keys_not_values():
    torch.manual_seed(0)
    attention = ModernBlock(D, HEADS, 174).self_attn
    x = torch.randn(1, 1, D).expand(1, 6, D)                    # one vector at 6 positions
    with torch.no_grad():
        out = attention(x, x, x)
    assert torch.allclose(out, out[:, :1].expand_as(out), atol=1e-5)   # a mixture of equal values is that value


def test_gpt_block_is_a_decoder_layer_without_cross_attention():
    torch.manual_seed(0)
    layer = addnorm.DecoderLayer(D, HEADS, D_FF, dropout=0.0, norm_first=True).eval()
    with torch.no_grad():
        layer.cross_attn.out_proj.weight.zero_()
        layer.cross_attn.out_proj.bias.zero_()
    block = GPTBlock(D, HEADS, D_FF, norm_first=True).eval()
    block.load_state_dict({k.replace("add_norm_3", "add_norm_2"): v for k, v in layer.state_dict().items()
                           if not k.startswith(("cross_attn", "add_norm_2"))})
    x, memory = torch.randn(2, 5, D), torch.randn(2, 3, D)
    with torch.no_grad():
        assert torch.allclose(layer(x, memory), block(x), atol=1e-6)


def test_modern_imports_only_the_model():
    source = Path(addnorm.__file__).parent / "variants" / "modern.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert not {name for name in imported if "lab" in name or name.split(".")[0] in ("matplotlib", "tqdm")}
