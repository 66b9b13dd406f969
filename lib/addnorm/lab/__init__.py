"""addnorm.lab — the instruments of the chapters: toy tasks, a training loop, probes, tracing, figures.

It imports the model (`addnorm`); the model never imports it.

| module | holds |
|---|---|
| `tasks` | seeded toy data: in-place tasks (`in_place_batch`) and sequence-to-sequence tasks (`make_seq2seq_data`) |
| `train` | `seed_everything`, `train` and its `History`, losses and accuracies for the toy tasks |
| `models` | `SequenceTagger`, the toy encoder-only model whose knobs the experiments vary |
| `probes` | forward hooks: outputs, inputs, attention weights, gradient norms, token similarity, linear probes |
| `tracing` | `trace_calls`: the shape of every call into a module, as a table |
| `plots` | the figures' common shapes: per-layer curves, loss curves, heatmaps |
| `diagram` | a data-flow diagram of a Transformer, traced from a real forward pass |
| `experiments` | `toy_tagger`, `grad_norms_at_init`: what several chapters measure |
| `sweep` | the depth × learning-rate sweep behind chapters 1 and 2's maps (`make sweep`) |
| `sweep_maps` | the committed sweep file as chapters 1 and 2 use it: its maps, and a few cells re-run against it |
| `glue` | `glue`: a value for the book's text, printed too when a chapter runs in JupyterLab |
"""

from .models import SequenceTagger
from .train import History, seed_everything, train

__all__ = ["History", "SequenceTagger", "seed_everything", "train"]
