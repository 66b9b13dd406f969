"""The `addnorm` package as a grading kernel reads it: a copy in which the functions an exercise withholds raise.

An exercise's tests withhold the library's own version of what it asks for: `_withhold([addnorm.AddNorm.forward],
"Your AddNorm calls addnorm.AddNorm, …")` in its helpers cell (or in a hidden check) replaces their code in the
kernel. That alone only holds for the module the kernel has imported: a learner's cell can load the package's files
afresh under another name, or read its compiled files, and have the reference untouched. So the grading sandbox
shows the kernel this copy instead of the package's folder (`sandbox.bwrap_arguments`): the withheld functions'
bodies are `raise AssertionError(<the same message>)` in the files themselves, and the folder holds no file compiled
from the real ones. Every other function is the library's, unchanged.

    withheld_calls(code)      the (name, message) of every `_withhold([...], "...")` call on addnorm in some code
    library(withholds)        the folder of such a copy (made once per grading process and set of withholds)

What is not withheld this way: torch's own modules (a built-in passed off as one's own is out of the judge's reach,
see the instructor guide), and the library's code as text (it is published with the course).
"""

from __future__ import annotations

import ast
import atexit
import compileall
import importlib.util
import inspect
import os
import pkgutil
import shutil
import tempfile
from pathlib import Path

from addnorm_grading.parsing import parse

PACKAGE = "addnorm"
_built: dict[frozenset, Path] = {}


def withheld_calls(code: str) -> list[tuple[str, str]]:
    """Every `_withhold([addnorm.X.y, ...], message)` call in `code`, as (dotted name, message) pairs; names outside
    addnorm (torch's) are left out. Code that does not parse has none."""
    try:
        tree = parse(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_withhold"
                and len(node.args) == 2 and isinstance(node.args[0], (ast.List, ast.Tuple))):
            continue
        try:
            message = ast.literal_eval(node.args[1])
        except ValueError:
            continue
        if not isinstance(message, str):
            continue
        names = [_dotted(element) for element in node.args[0].elts]
        found += [(name, message) for name in names if name.split(".")[0] == PACKAGE]
    return found


def _dotted(node: ast.expr) -> str:
    """'addnorm.AddNorm.forward' for that attribute chain; '' for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def package_folder() -> Path:
    """The folder of the real addnorm package (the one the sandbox shows the copy in place of), found without
    importing it: the sandbox launcher asks for every kernel, and importing addnorm imports torch."""
    return Path(importlib.util.find_spec(PACKAGE).origin).resolve().parent


def _function(name: str):
    """The function a dotted name stands for in the real package; ValueError if it is not one."""
    try:
        value = pkgutil.resolve_name(name)
    except (ImportError, AttributeError, ValueError):
        value = None
    if not inspect.isfunction(value):
        raise ValueError(f"{name} is withheld by an exercise's tests but is not a function of {PACKAGE} "
                         f"({type(value).__name__})")
    return value


def _definition(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    """The def of `qualname` ('AddNorm.forward') in a module's tree."""
    scope: list[ast.stmt] = tree.body
    node = None
    for part in qualname.split("."):
        node = next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            raise ValueError(f"no definition of {qualname} found")
        scope = node.body
    return node


def _withheld_source(source: str, withholds: list[tuple[str, str]]) -> str:
    """A module's source with the bodies of the named (qualname, message) functions replaced by a raise."""
    lines = source.splitlines(keepends=True)
    tree = parse(source)
    bodies = []
    for qualname, message in withholds:
        node = _definition(tree, qualname)
        first, last = node.body[0], node.body[-1]
        if first.lineno == node.lineno:
            raise ValueError(f"{qualname}: its body starts on its def line, which this copy cannot withhold")
        bodies.append((first.lineno, last.end_lineno, first.col_offset, message))
    for start, end, indent, message in sorted(bodies, reverse=True):
        lines[start - 1:end] = [" " * indent + f"raise AssertionError({message!r})\n"]
    return "".join(lines)


def _build(withholds: frozenset) -> Path:
    real = package_folder()
    root = Path(tempfile.mkdtemp(prefix="addnorm-withheld-"))
    atexit.register(shutil.rmtree, root, True)
    os.chmod(root, 0o755)              # the kernel reads it as the grader user of course.toml when grading as root
    copy = root / PACKAGE
    shutil.copytree(real, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    by_file: dict[Path, list[tuple[str, str]]] = {}
    for name, message in sorted(withholds):
        function = _function(name)
        path = Path(inspect.getsourcefile(function)).resolve()
        by_file.setdefault(copy / path.relative_to(real), []).append((function.__qualname__, message))
    for path, functions in by_file.items():
        path.write_text(_withheld_source(path.read_text(encoding="utf-8"), functions), encoding="utf-8")
    compileall.compile_dir(str(copy), quiet=1)     # the kernel cannot write its own compiled files (read-only)
    for path in [copy, *copy.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return copy


def library(withholds) -> Path:
    """The folder of a copy of addnorm with `withholds` ((dotted name, message) pairs) raising their message, made
    once per grading process for each set (removed when it ends)."""
    key = frozenset(withholds)
    if key not in _built:
        _built[key] = _build(key)
    return _built[key]
