"""Small synthetic tasks, generated on the fly and seeded: nothing is downloaded.

Two shapes of task:
- in-place tasks for encoder-only models: the label at position p is a function of the whole
  input (e.g. the input reversed), so solving them needs attention *and* positions;
- sequence-to-sequence tasks for the encoder–decoder: copy, reverse or sort a sequence of digits,
  with PAD/BOS/EOS tokens, padding, and disjoint train / held-out splits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PAD, BOS, EOS = 0, 1, 2
FIRST_SYMBOL = 3          # symbols are FIRST_SYMBOL, FIRST_SYMBOL + 1, …
TASKS = ("copy", "reverse", "sort")


def show(ids: list[int]) -> str:
    """Token ids of a sequence-to-sequence task as text: digits 0, 1, …, BOS, EOS and · for padding."""
    names = {PAD: "·", BOS: "BOS", EOS: "EOS"}
    return " ".join(names.get(i, str(i - FIRST_SYMBOL)) for i in ids)


def apply_task(task: str, symbols: list[int]) -> list[int]:
    """The target sequence the task asks for, given the source symbols."""
    if task == "copy":
        return list(symbols)
    if task == "reverse":
        return symbols[::-1]
    if task == "sort":
        return sorted(symbols)
    raise ValueError(f"task: expected one of {TASKS}, got {task!r}")


def in_place_batch(
    task: str, batch_size: int, seq_len: int, vocab_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """An encoder-only batch: inputs and per-position labels, both (batch_size, seq_len) in [0, vocab_size)."""
    x = torch.randint(0, vocab_size, (batch_size, seq_len), generator=generator)
    if task == "copy":
        y = x.clone()
    elif task == "reverse":
        y = x.flip(dims=[1])
    elif task == "sort":
        y = x.sort(dim=1).values
    else:
        raise ValueError(f"task: expected one of {TASKS}, got {task!r}")
    return x, y


@dataclass
class Seq2SeqBatch:
    """A padded batch: src (B, S) ends with EOS; tgt_in (B, T) starts with BOS; tgt_out (B, T) ends with EOS."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor

    @property
    def src_padding_mask(self) -> torch.Tensor:
        """(B, S), True at padding."""
        return self.src == PAD

    @property
    def tgt_padding_mask(self) -> torch.Tensor:
        """(B, T), True at padding."""
        return self.tgt_in == PAD


def _pad(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(task: str, sources: list[list[int]]) -> Seq2SeqBatch:
    """Pad a list of source symbol sequences into a teacher-forcing batch for `task`."""
    targets = [apply_task(task, s) for s in sources]
    return Seq2SeqBatch(
        src=_pad([s + [EOS] for s in sources]),
        tgt_in=_pad([[BOS] + t for t in targets]),
        tgt_out=_pad([t + [EOS] for t in targets]),
    )


@dataclass
class Seq2SeqData:
    """Disjoint train and held-out source sequences for one task, and a sampler of training batches."""

    task: str
    train: list[list[int]]
    held_out: list[list[int]]
    vocab_size: int           # including PAD, BOS, EOS

    def sample(self, batch_size: int, generator: torch.Generator) -> Seq2SeqBatch:
        """A random training batch."""
        idx = torch.randint(0, len(self.train), (batch_size,), generator=generator).tolist()
        return make_batch(self.task, [self.train[i] for i in idx])

    def held_out_batch(self) -> Seq2SeqBatch:
        """All held-out sequences as one batch."""
        return make_batch(self.task, self.held_out)


def make_seq2seq_data(
    task: str,
    num_symbols: int = 10,
    min_len: int = 3,
    max_len: int = 8,
    num_train: int = 4000,
    num_held_out: int = 200,
    seed: int = 0,
) -> Seq2SeqData:
    """Random symbol sequences of length min_len…max_len, split so no held-out sequence is in training."""
    if task not in TASKS:
        raise ValueError(f"task: expected one of {TASKS}, got {task!r}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"make_seq2seq_data: expected 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    g = torch.Generator().manual_seed(seed)
    seen: set[tuple[int, ...]] = set()
    sequences: list[list[int]] = []
    wanted = num_train + num_held_out
    attempts = 0
    while len(sequences) < wanted:
        attempts += 1
        if attempts > 50 * wanted:
            raise ValueError(
                f"make_seq2seq_data: only {len(sequences)} distinct sequences exist for these lengths and symbols, "
                f"but {wanted} were asked for"
            )
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
        seq = (torch.randint(0, num_symbols, (length,), generator=g) + FIRST_SYMBOL).tolist()
        if tuple(seq) not in seen:
            seen.add(tuple(seq))
            sequences.append(seq)
    return Seq2SeqData(task, sequences[:num_train], sequences[num_train:], num_symbols + FIRST_SYMBOL)
