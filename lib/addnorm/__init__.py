"""addnorm — a small, readable reference Transformer for the Add & Norm course.

Batch-first tensors (batch, seq, d_model); key-padding masks follow torch.nn (True marks padding).
`import addnorm` is the model and nothing else. Variants the chapters compare with it (other sublayer
connections, learned positions, RoPE, a key/value cache, a projection shortcut) are in `addnorm.variants`;
the instruments of the chapters (toy tasks, training loop, probes, figures) are in `addnorm.lab`.
"""

from .attention import MultiHeadAttention, causal_mask, scaled_dot_product_attention
from .compat import from_torch
from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .feedforward import FeedForward
from .norm import LayerNorm, RMSNorm
from .positional import Embedding, sinusoidal_encoding
from .residual import AddNorm, clones
from .transformer import EncoderDecoder, Transformer, greedy_decode, xavier_init

__all__ = [
    "AddNorm", "Decoder", "DecoderLayer", "Embedding", "Encoder", "EncoderDecoder", "EncoderLayer",
    "FeedForward", "LayerNorm", "MultiHeadAttention", "RMSNorm", "Transformer",
    "causal_mask", "clones", "from_torch", "greedy_decode", "scaled_dot_product_attention",
    "sinusoidal_encoding", "xavier_init",
]
__version__ = "0.2.0"
