"""Step-by-step decoding with a key/value cache: each step feeds only the newest token.

At step t the decoder's self-attention needs the keys and values of positions 0…t. Instead of
recomputing them from the whole prefix (what `addnorm.greedy_decode` does), each layer keeps the
keys and values it has already projected and appends one row per step; the cross-attention's keys
and values, projections of the fixed encoder memory, are computed once. The result is the same
tokens, for about n instead of n²/2 position updates.

`decode_step` runs each decoder layer's three sublayer connections itself (the layer's own AddNorms,
attentions and feed-forward, in DecoderLayer.forward's order), so hooks on the layer object do not fire.

The cache is a list with one dict per decoder layer: {"self": {"k", "v"}, "cross": {"k", "v"}},
each tensor (batch, heads, positions, d_head).
"""

from __future__ import annotations

import torch

from ..attention import MultiHeadAttention, combine_masks
from ..transformer import Transformer, greedy_search


def new_cache(model: Transformer) -> list[dict]:
    """An empty key/value cache for model's decoder: one dict per decoder layer."""
    return [{"self": {}, "cross": {}} for _ in model.decoder.layers]


def attend_cached(attn: MultiHeadAttention, query: torch.Tensor, source: torch.Tensor, store: dict,
                   append: bool, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """attn(query, source, source) reusing the keys/values in store: appended to (self) or computed once (cross)."""
    if append or "k" not in store:
        k = attn.split_heads(attn.k_proj(source))                      # (batch, heads, new, d_head)
        v = attn.split_heads(attn.v_proj(source))
        if append and "k" in store:
            k, v = torch.cat([store["k"], k], dim=2), torch.cat([store["v"], v], dim=2)
        store["k"], store["v"] = k, v
    q = attn.split_heads(attn.q_proj(query))                           # (batch, heads, 1, d_head)
    mask = combine_masks(key_padding_mask, None, query.shape[0], query.shape[1], store["k"].shape[2])
    return attn.out_proj(attn.merge_heads(attn.attend(q, store["k"], store["v"], mask)))


def decode_step(model: Transformer, token: torch.Tensor, memory: torch.Tensor, cache: list[dict], position: int,
                memory_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Logits (batch, 1, vocab) for one new token (batch, 1) at `position`, extending the cache.

    The newest token may attend to every cached position, so its self-attention needs no mask.
    """
    if token.dim() != 2 or token.shape[1] != 1:
        raise ValueError(f"decode_step: expected one new token per sequence, shape (batch, 1), got {tuple(token.shape)}")
    x = model.tgt_embed(token, offset=position)                           # (batch, 1, d_model)
    for layer, store in zip(model.decoder.layers, cache):
        x = layer.add_norm_1(x, lambda h: attend_cached(layer.self_attn, h, h, store["self"], append=True))
        x = layer.add_norm_2(x, lambda h: attend_cached(layer.cross_attn, h, memory, store["cross"], append=False,
                                                         key_padding_mask=memory_key_padding_mask))
        x = layer.add_norm_3(x, layer.feed_forward)
    if model.decoder.norm is not None:
        x = model.decoder.norm(x)
    return model.generator(x)


@torch.no_grad()
def cached_greedy_decode(model: Transformer, src: torch.Tensor, max_len: int, bos: int, eos: int,
                         src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The same tokens as addnorm.greedy_decode, computed with a key/value cache (one new position per step)."""
    memory = model.encode(src, src_key_padding_mask)
    cache = new_cache(model)

    def next_logits(prefix: torch.Tensor) -> torch.Tensor:
        position = prefix.shape[1] - 1
        return decode_step(model, prefix[:, -1:], memory, cache, position, src_key_padding_mask)[:, -1]

    return greedy_search(next_logits, src.shape[0], max_len, bos, eos, src.device)
