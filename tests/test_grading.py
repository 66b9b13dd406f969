"""The grading pipeline end to end (issue 5), in temporary nbgrader course directories.

One `nbgrader autograde` run grades a class of made-up students: the instructor solutions, the untouched learner
notebooks, a submission whose test cells were rewritten or deleted, one that never returns, and one that is not
a notebook at all. A second course, graded at the same time, holds one submission per classic mistake — each a
small text replacement of the solution code, listed in MISTAKES — and a third one submission per correct program
written differently from the solution (ALTERNATIVES, full marks) and per shortcut (SHORTCUTS). Each course is one
`nbgrader autograde` run (students = submissions). Every notebook's kernel imports torch, so the whole module
takes several minutes (marked slow).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from addnorm_grading import coursework, submissions
from addnorm_grading.verdicts import SPLIT, visible_only


pytestmark = pytest.mark.slow

ASSIGNMENTS = dict(coursework.assignments())            # assignment id -> notebook name
CELL_TIMEOUT = 30                                    # seconds per cell in these runs (the config says 60)

# name -> (assignment, [(text in the solution code, its replacement), ...]). Each must cost points, but never all of
# a notebook's (partial credit).
_PRE_LN = "return x + self.dropout(sublayer(self.norm(x)))"
_POST_LN = "return self.norm(x + self.dropout(sublayer(x)))"
_LN_RETURN = "return centered / torch.sqrt(variance + self.eps) * self.weight + self.bias"
_LN_MEAN = "mean = x.mean(dim=-1, keepdim=True)"
_LN_VARIANCE = "variance = centered.pow(2).mean(dim=-1, keepdim=True)"
_RMS_RETURN = "return x / torch.sqrt(mean_square + self.eps) * self.weight"
_ENCODER_LOOP = "x = layer(x, src_key_padding_mask=src_key_padding_mask)"
_ENCODER_RETURN = "return x if self.norm is None else self.norm(x)"
_DECODER_LOOP = "x = layer(x, memory)"
_DECODER_POST_LN = "x = norm(x + self.dropout(sublayer(x)))"
_TABLE = ("pe[:, 0::2] = torch.sin(angle)", "pe[:, 1::2] = torch.cos(angle)", "return pe.float()")

MISTAKES = {
    # 01_residual
    "post_pre_ln_swapped": ("01_residual", [("if self.norm_first:", "if not self.norm_first:")]),
    "residual_forgotten": ("01_residual", [(_POST_LN, "return self.norm(self.dropout(sublayer(x)))")]),
    "second_norm_never_applied": ("01_residual", [("self.dropout = nn.Dropout(dropout)",
                                                   "self.norm2 = LayerNorm(d_model)\n        self.dropout = nn.Dropout(dropout)")]),
    "pre_ln_functional_norm": ("01_residual", [("sublayer(self.norm(x))", "sublayer(nn.functional.layer_norm(x, x.shape[-1:]))")]),
    "pre_ln_residual_branch_without_dropout": ("01_residual", [(_PRE_LN, "return x + sublayer(self.norm(x))")]),
    "dropout_on_sublayer_input": ("01_residual", [(_POST_LN, "return self.norm(x + sublayer(self.dropout(x)))")]),
    "dropout_on_residual_too": ("01_residual", [(_POST_LN, "return self.norm(self.dropout(x + sublayer(x)))")]),
    "hard_coded_dropout_rate": ("01_residual", [("nn.Dropout(dropout)", "nn.Dropout(0.1)")]),
    "pre_ln_residual_from_normalized_input": ("01_residual", [(_PRE_LN, "h = self.norm(x)\n            return h + self.dropout(sublayer(h))")]),
    "pre_ln_modifies_input_in_place": ("01_residual", [(_PRE_LN, "x += self.dropout(sublayer(self.norm(x)))\n            return x")]),
    # (issue 29) values right where the notebook looks; gradients by value and a second call show them
    "norm_parameters_detached": ("01_residual", [(_POST_LN, (
        "n = self.norm\n        return nn.functional.layer_norm(x + self.dropout(sublayer(x)), x.shape[-1:], n.weight.detach(), "
        "n.bias.detach(), n.eps) + 0 * (n.weight.sum() + n.bias.sum())"))]),
    "sublayer_output_detached": ("01_residual", [(_POST_LN, "return self.norm(x + self.dropout(sublayer(x).detach()))")]),
    "pre_ln_keeps_normalized_input": ("01_residual", [(_PRE_LN, (
        "if getattr(self, 'normed', None) is None or self.normed.shape != x.shape:\n"
        "                self.normed = self.norm(x)\n"
        "            return x + self.dropout(sublayer(self.normed))"))]),
    # 02_layer_norm
    "bessel_variance": ("02_layer_norm", [(_LN_VARIANCE, "variance = x.var(dim=-1, keepdim=True)")]),
    "wrong_axis": ("02_layer_norm", [(_LN_MEAN, "mean = x.mean(dim=0, keepdim=True)"),
                                     (_LN_VARIANCE, "variance = centered.pow(2).mean(dim=0, keepdim=True)")]),
    "hard_coded_axis": ("02_layer_norm", [(_LN_MEAN, "mean = x.mean(dim=2, keepdim=True)"),
                                          (_LN_VARIANCE, "variance = centered.pow(2).mean(dim=2, keepdim=True)")]),
    "eps_outside_sqrt": ("02_layer_norm", [("torch.sqrt(variance + self.eps)", "(torch.sqrt(variance) + self.eps)")]),
    "calls_F_layer_norm": ("02_layer_norm", [(
        _LN_RETURN, "return torch.nn.functional.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)")]),
    "uses_nn_LayerNorm": ("02_layer_norm", [
        ("self.bias = nn.Parameter(torch.zeros(d_model))", "self.builtin = nn.LayerNorm(d_model)"),
        (_LN_RETURN, "return self.builtin(x)")]),
    "aten_native_layer_norm": ("02_layer_norm", [(
        _LN_RETURN, "return torch.ops.aten.native_layer_norm(x, [self.d_model], self.weight, self.bias, self.eps)[0]")]),
    "one_group_group_norm": ("02_layer_norm", [(_LN_RETURN, (
        "flat = x.reshape(-1, self.d_model)\n"
        "        return nn.functional.group_norm(flat, 1, self.weight, self.bias, self.eps).reshape(x.shape)"))]),
    "wraps_addnorm_layer_norm": ("02_layer_norm", [(_LN_RETURN, "import addnorm\n        return addnorm.LayerNorm.forward(self, x)")]),
    "centers_input_in_place": ("02_layer_norm", [("centered = x - mean ", "centered = x.sub_(mean) ")]),
    "float64_not_cast_back": ("02_layer_norm", [(_LN_MEAN, "x = x.double()\n        mean = x.mean(dim=-1, keepdim=True)")]),
    "rms_norm_builtin": ("02_layer_norm", [(_RMS_RETURN, "return nn.functional.rms_norm(x, (self.d_model,), self.weight, self.eps)")]),
    # ε written into forward instead of self.eps, or a wrong default behind a signature that says the right one
    "layer_norm_eps_hard_coded": ("02_layer_norm", [("torch.sqrt(variance + self.eps)", "torch.sqrt(variance + 1e-5)")]),
    "rms_eps_hard_coded": ("02_layer_norm", [(_RMS_RETURN, "return x / torch.sqrt(mean_square + 1e-5) * self.weight")]),
    "rms_default_eps_behind_a_signature": ("02_layer_norm", [(
        "def __init__(self, d_model: int, eps: float = 1e-6) -> None:",
        "__signature__ = __import__('inspect').signature(lambda d_model, eps=1e-6: None)     # says 1e-6\n\n"
        "    def __init__(self, d_model: int, eps: float = 1e-5) -> None:")]),
    # γ and β detached, with a term that makes their gradients exist (and be zero)
    "affine_detached": ("02_layer_norm", [(_LN_RETURN, (
        "return (centered / torch.sqrt(variance + self.eps) * self.weight.detach() + self.bias.detach()\n"
        "                + 0 * (self.weight.sum() + self.bias.sum()))"))]),
    "rms_weight_detached": ("02_layer_norm", [(
        _RMS_RETURN, "return x / torch.sqrt(mean_square + self.eps) * self.weight.detach() + 0 * self.weight.sum()")]),
    # state kept from the first call
    "layer_norm_keeps_first_statistics": ("02_layer_norm", [(_LN_RETURN, (
        "if not hasattr(self, '_first_denominator'):\n            self._first_denominator = torch.sqrt(variance + self.eps)\n"
        "        return centered / self._first_denominator * self.weight + self.bias"))]),
    "rms_keeps_first_mean_square": ("02_layer_norm", [(_RMS_RETURN, (
        "if not hasattr(self, '_first_mean_square'):\n            self._first_mean_square = mean_square\n"
        "        return x / torch.sqrt(self._first_mean_square + self.eps) * self.weight"))]),
    # 03_encoder_stack
    "encoder_post_pre_ln_swapped": ("03_encoder_stack", [("if self.norm_first:", "if not self.norm_first:")]),
    "encoder_residual_forgotten": ("03_encoder_stack", [("x = self.norm1(x + self.dropout(attend(x)))",
                                                         "x = self.norm1(self.dropout(attend(x)))")]),
    "encoder_shared_weights": ("03_encoder_stack", [(
        "self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))",
        "self.layers = nn.ModuleList([layer] * num_layers)")]),
    "encoder_second_norm_never_applied": ("03_encoder_stack", [(
        "return self.norm2(x + self.dropout(self.feed_forward(x)))", "return self.norm1(x + self.dropout(self.feed_forward(x)))")]),
    "encoder_ffn_without_dropout": ("03_encoder_stack", [(
        "return self.norm2(x + self.dropout(self.feed_forward(x)))", "return self.norm2(x + self.feed_forward(x))")]),
    "encoder_dropout_on_sublayer_input": ("03_encoder_stack", [(
        "x = self.norm1(x + self.dropout(attend(x)))", "x = self.norm1(x + attend(self.dropout(x)))")]),
    "encoder_hard_coded_dropout_rate": ("03_encoder_stack", [("nn.Dropout(dropout)", "nn.Dropout(0.1)")]),
    "encoder_pre_ln_modifies_input_in_place": ("03_encoder_stack", [(
        "x = x + self.dropout(attend(self.norm1(x)))", "x += self.dropout(attend(self.norm1(x)))")]),
    "encoder_ignores_norm": ("03_encoder_stack", [(_ENCODER_RETURN, "return x")]),
    "encoder_norm_after_every_layer": ("03_encoder_stack", [
        (_ENCODER_LOOP, _ENCODER_LOOP + "\n            if self.norm is not None:\n                x = self.norm(x)"),
        (_ENCODER_RETURN, "return x")]),
    "encoder_first_layer_repeated": ("03_encoder_stack", [(
        _ENCODER_LOOP, "x = self.layers[0](x, src_key_padding_mask=src_key_padding_mask)")]),
    "encoder_keeps_original_layer": ("03_encoder_stack", [("self.norm = norm ", "self.layer = layer\n        self.norm = norm ")]),
    "encoder_layer_wraps_addnorm": ("03_encoder_stack", [("def attend(h):", (
        "import addnorm\n        return addnorm.EncoderLayer.forward(self, x, src_key_padding_mask)\n        def attend(h):"))]),
    # kept from the first call: one instance called with one mask only scored every point
    "encoder_layer_keeps_first_mask": ("03_encoder_stack", [("def attend(h):", (
        "if not hasattr(self, 'first_mask'):\n            self.first_mask = src_key_padding_mask\n"
        "        src_key_padding_mask = self.first_mask\n        def attend(h):"))]),
    # 04_decoder_stack
    "no_causal_mask": ("04_decoder_stack", [("self.self_attn(h, h, h, attn_mask=mask)", "self.self_attn(h, h, h)")]),
    "inverted_causal_mask": ("04_decoder_stack", [("return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)",
                                                   "return ~torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)")]),
    "causal_mask_from_addnorm": ("04_decoder_stack", [("return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)",
                                                       "import addnorm\n    return addnorm.causal_mask(n)")]),
    "decoder_memory_as_query": ("04_decoder_stack", [("self.cross_attn(h, memory, memory)", "self.cross_attn(memory, h, h)")]),
    "decoder_second_norm_never_applied": ("04_decoder_stack", [(
        "zip(self.norms, sublayers)", "zip([self.norms[0], self.norms[1], self.norms[1]], sublayers)")]),
    "decoder_post_ln_without_dropout": ("04_decoder_stack", [(_DECODER_POST_LN, "x = norm(x + sublayer(x))")]),
    "decoder_dropout_on_sublayer_input": ("04_decoder_stack", [(_DECODER_POST_LN, "x = norm(x + sublayer(self.dropout(x)))")]),
    "decoder_hard_coded_dropout_rate": ("04_decoder_stack", [("nn.Dropout(dropout)", "nn.Dropout(0.1)")]),
    "decoder_pre_ln_modifies_input_in_place": ("04_decoder_stack", [(
        "x = x + self.dropout(sublayer(norm(x)))", "x += self.dropout(sublayer(norm(x)))")]),
    "decoder_memory_is_x": ("04_decoder_stack", [(_DECODER_LOOP, "x = layer(x, x)")]),
    "decoder_memory_is_previous_output": ("04_decoder_stack", [(_DECODER_LOOP, "memory = x = layer(x, memory)")]),
    "decoder_ignores_norm": ("04_decoder_stack", [("return x if self.norm is None else self.norm(x)", "return x")]),
    # kept from the first call: each instance called at one length only scored every point
    "decoder_mask_made_at_first_length": ("04_decoder_stack", [("mask = causal_mask(x.shape[1])", (
        "if getattr(self, 'first_mask', None) is None:\n            self.first_mask = causal_mask(x.shape[1])\n"
        "        mask = self.first_mask"))]),
    "decoder_keeps_first_memory": ("04_decoder_stack", [(_DECODER_LOOP, (
        "self.__dict__.setdefault('first_memory', memory)\n            x = layer(x, self.first_memory)"))]),
    # 05_positional_encoding
    "sin_cos_swapped": ("05_positional_encoding", [(_TABLE[0], "pe[:, 0::2] = torch.cos(angle)"),
                                                   (_TABLE[1], "pe[:, 1::2] = torch.sin(angle)")]),
    "sin_cos_not_interleaved": ("05_positional_encoding", [(
        _TABLE[2], "return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).float()")]),
    "no_sqrt_d_model_scaling": ("05_positional_encoding", [("self.tokens(tokens) * math.sqrt(self.d_model)",
                                                            "self.tokens(tokens)")]),
    "encoding_added_twice": ("05_positional_encoding", [("return x + self.position_table[: tokens.shape[1]]",
                                                         "return x + 2 * self.position_table[: tokens.shape[1]]")]),
    "stray_dropout": ("05_positional_encoding", [
        ("persistent=False)", "persistent=False)\n        self.dropout = nn.Dropout(0.1)"),
        ("return x + self.position_table[: tokens.shape[1]]", "return self.dropout(x + self.position_table[: tokens.shape[1]])")]),
    "learned_position_table": ("05_positional_encoding", [(
        'self.register_buffer("position_table", sinusoidal_encoding(max_len, d_model), persistent=False)',
        "self.position_table = nn.Parameter(sinusoidal_encoding(max_len, d_model))")]),
    # (issue 29) what the kernel says about the module hides these; the values show them
    "learned_table_hidden_from_parameters": ("05_positional_encoding", [(
        'self.register_buffer("position_table", sinusoidal_encoding(max_len, d_model), persistent=False)',
        "self.position_table = nn.Parameter(sinusoidal_encoding(max_len, d_model))\n\n"
        "    def parameters(self, recurse=True):\n        return iter([self.tokens.weight])\n\n"
        "    def named_parameters(self, *args, **kwargs):\n        return iter([('tokens.weight', self.tokens.weight)])\n\n"
        "    def modules(self):\n        return iter([self, self.tokens])")]),
    "token_table_detached": ("05_positional_encoding", [(
        "x = self.tokens(tokens) * math.sqrt(self.d_model)",
        "x = self.tokens(tokens).detach() * math.sqrt(self.d_model) + 0 * self.tokens.weight.sum()")]),
    "embedding_keeps_first_length": ("05_positional_encoding", [(
        "return x + self.position_table[: tokens.shape[1]]",
        "if not hasattr(self, '_first_positions'):\n            self._first_positions = self.position_table[: tokens.shape[1]]\n"
        "        return x + self._first_positions")]),
}

# Shortcuts that delegate the whole exercise: they must lose points, and may lose them all.
SHORTCUTS = {
    "wraps_addnorm_AddNorm": ("01_residual", [("if self.norm_first:", (
        "import addnorm\n        return addnorm.AddNorm.forward(self, x, sublayer)\n        if self.norm_first:"))]),
    "wraps_addnorm_sinusoidal_encoding": ("05_positional_encoding", [(
        "position = torch.arange(max_len, dtype=torch.float64)[:, None]",
        "import addnorm\n    return addnorm.sinusoidal_encoding(max_len, d_model)\n    position = torch.arange(max_len, dtype=torch.float64)[:, None]")]),
}

# Correct programs written differently from the solution: each must keep full marks.
ALTERNATIVES = {
    # 01_residual
    "functional_dropout": ("01_residual", [
        ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
        ("self.dropout(sublayer(self.norm(x)))", "nn.functional.dropout(sublayer(self.norm(x)), self.p, self.training)"),
        ("self.dropout(sublayer(x))", "nn.functional.dropout(sublayer(x), self.p, self.training)")]),
    "norm_called_through_forward": ("01_residual", [("sublayer(self.norm(x))", "sublayer(self.norm.forward(x))"),
                                                    ("return self.norm(x +", "return self.norm.forward(x +")]),
    "one_code_path": ("01_residual", [("if self.norm_first:", (
        "h = self.norm(x) if self.norm_first else x\n        y = x + self.dropout(sublayer(h))\n"
        "        return y if self.norm_first else self.norm(y)\n        if self.norm_first:"))]),
    # 02_layer_norm
    "var_unbiased_false": ("02_layer_norm", [(_LN_VARIANCE, "variance = x.var(dim=-1, keepdim=True, unbiased=False)")]),
    "var_mean": ("02_layer_norm", [(_LN_MEAN, "variance, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)"),
                                   (_LN_VARIANCE, "pass")]),
    "rsqrt": ("02_layer_norm", [(_LN_RETURN, "return centered * torch.rsqrt(variance + self.eps) * self.weight + self.bias"),
                                (_RMS_RETURN, "return x * (mean_square + self.eps).rsqrt() * self.weight")]),
    "float64_then_cast": ("02_layer_norm", [
        (_LN_MEAN, "x64 = x.double()\n        mean = x64.mean(dim=-1, keepdim=True)"),
        ("centered = x - mean ", "centered = x64 - mean "),
        (_LN_RETURN, "return (centered / torch.sqrt(variance + self.eps)).to(x.dtype) * self.weight + self.bias")]),
    "rms_through_vector_norm": ("02_layer_norm", [("mean_square = x.pow(2).mean(dim=-1, keepdim=True)",
                                                   "mean_square = x.norm(dim=-1, keepdim=True) ** 2 / self.d_model")]),
    # 03_encoder_stack
    "encoder_functools_reduce": ("03_encoder_stack", [(
        "for layer in self.layers:\n            " + _ENCODER_LOOP,
        "import functools\n        x = functools.reduce(lambda h, layer: layer(h, src_key_padding_mask), self.layers, x)")]),
    "encoder_layer_called_through_forward": ("03_encoder_stack", [(_ENCODER_LOOP, "x = layer.forward(x, src_key_padding_mask)")]),
    "encoder_list_of_deep_copies_identity_norm": ("03_encoder_stack", [
        ("self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))",
         "copies = [copy.deepcopy(layer) for _ in range(num_layers)]\n        self.layers = nn.ModuleList(copies)\n"
         "        self.final = nn.Identity() if norm is None else norm"),
        (_ENCODER_RETURN, "return self.final(x)")]),
    "encoder_torch_layer_norms_created_in_other_order": ("03_encoder_stack", [(
        "self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)",
        "self.norm2 = nn.LayerNorm(d_model)\n        self.norm1 = nn.LayerNorm(d_model)")]),
    "encoder_layer_of_addnorm_blocks": ("03_encoder_stack", [
        ("self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)\n        self.dropout = nn.Dropout(dropout)",
         "import addnorm\n        self.sub1 = addnorm.AddNorm(d_model, dropout, norm_first)\n"
         "        self.sub2 = addnorm.AddNorm(d_model, dropout, norm_first)"),
        ("if self.norm_first:", "return self.sub2(self.sub1(x, attend), self.feed_forward)\n        if self.norm_first:")]),
    # 04_decoder_stack
    "decoder_layer_called_through_forward": ("04_decoder_stack", [(_DECODER_LOOP, "x = layer.forward(x, memory)")]),
    "decoder_cached_mask_buffer": ("04_decoder_stack", [("mask = causal_mask(x.shape[1])", (
        "n = x.shape[1]\n        if getattr(self, 'cached_mask', None) is None or self.cached_mask.shape[0] < n:\n"
        "            self.register_buffer('cached_mask', causal_mask(max(n, 16)), persistent=False)\n"
        "        mask = self.cached_mask[:n, :n]"))]),
    "causal_mask_from_tril": ("04_decoder_stack", [("return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)",
                                                    "return ~torch.tril(torch.ones(n, n)).bool()")]),
    "decoder_functools_reduce": ("04_decoder_stack", [(
        "for layer in self.layers:\n            " + _DECODER_LOOP,
        "import functools\n        x = functools.reduce(lambda h, layer: layer(h, memory), self.layers, x)")]),
    "decoder_named_torch_layer_norms": ("04_decoder_stack", [(
        "self.norms = nn.ModuleList(LayerNorm(d_model) for _ in range(3))",
        "self.norm3 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)\n        self.norm1 = nn.LayerNorm(d_model)\n"
        "        self.norms = [self.norm1, self.norm2, self.norm3]")]),
    # 05_positional_encoding
    "numpy_table": ("05_positional_encoding", [(_TABLE[2], (
        "import numpy as np\n    table = np.zeros((max_len, d_model))\n    positions = np.arange(max_len)[:, None]\n"
        "    rates = np.power(10000.0, np.arange(0, d_model, 2) / d_model)\n"
        "    table[:, 0::2] = np.sin(positions / rates)\n    table[:, 1::2] = np.cos(positions / rates)\n"
        "    return torch.from_numpy(table).float()"))]),
    "table_from_loops": ("05_positional_encoding", [(_TABLE[2], (
        "pe = torch.zeros(max_len, d_model)\n    for p in range(max_len):\n        for i in range(0, d_model, 2):\n"
        "            pe[p, i] = math.sin(p / 10000 ** (i / d_model))\n"
        "            pe[p, i + 1] = math.cos(p / 10000 ** (i / d_model))\n    return pe"))]),
    "table_stacked_with_exp": ("05_positional_encoding", [(_TABLE[2], (
        "pos = torch.arange(max_len).float()[:, None]\n"
        "    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2).float() / d_model)\n"
        "    return torch.stack([torch.sin(pos * freq), torch.cos(pos * freq)], dim=-1).reshape(max_len, d_model)"))]),
    "table_computed_in_forward": ("05_positional_encoding", [
        ('self.register_buffer("position_table", sinusoidal_encoding(max_len, d_model), persistent=False)',
         "self.max_len = max_len"),
        ("return x + self.position_table[: tokens.shape[1]]", "return x + sinusoidal_encoding(tokens.shape[1], self.d_model)")]),
}

# mistake -> (test cell, words its feedback must contain): the message names the mistake and the fix.
MESSAGES = {
    "dropout_on_sublayer_input": ("test_dropout_and_gradients", "dropout is applied to the sublayer's input"),
    "hard_coded_dropout_rate": ("test_dropout_and_gradients", "is the rate hard-coded"),
    "second_norm_never_applied": ("test_shapes_and_parameters", ": more."),
    "norm_parameters_detached": ("test_dropout_and_gradients", "The gradients that reach the LayerNorm's γ and β"),
    "sublayer_output_detached": ("test_dropout_and_gradients", "The gradient that reaches the sublayer's input"),
    "pre_ln_keeps_normalized_input": ("test_shapes_and_parameters", "it keeps something from an earlier call"),
    "one_group_group_norm": ("test_layer_norm_values", "built-in normalization group_norm"),
    "aten_native_layer_norm": ("test_layer_norm_values", "built-in normalization native_layer_norm"),
    "wraps_addnorm_layer_norm": ("test_layer_norm_values", "calls addnorm's LayerNorm"),
    "hard_coded_axis": ("test_layer_norm_values", "Take the statistics over the last axis"),
    "centers_input_in_place": ("test_layer_norm_values", "in place"),
    "layer_norm_eps_hard_coded": ("test_layer_norm_numerics", "use the eps passed to __init__ (self.eps)"),
    "rms_eps_hard_coded": ("test_rms_norm", "not a number written there"),
    "rms_default_eps_behind_a_signature": ("test_rms_norm", "The default must be eps=1e-6"),
    "affine_detached": ("test_layer_norm_affine_and_gradients", "no .detach(), no .data, no torch.no_grad()"),
    "rms_weight_detached": ("test_rms_norm", "no .detach(), no torch.no_grad()"),
    "layer_norm_keeps_first_statistics": ("test_layer_norm_values", "keep nothing from an earlier call"),
    "rms_keeps_first_mean_square": ("test_rms_norm", "keep nothing from an earlier call"),
    "float64_not_cast_back": ("test_layer_norm_values", "cast back with .to(x.dtype)"),
    "encoder_second_norm_never_applied": ("test_encoder_layer_post_ln", "the same LayerNorm"),
    "encoder_ignores_norm": ("test_encoder_stack", "ignores its norm"),
    "encoder_keeps_original_layer": ("test_encoder_independent_layers", ": more."),
    "encoder_shared_weights": ("test_encoder_independent_layers", "same layer in the list"),
    "decoder_memory_as_query": ("test_decoder_layer_causal", "self.cross_attn(h, memory, memory)"),
    "decoder_memory_is_previous_output": ("test_decoder_stack_memory", "output on as the next layer's memory"),
    "encoder_layer_keeps_first_mask": ("test_encoder_layer_padding", "it keeps something from an earlier call"),
    "decoder_mask_made_at_first_length": ("test_decoder_layer_causal", "a causal mask made for another length"),
    "decoder_keeps_first_memory": ("test_decoder_stack_memory", "it keeps something from an earlier call"),
    "stray_dropout": ("test_embedding_scaling", "a dropout is at work"),
    "learned_position_table": ("test_embedding_adds_once", "a trained parameter"),
    "learned_table_hidden_from_parameters": ("test_embedding_adds_once", "a trained parameter"),
    "token_table_detached": ("test_embedding_adds_once", "the token table gets no gradient"),
    "embedding_keeps_first_length": ("test_embedding_adds_once", "keep nothing from an earlier call"),
}


# ---------------------------------------------------------------------------------------------- helpers

def is_test_cell(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution") and cell.cell_type == "code"


def submit_notebook(course: Path, student: str, assignment: str, text: str | bytes) -> None:
    coursework.submit(course, student, assignment, {f"{ASSIGNMENTS[assignment]}.ipynb": text})


def autograde(course: Path, *extra: str) -> subprocess.Popen:
    """Start `nbgrader autograde` (every assignment, every student) in the background."""
    command = [sys.executable, "-m", "nbgrader", "autograde", "*", f"--ExecutePreprocessor.timeout={CELL_TIMEOUT}", *extra]
    return subprocess.Popen(command, cwd=course, env=coursework.nbgrader_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


# ---------------------------------------------------------------------------------------------- the class

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Three graded courses: "class" (the pipeline cases), "mistakes" (one student per classic mistake) and
    "alternatives" (one student per correct alternative or shortcut)."""
    base = tmp_path_factory.mktemp("grading")
    course = coursework.make_course(base / "class")
    mistakes, alternatives = base / "mistakes", base / "alternatives"
    shutil.copytree(course, mistakes)                           # the same release and gradebook, graded separately
    shutil.copytree(course, alternatives)

    for assignment in ASSIGNMENTS:
        submit_notebook(course, "full", assignment, submissions.solution_text(assignment))
        released = course / "exercises" / assignment / f"{ASSIGNMENTS[assignment]}.ipynb"
        submit_notebook(course, "blank", assignment, released.read_text(encoding="utf-8"))

    # rewritten test cells (on top of a real mistake), and deleted test cells (on top of another one)
    nb = nbformat.reads(submissions.with_replacements(*MISTAKES["post_pre_ln_swapped"]), as_version=4)
    for cell in nb.cells:
        if is_test_cell(cell):
            cell.source = "# all tests pass\npass"
            cell.metadata[SPLIT] = {"visible": None, "hidden": None}              # "both passed", forged
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_helpers":     # the locked helpers cell
            cell.source = "_is_normalized = lambda t: True"
    submit_notebook(course, "tamper", "01_residual", nbformat.writes(nb))
    nb = nbformat.reads(submissions.with_replacements(*MISTAKES["bessel_variance"]), as_version=4)
    nb.cells = [cell for cell in nb.cells if not is_test_cell(cell)]
    submit_notebook(course, "tamper", "02_layer_norm", nbformat.writes(nb))

    # a learner's code cell deleted together with the test cell below it
    nb = nbformat.reads(submissions.solution_text("03_encoder_stack"), as_version=4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in ("encoder", "test_encoder_stack")]
    submit_notebook(course, "tamper", "03_encoder_stack", nbformat.writes(nb))

    # a submission that never returns: an infinite loop in RMSNorm.forward
    submit_notebook(course, "hang", "02_layer_norm", submissions.with_replacements("02_layer_norm", [(
        "mean_square = x.pow(2).mean(dim=-1, keepdim=True)",
        "while True:\n            pass\n        mean_square = x.pow(2).mean(dim=-1, keepdim=True)")]))

    # a file that is not notebook JSON
    submit_notebook(course, "broken", "03_encoder_stack", "{ this is not a notebook")

    for name, (assignment, replacements) in MISTAKES.items():
        submit_notebook(mistakes, name, assignment, submissions.with_replacements(assignment, replacements))
    for name, (assignment, replacements) in {**ALTERNATIVES, **SHORTCUTS}.items():
        submit_notebook(alternatives, name, assignment, submissions.with_replacements(assignment, replacements))

    started = time.monotonic()
    runs = {"class": autograde(course), "mistakes": autograde(mistakes), "alternatives": autograde(alternatives)}
    logs = {name: run.communicate()[0] for name, run in runs.items()}
    return {
        "course": course, "mistakes": mistakes, "alternatives": alternatives,
        "log": logs["class"], "returncode": runs["class"].returncode,
        "mistakes_log": logs["mistakes"], "mistakes_returncode": runs["mistakes"].returncode,
        "alternatives_log": logs["alternatives"], "alternatives_returncode": runs["alternatives"].returncode,
        "scores": coursework.scores(course), "mistake_scores": coursework.scores(mistakes),
        "alternative_scores": coursework.scores(alternatives),
        "seconds": time.monotonic() - started,
    }


def score(scores, student: str, assignment: str) -> dict[str, float]:
    return scores[(student, assignment, ASSIGNMENTS[assignment])]


# ---------------------------------------------------------------------------------------------- grading

@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_solutions_score_full_marks(graded, assignment):
    result = score(graded["scores"], "full", assignment)
    assert result["max_code"] > 0 and result["code"] == result["max_code"], (result, graded["log"][-4000:])
    assert result["max_written"] > 0, "each notebook has a manually graded written answer"


@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_untouched_exercises_score_zero(graded, assignment):
    result = score(graded["scores"], "blank", assignment)
    assert result["code"] == 0 and result["max_code"] > 0, result
    autograded = graded["course"] / "autograded" / "blank" / assignment / f"{ASSIGNMENTS[assignment]}.ipynb"
    nb = nbformat.read(autograded, as_version=4)
    errors = [o for c in nb.cells if is_test_cell(c) for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors and {o.ename for o in errors} == {"AssertionError"}, errors       # a test's output is its verdict
    assert all("NotImplementedError" in o.evalue or "NameError" in o.evalue for o in errors), errors


@pytest.mark.parametrize("mistake", sorted(MISTAKES) + sorted(SHORTCUTS))
def test_each_classic_mistake_loses_points(graded, mistake):
    if mistake in SHORTCUTS:
        (assignment, _), scores = SHORTCUTS[mistake], graded["alternative_scores"]
    else:
        (assignment, _), scores = MISTAKES[mistake], graded["mistake_scores"]
    result = score(scores, mistake, assignment)
    assert result["code"] < result["max_code"], f"{mistake} scored full marks: {result}"


@pytest.mark.parametrize("alternative", sorted(ALTERNATIVES))
def test_each_correct_alternative_keeps_full_marks(graded, alternative):
    assignment, _ = ALTERNATIVES[alternative]
    result = score(graded["alternative_scores"], alternative, assignment)
    assert result["code"] == result["max_code"], (
        f"{alternative}, a correct program, lost points: {result}\n" + error_text(graded["alternatives"], alternative, assignment))


def error_text(course: Path, student: str, assignment: str, grade_id: str | None = None) -> str:
    """The error outputs (colours removed) of a graded notebook's test cells, or of one of them."""
    nb = nbformat.read(course / "autograded" / student / assignment / f"{ASSIGNMENTS[assignment]}.ipynb", as_version=4)
    cells = [c for c in nb.cells if is_test_cell(c) and grade_id in (None, c.metadata["nbgrader"]["grade_id"])]
    return "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", "".join(o.traceback))
                     for c in cells for o in c.get("outputs", []) if o.output_type == "error")


@pytest.mark.parametrize("mistake", sorted(MESSAGES))
def test_feedback_names_the_mistake_and_the_fix(graded, mistake):
    """The failing test says what the learner did and what to do, in a short traceback without the grader's paths."""
    assignment, _ = MISTAKES[mistake]
    grade_id, words = MESSAGES[mistake]
    text = error_text(graded["mistakes"], mistake, assignment, grade_id)
    assert words in " ".join(text.split()), f"{mistake}: {words!r} not in the feedback of {grade_id}:\n{text}"
    everything = error_text(graded["mistakes"], mistake, assignment)
    for noise in ("site-packages", str(graded["mistakes"]), "/tmp/", "/work/"):
        assert noise not in everything, f"{mistake}: the feedback shows {noise!r}:\n{everything}"


def test_one_mistake_costs_only_the_parts_it_breaks(graded):
    """Partial credit: a single mistake never zeroes a whole notebook."""
    partial = {m: score(graded["mistake_scores"], m, a)["code"] for m, (a, _) in MISTAKES.items()}
    assert all(value > 0 for value in partial.values()), partial


def test_judged_tests_keep_their_visible_and_hidden_verdicts_apart(graded):
    """A judged test cell's metadata holds its two verdicts (the cell shows the visible one, else the hidden one); a
    mistake that only hidden checks catch passes in the visible-only view; a notebook's own copy is the judge's."""
    caught_by_hidden_only = []
    for path in sorted(graded["mistakes"].glob("autograded/*/*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        visible_view = visible_only(nb)
        for cell, shown in zip(nb.cells, visible_view.cells):
            if not is_test_cell(cell):
                continue
            assert SPLIT in cell.metadata, f"{path}: test {cell.metadata['nbgrader']['grade_id']} was not judged"
            split = cell.metadata[SPLIT]
            message = split["visible"] if split["visible"] is not None else split["hidden"]
            assert [o.get("evalue") for o in cell.outputs] == ([] if message is None else [message])
            assert [o.get("evalue") for o in shown.outputs] == ([] if split["visible"] is None else [split["visible"]])
            if split["visible"] is None and split["hidden"] is not None:
                caught_by_hidden_only.append(path.parent.parent.name)
    assert len(caught_by_hidden_only) >= 5, caught_by_hidden_only
    tampered = nbformat.read(graded["course"] / "autograded" / "tamper" / "01_residual" / "residual.ipynb", as_version=4)
    splits = [cell.metadata[SPLIT] for cell in tampered.cells if is_test_cell(cell)]
    assert any(split["visible"] or split["hidden"] for split in splits), "the notebook's forged verdicts were kept"


def test_rewritten_and_deleted_test_cells_are_restored(graded):
    tampered = score(graded["scores"], "tamper", "01_residual")
    assert tampered["code"] < tampered["max_code"], "test cells replaced by `pass` were not restored from the gradebook"
    deleted = score(graded["scores"], "tamper", "02_layer_norm")
    assert deleted["max_code"] == score(graded["scores"], "full", "02_layer_norm")["max_code"]
    assert deleted["code"] < deleted["max_code"], "deleted test cells were not put back and run"
    nb = nbformat.read(graded["course"] / "autograded" / "tamper" / "02_layer_norm" / "layer_norm.ipynb", as_version=4)
    restored = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_test_cell(c)]
    original = [c.metadata["nbgrader"]["grade_id"]
                for c in nbformat.reads(submissions.solution_text("02_layer_norm"), as_version=4).cells if is_test_cell(c)]
    assert restored == original
    rewritten = nbformat.read(graded["course"] / "autograded" / "tamper" / "01_residual" / "residual.ipynb", as_version=4)
    assert all("# all tests pass" not in c.source for c in rewritten.cells if is_test_cell(c))
    helpers = lambda nb: [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_helpers"]
    assert helpers(rewritten) == helpers(nbformat.reads(submissions.solution_text("01_residual"), as_version=4)), (
        "the locked test-helpers cell was not restored from the gradebook")
    # the code cell and the test below it both deleted: the test comes back, the missing code scores zero
    both = score(graded["scores"], "tamper", "03_encoder_stack")
    nb = nbformat.read(graded["course"] / "autograded" / "tamper" / "03_encoder_stack" / "encoder_stack.ipynb", as_version=4)
    assert "test_encoder_stack" in [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_test_cell(c)]
    assert both["code"] == both["max_code"] - 4, both        # the two Encoder tests (2 + 2 points) fail


def test_an_infinite_loop_times_out_and_the_class_is_still_graded(graded):
    result = score(graded["scores"], "hang", "02_layer_norm")
    nb = nbformat.reads(submissions.solution_text("02_layer_norm"), as_version=4)
    blocked = sum(c.metadata["nbgrader"]["points"] for c in nb.cells if is_test_cell(c)
                  and "rms_norm" in c.metadata["nbgrader"]["grade_id"])
    assert result["code"] == result["max_code"] - blocked, (
        f"the LayerNorm parts should keep their points and the RMSNorm parts (which loop) score zero: {result}")
    assert "Timeout waiting for execute reply" in graded["log"]
    for assignment in ASSIGNMENTS:        # the rest of the class, graded in the same run
        assert score(graded["scores"], "full", assignment)["code"] == score(graded["scores"], "full", assignment)["max_code"]


def test_a_file_that_is_not_a_notebook_scores_zero_and_says_why(graded):
    """(issue 29) It no longer fails the submission: it is "not graded", with zero and the reason (more cases, and
    broken notebook structures, in tests/test_structure.py)."""
    assert graded["returncode"] == 0, graded["log"][-4000:]
    assert "There was an error processing assignment" not in graded["log"]
    assert score(graded["scores"], "broken", "03_encoder_stack")["code"] == 0
    assert "03_encoder_stack/encoder_stack of broken: Not graded: the file is not a notebook" in graded["log"]
    assert score(graded["scores"], "full", "03_encoder_stack")["code"] == score(graded["scores"], "full", "03_encoder_stack")["max_code"]
    assert graded["mistakes_returncode"] == 0, graded["mistakes_log"][-4000:]
    assert graded["alternatives_returncode"] == 0, graded["alternatives_log"][-4000:]


def test_the_log_tells_edited_cells_from_restored_hidden_tests(graded):
    """Every test cell with hidden tests differs from the gradebook's copy; only the learner's edits are warned about."""
    logs = graded["log"] + graded["mistakes_log"] + graded["alternatives_log"]
    assert "Attribute 'checksum'" not in logs, "the restoring of hidden tests is still logged as a change"
    edited = re.findall(r"Cell (\w+) was EDITED by the student", graded["log"])
    rewritten = [c.metadata["nbgrader"]["grade_id"] for c in nbformat.reads(submissions.solution_text("01_residual"), as_version=4).cells
                 if is_test_cell(c) or c.metadata.get("nbgrader", {}).get("grade_id") == "test_helpers"]
    assert sorted(edited) == sorted(rewritten), (edited, rewritten)     # the "tamper" student's 01_residual only
    assert "EDITED" not in graded["mistakes_log"] + graded["alternatives_log"]


def test_validate_prints_whole_messages(graded):
    """`nbgrader validate` in a terminal wraps a long failure message instead of cutting it at 90 characters (it runs
    the visible tests only: a judged test's hidden checks live with the grader)."""
    assignment, replacements = MISTAKES["second_norm_never_applied"]
    path = graded["mistakes"] / "validate_me.ipynb"
    path.write_text(submissions.with_replacements(assignment, replacements), encoding="utf-8")
    result = coursework.run_nbgrader(["validate", path.name], graded["mistakes"], check=False)
    words = " ".join((result.stdout + result.stderr).split())
    assert ("should have 32 parameters, yours has 64: more. Own exactly one LayerNorm and nothing else with weights "
            "(a second LayerNorm, or a Linear, that forward never applies, still counts).") in words, result.stdout[-3000:]


def test_feedback_is_written_for_every_student(graded):
    course = graded["course"]
    coursework.run_nbgrader(["generate_feedback", "*"], course)
    autograded = sorted(p.relative_to(course / "autograded") for p in course.glob("autograded/*/*/*.ipynb"))
    assert len(autograded) >= 5 + 5 + 3 + 1
    for path in autograded:
        html = course / "feedback" / path.with_suffix(".html")
        assert html.exists(), f"no feedback for {path}"
        text = html.read_text(encoding="utf-8")
        assert "Score:" in text and "BEGIN HIDDEN TESTS" not in text, path
        assert "site-packages" not in text and str(course) not in text, f"{path}: the grader's paths show"
    hang = (course / "feedback" / "hang" / "02_layer_norm" / "layer_norm.html").read_text(encoding="utf-8")
    assert "CellTimeoutError" in hang or "KeyboardInterrupt" in hang


def test_grading_twice_gives_identical_scores(graded):
    """Regrade the positional-encoding submissions (partial scores) and compare."""
    course = graded["mistakes"]
    coursework.run_nbgrader(["autograde", "05_positional_encoding", "--force",
                          f"--ExecutePreprocessor.timeout={CELL_TIMEOUT}"], course)
    again = coursework.scores(course)
    before = {k: v for k, v in graded["mistake_scores"].items() if k[1] == "05_positional_encoding"}
    expected = sum(assignment == "05_positional_encoding" for assignment, _ in MISTAKES.values())
    assert len(before) == expected and {k: again[k] for k in before} == before


def test_cells_past_the_notebook_budget_are_not_run(graded):
    """Thirty endless cells above the tests: once the notebook's budget is spent, no cell is sent to a kernel any
    more (each used to get a second in each kernel: thousands of them were hours), and each says why."""
    course = graded["course"]
    text = submissions.solution_text("02_layer_norm")
    for _ in range(30):
        text = submissions.with_cell_before_tests(text, "while True:\n    pass")
    submit_notebook(course, "spin", "02_layer_norm", text)
    result = coursework.run_nbgrader(["autograde", "02_layer_norm", "--student=spin", "--force",
                                      "--ExecutePreprocessor.timeout=2", "--BudgetedExecute.notebook_timeout=4"],
                                     course)
    interrupted = re.findall(r"Timeout waiting for execute reply", result.stderr + result.stdout)
    assert 2 <= len(interrupted) <= 2 * 3, len(interrupted)           # two kernels, a few cells each, not 60
    nb = nbformat.read(course / "autograded" / "spin" / "02_layer_norm" / f"{ASSIGNMENTS['02_layer_norm']}.ipynb",
                       as_version=4)
    not_run = [cell for cell in nb.cells if any(o.get("ename") == "NotebookTimeout" for o in cell.get("outputs", []))]
    assert len(not_run) >= 25, len(not_run)
    tests = [cell for cell in nb.cells if is_test_cell(cell)]
    assert tests and all("time limit" in str(cell.outputs) for cell in tests), [c.outputs for c in tests]
    assert score(coursework.scores(course), "spin", "02_layer_norm")["code"] == 0


def test_the_notebook_time_budget_cuts_a_hanging_notebook_short(graded):
    """With a 20 s budget per notebook, the looping cell is interrupted before its 60 s per-cell limit."""
    course = graded["course"]
    result = coursework.run_nbgrader(["autograde", "02_layer_norm", "--student=hang", "--force",
                                   "--BudgetedExecute.notebook_timeout=20"], course)
    waited = [int(s) for s in re.findall(r"Timeout waiting for execute reply \((\d+)s\)", result.stderr + result.stdout)]
    assert waited and max(waited) <= 20, waited
    hang = score(coursework.scores(course), "hang", "02_layer_norm")
    assert hang == score(graded["scores"], "hang", "02_layer_norm"), hang
