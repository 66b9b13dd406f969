"""The whole encoder–decoder from the learner's components, each one theirs or addnorm's as asked.

The learner's classes look their pieces up by name when they run (`LayerNorm` in their encoder layer, `causal_mask`
in their decoder layer, `sinusoidal_encoding` in their Embedding), so choosing a piece is binding that name. Where
addnorm's class stands in but the learner's piece is asked for, the piece is put inside it: the learner's norms in
place of addnorm's, the learner's table as the Embedding's, the learner's mask in addnorm's decoder layers.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

import addnorm
import addnorm.decoder
from addnorm_grading.capstone.learner import Learner
from addnorm_grading.capstone.matching import copy_weights

MODEL = dict(d_model=64, num_heads=4, num_layers=2, d_ff=128, max_len=16)


class Assembled(nn.Module):
    """Embeddings, an encoder, a decoder and the output projection, run through the exercises' interfaces (no masks)."""

    def __init__(self, src_embed, tgt_embed, encoder, decoder, generator, library_mask=None) -> None:
        super().__init__()
        self.src_embed, self.tgt_embed = src_embed, tgt_embed
        self.encoder, self.decoder, self.generator = encoder, decoder, generator
        self.library_mask = library_mask          # the learner's causal_mask, for addnorm's decoder layers

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.src_embed(src))

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        with self._mask():
            return self.generator(self.decoder(self.tgt_embed(tgt), memory))

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src (batch, src_len), tgt (batch, tgt_len) token ids → logits (batch, tgt_len, vocab)."""
        return self.decode(tgt, self.encode(src))

    @contextmanager
    def _mask(self):
        if self.library_mask is None:
            yield
            return
        saved, mask = addnorm.decoder.causal_mask, self.library_mask
        addnorm.decoder.causal_mask = lambda n, device=None: mask(n).to(device)
        try:
            yield
        finally:
            addnorm.decoder.causal_mask = saved


class ExerciseDecoder(addnorm.Decoder):
    """addnorm's Decoder through exercise 4's interface: each layer called as layer(x, memory), no masks."""

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory)
        return x if self.norm is None else self.norm(x)


def _with_norms(module: nn.Module, make_norm) -> nn.Module:
    """Every addnorm.LayerNorm inside `module` replaced by make_norm(d_model)."""
    for name, child in list(module.named_children()):
        if isinstance(child, addnorm.LayerNorm):
            setattr(module, name, make_norm(child.weight.shape[0]))
        else:
            _with_norms(child, make_norm)
    return module


def build(learner: Learner, yours: set[str], vocab: int) -> Assembled:
    """The model with the components in `yours` taken from the learner and every other one from addnorm."""
    theirs = lambda name, default: learner.component(name) if name in yours else default
    LayerNorm = theirs("LayerNorm", addnorm.LayerNorm)
    causal_mask = theirs("causal_mask", addnorm.causal_mask)
    encoding = theirs("sinusoidal_encoding", addnorm.sinusoidal_encoding)
    learner.bind("03_encoder_stack", LayerNorm=LayerNorm)
    learner.bind("04_decoder_stack", LayerNorm=LayerNorm, causal_mask=causal_mask)
    learner.bind("05_positional_encoding", sinusoidal_encoding=encoding)

    d, heads, layers, d_ff, max_len = (MODEL[k] for k in ("d_model", "num_heads", "num_layers", "d_ff", "max_len"))
    EncoderLayer, Encoder = theirs("EncoderLayer", addnorm.EncoderLayer), theirs("Encoder", addnorm.Encoder)
    DecoderLayer, Decoder = theirs("DecoderLayer", addnorm.DecoderLayer), theirs("Decoder", ExerciseDecoder)
    if "Embedding" in yours:
        embed = lambda: learner.component("Embedding")(vocab, d, max_len)
    else:
        embed = lambda: addnorm.Embedding(vocab, d, max_len, 0.0)
    model = Assembled(embed(), embed(), Encoder(EncoderLayer(d, heads, d_ff, 0.0, False), layers, None),
                      Decoder(DecoderLayer(d, heads, d_ff, 0.0, False), layers, None), nn.Linear(d, vocab),
                      library_mask=causal_mask if "causal_mask" in yours and "DecoderLayer" not in yours else None)
    if "LayerNorm" in yours:
        _with_norms(model, LayerNorm)
    if "sinusoidal_encoding" in yours:
        for module in model.modules():
            if isinstance(module, addnorm.Embedding):
                module.position_table = encoding(max_len, d).to(torch.float32)
    return model


def same_start(reference: Assembled, model: Assembled, probe: tuple[torch.Tensor, torch.Tensor]) -> bool:
    """Give `model` the reference's initial weights, paired by order of use; False when they cannot be paired
    (the model then keeps its own initialization)."""
    try:
        copy_weights(reference, model, lambda m: m(*probe))
        return True
    except Exception:               # a mismatch, or a learner's piece that raises: the run says so itself
        return False
