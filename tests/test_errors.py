"""Mistakes a learner can make get a ValueError that says what was expected and what was given."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import addnorm
from addnorm.variants.connections import replace_connections


def test_residual_over_mismatched_widths_the_source_articles_example():
    """The source's ResidualLayer(input_dim=256, hidden_dim=512) adds (64, 256) to (64, 512)."""
    block = addnorm.AddNorm(256)
    with pytest.raises(ValueError, match=r"input \(64, 256\) and sublayer output \(64, 512\)"):
        block(torch.randn(64, 256), nn.Linear(256, 512))


def test_d_model_not_divisible_by_heads():
    with pytest.raises(ValueError, match="d_model=30, num_heads=4"):
        addnorm.MultiHeadAttention(30, 4)
    with pytest.raises(ValueError, match="divisible"):
        addnorm.EncoderLayer(30, 4, 64)


def test_odd_d_model_for_sinusoidal_encoding():
    with pytest.raises(ValueError, match="d_model must be even.*got 7"):
        addnorm.sinusoidal_encoding(10, 7)


def test_key_padding_mask_of_the_wrong_shape():
    layer = addnorm.EncoderLayer(16, 2, 32)
    with pytest.raises(ValueError, match=r"shape \(batch, seq\) = \(2, 5\), got shape \(2, 4\)"):
        layer(torch.randn(2, 5, 16), src_key_padding_mask=torch.zeros(2, 4, dtype=torch.bool))


def test_key_padding_mask_that_is_not_boolean():
    attention = addnorm.MultiHeadAttention(16, 2)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match="boolean mask.*float32"):
        attention(x, x, x, key_padding_mask=torch.zeros(2, 5))


def test_attention_mask_of_the_wrong_shape():
    q = torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match=r"\(\.\.\., 4, 4\).*got shape \(3, 3\)"):
        addnorm.scaled_dot_product_attention(q, q, q, mask=addnorm.causal_mask(3))


def test_sequence_longer_than_max_len():
    embed = addnorm.Embedding(10, 8, max_len=6)
    with pytest.raises(ValueError, match="length 7 is longer than max_len=6"):
        embed(torch.zeros(1, 7, dtype=torch.long))


def test_input_of_the_wrong_width():
    with pytest.raises(ValueError, match=r"last dimension is 16.*got shape \(2, 3, 8\)"):
        addnorm.LayerNorm(16)(torch.randn(2, 3, 8))
    with pytest.raises(ValueError, match=r"\(batch, seq, 16\), got shape \(3, 16\)"):
        addnorm.EncoderLayer(16, 2, 32)(torch.randn(3, 16))


def test_unknown_choices():
    with pytest.raises(ValueError, match="'relu' or 'gelu', got 'tanh'"):
        addnorm.FeedForward(8, 16, activation="tanh")
    with pytest.raises(ValueError, match="expected one of .*, got 'batch'"):
        replace_connections(addnorm.EncoderLayer(8, 2, 16), "batch")
    with pytest.raises(ValueError, match="at least 1 copy, got 0"):
        addnorm.Encoder(addnorm.EncoderLayer(8, 2, 16), 0)
