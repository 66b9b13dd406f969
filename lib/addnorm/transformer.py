"""The whole model: embeddings, an encoder stack, a decoder stack, and the output projection.

Also a toy encoder-only model for the chapters' in-place tasks, and greedy decoding.
"""

from __future__ import annotations

import torch
from torch import nn

from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .norm import LayerNorm, make_norm
from .positional import Embedding


def xavier_init(model: nn.Module) -> nn.Module:
    """Re-initialize every weight matrix with Xavier-uniform (as nn.Transformer does); biases and norms keep theirs."""
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
        cache: list[dict] | None = None,
        offset: int = 0,
    ) -> torch.Tensor:
        """(batch, tgt_len) token ids at positions offset… → logits (batch, tgt_len, tgt_vocab)."""
        x = self.tgt_embed(tgt, offset)
        return self.generator(self.decoder(x, memory, tgt_key_padding_mask, memory_key_padding_mask, cache))

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

    def new_cache(self) -> list[dict]:
        """An empty key/value cache for step-by-step decoding: one dict per decoder layer."""
        return [{} for _ in self.decoder.layers]


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos: int,
    eos: int,
    src_key_padding_mask: torch.Tensor | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Generate up to max_len tokens after BOS, one at a time, always taking the most likely next token.

    Returns (batch, ≤ max_len + 1) token ids starting with BOS; a sequence that has produced EOS
    is padded with EOS. use_cache=False recomputes the whole prefix at every step (the naive way).
    """
    memory = model.encode(src, src_key_padding_mask)
    out = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    cache = model.new_cache() if use_cache else None
    for step in range(max_len):
        if use_cache:   # feed only the newest token; earlier keys/values come from the cache
            logits = model.decode(out[:, -1:], memory, None, src_key_padding_mask, cache, offset=step)
        else:           # feed the whole prefix again
            logits = model.decode(out, memory, None, src_key_padding_mask)
        next_token = logits[:, -1].argmax(dim=-1)
        next_token = torch.where(done, torch.full_like(next_token, eos), next_token)
        out = torch.cat([out, next_token[:, None]], dim=1)
        done |= next_token == eos
        if done.all():
            break
    return out


class SequenceTagger(nn.Module):
    """A toy encoder-only model: embed, run an encoder stack, predict one label per position.

    The chapters' experiments use it on in-place tasks (e.g. output the input reversed). Its knobs
    are the ones the experiments vary: depth, Post-/Pre-LN, residuals on or off, which normalization,
    and how positions are encoded.
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
        self.embed = Embedding(vocab_size, d_model, max_len, dropout, positional)
        layer = EncoderLayer(d_model, num_heads, d_ff, dropout, norm_first, activation, residual, norm)
        final_norm = make_norm(norm, d_model) if norm_first and norm in ("layer", "rms") else None
        self.encoder = Encoder(layer, num_layers, final_norm)
        self.head = nn.Linear(d_model, vocab_size)
        xavier_init(self)

    def forward(self, tokens: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, seq) token ids → logits (batch, seq, vocab_size)."""
        return self.head(self.encoder(self.embed(tokens), src_key_padding_mask))
