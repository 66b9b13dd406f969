"""Chapter 7's training runs: the 2017 block, the modern block and the RoPE-only control on the causal copy and
reversal tasks, trained until solved (their committed file: `addnorm.lab.modern_runs_file`).

- `sequences`, `answers_read_right`, `generated_accuracy`, `train_until_solved`: the task and the run.
- `run(settings, task, model, seed)` trains one run from its settings; `run_all(settings, workers)` every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..variants.modern import gpt_2017, llama_style, matching_swiglu_width
from .tasks import in_place_batch
from .train import seed_everything, train

RUNS_FILE = Path("data") / "modern_block_runs.json"         # relative to the book's folder
REFRESH_COMMAND = ".venv/bin/python tools/modern_block_runs.py"
MODELS = ("2017 block", "modern block", "2017 block + RoPE")
TASKS = ("copy", "reverse")

# The chapter's settings: 8 symbols 0-9 and a separator (id 10); stop at 95 % of whole answers right.
SETTINGS = dict(n=8, symbols=10, d_model=64, heads=4, layers=2, d_ff=256, batch=32, lr=3e-3, warmup=25,
                max_steps=800, eval_every=50, solved=0.95, eval_examples=256, eval_seed=10_000,
                seeds=[0, 1, 2, 3], threads=1)


def sequences(s: dict, task: str, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Model input (batch, 2N) = x, SEP, answer without its last token; and the answer (batch, N)."""
    n, sep = s["n"], s["symbols"]                                      # the separator's id follows the symbols
    x, answer = in_place_batch(task, batch, n, s["symbols"], generator)   # answer = x copied or reversed
    full = torch.cat([x, torch.full((batch, 1), sep), answer], dim=1)  # (batch, 2N + 1)
    return full[:, :-1], answer


def next_token_loss(s: dict, task: str) -> Callable[[nn.Module, torch.Generator], torch.Tensor]:
    """Cross-entropy of the answer tokens only (the first N symbols are random and cannot be predicted)."""
    def loss_fn(model: nn.Module, generator: torch.Generator) -> torch.Tensor:
        inputs, answer = sequences(s, task, s["batch"], generator)
        logits = model(inputs)[:, s["n"]:]                 # positions SEP … : they predict the answer
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), answer.reshape(-1))
    return loss_fn


def held_out(s: dict, task: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out sequences every check reads (their own seed, never the training generator's)."""
    return sequences(s, task, s["eval_examples"], torch.Generator().manual_seed(s["eval_seed"]))


@torch.no_grad()
def answers_read_right(s: dict, model: nn.Module, task: str) -> float:
    """One pass over the held-out sequences, each answer token predicted from the true tokens before it: the
    fraction of answers right in every token (= of answers generated right, see the chapter)."""
    was_training = model.training
    model.eval()
    inputs, answer = held_out(s, task)
    right = model(inputs)[:, s["n"]:].argmax(dim=-1) == answer        # (examples, N)
    model.train(was_training)
    return right.all(dim=1).float().mean().item()


@torch.no_grad()
def generated_accuracy(s: dict, model: nn.Module, task: str) -> tuple[float, float]:
    """Greedy generation after the separator: (token accuracy, fraction of answers all right)."""
    was_training = model.training
    model.eval()
    inputs, answer = held_out(s, task)
    tokens = inputs[:, :s["n"] + 1]                        # the symbols and the separator
    for _ in range(s["n"]):
        next_token = model(tokens)[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    model.train(was_training)
    right = tokens[:, s["n"] + 1:] == answer
    return right.float().mean().item(), right.all(dim=1).float().mean().item()


def build(s: dict, name: str) -> nn.Module:
    """One of the three models; the modern block's SwiGLU width matches the 2017 block's parameter count."""
    vocab = s["symbols"] + 1
    if name == "2017 block":
        return gpt_2017(vocab, s["d_model"], s["heads"], s["layers"], s["d_ff"], norm_first=False)
    if name == "modern block":
        return llama_style(vocab, s["d_model"], s["heads"], s["layers"], matching_swiglu_width(s["d_model"], s["d_ff"]))
    if name == "2017 block + RoPE":      # the control: the 2017 block with only its positions changed, to RoPE
        return gpt_2017(vocab, s["d_model"], s["heads"], s["layers"], s["d_ff"], rope=True)
    raise ValueError(f"model: expected one of {MODELS}, got {name!r}")


def train_until_solved(s: dict, model: nn.Module, task: str, seed: int) -> dict:
    """Train until `solved` of the answers are right (checked every `eval_every` steps) or `max_steps`."""
    checks = [(0, answers_read_right(s, model, task))]   # (step, whole answers right)

    def check(step: int, model: nn.Module) -> bool:
        if step % s["eval_every"]:
            return False
        checks.append((step, answers_read_right(s, model, task)))
        return checks[-1][1] >= s["solved"]              # True stops the training

    history = train(model, next_token_loss(s, task), s["max_steps"], lr=s["lr"], warmup_steps=s["warmup"],
                    seed=seed, after_step=check, desc=f"{task}, seed {seed}")
    token_accuracy, exact = generated_accuracy(s, model, task)       # generated, one token at a time
    solved = exact >= s["solved"]
    return dict(steps=checks[-1][0] if solved else None, steps_trained=len(history.losses),
                checks=[list(c) for c in checks], token_accuracy=token_accuracy, exact=exact,
                exact_read=checks[-1][1])


def run(s: dict, task: str, name: str, seed: int) -> tuple[dict, nn.Module]:
    """One run from scratch: seed, build, train until solved. (record, trained model)."""
    torch.set_num_threads(s["threads"])
    seed_everything(seed)
    model = build(s, name)
    return dict(task=task, model=name, seed=seed, **train_until_solved(s, model, task, seed)), model


def _run_key(args: tuple) -> dict:
    s, task, name, seed = args
    return run(s, task, name, seed)[0]


def run_all(s: dict, workers: int = 1) -> list[dict]:
    """Every (task, model, seed) of the settings, in that order; `workers` processes side by side."""
    jobs = [(s, task, name, seed) for task in TASKS for name in MODELS for seed in s["seeds"]]
    if workers <= 1:
        return [_run_key(job) for job in jobs]
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return pool.map(_run_key, jobs, chunksize=1)
