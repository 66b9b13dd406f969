"""addnorm — a small, readable reference Transformer for the Add & Norm course.

Batch-first tensors (batch, seq, d_model); key-padding masks follow torch.nn (True marks padding).
"""

from .attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from .compat import from_torch
from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .feedforward import FeedForward
from .norm import LayerNorm, RMSNorm
from .positional import Embedding, sinusoidal_encoding
from .residual import AddNorm, clones
from .train import History, seed_everything, train
from .transformer import EncoderDecoder, SequenceTagger, Transformer, greedy_decode

__all__ = [
    "AddNorm", "Decoder", "DecoderLayer", "Embedding", "Encoder", "EncoderDecoder", "EncoderLayer",
    "FeedForward", "History", "LayerNorm", "MultiHeadAttention", "RMSNorm", "SequenceTagger", "Transformer",
    "causal_mask", "clones", "from_torch", "greedy_decode", "scaled_dot_product_attention", "seed_everything",
    "sinusoidal_encoding", "train",
]
__version__ = "0.1.0"
