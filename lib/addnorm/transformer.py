"""The whole model: embeddings, an encoder stack, a decoder stack, the output projection; greedy decoding."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .norm import LayerNorm
from .positional import Embedding


def xavier_init(model: nn.Module) -> nn.Module:
    """Re-initialize every parameter with 2 or more dimensions by Xavier-uniform (as nn.Transformer does).

    Biases and norms keep theirs. Note: a learned position table (variants.positions) is 2-D, so it is
    re-initialized too, to values far larger than the usual N(0, 0.02).
    """
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


class EncoderDecoder(nn.Module):
    """An encoder stack and a decoder stack on vectors (no embeddings): what `nn.Transformer` computes."""

    def __init__(self, encoder: Encoder, decoder: Decoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_key_padding_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """src: (batch, src_len, d_model), tgt: (batch, tgt_len, d_model) → (batch, tgt_len, d_model)."""
        memory = self.encoder(src, src_key_padding_mask)
        return self.decoder(tgt, memory, tgt_key_padding_mask, memory_key_padding_mask)


class Transformer(nn.Module):
    """The encoder–decoder Transformer of Vaswani et al. (2017) on token ids, with its output projection.

    The positional encoding is added once per stack, inside each Embedding. Pre-LN stacks
    (norm_first=True) get a final LayerNorm after each stack, as in GPT-2 and nn.Transformer.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        max_len: int = 512,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.src_embed = Embedding(src_vocab, d_model, max_len, dropout)
        self.tgt_embed = Embedding(tgt_vocab, d_model, max_len, dropout)
        enc_layer = EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first, activation)
        dec_layer = DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first, activation)
        self.encoder = Encoder(enc_layer, num_encoder_layers, LayerNorm(d_model) if norm_first else None)
        self.decoder = Decoder(dec_layer, num_decoder_layers, LayerNorm(d_model) if norm_first else None)
        self.generator = nn.Linear(d_model, tgt_vocab)        # d_model → logits over the target vocabulary
        xavier_init(self)

    def encode(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, src_len) token ids → memory (batch, src_len, d_model)."""
        return self.encoder(self.src_embed(src), src_key_padding_mask)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        tgt_key_padding_mask: torch.Tensor | None = None,
        memory_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(batch, tgt_len) token ids → logits (batch, tgt_len, tgt_vocab), attending to memory."""
        x = self.tgt_embed(tgt)
        return self.generator(self.decoder(x, memory, tgt_key_padding_mask, memory_key_padding_mask))

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_key_padding_mask: torch.Tensor | None = None,
        tgt_key_padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Teacher forcing: all target positions in one parallel pass → logits (batch, tgt_len, tgt_vocab)."""
        memory = self.encode(src, src_key_padding_mask)
        return self.decode(tgt, memory, tgt_key_padding_mask, src_key_padding_mask)


NextLogits = Callable[[torch.Tensor], torch.Tensor]


def greedy_search(next_logits: NextLogits, batch: int, max_len: int, bos: int, eos: int,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """Grow (batch, 1) BOS tokens by the argmax of next_logits(prefix) (batch, vocab), up to max_len tokens.

    Stops when every sequence has produced EOS; a finished sequence is padded with EOS.
    """
    out = torch.full((batch, 1), bos, dtype=torch.long, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    for _ in range(max_len):
        next_token = next_logits(out).argmax(dim=-1)                       # (batch,)
        next_token = torch.where(done, torch.full_like(next_token, eos), next_token)
        out = torch.cat([out, next_token[:, None]], dim=1)
        done |= next_token == eos
        if done.all():
            break
    return out


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos: int,
    eos: int,
    src_key_padding_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Generate up to max_len tokens after BOS, one at a time, always taking the most likely next token.

    Returns (batch, ≤ max_len + 1) token ids starting with BOS; a sequence that has produced EOS
    is padded with EOS. Each step re-runs the decoder on the whole prefix; variants.kv_cache avoids that.
    """
    memory = model.encode(src, src_key_padding_mask)

    def next_logits(prefix: torch.Tensor) -> torch.Tensor:
        return model.decode(prefix, memory, None, src_key_padding_mask)[:, -1]   # the newest position's logits

    return greedy_search(next_logits, src.shape[0], max_len, bos, eos, src.device)
