"""The capstone (addnorm_grading.capstone): the learner's components checked alone, assembled, trained, and blamed.

Fast: the pairing of parameters by order of use, the notebooks' reading, the report's lines. Slow: the command
itself, on the solutions (everything matches, the model trains, blame: none), on one classic mistake at a time
(blame names that component and no other), and on notebooks with a cell that raises and a class that is missing;
the notebooks are only read. The tests use the quick budget; bench/capstone.py times the full one.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
import torch
from torch import nn

import addnorm
from addnorm_grading import submissions
from addnorm_grading.capstone import COMPONENTS
from addnorm_grading.capstone.matching import Mismatch, copy_weights, pairs
from addnorm_grading.capstone.notebooks import read_learner_code
from addnorm_grading.capstone.report import last_line

ROOT = Path(__file__).resolve().parent.parent
LAST_LINE = re.compile(r"^capstone: exact match (\d+\.\d)% \(reference (\d+\.\d)%\); blame: (.+)$")


# ---- fast ------------------------------------------------------------------------------------------------------

class _RenamedNorm(nn.Module):
    """A correct LayerNorm whose parameters are called otherwise and registered shift first."""

    def __init__(self, d):
        super().__init__()
        self.beta = nn.Parameter(torch.zeros(d))
        self.gamma = nn.Parameter(torch.ones(d))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5) * self.gamma + self.beta


class _TwoNorms(nn.Module):
    """Norms created in one order and applied in the other."""

    def __init__(self, make, d=8):
        super().__init__()
        self.second, self.first = make(d), make(d)

    def forward(self, x):
        return self.second(self.first(x) * 2)


def _paired(yours):
    """A reference of two trained-looking addnorm norms, its weights copied into `yours`; both, and the input."""
    reference = _TwoNorms(addnorm.LayerNorm)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(torch.randn_like(p))
    x = torch.randn(3, 8)
    copy_weights(reference, yours, lambda m: m(x))
    return reference, yours, x


def test_parameters_pair_by_order_of_use_and_a_norms_scale_by_its_value():
    reference, yours, x = _paired(_TwoNorms(_RenamedNorm))
    assert torch.allclose(reference(x), yours(x), atol=1e-5)
    assert torch.equal(yours.first.gamma, reference.first.weight) and torch.equal(yours.first.beta, reference.first.bias)


def test_a_module_called_through_forward_or_a_functional_still_pairs():
    """Parameters are seen where torch receives them: `norm.forward(x)` and F.layer_norm(x, …, norm.weight) count."""
    class Direct(_TwoNorms):
        def forward(self, x):
            h = torch.nn.functional.layer_norm(x, (8,), self.first.gamma, self.first.beta)
            return self.second.forward(h * 2)

    reference, yours, x = _paired(Direct(_RenamedNorm))
    assert torch.allclose(reference(x), yours(x), atol=1e-5)


def test_a_module_applied_twice_does_not_pair():
    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = addnorm.LayerNorm(8)

        def forward(self, x):
            return self.norm(self.norm(x) * 2)

    with pytest.raises(Mismatch, match="uses 2 parameter tensors, addnorm's uses 4"):
        pairs(_TwoNorms(addnorm.LayerNorm), Shared(), lambda m: m(torch.randn(2, 8)))


def test_reading_takes_setup_and_solution_cells_and_says_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        read_learner_code(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="found none of them"):
        read_learner_code(tmp_path)
    shutil.copytree(ROOT / "exercises" / "02_layer_norm", tmp_path / "02_layer_norm")
    code = read_learner_code(tmp_path)
    assert code["01_residual"] is None and code["02_layer_norm"]["setup"][0].startswith("import torch")
    assert [grade_id for grade_id, _ in code["02_layer_norm"]["cells"]] == ["layer_norm", "rms_norm"]


def test_the_last_line_says_both_scores_with_one_decimal_and_the_blame():
    result = {"yours": {"exact_match": 0.5}, "reference": {"exact_match": 0.995}, "blame": ["LayerNorm", "Decoder"]}
    assert last_line(result) == "capstone: exact match 50.0% (reference 99.5%); blame: LayerNorm, Decoder"
    assert last_line({**result, "blame": []}).endswith("blame: none")


# ---- slow: the command ------------------------------------------------------------------------------------------

_ENCODING = "position = torch.arange(max_len, dtype=torch.float64)[:, None]"
MISTAKES = {     # one classic mistake, placed in one component: (assignment, [(old, new)], the component to blame)
    "post_pre_ln_swapped": ("01_residual", [("if self.norm_first:", "if not self.norm_first:")], "AddNorm"),
    "unbiased_variance": ("02_layer_norm", [("variance = centered.pow(2).mean(dim=-1, keepdim=True)",
                                             "variance = x.var(dim=-1, keepdim=True)")], "LayerNorm"),
    "ffn_before_attention": ("03_encoder_stack", [
        ("x = self.norm1(x + self.dropout(attend(x)))", "x = self.norm1(x + self.dropout(self.feed_forward(x)))"),
        ("return self.norm2(x + self.dropout(self.feed_forward(x)))", "return self.norm2(x + self.dropout(attend(x)))")],
        "EncoderLayer"),
    "one_layer_shared_across_the_stack": ("03_encoder_stack", [("copy.deepcopy(layer) for _ in range(num_layers)",
                                                                "layer for _ in range(num_layers)")], "Encoder"),
    "mask_lets_a_position_see_the_next": ("04_decoder_stack", [(".triu(diagonal=1)", ".triu(diagonal=2)")],
                                          "causal_mask"),
    "cross_attention_reads_the_decoders_own_stream": ("04_decoder_stack", [
        ("self.cross_attn(h, memory, memory)", "self.cross_attn(h, h, h)")], "DecoderLayer"),
    "decoder_layers_read_their_own_input_as_memory": ("04_decoder_stack", [("x = layer(x, memory)", "x = layer(x, x)")],
                                                      "Decoder"),
    "positions_counted_from_one": ("05_positional_encoding", [(_ENCODING, _ENCODING.replace("[:, None]", "[:, None] + 1"))],
                                   "sinusoidal_encoding"),
    "encoding_added_in_every_layer": ("03_encoder_stack", [(
        "def attend(h):", "x = x + addnorm.sinusoidal_encoding(x.shape[1], x.shape[2])\n\n        def attend(h):"),
        ("class EncoderLayer(nn.Module):", "import addnorm\n\n\nclass EncoderLayer(nn.Module):")], "EncoderLayer"),
    "no_sqrt_d_model": ("05_positional_encoding", [("self.tokens(tokens) * math.sqrt(self.d_model)", "self.tokens(tokens)")],
                        "Embedding"),
}


def learner_folder(base: Path, name: str, changes: dict[str, str] | None = None) -> Path:
    """The solutions as a learner's fetched notebooks, DIR/<assignment>/<notebook>.ipynb, with `changes` applied."""
    return submissions.learner_folder(base / name, sorted(set(COMPONENTS.values())), changes)


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*.ipynb"))}


def run_capstone(folder: Path) -> dict:
    before = digest(folder)
    result = subprocess.run([sys.executable, "-m", "addnorm_grading.capstone", "--notebooks", str(folder),
                             "--out", str(folder.parent / f"{folder.name}-report"), "--budget", "quick"],
                            capture_output=True, text=True, timeout=600)
    lines = result.stdout.strip().splitlines()
    match = LAST_LINE.match(lines[-1]) if lines else None
    return dict(returncode=result.returncode, stdout=result.stdout, stderr=result.stderr[-3000:], lines=lines,
                match=match, unchanged=digest(folder) == before, out=folder.parent / f"{folder.name}-report")


def _raising_and_missing() -> dict[str, str]:
    nb = nbformat.reads(submissions.solution_text("04_decoder_stack"), as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "decoder":
            cell.source = "raise RuntimeError('my decoder is not ready')\n" + cell.source
    nb5 = nbformat.reads(submissions.solution_text("05_positional_encoding"), as_version=4)
    nb5.cells = [c for c in nb5.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "embedding"]
    return {"04_decoder_stack": nbformat.writes(nb), "05_positional_encoding": nbformat.writes(nb5)}


@pytest.fixture(scope="module")
def capstones(tmp_path_factory):
    """Every case's folder, run by the command, two at a time (each run trains on one thread)."""
    base = tmp_path_factory.mktemp("capstone")
    folders = {"solutions": learner_folder(base, "solutions"),
               "raising_and_missing": learner_folder(base, "raising_and_missing", _raising_and_missing())}
    for name, (assignment, replacements, _) in MISTAKES.items():
        folders[name] = learner_folder(base, name, {assignment: submissions.with_replacements(assignment, replacements)})
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(folders, pool.map(run_capstone, folders.values())))




@pytest.mark.slow
def test_the_solutions_match_train_and_blame_nothing(capstones):
    run = capstones["solutions"]
    assert run["returncode"] == 0 and run["match"], run["stdout"] + run["stderr"]
    for name in COMPONENTS:
        line = next(line for line in run["lines"] if line.startswith(name + " "))
        assert "matches addnorm's (largest difference" in line, line
    yours, reference, blame = float(run["match"][1]), float(run["match"][2]), run["match"][3]
    assert yours >= 90 and abs(yours - reference) <= 5 and blame == "none", run["lines"][-1]
    assert (run["out"] / "capstone_losses.png").stat().st_size > 10_000
    assert (run["out"] / "capstone_report.txt").read_text().strip() == run["stdout"].strip()
    assert run["unchanged"], "the capstone changed a learner's notebook"


@pytest.mark.slow
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_one_mistake_is_blamed_on_its_component_and_no_other(capstones, mistake):
    run, component = capstones[mistake], MISTAKES[mistake][2]
    assert run["returncode"] == 0 and run["match"], run["stdout"] + run["stderr"]
    assert run["match"][3] == component, f"{mistake}: expected blame: {component}\n{run['stdout']}"
    line = next(line for line in run["lines"] if line.startswith(component + " "))
    assert "differs" in line or "raises" in line, line
    assert run["unchanged"]


@pytest.mark.slow
def test_a_cell_that_raises_and_a_missing_class_get_a_line_each_and_the_rest_is_reported(capstones):
    run = capstones["raising_and_missing"]
    assert run["returncode"] == 0 and run["match"], run["stdout"] + run["stderr"]
    text = run["stdout"]
    assert "04_decoder_stack, cell decoder: RuntimeError: my decoder is not ready" in text, text
    assert re.search(r"^Decoder +missing: the solution cells of 04_decoder_stack define no Decoder", text, re.M), text
    assert re.search(r"^Embedding +missing: the solution cells of 05_positional_encoding define no Embedding", text, re.M)
    assert run["match"][3] == "Decoder, Embedding", run["lines"][-1]
    assert float(run["match"][1]) >= 90, "addnorm's pieces stand in for the missing ones: the model still trains"
    assert "EncoderLayer" in text and re.search(r"^LayerNorm +matches", text, re.M)


@pytest.mark.slow
def test_the_capstone_notebook_runs_and_shows_the_report_and_the_figure(tmp_path):
    """capstone/your_transformer.ipynb, executed as a learner would (on the released, unwritten exercises)."""
    from nbclient import NotebookClient

    shutil.copytree(ROOT / "capstone", tmp_path / "capstone")
    shutil.copytree(ROOT / "exercises", tmp_path / "exercises")
    nb = nbformat.read(tmp_path / "capstone" / "your_transformer.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path / "capstone")}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert LAST_LINE.match(printed.strip().splitlines()[-1]), printed[-2000:]
    assert "not written yet" in printed and "blame: AddNorm, LayerNorm" in printed
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
