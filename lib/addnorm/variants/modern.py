"""Decoder-only language models: the 2017 block without cross-attention, and the block of today's open models.

| name | computes |
|---|---|
| `GPTBlock` | chapter 4's decoder layer minus cross-attention: causal self-attention and a ReLU FFN, each in an AddNorm (LayerNorm, Post-LN or Pre-LN, biases) |
| `SwiGLU` | gated feed-forward W₂(SiLU(W x) ⊙ V x), three matrices (Shazeer 2020) |
| `ModernBlock` | x + Attn_RoPE(RMSNorm(x)), then x + SwiGLU(RMSNorm(x)); no bias anywhere (LLaMA, Touvron et al. 2023) |
| `DecoderOnly` | embedding, N deep copies of a block, an optional final norm, the output head (GPT, Radford et al. 2018) |

`gpt_2017` and `llama_style` build the two models (`gpt_2017(rope=True)`: the 2017 block with RoPE, so that
the position scheme can be compared alone); `matching_swiglu_width` picks the SwiGLU width that gives the modern
block about as many parameters as the 2017 block.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import check_batch_first
from ..attention import MultiHeadAttention, causal_mask
from ..feedforward import FeedForward
from ..norm import LayerNorm, RMSNorm
from ..positional import Embedding
from ..residual import AddNorm, clones
from ..transformer import xavier_init
from .connections import AddRMSNorm
from .positions import NoPositionEmbedding
from .rope import RotaryMultiHeadAttention, use_rope


class SwiGLU(nn.Module):
    """SwiGLU(x) = W₂ (SiLU(W x) ⊙ V x): a feed-forward network whose hidden layer is gated (Shazeer 2020)."""

    def __init__(self, d_model: int, d_ff: int, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        self.w = nn.Linear(d_model, d_ff, bias=bias)     # the gate's projection, through SiLU
        self.v = nn.Linear(d_model, d_ff, bias=bias)     # the projection it gates (linear)
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)    # back to d_model, so the residual can add
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) → (batch, seq, d_model)."""
        hidden = F.silu(self.w(x)) * self.v(x)           # (batch, seq, d_ff), SiLU(z) = z·σ(z)
        return self.w2(self.dropout(hidden))


class BiasFreeRotaryAttention(RotaryMultiHeadAttention):
    """RoPE multi-head attention whose four projections (W^Q, W^K, W^V, W^O) have no bias."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, base: float = 10000.0) -> None:
        super().__init__(d_model, num_heads, dropout, base)
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=False))


class CausalBlock(nn.Module):
    """Two sublayers — causal self-attention, then feed-forward — each wrapped in its connection; no cross-attention."""

    self_attn: MultiHeadAttention
    feed_forward: nn.Module
    add_norm_1: nn.Module
    add_norm_2: nn.Module

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, seq, d_model) → (batch, seq, d_model); position i reads only positions ≤ i."""
        check_batch_first(x, self.d_model, type(self).__name__)
        future = causal_mask(x.shape[1], x.device)                      # (seq, seq): True above the diagonal
        x = self.add_norm_1(x, lambda h: self.self_attn(
            h, h, h, key_padding_mask=key_padding_mask, attn_mask=future))
        return self.add_norm_2(x, self.feed_forward)


class GPTBlock(CausalBlock):
    """The 2017 decoder layer without cross-attention: LayerNorm (Post-LN, or Pre-LN), ReLU FFN, biases (GPT)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False,
                 activation: str = "relu") -> None:
        super().__init__()
        self.d_model = d_model
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation)
        self.add_norm_1 = AddNorm(d_model, dropout, norm_first)
        self.add_norm_2 = AddNorm(d_model, dropout, norm_first)


class ModernBlock(CausalBlock):
    """The block of LLaMA-style models: Pre-RMSNorm, RoPE attention, SwiGLU, and no bias anywhere."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, base: float = 10000.0) -> None:
        super().__init__()
        self.d_model = d_model
        self.self_attn = BiasFreeRotaryAttention(d_model, num_heads, dropout, base)
        self.feed_forward = SwiGLU(d_model, d_ff, bias=False, dropout=dropout)
        self.add_norm_1 = AddRMSNorm(d_model, dropout, norm_first=True)   # x + F(RMSNorm(x))
        self.add_norm_2 = AddRMSNorm(d_model, dropout, norm_first=True)


class DecoderOnly(nn.Module):
    """A decoder-only language model: token ids → next-token logits at every position."""

    def __init__(self, embed: Embedding, block: CausalBlock, num_layers: int, norm: nn.Module | None,
                 vocab_size: int, bias: bool = True) -> None:
        super().__init__()
        self.embed = embed
        self.layers = clones(block, num_layers)      # independent weights, same structure
        self.norm = norm                             # the final norm of a Pre-norm stack
        self.head = nn.Linear(embed.d_model, vocab_size, bias=bias)

    def forward(self, tokens: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, seq) token ids → (batch, seq, vocab_size) logits; the logits at i predict token i + 1."""
        x = self.embed(tokens)                                          # (batch, seq, d_model)
        for layer in self.layers:
            x = layer(x, key_padding_mask)
        return self.head(x if self.norm is None else self.norm(x))


def gpt_2017(vocab_size: int, d_model: int = 64, num_heads: int = 4, num_layers: int = 2, d_ff: int = 256,
             norm_first: bool = False, max_len: int = 512, dropout: float = 0.0, rope: bool = False) -> DecoderOnly:
    """The 2017 block, decoder-only: sinusoidal positions added once, LayerNorm (+ final LN if Pre-LN), ReLU, biases.

    rope=True swaps only the positions: nothing added at the input, RoPE in every self-attention instead.
    """
    block = GPTBlock(d_model, num_heads, d_ff, dropout, norm_first)
    final = LayerNorm(d_model) if norm_first else None
    embed = (NoPositionEmbedding if rope else Embedding)(vocab_size, d_model, max_len, dropout)
    model = DecoderOnly(embed, block, num_layers, final, vocab_size, bias=True)
    return xavier_init(use_rope(model) if rope else model)


def llama_style(vocab_size: int, d_model: int = 64, num_heads: int = 4, num_layers: int = 2, d_ff: int = 171,
                dropout: float = 0.0, base: float = 10000.0) -> DecoderOnly:
    """Today's open-model block: no position at the input, RoPE in every layer, Pre-RMSNorm + final RMSNorm, SwiGLU, no biases."""
    block = ModernBlock(d_model, num_heads, d_ff, dropout, base)
    return xavier_init(DecoderOnly(NoPositionEmbedding(vocab_size, d_model, 1, dropout), block, num_layers,
                                   RMSNorm(d_model), vocab_size, bias=False))


def matching_swiglu_width(d_model: int, d_ff: int) -> int:
    """The SwiGLU width h that makes a ModernBlock about as large as a GPTBlock with a ReLU FFN of width d_ff."""
    # GPTBlock:    4(d² + d) attention + (2·d·d_ff + d_ff + d) FFN + 2·2d LayerNorms
    # ModernBlock: 4d² attention       + 3·d·h SwiGLU              + 2·d RMSNorms
    return round((2 * d_model * d_ff + d_ff + 7 * d_model) / (3 * d_model))
