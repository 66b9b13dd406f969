"""A toy encoder-only model for the chapters' in-place tasks, with the knobs the experiments vary."""

from __future__ import annotations

import torch
from torch import nn

from ..encoder import Encoder, EncoderLayer
from ..norm import LayerNorm, RMSNorm
from ..positional import Embedding
from ..transformer import xavier_init
from ..variants.connections import replace_connections
from ..variants.positions import LearnedPositionEmbedding, NoPositionEmbedding

EMBEDDINGS = {"sinusoidal": Embedding, "learned": LearnedPositionEmbedding, "none": NoPositionEmbedding}

# (residual, norm) -> the sublayer connection of variants.connections
CONNECTION = {
    (True, "layer"): "add_norm", (True, "rms"): "rms", (True, "none"): "residual_only", (True, "rezero"): "rezero",
    (False, "layer"): "no_residual", (False, "none"): "plain",
}


class SequenceTagger(nn.Module):
    """Embed, run an encoder stack, predict one label per position (e.g. the input reversed).

    Knobs: depth, Post-/Pre-LN (norm_first), the residual on or off, the normalization ("layer",
    "rms", "none" or "rezero") and the positions ("sinusoidal", "learned" or "none"). A Pre-LN stack
    with a norm gets the final norm after the last layer. Weights are Xavier-initialized.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 128,
        dropout: float = 0.0,
        norm_first: bool = False,
        residual: bool = True,
        norm: str = "layer",
        positional: str = "sinusoidal",
        max_len: int = 64,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        if (residual, norm) not in CONNECTION:
            raise ValueError(f"SequenceTagger: no connection for residual={residual}, norm={norm!r}; "
                             f"expected one of {sorted(CONNECTION)}")
        if positional not in EMBEDDINGS:
            raise ValueError(f"SequenceTagger: expected positional in {sorted(EMBEDDINGS)}, got {positional!r}")
        self.embed = EMBEDDINGS[positional](vocab_size, d_model, max_len, dropout)
        layer = replace_connections(EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first, activation),
                                    CONNECTION[(residual, norm)])
        final_norm = {"layer": LayerNorm, "rms": RMSNorm}.get(norm) if norm_first else None
        self.encoder = Encoder(layer, num_layers, final_norm(d_model) if final_norm else None)
        self.head = nn.Linear(d_model, vocab_size)
        xavier_init(self)

    def forward(self, tokens: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, seq) token ids → logits (batch, seq, vocab_size)."""
        return self.head(self.encoder(self.embed(tokens), src_key_padding_mask))
