"""addnorm computes what torch.nn computes: same weights through from_torch, float32, eval mode."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

import addnorm

TOL = 1e-5
CONFIGS = [  # (d_model, heads, d_ff, num_layers)
    (16, 2, 32, 1),
    (32, 4, 64, 2),
    (48, 6, 96, 3),
]


def _padding(batch: int, seq: int, lengths: list[int]) -> torch.Tensor:
    mask = torch.zeros(batch, seq, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, n:] = True
    return mask


@pytest.mark.parametrize(
    "config,norm_first,activation",
    list(itertools.product(CONFIGS, [False, True], ["relu", "gelu"])),
)
def test_encoder_matches_torch(config, norm_first, activation):
    d_model, heads, d_ff, layers = config
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout=0.1, activation=activation,
                                       batch_first=True, norm_first=norm_first)
    theirs = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d_model) if norm_first else None,
                                   enable_nested_tensor=False).eval()
    ours = addnorm.from_torch(theirs)
    x = torch.randn(3, 7, d_model)
    pad = _padding(3, 7, [7, 5, 2])
    with torch.no_grad():
        expected, got = theirs(x, src_key_padding_mask=pad), ours(x, src_key_padding_mask=pad)
    assert (expected - got)[~pad].abs().max() <= TOL


@pytest.mark.parametrize("norm_first,activation", list(itertools.product([False, True], ["relu", "gelu"])))
def test_single_layers_match_torch(norm_first, activation):
    torch.manual_seed(1)
    enc = nn.TransformerEncoderLayer(32, 4, 64, activation=activation, batch_first=True, norm_first=norm_first).eval()
    dec = nn.TransformerDecoderLayer(32, 4, 64, activation=activation, batch_first=True, norm_first=norm_first).eval()
    x, memory = torch.randn(2, 6, 32), torch.randn(2, 9, 32)
    causal = nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.bool)
    with torch.no_grad():
        assert (enc(x) - addnorm.from_torch(enc)(x)).abs().max() <= TOL
        assert (dec(x, memory, tgt_mask=causal) - addnorm.from_torch(dec)(x, memory)).abs().max() <= TOL


@pytest.mark.parametrize("config,norm_first,activation",
                         list(itertools.product(CONFIGS[:2], [False, True], ["relu", "gelu"])))
def test_decoder_matches_torch(config, norm_first, activation):
    d_model, heads, d_ff, layers = config
    torch.manual_seed(2)
    layer = nn.TransformerDecoderLayer(d_model, heads, d_ff, activation=activation, batch_first=True,
                                       norm_first=norm_first)
    theirs = nn.TransformerDecoder(layer, layers, norm=nn.LayerNorm(d_model)).eval()
    ours = addnorm.from_torch(theirs)
    tgt, memory = torch.randn(3, 5, d_model), torch.randn(3, 8, d_model)
    tgt_pad, mem_pad = _padding(3, 5, [5, 4, 3]), _padding(3, 8, [8, 6, 1])
    causal = nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.bool)
    with torch.no_grad():
        expected = theirs(tgt, memory, tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=mem_pad)
        got = ours(tgt, memory, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=mem_pad)
    assert (expected - got)[~tgt_pad].abs().max() <= TOL


@pytest.mark.parametrize("norm_first,activation", list(itertools.product([False, True], ["relu", "gelu"])))
def test_whole_transformer_matches_torch(norm_first, activation):
    torch.manual_seed(3)
    theirs = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3, dim_feedforward=64,
                            activation=activation, batch_first=True, norm_first=norm_first).eval()
    ours = addnorm.from_torch(theirs)
    assert isinstance(ours, addnorm.EncoderDecoder)
    src, tgt = torch.randn(2, 7, 32), torch.randn(2, 6, 32)
    src_pad, tgt_pad = _padding(2, 7, [7, 4]), _padding(2, 6, [6, 5])
    causal = nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.bool)
    with torch.no_grad():
        expected = theirs(src, tgt, tgt_mask=causal, src_key_padding_mask=src_pad,
                          tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        got = ours(src, tgt, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                   memory_key_padding_mask=src_pad)
    assert (expected - got)[~tgt_pad].abs().max() <= TOL


def test_from_torch_keeps_training_mode_and_gradients_match():
    torch.manual_seed(4)
    theirs = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    ours = addnorm.from_torch(theirs)
    assert ours.training
    x = torch.randn(2, 5, 16)
    theirs(x).pow(2).sum().backward()
    ours(x).pow(2).sum().backward()
    assert torch.allclose(ours.feed_forward.linear1.weight.grad, theirs.linear1.weight.grad, atol=1e-5)


def test_from_torch_rejects_other_modules():
    with pytest.raises(ValueError, match="expected nn.TransformerEncoderLayer"):
        addnorm.from_torch(nn.Linear(3, 3))
    with pytest.raises(ValueError, match="batch_first"):
        addnorm.from_torch(nn.TransformerEncoderLayer(16, 2, 32))


class TestLayerNorm:
    def test_matches_nn_layernorm_with_trained_gamma_beta(self):
        torch.manual_seed(5)
        ours, theirs = addnorm.LayerNorm(24), nn.LayerNorm(24)
        with torch.no_grad():
            for p in (*ours.parameters(), *theirs.parameters()):
                p.copy_(torch.arange(24.0) / 7 - 1)
        x = torch.randn(4, 9, 24) * 3 + 2
        assert (ours(x) - theirs(x)).abs().max() <= TOL
        assert [n for n, _ in ours.named_parameters()] == ["weight", "bias"]

    @pytest.mark.parametrize("mean", [0.0, 1e2, 1e4])
    def test_as_accurate_as_nn_layernorm_against_float64(self, mean):
        torch.manual_seed(6)
        x = torch.randn(64, 128) + mean
        reference = torch.nn.functional.layer_norm(x.double(), (128,), eps=1e-5)
        our_error = (addnorm.LayerNorm(128)(x).double() - reference).abs().max().item()
        torch_error = (nn.LayerNorm(128)(x).double() - reference).abs().max().item()
        assert our_error <= max(1.5 * torch_error, 1e-5), (our_error, torch_error)

    def test_does_not_call_the_builtin(self, monkeypatch):
        def refuse(*args, **kwargs):
            raise AssertionError("addnorm.LayerNorm must not call F.layer_norm")
        monkeypatch.setattr(torch.nn.functional, "layer_norm", refuse)
        monkeypatch.setattr(torch, "layer_norm", refuse)
        addnorm.LayerNorm(8)(torch.randn(2, 8))

    def test_rmsnorm_formula(self):
        x = torch.randn(3, 10) * 4
        expected = x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
        assert torch.allclose(addnorm.RMSNorm(10)(x), expected, atol=1e-6)
        assert [n for n, _ in addnorm.RMSNorm(10).named_parameters()] == ["weight"]
