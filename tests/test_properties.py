"""Properties the chapters rely on: causality, identity blocks, independent layers, one positional encoding."""

from __future__ import annotations

import torch
from torch import nn

import addnorm
from addnorm.lab import SequenceTagger
from addnorm.lab.probes import capture_inputs, capture_outputs
from addnorm.lab.tasks import BOS, EOS, make_seq2seq_data
from addnorm.lab.train import seed_everything, seq2seq_loss, tagging_loss, train
from addnorm.variants.connections import NoResidual
from addnorm.variants.kv_cache import cached_greedy_decode


def small_transformer(**kwargs) -> addnorm.Transformer:
    args = dict(src_vocab=13, tgt_vocab=13, d_model=32, num_heads=4, num_encoder_layers=2,
                num_decoder_layers=3, d_ff=64, dropout=0.0, max_len=32)
    args.update(kwargs)
    return addnorm.Transformer(**args).eval()


def test_changing_a_future_target_token_leaves_earlier_outputs_unchanged():
    torch.manual_seed(0)
    model = small_transformer()
    src = torch.randint(3, 13, (2, 6))
    tgt = torch.randint(3, 13, (2, 7))
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 1 - 3) % 10 + 3
    with torch.no_grad():
        before, after = model(src, tgt), model(src, changed)
    assert torch.equal(before[:, :4], after[:, :4])
    assert not torch.allclose(before[:, 4:], after[:, 4:])


def test_pre_ln_addnorm_with_zero_sublayer_is_the_identity():
    x = torch.randn(2, 5, 16)
    block = addnorm.AddNorm(16, norm_first=True)
    assert torch.equal(block(x, torch.zeros_like), x)
    # Post-LN normalizes x instead: not the identity.
    assert not torch.allclose(addnorm.AddNorm(16, norm_first=False)(x, torch.zeros_like), x)


def test_addnorm_post_and_pre_ln_formulas():
    torch.manual_seed(1)
    x = torch.randn(2, 4, 8)
    f = nn.Linear(8, 8)
    post, pre = addnorm.AddNorm(8), addnorm.AddNorm(8, norm_first=True)
    assert torch.allclose(post(x, f), post.norm(x + f(x)))
    assert torch.allclose(pre(x, f), x + f(pre.norm(x)))
    no_res = NoResidual(8)
    assert torch.allclose(no_res(x, f), no_res.norm(f(x)))


def test_stacked_layers_are_independent_copies():
    layer = addnorm.EncoderLayer(32, 4, 64)
    one = sum(p.numel() for p in layer.parameters())
    encoder = addnorm.Encoder(layer, 6)
    assert sum(p.numel() for p in encoder.parameters()) == 6 * one
    params = [layer.self_attn.q_proj.weight for layer in encoder.layers]
    assert len({p.data_ptr() for p in params}) == 6
    with torch.no_grad():
        encoder.layers[0].self_attn.q_proj.weight.add_(1.0)
    assert not torch.equal(encoder.layers[0].self_attn.q_proj.weight, encoder.layers[1].self_attn.q_proj.weight)
    decoder = addnorm.Decoder(addnorm.DecoderLayer(32, 4, 64), 3)
    assert sum(p.numel() for p in decoder.parameters()) == 3 * sum(
        p.numel() for p in addnorm.DecoderLayer(32, 4, 64).parameters())


def test_every_decoder_layer_receives_the_identical_memory():
    torch.manual_seed(2)
    model = small_transformer()
    src, tgt = torch.randint(3, 13, (2, 6)), torch.randint(3, 13, (2, 5))
    memory = model.encode(src)
    with capture_inputs(model.decoder.layers) as inputs:
        model.decoder(model.tgt_embed(tgt), memory)
    assert all(received[1] is not None and torch.equal(received[1], memory) for received in inputs)
    # and layer k's input is layer k-1's output
    with capture_inputs(model.decoder.layers) as inputs, capture_outputs(model.decoder.layers) as outs:
        model.decoder(model.tgt_embed(tgt), memory)
    for k in range(1, len(inputs)):
        assert torch.equal(inputs[k][0], outs[k - 1])


def test_positional_encoding_is_added_once_per_stack(monkeypatch):
    model = small_transformer()
    embed_calls = []
    for embed in (model.src_embed, model.tgt_embed):
        embed.register_forward_hook(lambda m, a, o: embed_calls.append(m))
    original = addnorm.positional.Embedding.positions
    position_lookups = []

    def counting(self, *args, **kwargs):
        position_lookups.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(addnorm.positional.Embedding, "positions", counting)
    model(torch.randint(3, 13, (2, 6)), torch.randint(3, 13, (2, 5)))
    assert len(embed_calls) == 2
    assert len(position_lookups) == 2
    assert position_lookups[0] is model.src_embed and position_lookups[1] is model.tgt_embed


def test_embedding_scales_by_sqrt_d_model_and_adds_sinusoids():
    embed = addnorm.Embedding(10, 16, max_len=20)
    tokens = torch.tensor([[1, 2, 3]])
    expected = embed.tokens(tokens) * 4.0 + addnorm.sinusoidal_encoding(20, 16)[:3]
    assert torch.allclose(embed(tokens), expected)


def test_sinusoidal_encoding_layout():
    pe = addnorm.sinusoidal_encoding(50, 8)
    p, i = 7, 2
    angle = torch.tensor(p / 10000 ** (2 * i / 8))
    assert torch.isclose(pe[p, 2 * i], torch.sin(angle)) and torch.isclose(pe[p, 2 * i + 1], torch.cos(angle))
    assert torch.equal(pe[0, 0::2], torch.zeros(4)) and torch.equal(pe[0, 1::2], torch.ones(4))


def test_one_optimizer_step_lowers_the_loss():
    seed_everything(0)
    model = SequenceTagger(vocab_size=8, d_model=32, num_layers=2)
    loss_fn = tagging_loss("reverse", 16, 6, 8)
    batch_generator = lambda: torch.Generator().manual_seed(123)
    before = loss_fn(model, batch_generator()).item()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn(model, batch_generator()).backward()
    optimizer.step()
    assert loss_fn(model, batch_generator()).item() < before


def test_seeded_training_is_bit_for_bit_reproducible():
    def run():
        seed_everything(3)
        model = SequenceTagger(vocab_size=8, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.1)
        return train(model, tagging_loss("copy", 8, 5, 8), steps=5, progress=False, seed=3).losses
    assert run() == run()


def test_cached_decoding_equals_recomputing_the_prefix_and_the_parallel_pass():
    seed_everything(4)
    model = small_transformer()
    src = torch.randint(3, 13, (3, 6))
    cached = cached_greedy_decode(model, src, 8, BOS, EOS)
    naive = addnorm.greedy_decode(model, src, 8, BOS, EOS)
    assert torch.equal(cached, naive)
    with torch.no_grad():   # the parallel teacher-forced pass on the decoded prefix predicts the same tokens
        logits = model(src, cached[:, :-1])
    assert torch.equal(logits.argmax(-1), cached[:, 1:])


def test_seq2seq_training_reduces_the_loss():
    seed_everything(5)
    data = make_seq2seq_data("copy", num_symbols=5, min_len=2, max_len=4, num_train=200, num_held_out=20)
    model = small_transformer(src_vocab=data.vocab_size, tgt_vocab=data.vocab_size, num_encoder_layers=1,
                              num_decoder_layers=1)
    history = train(model, seq2seq_loss(data, 16), steps=40, lr=3e-3, progress=False)
    assert history.final(5) < history.losses[0] * 0.7


def test_held_out_sequences_are_not_in_training():
    data = make_seq2seq_data("sort", num_train=300, num_held_out=50, seed=1)
    assert not {tuple(s) for s in data.train} & {tuple(s) for s in data.held_out}


def test_padding_does_not_change_real_tokens():
    seed_everything(6)
    layer = addnorm.EncoderLayer(16, 2, 32, dropout=0.0).eval()
    x = torch.randn(1, 4, 16)
    padded = torch.cat([x, torch.randn(1, 3, 16) * 100], dim=1)
    mask = torch.tensor([[False] * 4 + [True] * 3])
    with torch.no_grad():
        assert torch.allclose(layer(x), layer(padded, mask)[:, :4], atol=1e-6)


def test_seeded_training_is_identical_in_two_fresh_processes():
    """What a chapter prints must not depend on the process that ran it (same thread count)."""
    import subprocess
    import sys

    script = (
        "import torch, addnorm\n"
        "from addnorm.lab import SequenceTagger\nfrom addnorm.lab.train import seed_everything, tagging_loss, train\n"
        "torch.set_num_threads(1)\n"
        "seed_everything(0)\n"
        "model = SequenceTagger(vocab_size=8, d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1)\n"
        "print(train(model, tagging_loss('reverse', 16, 6, 8), steps=20, lr=3e-3, progress=False).losses)\n"
    )
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].startswith("[")
