"""addnorm against torch.nn.Transformer: same weights, same shapes, timed side by side.

Prints the time of each and the ratio addnorm / torch.nn for inference and for forward+backward.
Measurements are interleaved (torch, addnorm, torch, addnorm, …) and summarized by their median,
so a change in machine load affects both sides alike.

    .venv/bin/python bench/speed.py            # 6+6 layers, d_model 512, 8 heads, d_ff 2048, batch 16, seq 64
    .venv/bin/python bench/speed.py --repeats 5 --batch 4   # quicker
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

import addnorm


def build(args: argparse.Namespace) -> tuple[nn.Transformer, nn.Module]:
    """A torch.nn.Transformer and the addnorm model holding the same weights."""
    torch.manual_seed(0)
    theirs = nn.Transformer(
        d_model=args.d_model, nhead=args.heads, num_encoder_layers=args.layers, num_decoder_layers=args.layers,
        dim_feedforward=args.d_ff, dropout=args.dropout, batch_first=True,
    )
    return theirs, addnorm.from_torch(theirs)


def inference_step(model, src, tgt, mask, is_torch: bool):
    with torch.inference_mode():
        return model(src, tgt, tgt_mask=mask) if is_torch else model(src, tgt)


def training_step(model, src, tgt, mask, is_torch: bool):
    out = model(src, tgt, tgt_mask=mask) if is_torch else model(src, tgt)
    out.pow(2).mean().backward()
    model.zero_grad(set_to_none=True)


def time_pair(step, theirs, ours, inputs, repeats: int, warmup: int) -> tuple[list[float], list[float]]:
    """Interleaved timings (seconds) of step on torch.nn and on addnorm."""
    times = {"torch": [], "addnorm": []}
    for i in range(warmup + repeats):
        order = [("torch", theirs, True), ("addnorm", ours, False)]
        for name, model, is_torch in (order if i % 2 == 0 else order[::-1]):
            start = time.perf_counter()
            step(model, *inputs, is_torch)
            elapsed = time.perf_counter() - start
            if i >= warmup:
                times[name].append(elapsed)
    return times["torch"], times["addnorm"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-ff", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    theirs, ours = build(args)
    src = torch.randn(args.batch, args.seq, args.d_model)
    tgt = torch.randn(args.batch, args.seq, args.d_model)
    mask = nn.Transformer.generate_square_subsequent_mask(args.seq, dtype=torch.bool)
    print(f"{args.layers}+{args.layers} layers, d_model {args.d_model}, {args.heads} heads, d_ff {args.d_ff}, "
          f"batch {args.batch}, seq {args.seq}, {torch.get_num_threads()} threads, torch {torch.__version__}")

    for label, step, train_mode in (("inference", inference_step, False), ("forward+backward", training_step, True)):
        theirs.train(train_mode)
        ours.train(train_mode)
        t_torch, t_ours = time_pair(step, theirs, ours, (src, tgt, mask), args.repeats, args.warmup)
        m_torch, m_ours = statistics.median(t_torch), statistics.median(t_ours)
        print(f"{label:>17}: torch.nn {m_torch * 1e3:8.1f} ms   addnorm {m_ours * 1e3:8.1f} ms   "
              f"ratio {m_ours / m_torch:.3f}   (median of {args.repeats})")


if __name__ == "__main__":
    main()
