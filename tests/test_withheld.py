"""The copy of addnorm a grading kernel reads (addnorm_grading.withheld): what an exercise withholds raises in its
files, everything else is the library's. That the sandbox shows it in place of the package, and that a blank
notebook loading the package afresh scores nothing, is tested with the cheats (tests/cheats.py,
fresh_copy_of_the_library)."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from addnorm_grading import withheld
from addnorm_grading.execute import _helpers

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ["01_residual", "02_layer_norm", "03_encoder_stack", "04_decoder_stack"]


def declared(assignment: str) -> list[tuple[str, str]]:
    """What an exercise withholds: its helpers cell's and its hidden checks' _withhold calls on addnorm."""
    notebook = next((ROOT / "solutions" / assignment).glob("*.ipynb"))
    code = [_helpers(nbformat.read(notebook, as_version=4))]
    code += [path.read_text(encoding="utf-8") for path in sorted((ROOT / "checks" / assignment).glob("*.py"))]
    return [call for text in code for call in withheld.withheld_calls(text)]


def in_the_copy(copy: Path, code: str) -> str:
    """What `code` prints in a fresh interpreter that imports addnorm from `copy` (as the sandbox shows it)."""
    result = subprocess.run([sys.executable, "-c", code], cwd=copy.parent,     # the folder of `python -c` comes first
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_the_calls_are_read_from_code_with_their_message():
    code = '''
_withhold([addnorm.LayerNorm.forward, torch.nn.LayerNorm.forward, addnorm.causal_mask],
          "Your code calls the library: " "write it yourself.")
_withhold(functions, "not a list: skipped")
def _withhold(functions, message): pass
'''
    message = "Your code calls the library: write it yourself."
    assert withheld.withheld_calls(code) == [("addnorm.LayerNorm.forward", message), ("addnorm.causal_mask", message)]
    assert withheld.withheld_calls("def broken(:") == []


@pytest.mark.parametrize("assignment", [*EXERCISES, "05_positional_encoding"])
def test_every_exercise_that_has_a_library_answer_withholds_it(assignment):
    assert declared(assignment), f"{assignment} withholds nothing of addnorm"


def test_a_withheld_function_raises_its_message_and_the_rest_is_the_librarys():
    calls = declared("01_residual") + declared("05_positional_encoding")
    copy = withheld.library(calls)
    out = in_the_copy(copy, '''
import torch, addnorm
for call in (lambda: addnorm.AddNorm(8).forward(torch.zeros(1, 8), lambda t: t),
             lambda: addnorm.sinusoidal_encoding(4, 8), lambda: addnorm.Embedding(10, 8)(torch.zeros(1, 3).long())):
    try:
        call()
        print("ran")
    except AssertionError as error:
        print("withheld:", error)
print("norm:", abs(addnorm.LayerNorm(8)(torch.arange(8.0)[None]).sum().item()) < 1e-4)
print(addnorm.__file__)
''')
    lines = out.splitlines()
    messages = dict(calls)
    assert lines[0] == f"withheld: {messages['addnorm.AddNorm.forward']}", out
    assert lines[1] == f"withheld: {messages['addnorm.sinusoidal_encoding']}", out
    assert lines[2].startswith("withheld: "), out          # Embedding's constructor builds its table with the encoding
    assert lines[3] == "norm: True", out                  # not withheld here: the library's own
    assert lines[4].startswith(str(copy)), out


def test_the_copy_holds_nothing_compiled_from_the_real_files():
    copy = withheld.library(declared("02_layer_norm"))
    real = withheld.package_folder()
    changed = [path for path in copy.rglob("*.py")
               if not filecmp.cmp(path, real / path.relative_to(copy), shallow=False)]
    assert [path.name for path in changed] == ["norm.py"], changed
    compiled = list(copy.rglob("*.pyc"))
    assert compiled, "the copy should be compiled: the kernel cannot write its own compiled files"
    for pyc in compiled:                  # a compiled file records the size of the source it was compiled from
        source = pyc.parent.parent / (pyc.name.split(".")[0] + ".py")
        assert int.from_bytes(pyc.read_bytes()[12:16], "little") == source.stat().st_size, pyc
    assert withheld.library(declared("02_layer_norm")) == copy        # made once per set of withholds


def test_withholding_what_is_not_a_function_of_the_library_says_so():
    with pytest.raises(ValueError, match="addnorm.AddNorm .*not a function"):
        withheld.library([("addnorm.AddNorm", "message")])
