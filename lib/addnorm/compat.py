"""`from_torch`: the same weights in torch.nn's Transformer modules and in addnorm.

Used to check, to float32 precision, that addnorm computes exactly what torch.nn computes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .feedforward import FeedForward
from .norm import LayerNorm
from .transformer import EncoderDecoder


def _activation_name(activation) -> str:
    if activation in ("relu", F.relu) or isinstance(activation, nn.ReLU):
        return "relu"
    if activation in ("gelu", F.gelu) or isinstance(activation, nn.GELU):
        return "gelu"
    raise ValueError(f"from_torch: expected a relu or gelu activation, got {activation!r}")


@torch.no_grad()
def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    if not theirs.batch_first:
        raise ValueError("from_torch: expected batch_first=True modules (addnorm is batch-first), got batch_first=False")
    if theirs.in_proj_weight is None or theirs.in_proj_bias is None:
        raise ValueError("from_torch: expected attention with a packed in_proj_weight and biases")
    for proj, w, b in zip((ours.q_proj, ours.k_proj, ours.v_proj),
                          theirs.in_proj_weight.chunk(3), theirs.in_proj_bias.chunk(3)):
        proj.weight.copy_(w)
        proj.bias.copy_(b)
    ours.out_proj.weight.copy_(theirs.out_proj.weight)
    ours.out_proj.bias.copy_(theirs.out_proj.bias)


@torch.no_grad()
def _copy_norm(ours: LayerNorm, theirs: nn.LayerNorm) -> None:
    ours.weight.copy_(theirs.weight)
    ours.bias.copy_(theirs.bias)
    ours.eps = theirs.eps


@torch.no_grad()
def _copy_feed_forward(ours: FeedForward, layer: nn.Module) -> None:
    for mine, theirs in ((ours.linear1, layer.linear1), (ours.linear2, layer.linear2)):
        mine.weight.copy_(theirs.weight)
        mine.bias.copy_(theirs.bias)


def _layer_args(layer: nn.Module) -> dict:
    return dict(
        d_model=layer.linear1.in_features,
        num_heads=layer.self_attn.num_heads,
        d_ff=layer.linear1.out_features,
        dropout=layer.dropout.p,
        norm_first=layer.norm_first,
        activation=_activation_name(layer.activation),
    )


def _encoder_layer(theirs: nn.TransformerEncoderLayer) -> EncoderLayer:
    ours = EncoderLayer(**_layer_args(theirs))
    _copy_attention(ours.self_attn, theirs.self_attn)
    _copy_feed_forward(ours.feed_forward, theirs)
    _copy_norm(ours.add_norm_1.norm, theirs.norm1)
    _copy_norm(ours.add_norm_2.norm, theirs.norm2)
    return ours


def _decoder_layer(theirs: nn.TransformerDecoderLayer) -> DecoderLayer:
    ours = DecoderLayer(**_layer_args(theirs))
    _copy_attention(ours.self_attn, theirs.self_attn)
    _copy_attention(ours.cross_attn, theirs.multihead_attn)
    _copy_feed_forward(ours.feed_forward, theirs)
    for mine, norm in zip((ours.add_norm_1, ours.add_norm_2, ours.add_norm_3), (theirs.norm1, theirs.norm2, theirs.norm3)):
        _copy_norm(mine.norm, norm)
    return ours


def _final_norm(norm: nn.Module | None) -> LayerNorm | None:
    if norm is None:
        return None
    ours = LayerNorm(norm.normalized_shape[0], norm.eps)
    _copy_norm(ours, norm)
    return ours


def _stack(theirs: nn.Module, stack_cls, convert) -> nn.Module:
    layers = [convert(layer) for layer in theirs.layers]
    ours = stack_cls(layers[0], len(layers), _final_norm(theirs.norm))
    for i, layer in enumerate(layers):   # clones() made copies of layer 0; give each its own weights
        ours.layers[i].load_state_dict(layer.state_dict())
    return ours


def from_torch(module: nn.Module) -> nn.Module:
    """The addnorm module that computes the same function as a torch.nn Transformer module, with its weights.

    Accepts nn.TransformerEncoderLayer, nn.TransformerEncoder, nn.TransformerDecoderLayer,
    nn.TransformerDecoder and nn.Transformer (batch_first=True, relu or gelu, Post-LN or Pre-LN).
    The result is in the same training/eval mode as the input.
    """
    if isinstance(module, nn.TransformerEncoderLayer):
        ours = _encoder_layer(module)
    elif isinstance(module, nn.TransformerDecoderLayer):
        ours = _decoder_layer(module)
    elif isinstance(module, nn.TransformerEncoder):
        ours = _stack(module, Encoder, _encoder_layer)
    elif isinstance(module, nn.TransformerDecoder):
        ours = _stack(module, Decoder, _decoder_layer)
    elif isinstance(module, nn.Transformer):
        ours = EncoderDecoder(_stack(module.encoder, Encoder, _encoder_layer),
                              _stack(module.decoder, Decoder, _decoder_layer))
    else:
        raise ValueError(
            "from_torch: expected nn.TransformerEncoderLayer, nn.TransformerEncoder, nn.TransformerDecoderLayer, "
            f"nn.TransformerDecoder or nn.Transformer, got {type(module).__name__}"
        )
    return ours.train(module.training)
