"""Other ways to give the model positions than the sinusoidal encoding added once.

- `LearnedPositionEmbedding`: a trained table, as in BERT and GPT-2 (still added once, at the input).
- `NoPositionEmbedding`: tokens only — a Transformer encoder then cannot tell positions apart.
- `add_positions_every_layer`: add the sinusoidal encoding again before every layer (Universal Transformer style).
RoPE, which rotates queries and keys in every attention layer, is in variants.rope.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from ..positional import Embedding, sinusoidal_encoding


class LearnedPositionEmbedding(Embedding):
    """Embedding whose position table is a parameter, initialized N(0, 0.02²) and trained with the model."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int = 512, dropout: float = 0.0) -> None:
        super().__init__(vocab_size, d_model, max_len, dropout)
        del self.position_table                                            # the fixed sinusoidal buffer
        self.position_table = nn.Parameter(torch.randn(max_len, d_model) * 0.02)


class NoPositionEmbedding(Embedding):
    """Embedding that adds no position information at all (the token embedding, scaled by √d_model)."""

    def positions(self, seq_len: int, offset: int = 0) -> torch.Tensor:
        """Zeros: every position looks the same."""
        return torch.zeros(seq_len, self.d_model, device=self.tokens.weight.device)


def add_positions_every_layer(layers: nn.ModuleList, d_model: int, max_len: int = 512) -> list[RemovableHandle]:
    """Add the sinusoidal encoding again to the input of every layer after the first (forward pre-hooks).

    The embedding already adds it before layer 1; with these hooks layers 2…N also receive
    x + PE, as the Universal Transformer's timing signal does (Dehghani et al. 2018).
    Returns the hook handles: call `.remove()` on each to restore the once-only model.
    """
    table = sinusoidal_encoding(max_len, d_model)                   # (max_len, d_model)

    def add_pe(module: nn.Module, args: tuple) -> tuple:
        x = args[0]                                                  # (batch, seq, d_model)
        return (x + table[: x.shape[1]].to(x.device),) + tuple(args[1:])

    return [layer.register_forward_pre_hook(add_pe) for layer in list(layers)[1:]]
