"""The judge (addnorm_grading.judge) on its own, without nbgrader: what crosses from the kernel is data, what it
says is decided here, and what it may quote is the learner's own. Fast: the kernel is played by `observe` called
in this process on a namespace standing for the learner's."""

from __future__ import annotations

import linecache
import textwrap

import nbformat
import pytest
import torch
from IPython import display as ipython_display

from addnorm_grading import judge as judge_module
from addnorm_grading import observation, secret
from addnorm_grading.judge import (HIDDEN_FAILED, HIDDEN_NO_RESULT, HIDDEN_RAISED, TOO_MANY_QUOTED, Judge,
                                   JudgeError)
from addnorm_grading.observation import MIME, ObservationError
from addnorm_grading.quoting import quoted_strings
from addnorm_grading.sections import Sections, assigned_names

VISIBLE = textwrap.dedent('''\
    import torch

    # [inputs]
    x = torch.arange(6.0).reshape(2, 3)
    # [observe]
    out = double(x)
    # [check]
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (2, 3), (
        f"double(x) must keep the shape (2, 3), got {getattr(out, 'shape', type(out).__name__)}")
    assert torch.equal(out, 2 * x), f"double(x) should be 2·x; yours is {out.tolist()}"
''')

HIDDEN = textwrap.dedent('''\
    import torch

    # [inputs]
    torch.manual_seed(SEED)
    y = torch.randn(4, 5)
    # [observe]
    hidden_out = double(y)
    # [check]
    assert torch.equal(hidden_out, 2 * y), "double must work for every shape (the secret test says so)"
''')


@pytest.fixture
def judge(tmp_path):
    checks = tmp_path / "checks"
    (checks / "ex").mkdir(parents=True)
    secret.make(checks)
    (checks / "ex" / "test_double.py").write_text(HIDDEN)
    return Judge(tmp_path)


def kernel(code: str, learner: str) -> list:
    """Run a trial's kernel code as the learner's kernel would, in a fresh namespace holding the learner's cells;
    return the outputs it displayed."""
    outputs, namespace = [], {}
    name = f"<learner cell {abs(hash(learner))}>"           # as IPython does: the cell's source in linecache
    linecache.cache[name] = (len(learner), None, learner.splitlines(keepends=True), name)
    exec(compile(learner, name, "exec"), namespace)
    original = ipython_display.display
    ipython_display.display = lambda data, raw=False: outputs.append({"output_type": "display_data", "data": data})
    try:
        exec(code, namespace)
    finally:
        ipython_display.display = original
    return outputs


def judged(trial, learner: str, visible_code: str | None = None):
    """The verdicts of a trial whose two kernels each ran the learner's cells (in a namespace of their own)."""
    return trial.verdicts(kernel(visible_code or trial.visible_code, learner), kernel(trial.hidden_code, learner),
                          learner)


def verdicts(judge, learner: str):
    return judged(judge.trial("ex", "test_double", VISIBLE), learner)


def test_sections_and_the_names_they_assign():
    sections = Sections.parse(VISIBLE)
    assert sections.judged and sections.preamble.strip() == "import torch"
    assert sections.parts["observe"].strip() == "out = double(x)"
    assert assigned_names("a = 1\nfor b in range(2):\n    c = [d for d in range(b)]\nwith f() as e:\n    pass") == \
        ["a", "b", "c", "e"]
    assert not Sections.parse("assert True").judged


def test_a_right_answer_passes_and_a_wrong_one_gets_the_visible_message(judge):
    right = verdicts(judge, "def double(x):\n    return x * 2\n")
    assert right.visible is None and right.hidden is None and right.message is None
    wrong = verdicts(judge, "def double(x):\n    return x + 1\n")
    assert wrong.visible.startswith("double(x) should be 2·x; yours is [[1.0, 2.0, 3.0]")


def test_the_hidden_check_runs_on_the_judges_own_inputs(judge):
    """A learner that special-cases the visible input passes the visible check and fails the hidden one."""
    learner = "import torch\ndef double(x):\n    return 2 * x if x.shape == (2, 3) else torch.zeros_like(x)\n"
    result = verdicts(judge, learner)
    assert result.visible is None and result.hidden == "double must work for every shape (the secret test says so)"
    trial = judge.trial("ex", "test_double", VISIBLE)
    assert "randn" not in trial.hidden_code and "SEED" not in trial.hidden_code   # only data and observing lines
    assert "hidden_out" not in trial.visible_code and "hidden_out" in trial.hidden_code   # the visible kernel: no hidden line


def test_an_observation_that_lies_about_its_input_changes_nothing(judge):
    """The check compares with the judge's own x, never with an x read back from the kernel."""
    learner = "def double(x):\n    global x_forged\n    return x * 0\nx = None\n"
    trial = judge.trial("ex", "test_double", VISIBLE)
    lying = trial.visible_code.replace("'out'", "'out', 'x'")                     # the kernel also reports an x
    assert judged(trial, learner, lying).visible.startswith("double(x) should be 2·x")


@pytest.mark.parametrize("outputs, says", [
    ([], "none arrived"),
    ([{"output_type": "stream", "text": "hello"}], "none arrived"),
    ([{"output_type": "display_data", "data": {MIME: {"observation": "bm90IGRhdGE="}}}], "cannot be read as data"),
    ([{"output_type": "display_data", "data": {MIME: {"observation": "A" * (observation.MAX_BYTES + 4)}}}],
     "allowed"),
    ([{"output_type": "display_data", "data": {MIME: {"other": 1}}}], "not in the expected form"),
])
def test_a_missing_malformed_or_oversized_observation_is_a_failed_test(judge, outputs, says):
    trial = judge.trial("ex", "test_double", VISIBLE)
    result = trial.verdicts(outputs, outputs, "")
    assert "no result" in result.visible and says in result.visible
    assert result.hidden == HIDDEN_NO_RESULT               # of the hidden kernel, not a word of what it sent


def test_an_observation_that_would_inflate_is_refused_before_it_is_loaded():
    """torch.save's archive, its files compressed: 1 GB of zeros in about a megabyte. torch.load would inflate it
    in one C call that no time limit interrupts; the judge refuses it unread, from the archive's directory."""
    import base64
    import io
    import zipfile

    buffer = io.BytesIO()
    torch.save({"values": {"out": torch.zeros(4)}, "raised": None}, buffer)
    bomb = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as plain, \
            zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as packed:
        for entry in plain.infolist():
            data = plain.read(entry)
            packed.writestr(entry.filename, data + bytes(1 << 30) if entry.filename.endswith("data/0") else data)
    text = base64.b64encode(bomb.getvalue()).decode("ascii")
    assert len(text) < observation.MAX_BYTES                  # it passes the size check of the text
    with pytest.raises(ObservationError, match="compressed"):
        observation.decode(text)
    assert observation.decode(observation.encode({"out": torch.ones(3)}))["out"].tolist() == [1.0, 1.0, 1.0]


def test_an_observation_whose_structure_would_take_seconds_to_read_is_refused_unread():
    """The pickle inside torch.save's archive is read by a pure-Python unpickler, an opcode at a time: 16 MB of
    one-byte opcodes (a list made 16 million times) took half a minute of the judge's CPU. Past MAX_PICKLE_BYTES
    it is refused from the archive's directory, before torch.load."""
    import base64
    import io
    import zipfile

    buffer = io.BytesIO()
    torch.save({"values": {}, "raised": None}, buffer)
    slow = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as plain, zipfile.ZipFile(slow, "w") as stored:
        for entry in plain.infolist():
            data = plain.read(entry)
            stored.writestr(entry.filename, b"\x80\x02" + b"]" * (4 * observation.MAX_PICKLE_BYTES) + b"."
                            if entry.filename.endswith("data.pkl") else data)
    text = base64.b64encode(slow.getvalue()).decode("ascii")
    assert len(text) < observation.MAX_BYTES                  # it passes the size check of the text
    with pytest.raises(ObservationError, match="its structure is"):
        observation.decode(text)
    numbers = {"values": {"x": [list(range(1000)) for _ in range(99)]}, "raised": None}
    assert observation.decode(observation.encode(numbers)) == numbers, "an observation at MAX_NODES is read"


def test_two_observations_are_refused():
    payload = {"output_type": "display_data",
               "data": {MIME: {"observation": observation.encode({"values": {}, "raised": None})}}}
    with pytest.raises(ObservationError, match="2 arrived"):
        observation.read([payload, payload])


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickled_code_is_never_run():
    import base64
    import pickle

    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('ran')",))

    with pytest.raises(ObservationError):
        observation.decode(base64.b64encode(pickle.dumps(Boom())).decode())


def test_strings_from_the_kernel_are_quoted_only_where_the_learner_wrote_them(judge):
    secret = "HIDDEN-SOURCE-TEXT"
    made_up = f"def double(x):\n    return type({secret!r} .lower(), (), {{}})()\n"    # a class named by a string
    result = verdicts(judge, made_up)
    assert "hidden-source-text" not in result.visible and "got …" in result.visible
    own = "class Wrong:\n    pass\ndef double(x):\n    return Wrong()\n"                  # a name of their own
    assert verdicts(judge, own).visible.endswith("got Wrong")


def test_an_exception_is_told_by_its_call_type_and_the_learners_own_line(judge):
    learner = "def double(x):\n    raise ValueError('my own words')\n"
    assert verdicts(judge, learner).visible == ("`out = double(x)` raised ValueError at "
                                                "`raise ValueError('my own words')`: my own words")
    # the observing code, hidden lines included, read from the frame that runs it, as the exception's text
    smuggled = ("import inspect\ndef double(x):\n"
                "    raise ValueError(next(f.frame.f_locals['source'] for f in inspect.stack() if 'source' in f.frame.f_locals))\n")
    result = verdicts(judge, smuggled)
    assert result.visible.startswith("`out = double(x)` raised ValueError at `raise ValueError(next(")
    assert "hidden_out" not in result.visible + result.hidden
    custom = "def double(x):\n    raise type('Leaky' + ' Name', (Exception,), {})()\n"   # a type named at run time
    message = verdicts(judge, custom).visible
    assert "Leaky Name" not in message and message.startswith("`out = double(x)` raised an exception at `raise type(")
    own = "class MyError(Exception):\n    pass\ndef double(x):\n    raise MyError()\n"
    assert verdicts(judge, own).visible == "`out = double(x)` raised MyError at `raise MyError()`"


def test_a_failed_run_helper_call_gets_the_helpers_message(tmp_path):
    (tmp_path / "checks" / "ex").mkdir(parents=True)
    secret.make(tmp_path / "checks")
    source = textwrap.dedent('''\
        # [inputs]
        n = 3
        # [observe]
        out = _run(f"double on {n} numbers", double, n, hint="Multiply by two.")
        # [check]
        assert out == 6
    ''')
    helpers = ("def _run(what, function, *args, hint='', **kwargs):\n"
               "    if globals().get('_addnorm_observing'):\n        return function(*args, **kwargs)\n"
               "    raise RuntimeError('not in a test')\n")
    learner = "def double(n):\n    return n.missing\n"
    trial = Judge(tmp_path).trial("ex", "test_double", source)
    result = judged(trial, helpers + learner)
    assert result.visible == "double on 3 numbers raised AttributeError at `return n.missing`. Multiply by two."


def test_hidden_names_that_clash_with_the_visible_ones_are_the_instructors_mistake(tmp_path):
    (tmp_path / "checks" / "ex").mkdir(parents=True)
    secret.make(tmp_path / "checks")
    (tmp_path / "checks" / "ex" / "test_double.py").write_text("# [inputs]\nx = 5\n# [observe]\n# [check]\n")
    with pytest.raises(JudgeError, match=r"\['x'\]"):
        Judge(tmp_path).trial("ex", "test_double", VISIBLE)


def test_observing_lines_that_reassign_an_input_are_the_instructors_mistake(judge):
    with pytest.raises(JudgeError, match=r"assign \['x'\], which are inputs"):
        judge.trial("ex", "test_double", VISIBLE.replace("out = double(x)", "x = x.clone()\nout = double(x)"))


def test_a_check_that_crashes_fails_the_test_and_is_kept_for_the_log(judge):
    """A check that raises something other than an assertion (here: it reads a tensor's attribute off a string)
    fails the test without guessing, and the trial keeps the error for the grading log."""
    learner = "def double(x):\n    return 'twice'\n"
    trial = judge.trial("ex", "test_double", VISIBLE.replace("assert isinstance(out, torch.Tensor) and ", "assert "))
    result = judged(trial, learner)
    assert result.visible is not None and trial.errors and "ex/test_double" in trial.errors[0]


DIAGNOSING = textwrap.dedent('''\
    import torch

    # [inputs]
    z = torch.ones(3)
    # [observe]
    doubled_ones = double(z)
    # [diagnose]
    assert not torch.equal(doubled_ones, z), "double returns its input unchanged: multiply it by 2"
    # [check]
    assert torch.equal(doubled_ones, 2 * z), "double(ones) should be twos"
''')


def test_a_hidden_diagnosis_speaks_first_even_when_the_visible_observing_raised(judge, tmp_path):
    """A hidden `# [diagnose]` section's failing message is the cell's, ahead of the visible one; its observations
    are made even when the visible observing lines raised; the visible verdict stays the visible test's own."""
    (tmp_path / "checks" / "ex" / "test_double.py").write_text(DIAGNOSING)
    identity = "def double(x):\n    return x\n"
    result = verdicts(judge, identity)
    assert result.visible.startswith("double(x) should be 2·x") and result.message == result.hidden
    assert result.hidden == "double returns its input unchanged: multiply it by 2"
    picky = "def double(x):\n    if x.dim() == 2:\n        raise ValueError('no matrices')\n    return x\n"
    result = verdicts(judge, picky)
    assert "raised ValueError" in result.visible and result.message == "double returns its input unchanged: multiply it by 2"
    assert verdicts(judge, "def double(x):\n    return 2 * x\n").message is None
    # a cell still to write is said first: no diagnosis of what the rest of an untouched exercise does
    untouched = "def double(x):\n    if x.dim() == 2:\n        raise NotImplementedError()\n    return x\n"
    result = verdicts(judge, untouched)
    assert not result.diagnosed and "still says YOUR CODE HERE" in result.message, result


def test_a_missing_or_short_secret_is_said_with_its_file_and_the_command_that_makes_one(tmp_path):
    (tmp_path / "checks" / "ex").mkdir(parents=True)
    with pytest.raises(secret.SecretMissing, match=r"checks/secret is missing\): run `make secret`"):
        Judge(tmp_path).trial("ex", "test_double", VISIBLE)
    (tmp_path / "checks" / "secret").write_text("20261201\n")          # a date is no secret
    with pytest.raises(secret.SecretMissing, match="at least 32 hexadecimal digits"):
        Judge(tmp_path).trial("ex", "test_double", VISIBLE)


def test_data_crosses_as_data():
    value = {"t": torch.ones(2, requires_grad=True) * 3, "shape": torch.Size([2, 3]), "n": [1, 2.5, None, "ab"],
             "module": torch.nn.Linear(2, 2), "dtype": torch.float16}
    back = observation.decode(observation.encode(observation.as_data(value)))
    assert torch.equal(back["t"], torch.full((2,), 3.0)) and not back["t"].requires_grad
    assert back["shape"] == (2, 3) and back["n"] == [1, 2.5, None, "ab"]
    assert back["module"] == (observation.OBJECT, "Linear") and back["dtype"] == (observation.OBJECT, "torch.float16")


def test_observed_names_are_the_courses_and_a_long_course_message_is_quoted_whole(tmp_path):
    (tmp_path / "checks" / "ex").mkdir(parents=True)
    secret.make(tmp_path / "checks")
    long_message = "Your code calls the library's version: " + "write it yourself, " * 20 + "from the formula."
    source = textwrap.dedent(f'''\
        # [observe]
        def _guard():
            raise AssertionError({long_message!r})
        outcome = double(3)
        if outcome is None:
            _guard()
        # [check]
        assert outcome == 6, f"double(3) should be 6; outcome is {{outcome}}"
    ''')
    trial = Judge(tmp_path).trial("ex", "test_double", source)
    wrong = "def double(n):\n    return n + 1\n"
    assert judged(trial, wrong).visible == "double(3) should be 6; outcome is 4"
    silent = "def double(n):\n    return None\n"
    message = judged(trial, silent).visible
    assert message.endswith(long_message.rstrip(".")) and len(long_message) > observation.MAX_TEXT


def test_every_test_cell_of_every_exercise_is_judged(repo_root):
    """Each graded code cell of the six exercises is written in sections (its verdict decided in the judge), and its
    hidden part, when it has one, is a checks/ file, never a `### BEGIN HIDDEN TESTS` region."""
    import nbformat

    notebooks = sorted((repo_root / "solutions").glob("*/*.ipynb"))
    assert len(notebooks) == 6
    for path in notebooks:
        judge = Judge(repo_root)
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade"):
                where = f"{path.parent.name}/{meta['grade_id']}"
                assert judge.judges(cell.source), f"{where} is not in sections: its verdict would run in the kernel"
                assert "BEGIN HIDDEN TESTS" not in cell.source, f"{where}: hidden tests belong in checks/"


# ---- nothing a kernel saw of a hidden test comes back (issue 29) ----------------------------------------------

ECHOING = textwrap.dedent('''\
    import torch

    # [inputs]
    torch.manual_seed(SEED)
    y = torch.randn(4, 5)
    # [observe]
    hidden_out = double(y)
    # [check]
    assert torch.equal(hidden_out, 2 * y), f"double(y) is wrong; yours is {hidden_out.tolist()} for y = {y.tolist()}"
''')


def test_a_hidden_message_that_formats_a_value_is_replaced_by_the_instructors_words(judge, tmp_path):
    """A hidden check's f-string would echo what the hidden kernel computed (which can pack the hidden code into
    numbers) and the hidden input: only a message written whole in the course's code is shown."""
    (tmp_path / "checks" / "ex" / "test_double.py").write_text(ECHOING)
    packing = ("import inspect\nimport torch\ndef double(x):\n"
               "    code = next(f.frame.f_locals['source'] for f in inspect.stack() if 'source' in f.frame.f_locals)\n"
               "    return torch.tensor([float(ord(c)) for c in code[:20]]) if x.shape == (4, 5) else 2 * x\n")
    result = verdicts(judge, packing)
    assert result.visible is None and result.hidden == HIDDEN_FAILED


def test_an_exception_in_the_hidden_kernel_is_told_without_its_type_text_or_line(judge):
    smuggling = ("import inspect\ndef double(x):\n    if x.shape == (2, 3):\n        return 2 * x\n"
                 "    source = next(f.frame.f_locals['source'] for f in inspect.stack() if 'source' in f.frame.f_locals)\n"
                 "    raise type(source[-40:], (ValueError,), {})(source)\n")
    result = verdicts(judge, smuggling)
    assert result.visible is None and result.hidden == HIDDEN_RAISED


def test_the_visible_kernel_never_gets_a_hidden_input_or_a_hidden_line(judge):
    trial = judge.trial("ex", "test_double", VISIBLE)
    encoded = trial.visible_code.split("_addnorm_observe(globals(), ")[1].split(", ")[0]
    assert set(observation.decode(eval(encoded))) == {"x"}
    assert "hidden_out" not in trial.visible_code and "double(y)" not in trial.visible_code


def test_short_strings_the_learner_did_not_write_are_not_quoted(tmp_path):
    (tmp_path / "checks" / "ex").mkdir(parents=True)
    secret.make(tmp_path / "checks")
    source = textwrap.dedent('''\
        # [observe]
        names = tuple_names()
        # [check]
        assert names == ["weight"], f"expected one parameter, weight; yours are {names}, and {names[0]} first"
    ''')
    trial = Judge(tmp_path).trial("ex", "test_double", source)
    learner = "def tuple_names():\n    return ['im' + 'po', chr(114) + chr(116), 'x']\n"   # 'x' is theirs
    message = judged(trial, learner).visible
    assert message.startswith("expected one parameter, weight; yours are [") and "'im'" not in message
    assert "impo" not in message and "'rt'" not in message and "'x'" in message


NAMES_CHECK = textwrap.dedent('''\
    # [observe]
    names = tuple_names()
    # [check]
    assert names[:1] == ["weight"], f"expected weight first; yours start {names[:COUNT]}"
''')


def test_only_the_strings_a_message_holds_are_looked_up_in_the_learners_text(tmp_path, monkeypatch):
    """20,000 distinct names from the kernel beside a learner text near its 200,000-character cap: only the names
    the message quotes are looked up there (each look-up can cost a millisecond; 11,000 of them cost 83 s)."""
    (tmp_path / "checks" / "ex").mkdir(parents=True)
    secret.make(tmp_path / "checks")
    trial = Judge(tmp_path).trial("ex", "test_double", NAMES_CHECK.replace("COUNT", "2"))
    learner = ("def tuple_names():\n    return ['b' + 'a' * 6 + str(i) + 'aaa' for i in range(20_000)]\n"
               + "# " + "a" * 199_000 + "\n")
    looked_up = []
    monkeypatch.setattr(judge_module, "quoted_strings",
                        lambda message, strings: looked_up.append(quoted_strings(message, strings)) or looked_up[-1])
    message = judged(trial, learner).visible
    assert message == "expected weight first; yours start […, …]", message
    assert sum(len(found) for found in looked_up) == 2          # the two names it quotes, of 20,000


def test_a_message_that_would_quote_too_many_of_the_kernels_strings_is_not_shown(tmp_path):
    (tmp_path / "checks" / "ex").mkdir(parents=True)
    secret.make(tmp_path / "checks")
    trial = Judge(tmp_path).trial("ex", "test_double", NAMES_CHECK.replace("COUNT", "200"))
    learner = "def tuple_names():\n    return ['n' + str(i) for i in range(150)]\n"
    assert judged(trial, learner).visible == TOO_MANY_QUOTED
    few = "def tuple_names():\n    return ['n' + str(i) for i in range(50)]\n"
    assert judged(trial, few).visible.startswith("expected weight first; yours start […, …, ")


def test_seed_is_a_keyed_hash_of_the_secret_for_each_test(tmp_path):
    key = bytes.fromhex(secret.make(tmp_path).read_text().strip())
    assert len(key) * 8 >= 128 and (tmp_path / "secret").stat().st_mode & 0o077 == 0
    seeds = {secret.seed_for(key, "ex", name) for name in ("test_a", "test_b")}
    assert len(seeds) == 2 and all(0 <= seed < 2 ** secret.SEED_BITS for seed in seeds)
    assert secret.seed_for(key, "ex", "test_a") == secret.seed_for(key, "ex", "test_a")
    assert secret.seed_for(bytes(16), "ex", "test_a") != secret.seed_for(key, "ex", "test_a")
    assert key.hex() not in str(seeds) and str(int.from_bytes(key, "big")) not in str(seeds)


def test_each_submission_draws_its_own_hidden_inputs_and_a_regrade_the_same(tmp_path):
    """What a submission learns of its hidden inputs (a side channel, its verdicts) is worth nothing to a changed one."""
    key = bytes.fromhex(secret.make(tmp_path).read_text().strip())
    first, changed = (secret.submission_digest(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(text)]))
                      for text in ("def f(x):\n    return x\n", "def f(x):\n    return +x\n"))
    assert secret.seed_for(key, "ex", "test_a", first) != secret.seed_for(key, "ex", "test_a", changed)
    assert secret.seed_for(key, "ex", "test_a", first) == secret.seed_for(key, "ex", "test_a", first)
    assert secret.seed_for(key, "ex", "test_a", first) != secret.seed_for(key, "ex", "test_a")


def test_the_grader_draws_a_notebooks_hidden_inputs_from_what_its_learner_wrote(judge):
    """SandboxedExecute gives each notebook's trials the digest of its code as graded: a changed answer or an added
    cell, other hidden inputs; a markdown cell, none (it runs nothing)."""
    from addnorm_grading.execute import SandboxedExecute
    from traitlets.config import Config

    def notebook(answer: str, added=None) -> nbformat.NotebookNode:
        cells = [nbformat.v4.new_code_cell(answer, metadata={"nbgrader": {"solution": True, "grade_id": "answer"}}),
                 added or nbformat.v4.new_markdown_cell("Notes"),
                 nbformat.v4.new_code_cell(VISIBLE, metadata={"nbgrader": {"grade": True, "grade_id": "test_double",
                                                                          "points": 1}})]
        return nbformat.v4.new_notebook(cells=cells)

    executor = SandboxedExecute(config=Config())
    executor.judge = judge
    resources = {"nbgrader": {"assignment": "ex"}}

    def seed(nb) -> int:
        return executor._prepare_trials(nb, resources)[2].namespace["SEED"]

    first = seed(notebook("def double(x):\n    return 2 * x\n"))
    assert first == seed(notebook("def double(x):\n    return 2 * x\n", nbformat.v4.new_markdown_cell("Mine")))
    assert first != seed(notebook("def double(x):\n    return x + x\n"))
    assert first != seed(notebook("def double(x):\n    return 2 * x\n", nbformat.v4.new_code_cell("# mine")))


def test_a_hidden_message_that_only_ends_with_the_graders_words_is_not_kept(judge):
    """The hidden kernel names its object's type; the visible check, run again on the hidden observations, formats
    it. A type named "<what it saw>: <a grader failure's words>" once kept the whole message, leak included."""
    from addnorm_grading.verdicts import GRADER_FAILURES, kernel_failure

    words = GRADER_FAILURES["KernelUnresponsive"]
    learner = (f"import torch\ndef double(x):\n    if 'y' in globals():\n"
               f"        return type(str(round(float(globals()['y'][0, 0]), 4)) + ': ' + {words!r}, (), {{}})()\n"
               f"    return 2 * x\n")
    result = verdicts(judge, learner)
    assert result.visible is None and result.hidden == HIDDEN_FAILED, result
    failure = kernel_failure([{"output_type": "error", "ename": "KernelUnresponsive"}])
    assert judge.trial("ex", "test_double", VISIBLE)._words(failure) == failure, "the grader's own failure is kept"


def test_a_kernels_cut_text_is_completed_only_from_the_visible_tests_strings(tmp_path):
    """A visible exception's text of 20 characters or more is completed to a course message it begins: never to a
    string of the hidden observing lines, which the visible kernel never saw."""
    checks = tmp_path / "checks"
    (checks / "ex").mkdir(parents=True)
    secret.make(checks)
    hidden_string = "a hidden probe's own message, that the learner has never seen anywhere"
    (checks / "ex" / "test_double.py").write_text(HIDDEN.replace("hidden_out = double(y)",
                                                                 f"hidden_out = double(y)\nnote = {hidden_string!r}"))
    learner = "def double(x):\n    raise ValueError('a hidden probe' + \"'s own message\")\n"
    result = verdicts(Judge(tmp_path), learner)
    assert "never seen" not in result.visible and "raised ValueError" in result.visible, result.visible


def test_a_hidden_line_the_learner_wrote_is_quoted_back_as_written(judge):
    """Blanking a hidden line inside the learner's own text would tell them their guess is one (an oracle); a
    hidden line they did not write stays blank."""
    line = "assert torch.equal(hidden_out, 2 * y), \"double must work for every shape (the secret test says so)\""
    trial = judge.trial("ex", "test_double", VISIBLE)
    assert line in trial.hidden_lines
    mine = f"guess = {line!r}"
    assert line in trial._safe(f"yours: {line}", set(), learner_text=mine)
    assert line not in trial._safe(f"yours: {line}", set(), learner_text="def double(x): ...")


def test_a_file_beside_the_notebook_is_part_of_what_draws_its_hidden_inputs(tmp_path):
    """A cell can run code from another file of its submission (`exec(open('notes.txt').read())`): the digest reads
    every file the kernels get, never a notebook (the code cells count) and never what a link points to."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("exec(open('notes.txt').read())")])
    (tmp_path / "notes.txt").write_text("print(1)")
    (tmp_path / "other.ipynb").write_text("{}")
    (tmp_path / "link").symlink_to("/etc/hostname")
    first = secret.submission_digest(nb, tmp_path)
    (tmp_path / "other.ipynb").write_text('{"cells": []}')
    assert secret.submission_digest(nb, tmp_path) == first
    (tmp_path / "notes.txt").write_text("print(2)")
    assert secret.submission_digest(nb, tmp_path) != first
    assert secret.submission_digest(nb) != secret.submission_digest(nb, tmp_path)


def test_a_check_that_runs_too_long_fails_that_test_and_says_so(judge):
    source = VISIBLE.replace("# [check]\n", "# [check]\nwhile True:\n    pass\n")
    trial = judge.trial("ex", "test_double", source)
    learner = "def double(x):\n    return 2 * x\n"
    result = trial.verdicts(kernel(trial.visible_code, learner), kernel(trial.hidden_code, learner), learner,
                            cpu_seconds=0.5)
    assert "more than 0.5 s of CPU time" in result.visible and result.visible == result.hidden


def _payload(value) -> list:
    return [{"output_type": "display_data", "data": {MIME: {"observation": observation.encode(value)}}}]


@pytest.mark.parametrize("values, says", [
    ({"out": torch.zeros(1).expand(3_000_000, 2_000_000)}, "more than 20,000,000 numbers"),   # 2 KB on the wire
    ({"out": ["ab"] * 200_000}, "more than 100,000 values"),
    ({"out": [[[[[[[[[[[[[[1]]]]]]]]]]]]]]}, "nests containers more than 12 deep"),
])
def test_an_observation_over_the_judges_limits_fails_that_test(judge, values, says):
    trial = judge.trial("ex", "test_double", VISIBLE)
    payload = _payload({"values": values, "raised": None})
    result = trial.verdicts(payload, payload, "")
    assert says in result.visible and result.hidden == HIDDEN_NO_RESULT


def _display_message(data: dict) -> dict:
    return {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {},
            "content": {"data": data, "metadata": {}, "transient": {}}}


def _kept_observations(outputs) -> list[int]:
    """The sizes of the observations among `outputs` that the judge would read (stand-ins count as 0)."""
    return [len(o["data"][MIME].get("observation", "")) for o in outputs
            if o.get("output_type") == "display_data" and MIME in o.get("data", {})]


def test_an_observing_cell_keeps_one_observation_no_larger_than_the_judge_reads():
    """A learner's kernel can display observation messages of any size, as many as it likes, from any cell: only
    the first of an observing cell is kept whole; the rest take no memory, and the judge refuses the cell."""
    from traitlets.config import Config

    from addnorm_grading.execute import OUTPUT_CHARS, SandboxedExecute

    executor = SandboxedExecute(config=Config())
    executor.reset_execution_trackers()                 # as nbclient does before it runs a notebook, and a cell
    executor.clear_before_next_output = False
    executor._observing_cells = frozenset({3})
    small, large = "A" * 1000, "B" * (observation.MAX_BYTES + 1)

    def run(index: int, texts: list[str]) -> list:
        outputs = []
        executor._output_chars, executor._output_cut = 0, False
        executor._observing, executor._observed = index in executor._observing_cells, False
        for text in texts:
            executor.output(outputs, _display_message({MIME: {"observation": text}}), None, index)
        return outputs

    assert _kept_observations(run(3, [small])) == [1000]
    flooded = run(3, [small] + [large] * 100)
    assert _kept_observations(flooded)[0] == 1000 and max(_kept_observations(flooded)[1:]) == 0
    assert len(str(flooded)) < 2 * OUTPUT_CHARS
    assert _kept_observations(run(3, [large])) == [0], "an observation larger than the judge reads is not kept"
    assert _kept_observations(run(2, [small])) == [0], "a cell that observes nothing keeps no observation"
    with pytest.raises(ObservationError):
        observation.read(flooded)
