"""Variants of the reference model that the chapters compare with it — each one found by its name.

| module | holds |
|---|---|
| `connections` | sublayer connections with a part removed or replaced: `ResidualOnly`, `ReZero`, `NoResidual`, `Plain`, `AddRMSNorm`, `replace_connections` |
| `positions` | `LearnedPositionEmbedding`, `NoPositionEmbedding`, `add_positions_every_layer` |
| `rope` | rotary position embedding: `rotate`, `RotaryMultiHeadAttention`, `use_rope` |
| `kv_cache` | step-by-step decoding with a key/value cache: `new_cache`, `decode_step`, `cached_greedy_decode` |
| `shortcut` | `ProjectionShortcut`: a residual across two widths, y = F(x) + W_s·x |
| `modern` | decoder-only models: `GPTBlock` (2017 block, no cross-attention), `SwiGLU`, `ModernBlock` (Pre-RMSNorm, RoPE, SwiGLU, no biases), `DecoderOnly`, `gpt_2017`, `llama_style`, `matching_swiglu_width` |
"""
