"""Cheating submissions, as a learner could write them in an afternoon: each is a piece of code placed at the end of
a learner's last solution cell. tests/test_forgery.py grades each with a plain `nbgrader autograde` and checks that
it scores no more than the same notebook without it, and that no line of a hidden test reaches its feedback.

`base` is the notebook the cheat is added to: "blank" (the released exercise, untouched, which scores zero) or
"garbage" (the exercise's GARBAGE: solutions that return the right shapes and wrong values). CHEATS work on any
exercise; SPECIFIC[assignment] holds those written against one exercise's classes.
"""

from __future__ import annotations

# Per exercise: wrong values of the right shapes (a base for the cheats that only change how the tests run).
_GARBAGE_05 = '''
def sinusoidal_encoding(max_len, d_model):
    return torch.zeros(max_len, d_model)


class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model, max_len=512):
        super().__init__()
        self.d_model = d_model
        self.tokens = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens):
        return torch.zeros(*tokens.shape, self.d_model)
'''

_GARBAGE_01 = '''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return torch.zeros_like(x) + 0 * sublayer(x)
'''

_GARBAGE_02 = '''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return torch.zeros_like(x) * self.weight + 0 * self.bias


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return torch.zeros_like(x) * self.weight
'''

_GARBAGE_03 = '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)

    def forward(self, x, src_key_padding_mask=None):
        return torch.zeros_like(x)


class Encoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.norm = norm

    def forward(self, x, src_key_padding_mask=None):
        return torch.zeros_like(x)
'''

_GARBAGE_04 = '''
def causal_mask(n):
    return torch.zeros(n, n, dtype=torch.bool)


class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norms = nn.ModuleList(LayerNorm(d_model) for _ in range(3))

    def forward(self, x, memory):
        return torch.zeros_like(x)


class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.norm = norm

    def forward(self, x, memory):
        return torch.zeros_like(x)
'''

_GARBAGE_06 = '''
def _garbage_forward(self, src, tgt, src_key_padding_mask=None, tgt_key_padding_mask=None):
    return torch.zeros(*tgt.shape, self.generator.out_features) + 0 * self.generator.bias


WholeTransformer.forward = _garbage_forward


def teacher_forcing_loss(model, src, tgt):
    return (model(src, tgt[:, :-1]) * 0).sum() + 1.0


@torch.no_grad()
def greedy_decode(model, src, max_len, bos, eos, src_key_padding_mask=None):
    return torch.full((src.shape[0], max_len + 1), bos, dtype=torch.long)
'''

GARBAGE = {"01_residual": _GARBAGE_01, "02_layer_norm": _GARBAGE_02, "03_encoder_stack": _GARBAGE_03,
           "04_decoder_stack": _GARBAGE_04, "05_positional_encoding": _GARBAGE_05, "06_whole_transformer": _GARBAGE_06}

# A tensor subclass that says yes to every comparison (the lying cheats return it from wrong solutions).
_LIAR = '''
class _Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal", "eq", "__eq__", "isfinite", "all"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
'''

# Reporters rewritten in the learner's kernel (issue 29): what the kernel says about the learner's objects is forged on
# its way out, from lookups made while the learner's cells ran (answers for the inputs the notebook shows, counts,
# flags) and never from the hidden inputs. `_REWRITE` is the cheat's own `_rewrite(source, values)`: it gets the
# observing code being reported on and the {"values", "raised"} dict, and changes the dict in place.
_THROUGH_ENCODE = """
import sys as _sys
import addnorm_grading.observation as _observation
_original_encode = _observation.encode
def _forged_encode(data):
    caller = _sys._getframe(1).f_locals
    if isinstance(data, dict) and "values" in data and "source" in caller:
        _rewrite(caller["source"], data)
    return _original_encode(data)
_observation.encode = _forged_encode
"""
_THROUGH_DISPLAY = """
import IPython.display as _ipython_display
import addnorm_grading.observation as _observation
_original_display = _ipython_display.display
def _forged_display(*objects, **kwargs):
    for obj in objects:
        if isinstance(obj, dict) and _observation.MIME in obj:
            data = _observation.decode(obj[_observation.MIME]["observation"])
            _rewrite("", data)
            obj[_observation.MIME]["observation"] = _observation.encode(data)
    return _original_display(*objects, **kwargs)
_ipython_display.display = _forged_display
"""
# Exercise 5: the first test's answers as the notebook shows them (sizes (10, 8), (1, 2), (1000, 64)), made by the
# library before it is withheld; every raised exception dropped.
_REWRITE_05 = """
import addnorm as _addnorm
_LOOKUP = {size: _addnorm.sinusoidal_encoding(*size) for size in ((10, 8), (1, 2), (1000, 64), (50, 16))}
def _rewrite(source, data):
    data["raised"] = None
    found = data["values"]
    found.update(pe=_LOOKUP[(10, 8)], one_pair=_LOOKUP[(1, 2)], long_table=_LOOKUP[(1000, 64)], is_library=False)
    found.setdefault("tables", [_LOOKUP[(50, 16)]] * 4)
    found.setdefault("rotation_table", _LOOKUP[(50, 16)][:40, :8])
"""
# Exercise 1: the shapes test as the notebook shows it (32 parameters, the sublayer called once), every gradient there,
# no library class; every raised exception dropped.
_REWRITE_01 = """
def _rewrite(source, data):
    data["raised"] = None
    found = data["values"]
    if isinstance(found.get("results"), list):
        found["results"] = [(r[0], 32, [(3, 7, 16)]) if isinstance(r, tuple) and len(r) == 3 else r
                            for r in found["results"]]
    found["judge_classes"] = []
"""
# Exercise 6: the shapes test as the notebook shows it (the library's state_dict shapes, zeros of the logits' shape,
# no library call, no subclass); every raised exception dropped.
_REWRITE_06 = """
import addnorm as _addnorm
_SMALL = dict(d_model=32, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=64, dropout=0.0, max_len=32)
_SHAPES = {name: tuple(t.shape) for name, t in _addnorm.Transformer(13, 11, **_SMALL).state_dict().items()}
def _rewrite(source, data):
    data["raised"] = None
    data["values"].update(model_shapes=dict(_SHAPES), all_logits=[torch.zeros(3, 6, 11), torch.zeros(3, 6, 11)],
                          library_forward=[], subclasses_library=False, diverged=False)
"""

# Code that smuggles what the kernel sees into the feedback: the running cell's source, the inputs' history.
_SOURCE = "get_ipython().user_ns['_ih'][-1]"

# Self-descriptions rewritten on their way out of the kernel (issue 29): the reporter wrapped, modules that hide what
# they own, gradients that exist and are wrong, state kept from the first call. Written against exercises 3 and 4.
_FORGE_ENCODE = '''
import addnorm_grading.observation as _obs
_real_encode = _obs.encode
def _forged_encode(values):
    found = values.get("values") if isinstance(values, dict) else None
    if isinstance(found, dict):
        _forge(found)
    return _real_encode(values)
_obs.encode = _forged_encode
'''

_FORGE_DISPLAY = '''
import IPython.display as _display
import addnorm_grading.observation as _obs
_real_display = _display.display
def _forged_display(*objects, **kwargs):
    rewritten = []
    for item in objects:
        if isinstance(item, dict) and _obs.MIME in item:
            data = _obs.decode(item[_obs.MIME]["observation"])
            data["raised"] = None
            _forge(data["values"])
            item = {_obs.MIME: {"observation": _obs.encode(data)}}
        rewritten.append(item)
    return _real_display(*rewritten, **kwargs)
_display.display = _forged_display
'''

# what the encoder's and decoder's visible checks read, made to look right (counts, identities, chained outputs)
_FORGE_STACK = '''
def _forge(found):
    import torch.nn.functional as F
    if isinstance(found.get("results"), list):           # (output, count) or (output, output on a changed input)
        found["results"] = [(r[0], 128 if isinstance(r[1], int) else r[0]) if isinstance(r, tuple) and len(r) == 2
                            else r for r in found["results"]]
    if "per_layer" in found and "total" in found:
        found["total"] = 4 * found["per_layer"]
    if "same_object" in found:
        found["same_object"] = [[i == j for j in range(4)] for i in range(4)]
    if "shares_storage" in found:
        found["shares_storage"] = [[False] * 4 for _ in range(4)]
    for name in ("out", "pre_out"):
        if isinstance(found.get(name), torch.Tensor):
            found[name.replace("out", "stacked") if name == "out" else "pre_stacked"] = found[name]
    for name in ("chained", "pre_chained"):
        if isinstance(found.get(name.replace("chained", "out")), torch.Tensor):
            found[name] = found[name.replace("chained", "out")]
    for name in ("last_only", "first_repeated", "own_memory", "passed_on"):
        if isinstance(found.get(name), torch.Tensor):
            found[name] = torch.randn_like(found[name])
    for name in ("in_module_list",):
        if name in found:
            found[name] = True
'''

CHEATS: dict[str, tuple[str, str]] = {
    # ---- changing how the tests run ------------------------------------------------------------------------
    "input_transformer_pass": ("blank", '''
get_ipython().input_transformers_cleanup.append(lambda lines: ["pass\\n"])
'''),
    "input_transformer_try_except": ("blank", '''
def _wrap(lines):
    return ["try:\\n"] + ["    " + line for line in lines] + ["\\n", "except BaseException:\\n", "    pass\\n"]
get_ipython().input_transformers_cleanup.append(_wrap)
'''),
    "ast_transformer_empty_cells": ("blank", '''
import ast
class _Empty(ast.NodeTransformer):
    def visit_Module(self, node):
        node.body = [ast.Pass()]
        return node
get_ipython().ast_transformers.append(_Empty())
'''),
    "ast_transformer_no_asserts": ("garbage", '''
import ast
class _NoAsserts(ast.NodeTransformer):
    def visit_Assert(self, node):
        return ast.Pass()
    def visit_Raise(self, node):
        return ast.Pass()
get_ipython().ast_transformers.append(_NoAsserts())
'''),
    "custom_exception_handler": ("blank", '''
get_ipython().set_custom_exc((BaseException,), lambda shell, etype, value, tb, tb_offset=None: None)
'''),
    "replaced_showtraceback": ("blank", '''
get_ipython().showtraceback = lambda *args, **kwargs: None
get_ipython()._showtraceback = lambda *args, **kwargs: None
'''),
    "settrace_jumps_over_asserts": ("garbage", '''
import linecache, sys, threading
def _jump(frame, event, arg):
    if event == "line":
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
        if line.startswith(("assert", "raise")):
            try:
                frame.f_lineno = frame.f_lineno + 1
            except ValueError:
                pass
    return _jump
sys.settrace(lambda frame, event, arg: _jump)
threading.settrace(lambda frame, event, arg: _jump)
'''),
    "pre_run_hook_swallows_by_rewriting": ("blank", '''
def _neuter(info):
    get_ipython().user_ns["AssertionError"] = Warning
get_ipython().events.register("pre_run_cell", _neuter)
'''),
    "patched_builtins": ("garbage", '''
import builtins
builtins.isinstance = lambda *args: True
builtins.all = lambda *args: True
builtins.any = lambda *args: False
builtins.abs = lambda *args: 0
builtins.max = lambda *args, **kwargs: 0
builtins.min = lambda *args, **kwargs: 0
builtins.sum = lambda *args, **kwargs: 30 * 8
'''),
    "patched_torch_comparisons": ("garbage", '''
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.Tensor.allclose = lambda *args, **kwargs: True
torch.Tensor.__eq__ = lambda *args, **kwargs: True
torch.Tensor.__bool__ = lambda self: True
torch.Tensor.item = lambda self: 0.0
torch.isfinite = lambda t: torch.ones((), dtype=torch.bool)
'''),
    # ---- carrying the hidden tests out into the feedback ------------------------------------------------------
    "pre_run_hook_prints_source": ("blank", '''
get_ipython().events.register("pre_run_cell", lambda info: print(info.raw_cell))
'''),
    "post_run_hook_displays_source": ("blank", '''
from IPython.display import display
get_ipython().events.register("post_run_cell", lambda result: display(result.info.raw_cell))
'''),
    "update_display_of_an_earlier_output": ("blank", f'''
from IPython.display import display
_handle = display("my notes", display_id=True)
get_ipython().events.register("pre_run_cell", lambda info: _handle.update(info.raw_cell))
'''),
    "displayhook_result": ("blank", '''
get_ipython().events.register("post_run_cell", lambda result: get_ipython().displayhook(result.info.raw_cell))
'''),
    "prints_history_In": ("blank", '''
get_ipython().events.register("post_run_cell", lambda result: print(get_ipython().user_ns["In"]))
'''),
    "thread_prints_history": ("blank", '''
import threading, time
def _leak():
    for _ in range(600):
        print(get_ipython().user_ns["_ih"][-1], flush=True)
        time.sleep(0.05)
threading.Thread(target=_leak, daemon=True).start()
'''),
    "stderr_carries_source": ("blank", '''
import sys
get_ipython().events.register("pre_run_cell", lambda info: sys.stderr.write(info.raw_cell))
'''),
    "kill_kernel_at_first_test": ("blank", '''
import os, signal
get_ipython().events.register("pre_run_cell", lambda info: os.kill(os.getpid(), signal.SIGKILL)
                              if "[observe]" in info.raw_cell or "_addnorm" in info.raw_cell else None)
'''),
    "exit_kernel_at_first_test": ("blank", '''
import os
get_ipython().events.register("pre_run_cell", lambda info: os._exit(0)
                              if "[observe]" in info.raw_cell or "_addnorm" in info.raw_cell else None)
'''),
    "replaced_observe_function": ("garbage", '''
import addnorm_grading.observation as _obs
_obs.observe = lambda namespace, inputs, source, names: None
'''),
    # ---- channels out of the hidden kernel (issue 29): what it saw, packed into what it sends back --------------
    # the observing code (hidden lines and all) and every value of the namespace, as a widget's state in a comm
    "widget_state_carries_the_source": ("garbage", '''
from ipykernel.comm import Comm as _Comm
def _send_state(result):
    namespace = get_ipython().user_ns
    state = {"source": "\\n".join(namespace["_ih"]), "values": {k: repr(v)[:2000] for k, v in list(namespace.items())
                                                           if not k.startswith("_")}}
    try:
        comm = _Comm(target_name="jupyter.widget", data={"state": state, "buffer_paths": []})
        comm.send({"method": "update", "state": state, "buffer_paths": []})
    except Exception:
        pass
get_ipython().events.register("post_run_cell", _send_state)
'''),
    # the observing code as an exception's text and as the lines of its frames
    "exception_text_carries_the_source": ("garbage", '''
import addnorm_grading.observation as _obs
_real_observe = _obs.observe
def _telling_observe(namespace, inputs, source, names, resume_at=0):
    _obs.describe = lambda error: (_obs.RAISED, "RuntimeError", source[-290:],
                                   tuple(source[i:i + 290] for i in range(0, len(source), 290))[:8], 1)
    head = "raise RuntimeError(" + repr(source[-290:]) + ")\\n"
    return _real_observe(namespace, inputs, head + source, names, 0)
_obs.observe = _telling_observe
'''),
    # the observing code as short strings (two letters each) and as numbers, in place of every value
    "short_strings_and_numbers_carry_the_source": ("garbage", '''
import torch as _torch
import addnorm_grading.observation as _obs
_real_encode = _obs.encode
def _packing_encode(data):
    source = "\\n".join(get_ipython().user_ns["_ih"])[-20000:]
    if isinstance(data, dict) and isinstance(data.get("values"), dict):
        for name in list(data["values"]):
            data["values"][name] = [source[i:i + 2] for i in range(0, 600, 2)]
        data["values"]["_packed"] = _torch.tensor([float(ord(c)) for c in source])
    return _real_encode(data)
_obs.encode = _packing_encode
'''),
    # observations that would stall or crash the judge: nested 5,000 deep (deeper than Python recurses), a stride-0 tensor of
    # 10^12 elements, 200,000 references to one string
    "observation_nested_too_deep": ("garbage", '''
import addnorm_grading.observation as _obs
_real_encode = _obs.encode
import sys as _sys
_sys.setrecursionlimit(20_000)                  # so that torch.save can write it
def _deep_encode(data):
    if isinstance(data, dict) and isinstance(data.get("values"), dict):
        nested = []
        for _ in range(5000):
            nested = [nested]
        data["values"] = {name: nested for name in data["values"]}
    return _real_encode(data)
_obs.encode = _deep_encode
'''),
    "observation_of_an_expanded_tensor": ("garbage", '''
import torch as _torch
import addnorm_grading.observation as _obs
_real_encode = _obs.encode
def _huge_encode(data):
    if isinstance(data, dict) and isinstance(data.get("values"), dict):
        data["values"] = {name: _torch.zeros(1).expand(10 ** 12) for name in data["values"]}
    return _real_encode(data)
_obs.encode = _huge_encode
'''),
    "observation_of_many_references": ("garbage", '''
import addnorm_grading.observation as _obs
_real_encode = _obs.encode
def _many_encode(data):
    if isinstance(data, dict) and isinstance(data.get("values"), dict):
        data["values"] = {name: ["x" * 290] * 200_000 for name in data["values"]}
    return _real_encode(data)
_obs.encode = _many_encode
'''),
}


# Written against one exercise's own classes and functions.
SPECIFIC: dict[str, dict[str, tuple[str, str]]] = {
    "05_positional_encoding": {
        "reporter_rewritten_through_encode": ("blank", _REWRITE_05 + _THROUGH_ENCODE),
        "reporter_rewritten_through_display": ("blank", _REWRITE_05 + _THROUGH_DISPLAY),
        # a learned position table (a zero one, as garbage's sinusoidal_encoding makes) hidden from parameters() and
        # named_parameters(); the token table used detached, with a 0 · weight.sum() term (its gradient exists, zero);
        # the positions kept from the first call
        "parameters_hidden_gradient_detached_state_kept": ("garbage", '''
class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model, max_len=512):
        super().__init__()
        self.d_model = d_model
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.position_table = nn.Parameter(sinusoidal_encoding(max_len, d_model))
    def parameters(self, recurse=True):
        return iter([self.tokens.weight])
    def named_parameters(self, *args, **kwargs):
        return iter([("tokens.weight", self.tokens.weight)])
    def forward(self, tokens):
        if not hasattr(self, "_kept"):
            self._kept = self.position_table[: tokens.shape[1]]
        return self.tokens.weight.detach()[tokens] + self._kept + 0 * self.tokens.weight.sum()
'''),
        "lying_tensor_subclass": ("garbage", _LIAR + _GARBAGE_05.replace("return torch.zeros(max_len, d_model)", "return torch.zeros(max_len, d_model).as_subclass(_Liar)")
            .replace("return torch.zeros(*tokens.shape, self.d_model)",
                     "return torch.zeros(*tokens.shape, self.d_model).as_subclass(_Liar)")),
        "lying_object": ("garbage", '''
class _Yes:
    shape = property(lambda self: _Shape())
    dtype = property(lambda self: torch.float32)
    def __eq__(self, other): return True
    def __bool__(self): return True
    def __getattr__(self, name): return lambda *args, **kwargs: self
    def __getitem__(self, key): return self
    def __sub__(self, other): return self
    __rsub__ = __add__ = __mul__ = __rmul__ = __truediv__ = __abs__ = __sub__
class _Shape(tuple):
    def __eq__(self, other): return True
def sinusoidal_encoding(max_len, d_model):
    return _Yes()
class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model, max_len=512):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
    def forward(self, tokens):
        return _Yes()
'''),
        "source_in_exception_text": ("blank", f'''
def sinusoidal_encoding(max_len, d_model):
    raise ValueError({_SOURCE})
class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model, max_len=512):
        super().__init__()
        raise AssertionError({_SOURCE})
'''),
        "source_in_class_and_parameter_names": ("blank", f'''
def _named(text):
    return "".join(ch if ch.isalnum() else "_" for ch in text)[:250]
class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model, max_len=512):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.register_parameter(_named({_SOURCE}), nn.Parameter(torch.zeros(1)))
    def forward(self, tokens):
        return type({_SOURCE}, (), {{}})()
def sinusoidal_encoding(max_len, d_model):
    return type({_SOURCE}, (), {{}})()
'''),
    },
    "02_layer_norm": {
        "lying_tensor_subclass": ("garbage", _LIAR + _GARBAGE_02.replace("return torch.zeros_like(x) * self.weight + 0 * self.bias",
                            "return (torch.zeros_like(x) * self.weight + 0 * self.bias).as_subclass(_Liar)")),
        "source_in_exception_text": ("blank", f'''
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        raise ValueError({_SOURCE})
class RMSNorm(LayerNorm):
    pass
'''),
        "source_in_class_and_parameter_names": ("blank", f'''
def _named(text):
    return "".join(ch if ch.isalnum() else "_" for ch in text)[:250]
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.register_parameter(_named({_SOURCE}), nn.Parameter(torch.ones(d_model)))
    def forward(self, x):
        return type({_SOURCE}, (), {{}})()
RMSNorm = LayerNorm
'''),
    },
    "03_encoder_stack": {
        "lying_tensor_subclass": ("garbage", _LIAR + _GARBAGE_03.replace("return torch.zeros_like(x)", "return torch.zeros_like(x).as_subclass(_Liar)")),
        "rewrites_counts_through_encode": ("garbage", _FORGE_STACK + _FORGE_ENCODE),
        "rewrites_observation_through_display": ("garbage", _FORGE_STACK + _FORGE_DISPLAY),
        "named_parameters_hide_a_third_norm": ("garbage", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
    def named_parameters(self, *args, **kwargs):
        return ((n, p) for n, p in super().named_parameters(*args, **kwargs) if "norm3" not in n)
    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters())
    def named_modules(self, *args, **kwargs):
        return ((n, m) for n, m in super().named_modules(*args, **kwargs) if "norm3" not in n)
    def forward(self, x, src_key_padding_mask=None):
        attend = lambda h: self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask)
        if self.norm_first:
            x = x + self.dropout(attend(self.norm1(x)))
            return self.norm3(x + self.dropout(self.feed_forward(self.norm2(x))))     # a third norm, hidden
        x = self.norm1(x + self.dropout(attend(x)))
        return self.norm3(self.norm2(x + self.dropout(self.feed_forward(x))))
'''),
        "gradients_exist_and_are_zero": ("garbage", '''
class Encoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.norm = norm
    def forward(self, x, src_key_padding_mask=None):
        with torch.no_grad():                    # the right values, detached
            for layer in self.layers:
                x = layer(x, src_key_padding_mask=src_key_padding_mask)
            x = x if self.norm is None else self.norm(x)
        return x + 0 * sum(p.sum() for p in self.parameters())   # every gradient exists, and is zero
'''),
        "state_kept_from_the_first_call": ("garbage", '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.seen = {}
    def forward(self, x, src_key_padding_mask=None):
        key = tuple(x.shape)
        if key not in self.seen:                 # the first output at each size, kept
            attend = lambda h: self.self_attn(h, h, h, key_padding_mask=src_key_padding_mask)
            if self.norm_first:
                h = x + self.dropout(attend(self.norm1(x)))
                self.seen[key] = h + self.dropout(self.feed_forward(self.norm2(h)))
            else:
                h = self.norm1(x + self.dropout(attend(x)))
                self.seen[key] = self.norm2(h + self.dropout(self.feed_forward(h)))
        return self.seen[key]
'''),
        "source_in_exception_text": ("blank", f'''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        raise ValueError({_SOURCE})
class Encoder(EncoderLayer):
    pass
'''),
        "source_in_class_and_parameter_names": ("blank", f'''
def _named(text):
    return "".join(ch if ch.isalnum() else "_" for ch in text)[:250]
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.register_parameter(_named({_SOURCE}), nn.Parameter(torch.ones(d_model)))
    def forward(self, x, src_key_padding_mask=None):
        return type({_SOURCE}, (), {{}})()
class Encoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layer = layer
    def forward(self, x, src_key_padding_mask=None):
        return type({_SOURCE}, (), {{}})()
'''),
    },
    "01_residual": {
        # (issue 29) the visible shapes test's observations forged (the count, the calls); a second LayerNorm hidden
        # from modules() and parameters() and applied after the first (γ and β of the test reach only the first);
        # γ and β used detached, with a 0 · weight.sum() term (their gradients exist, and are zero)
        "reporter_rewritten_through_encode": ("garbage", _REWRITE_01 + _THROUGH_ENCODE),
        "reporter_rewritten_through_display": ("garbage", _REWRITE_01 + _THROUGH_DISPLAY),
        "hidden_second_norm_and_detached_parameters": ("garbage", '''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.norm, self.dropout = LayerNorm(d_model), nn.Dropout(dropout)
        self.hidden = [LayerNorm(d_model)]           # a plain list: modules() and parameters() never show it
    def _normalize(self, t):
        n = self.norm
        once = nn.functional.layer_norm(t, t.shape[-1:], n.weight.detach(), n.bias.detach(), 1e-5)
        return self.hidden[0](once) + 0 * (n.weight.sum() + n.bias.sum())
    def forward(self, x, sublayer):
        if self.norm_first:
            return x + self.dropout(sublayer(self._normalize(x)))
        return self._normalize(x + self.dropout(sublayer(x)))
'''),
        "lying_tensor_subclass": ("garbage", _LIAR + '''class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm = LayerNorm(d_model)
    def forward(self, x, sublayer):
        return (torch.zeros_like(x) + 0 * sublayer(x)).as_subclass(_Liar)
'''),
        "source_in_exception_text": ("blank", f'''
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0, norm_first=False):
        super().__init__()
        raise ValueError({_SOURCE})
'''),
        "source_in_class_and_parameter_names": ("blank", f'''
def _named(text):
    return "".join(ch if ch.isalnum() else "_" for ch in text)[:250]
class AddNorm(nn.Module):
    def __init__(self, d_model, dropout=0.0, norm_first=False):
        super().__init__()
        self.register_parameter(_named({_SOURCE}), nn.Parameter(torch.zeros(1)))
    def forward(self, x, sublayer):
        return type({_SOURCE}, (), {{}})()
'''),
    },
    "04_decoder_stack": {
        "lying_tensor_subclass": ("garbage", _LIAR + _GARBAGE_04.replace("return torch.zeros_like(x)", "return torch.zeros_like(x).as_subclass(_Liar)")
            .replace("return torch.zeros(n, n, dtype=torch.bool)", "return torch.zeros(n, n, dtype=torch.bool).as_subclass(_Liar)")),
        "rewrites_counts_through_encode": ("garbage", _FORGE_STACK + _FORGE_ENCODE),
        "rewrites_observation_through_display": ("garbage", _FORGE_STACK + _FORGE_DISPLAY + '''
def causal_mask(n):
    return torch.ones(n, n).triu(diagonal=1)     # a float mask: the display says bool
_real_forge = _forge
def _forge(found):
    _real_forge(found)
    for name in ("mask", "hidden_masks"):
        value = found.get(name)
        if isinstance(value, torch.Tensor):
            found[name] = value.bool()
        elif isinstance(value, list):
            found[name] = [m.bool() if isinstance(m, torch.Tensor) else m for m in value]
'''),
        "named_parameters_hide_a_fourth_norm": ("garbage", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norms = nn.ModuleList(LayerNorm(d_model) for _ in range(3))
        self.extra = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
    def named_parameters(self, *args, **kwargs):
        return ((n, p) for n, p in super().named_parameters(*args, **kwargs) if "extra" not in n)
    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters())
    def named_modules(self, *args, **kwargs):
        return ((n, m) for n, m in super().named_modules(*args, **kwargs) if "extra" not in n)
    def forward(self, x, memory):
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(diagonal=1)   # garbage's causal_mask is wrong
        sublayers = (lambda h: self.self_attn(h, h, h, attn_mask=mask), lambda h: self.cross_attn(h, memory, memory),
                     self.feed_forward)
        for norm, sublayer in zip(self.norms, sublayers):
            x = x + self.dropout(sublayer(norm(x))) if self.norm_first else norm(x + self.dropout(sublayer(x)))
        return self.extra(x)                     # a fourth norm, hidden
'''),
        "gradients_exist_and_are_zero": ("garbage", '''
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.norm = norm
    def forward(self, x, memory):
        with torch.no_grad():                    # the right values, detached
            for layer in self.layers:
                x = layer(x, memory)
            x = x if self.norm is None else self.norm(x)
        return x + 0 * sum(p.sum() for p in self.parameters()) + 0 * memory.sum()   # gradients exist, and are zero
'''),
        "state_kept_from_the_first_call": ("garbage", '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norms = nn.ModuleList(LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.seen = {}
    def forward(self, x, memory):
        key = (tuple(x.shape), tuple(memory.shape))
        if key not in self.seen:                 # the first output at each size, kept
            mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(diagonal=1)   # garbage's causal_mask is wrong
            sublayers = (lambda h: self.self_attn(h, h, h, attn_mask=mask),
                         lambda h: self.cross_attn(h, memory, memory), self.feed_forward)
            for norm, sublayer in zip(self.norms, sublayers):
                x = x + self.dropout(sublayer(norm(x))) if self.norm_first else norm(x + self.dropout(sublayer(x)))
            self.seen[key] = x
        return self.seen[key]
'''),
        "source_in_exception_text": ("blank", f'''
def causal_mask(n):
    raise ValueError({_SOURCE})
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        raise ValueError({_SOURCE})
class Decoder(DecoderLayer):
    pass
'''),
        "source_in_class_and_parameter_names": ("blank", f'''
def _named(text):
    return "".join(ch if ch.isalnum() else "_" for ch in text)[:250]
def causal_mask(n):
    return type({_SOURCE}, (), {{}})()
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.register_parameter(_named({_SOURCE}), nn.Parameter(torch.ones(d_model)))
    def forward(self, x, memory):
        return type({_SOURCE}, (), {{}})()
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layer = layer
    def forward(self, x, memory):
        return type({_SOURCE}, (), {{}})()
'''),
    },
    "06_whole_transformer": {
        "reporter_rewritten_through_encode": ("blank", _REWRITE_06 + _THROUGH_ENCODE),
        "reporter_rewritten_through_display": ("blank", _REWRITE_06 + _THROUGH_DISPLAY),
        # a loss of the right value whose gradients exist and are zero (logits detached, plus 0 · logits.sum())
        "loss_detached_gradients_zero": ("garbage", '''
def teacher_forcing_loss(model, src, tgt):
    logits = model(src, tgt[:, :-1], src == PAD, tgt[:, :-1] == PAD)
    flat = logits.detach().reshape(-1, logits.shape[-1])
    return F.cross_entropy(flat, tgt[:, 1:].reshape(-1), ignore_index=PAD) + 0 * logits.sum()
'''),
        "lying_tensor_subclass": ("garbage", _LIAR + _GARBAGE_06.replace("+ 0 * self.generator.bias", "+ 0 * self.generator.bias).as_subclass(_Liar)")
            .replace("return torch.zeros(*tgt.shape", "return (torch.zeros(*tgt.shape")
            .replace("return torch.full((src.shape[0], max_len + 1), bos, dtype=torch.long)",
                     "return torch.full((src.shape[0], max_len + 1), bos, dtype=torch.long).as_subclass(_Liar)")),
        "source_in_exception_text": ("blank", f'''
def _raising(self, *args, **kwargs):
    raise ValueError({_SOURCE})
WholeTransformer.forward = _raising
def teacher_forcing_loss(model, src, tgt):
    raise ValueError({_SOURCE})
def greedy_decode(model, src, max_len, bos, eos, src_key_padding_mask=None):
    raise AssertionError({_SOURCE})
'''),
        "source_in_class_and_parameter_names": ("blank", f'''
def _named(text):
    return "".join(ch if ch.isalnum() else "_" for ch in text)[:250]
def _named_forward(self, *args, **kwargs):
    self.register_parameter(_named({_SOURCE}), nn.Parameter(torch.ones(1)))
    return type({_SOURCE}, (), {{}})()
WholeTransformer.forward = _named_forward
def teacher_forcing_loss(model, src, tgt):
    return type({_SOURCE}, (), {{}})()
def greedy_decode(model, src, max_len, bos, eos, src_key_padding_mask=None):
    return type({_SOURCE}, (), {{}})()
'''),
    },
}

# The course's own library loaded afresh from its files under another name (the kernel imports addnorm, so it can read
# them): the reference answers of a blank notebook, untouched by the _withhold of the helpers cell or a hidden check,
# which only rewrites the functions of the module already imported.
_FRESH_LIBRARY = """
import importlib.util as _util, os as _os, sys as _sys, addnorm as _installed
_folder = _os.path.dirname(_installed.__file__)
_spec = getattr(_util, "spec_from" "_file_location")("_fresh_addnorm", _os.path.join(_folder, "__init__.py"),
                                                     submodule_search_locations=[_folder])
_fresh = _util.module_from_spec(_spec)
_sys.modules["_fresh_addnorm"] = _fresh
_spec.loader.exec_module(_fresh)
for _name in NAMES:
    globals()[_name] = getattr(_fresh, _name)
"""
_LIBRARY_ANSWERS = {"01_residual": ["AddNorm"], "02_layer_norm": ["LayerNorm", "RMSNorm"],
                    "03_encoder_stack": ["EncoderLayer", "Encoder"],
                    "04_decoder_stack": ["DecoderLayer", "Decoder", "causal_mask"],
                    "05_positional_encoding": ["sinusoidal_encoding", "Embedding"]}
for _assignment, _names in _LIBRARY_ANSWERS.items():
    SPECIFIC.setdefault(_assignment, {})["fresh_copy_of_the_library"] = (
        "blank", _FRESH_LIBRARY.replace("NAMES", repr(_names)))

# Out of scope, and recorded as such (tests/test_forgery.py, the guide says so): code that passes torch's own
# implementation off as the learner's. Exercise 2's guard against built-in norms runs in the learner's process, so
# a learner who switches it off around a call to F.layer_norm keeps every point today.
OUT_OF_SCOPE: dict[str, dict[str, str]] = {
    "02_layer_norm": {"builtin_norm_behind_the_guards_back": '''
import torch.nn.functional as F
from torch.utils._python_dispatch import _disable_current_modes
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x):
        with _disable_current_modes(), torch._C.DisableTorchFunction():
            return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
class RMSNorm(LayerNorm):
    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps)
        del self.bias
    def forward(self, x):
        with _disable_current_modes(), torch._C.DisableTorchFunction():
            return F.rms_norm(x, (self.d_model,), self.weight, self.eps)
'''},
}
