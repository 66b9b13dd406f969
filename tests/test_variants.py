"""The variants (addnorm.variants) and the layout: each variant computes its formula; the model stands alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import addnorm
from addnorm.lab import SequenceTagger
from addnorm.lab.probes import record_attention
from addnorm.lab.tasks import BOS, EOS
from addnorm.variants.connections import (AddRMSNorm, NoResidual, Plain, ReZero, ResidualOnly,
                                          replace_connections)
from addnorm.variants.kv_cache import cached_greedy_decode, decode_step, new_cache
from addnorm.variants.positions import LearnedPositionEmbedding, NoPositionEmbedding

LIB = Path(addnorm.__file__).parent
MODEL_MODULES = sorted(p for p in LIB.glob("*.py"))


def test_each_connection_computes_its_formula():
    torch.manual_seed(0)
    x, f = torch.randn(2, 3, 8), nn.Linear(8, 8)
    assert torch.allclose(ResidualOnly(8)(x, f), x + f(x))
    rezero = ReZero(8)
    assert torch.equal(rezero(x, f), x)                       # α starts at 0: the identity
    with torch.no_grad():
        rezero.alpha.fill_(0.5)
    assert torch.allclose(rezero(x, f), x + 0.5 * f(x))
    post, pre = NoResidual(8), NoResidual(8, norm_first=True)
    assert torch.allclose(post(x, f), post.norm(f(x)))
    assert torch.allclose(pre(x, f), f(pre.norm(x)))
    assert torch.allclose(Plain(8)(x, f), f(x))
    rms = AddRMSNorm(8)
    assert isinstance(rms.norm, addnorm.RMSNorm) and torch.allclose(rms(x, f), rms.norm(x + f(x)))


@pytest.mark.parametrize("connection", [ResidualOnly, ReZero, NoResidual, Plain, AddRMSNorm])
def test_every_connection_rejects_a_change_of_width(connection):
    with pytest.raises(ValueError, match=r"input \(4, 8\) and sublayer output \(4, 16\)"):
        connection(8)(torch.randn(4, 8), nn.Linear(8, 16))


def test_replace_connections_swaps_every_addnorm_and_keeps_the_settings():
    layer = replace_connections(addnorm.DecoderLayer(16, 2, 32, dropout=0.2, norm_first=True), "no_residual")
    connections = [layer.add_norm_1, layer.add_norm_2, layer.add_norm_3]
    assert all(isinstance(c, NoResidual) and c.norm_first and c.dropout.p == 0.2 for c in connections)


def test_learned_and_absent_positions():
    torch.manual_seed(1)
    tokens = torch.randint(0, 10, (2, 5))
    learned = LearnedPositionEmbedding(10, 16, max_len=8)
    assert isinstance(learned.position_table, nn.Parameter) and learned.position_table.shape == (8, 16)
    assert "position_table" in dict(learned.named_parameters())
    assert torch.allclose(learned(tokens), learned.tokens(tokens) * 4.0 + learned.position_table[:5])
    none = NoPositionEmbedding(10, 16)
    assert torch.allclose(none(tokens), none.tokens(tokens) * 4.0)
    same = torch.full((1, 4), 3)
    assert torch.equal(none(same)[0, 0], none(same)[0, 3])    # every position looks the same


def test_a_tagger_built_from_each_knob_runs():
    for residual, norm in [(True, "layer"), (True, "rms"), (True, "none"), (True, "rezero"), (False, "layer"),
                           (False, "none")]:
        for positional in ("sinusoidal", "learned", "none"):
            model = SequenceTagger(8, d_model=16, num_heads=2, num_layers=2, d_ff=32, norm_first=True,
                                   residual=residual, norm=norm, positional=positional)
            assert model(torch.randint(0, 8, (2, 5))).shape == (2, 5, 8)
    with pytest.raises(ValueError, match="no connection for residual=False, norm='rezero'"):
        SequenceTagger(8, residual=False, norm="rezero")


def small_transformer(norm_first: bool) -> addnorm.Transformer:
    torch.manual_seed(2)
    return addnorm.Transformer(14, 14, d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2,
                               d_ff=64, dropout=0.0, norm_first=norm_first, max_len=32).eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_each_cached_step_equals_the_parallel_pass(norm_first):
    model = small_transformer(norm_first)
    src, tgt = torch.randint(3, 14, (3, 6)), torch.randint(3, 14, (3, 7))
    src_pad = torch.zeros(3, 6, dtype=torch.bool)
    src_pad[0, 4:] = True
    with torch.no_grad():
        parallel = model(src, tgt, src_pad)
        memory = model.encode(src, src_pad)
        cache = new_cache(model)
        steps = [decode_step(model, tgt[:, t:t + 1], memory, cache, t, src_pad)[:, 0] for t in range(7)]
    assert torch.allclose(torch.stack(steps, dim=1), parallel, atol=1e-5)
    assert cache[0]["self"]["k"].shape == (3, 4, 7, 8) and cache[0]["cross"]["k"].shape == (3, 4, 6, 8)
    assert torch.equal(cached_greedy_decode(model, src, 8, BOS, EOS, src_pad),
                       addnorm.greedy_decode(model, src, 8, BOS, EOS, src_pad))


def test_recorded_attention_weights_are_the_ones_the_model_uses():
    model = small_transformer(False)
    src, tgt = torch.randint(3, 14, (2, 5)), torch.randint(3, 14, (2, 4))
    with record_attention(model) as weights, torch.no_grad():
        model(src, tgt)
    assert set(weights) == {f"{stack}.layers.{i}.{kind}" for stack, kinds in
                            (("encoder", ["self_attn"]), ("decoder", ["self_attn", "cross_attn"]))
                            for i in range(2) for kind in kinds}
    self_attn = weights["decoder.layers.0.self_attn"]                        # (batch, heads, 4, 4), causal
    assert self_attn.shape == (2, 4, 4, 4) and torch.all(self_attn.triu(diagonal=1) == 0)
    assert torch.allclose(self_attn.sum(-1), torch.ones(2, 4, 4))
    assert weights["decoder.layers.1.cross_attn"].shape == (2, 4, 4, 5)


def test_the_model_modules_import_no_lab_and_no_plotting():
    for path in MODEL_MODULES:
        tree = ast.parse(path.read_text())
        imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        assert not any("lab" in name.split(".") or name.startswith(("matplotlib", "tqdm", "numpy")) for name in imported), (
            f"{path.name} imports {imported}: the model must not import the lab, plotting, tqdm or numpy")
    code = "import sys, addnorm; print(sorted(m for m in sys.modules if m.startswith(('addnorm.lab', 'matplotlib'))))"  # (torch itself loads tqdm)
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", f"`import addnorm` loaded {loaded.strip()}"


def test_no_library_module_is_longer_than_about_200_lines():
    for path in LIB.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        assert lines <= 210, f"{path.relative_to(LIB)} has {lines} lines: split it by idea"


def test_the_public_names_of_the_model():
    names = ["LayerNorm", "RMSNorm", "AddNorm", "MultiHeadAttention", "causal_mask", "scaled_dot_product_attention",
             "sinusoidal_encoding", "Embedding", "FeedForward", "EncoderLayer", "Encoder", "DecoderLayer", "Decoder",
             "Transformer", "greedy_decode", "from_torch"]
    assert all(hasattr(addnorm, name) for name in names)


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_a_stack_applies_its_final_norm_once_and_adds_nothing_without_it(stack):
    torch.manual_seed(3)
    make = addnorm.EncoderLayer if stack == "encoder" else addnorm.DecoderLayer
    stack_cls = addnorm.Encoder if stack == "encoder" else addnorm.Decoder
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 6, 16)
    args = (x,) if stack == "encoder" else (x, memory)
    post = stack_cls(make(16, 2, 32, dropout=0.0), 2).eval()                  # Post-LN: no norm
    expected = x
    for layer in post.layers:
        expected = layer(expected, *args[1:])
    assert post.norm is None and torch.allclose(post(*args), expected)
    final = addnorm.LayerNorm(16)
    with torch.no_grad():
        final.weight.uniform_(0.5, 1.5)
        final.bias.uniform_(-0.5, 0.5)
    pre = stack_cls(make(16, 2, 32, dropout=0.0, norm_first=True), 2, norm=final).eval()
    expected = x
    for layer in pre.layers:
        expected = layer(expected, *args[1:])
    assert torch.allclose(pre(*args), final(expected), atol=1e-6)


def test_recorded_attention_follows_rope():
    from addnorm.variants.rope import use_rope

    torch.manual_seed(5)
    model = use_rope(SequenceTagger(8, d_model=16, num_heads=2, num_layers=1, d_ff=32)).eval()
    tokens = torch.randint(0, 8, (1, 6))
    with record_attention(model) as weights, torch.no_grad():
        model(tokens)
    attn = model.encoder.layers[0].self_attn
    with torch.no_grad():
        h = model.embed(tokens)
        # recompute the layer's attention output from the recorded weights: it must be what the layer computes
        v = attn.split_heads(attn.v_proj(h))
        expected = attn.out_proj(attn.merge_heads(weights["encoder.layers.0.self_attn"] @ v))
        assert torch.allclose(expected, attn(h, h, h), atol=1e-5)
