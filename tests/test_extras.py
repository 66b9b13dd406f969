"""The library's teaching extras: projection shortcut, RoPE, experiment variants, tracing and diagrams."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from torch import nn

import addnorm
from addnorm.lab import SequenceTagger
from addnorm.lab.probes import linear_probe_accuracy
from addnorm.lab.tracing import markdown_table, trace_calls
from addnorm.variants.positions import add_positions_every_layer
from addnorm.variants.rope import RotaryMultiHeadAttention, rotate, use_rope
from addnorm.variants.shortcut import ProjectionShortcut


def test_projection_shortcut_fixes_the_source_articles_residual_layer():
    torch.manual_seed(0)
    block = ProjectionShortcut(nn.Linear(256, 512), d_in=256, d_out=512)
    x = torch.randn(64, 256)
    y = block(x)
    assert y.shape == (64, 512)
    assert torch.allclose(y, block.sublayer(x) + block.projection(x))
    assert isinstance(ProjectionShortcut(nn.Linear(8, 8), 8, 8).projection, nn.Identity)
    with pytest.raises(ValueError, match="last dimension is 256"):
        block(torch.randn(3, 512))


def test_rope_scores_depend_only_on_the_offset():
    torch.manual_seed(1)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)

    def score(m: int, n: int) -> float:
        return (rotate(q, offset=m) * rotate(k, offset=n)).sum().item()

    assert score(3, 7) == pytest.approx(score(10, 14), abs=1e-4)
    assert score(3, 7) != pytest.approx(score(3, 8), abs=1e-4)
    assert torch.allclose(rotate(q).norm(), q.norm())          # a rotation keeps the length


def test_use_rope_swaps_self_attention_and_keeps_the_weights():
    torch.manual_seed(2)
    model = SequenceTagger(vocab_size=8, d_model=16, num_heads=2, num_layers=2, d_ff=32)
    before = model.encoder.layers[0].self_attn.q_proj.weight.clone()
    use_rope(model)
    attn = model.encoder.layers[0].self_attn
    assert isinstance(attn, RotaryMultiHeadAttention) and torch.equal(attn.q_proj.weight, before)
    assert model(torch.randint(0, 8, (2, 5))).shape == (2, 5, 8)


def test_positions_every_layer_adds_the_table_to_layers_after_the_first():
    torch.manual_seed(3)
    layers = nn.ModuleList([nn.Identity(), nn.Identity(), nn.Identity()])
    handles = add_positions_every_layer(layers, d_model=8, max_len=10)
    x = torch.zeros(1, 4, 8)
    pe = addnorm.sinusoidal_encoding(10, 8)[:4]
    assert torch.equal(layers[0](x), x)
    assert torch.allclose(layers[2](x), pe)
    for h in handles:
        h.remove()
    assert torch.equal(layers[2](x), x)


def test_linear_probe_reads_a_linearly_coded_label_and_not_noise():
    g = torch.Generator().manual_seed(4)
    labels = torch.randint(0, 5, (400,), generator=g)
    features = nn.functional.one_hot(labels, 5).float() + 0.1 * torch.randn(400, 5, generator=g)
    assert linear_probe_accuracy(features[:300], labels[:300], features[300:], labels[300:]) > 0.95
    noise = torch.randn(400, 5, generator=g)
    assert linear_probe_accuracy(noise[:300], labels[:300], noise[300:], labels[300:]) < 0.5


def test_trace_calls_measures_the_shapes_of_a_real_pass():
    layer = addnorm.EncoderLayer(16, 2, 32, dropout=0.0)
    out, calls = trace_calls(layer, torch.randn(2, 5, 16))
    names = [c.name for c in calls]
    assert "self_attn" in names and "feed_forward" in names
    assert all(c.output == (2, 5, 16) for c in calls if c.name in ("self_attn", "feed_forward"))
    table = markdown_table(["a", "b"], [[1, 2]])
    assert table.splitlines()[0] == "| a | b |" and table.splitlines()[2] == "| 1 | 2 |"


def test_transformer_diagram_is_drawn_from_the_model():
    from addnorm.lab.diagram import draw_transformer, trace

    model = addnorm.Transformer(10, 10, d_model=16, num_heads=2, num_encoder_layers=2, num_decoder_layers=3,
                                d_ff=32, dropout=0.0, max_len=16)
    stages = trace(model, torch.randint(3, 10, (1, 4)), torch.randint(3, 10, (1, 5)))
    assert sum(s.name.endswith("cross_attn") for s in stages) == 3
    assert sum(s.name.endswith("self_attn") and s.name.startswith("encoder") for s in stages) == 2
    from addnorm.lab import plots

    fig, ax = plots.figure()
    draw_transformer(ax, stages)
    assert ax.patches, "the diagram drew no boxes"


def test_glue_prints_the_value_outside_the_book_build(monkeypatch, capsys):
    from addnorm.lab import glue as glue_module

    monkeypatch.delenv(glue_module.BOOK_BUILD, raising=False)
    glue_module.glue("some_ratio", "0.52")
    assert capsys.readouterr().out == "some_ratio = 0.52\n"
    monkeypatch.setenv(glue_module.BOOK_BUILD, "1")
    glue_module.glue("some_ratio", "0.52")
    assert capsys.readouterr().out == ""
