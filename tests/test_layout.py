"""The project's structure as the grading-package issue asks for it: settings in the config, code in modules, one way
to import it, one version, the course's constants in one file. Fast: reads files, imports nothing from tools/."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import re
import tomllib
from pathlib import Path

import addnorm

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "nbgrader_config.py"
PATH_IMPORTS = re.compile("sys" + r"\.path\.insert|spec_from" + "_file_location")   # (split: this file holds neither)


def config_tree() -> ast.Module:
    return ast.parse(CONFIG.read_text(encoding="utf-8"))


def test_the_nbgrader_config_is_settings_only():
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 65, f"nbgrader_config.py has {len(lines)} lines (at most 65: settings only)"
    tree = config_tree()
    definitions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Lambda))]
    assert not definitions, f"nbgrader_config.py defines code at lines {[n.lineno for n in definitions]}"
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names] + [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert "importlib" not in " ".join(filter(None, imported)), "nbgrader_config.py loads a module by file path"


def test_each_setting_is_written_once_and_every_class_is_named_by_a_dotted_path_that_imports():
    settings = [ast.unparse(node.targets[0]) for node in config_tree().body if isinstance(node, ast.Assign)
                and ast.unparse(node.targets[0]).startswith("c.")]
    repeated = sorted({name for name in settings if settings.count(name) > 1})
    assert not repeated, f"set more than once (what a reader sees is not what runs): {repeated}"
    namespace: dict = {"get_config": lambda: _Recorder(), "__file__": str(CONFIG)}
    exec(compile(CONFIG.read_text(encoding="utf-8"), str(CONFIG), "exec"), namespace)
    lists = {name: value for name, value in namespace["c"].values.items() if name.endswith("preprocessors")}
    assert set(lists) == {"Autograde.sanitize_preprocessors", "Autograde.autograde_preprocessors",
                          "GenerateFeedback.preprocessors"}
    for name, dotted_names in lists.items():
        for dotted in dotted_names:
            assert isinstance(dotted, str), f"{name}: {dotted!r} is not named by its dotted path"
            module, _, attribute = dotted.rpartition(".")
            assert inspect.isclass(getattr(importlib.import_module(module), attribute)), f"{name}: {dotted}"


class _Recorder:
    """A stand-in for traitlets' config object that records `c.Section.name = value`."""

    def __init__(self):
        object.__setattr__(self, "values", {})

    def __getattr__(self, section):
        recorder = self

        class Section:
            def __setattr__(self, name, value):
                recorder.values[f"{section}.{name}"] = value
        return Section()


def test_no_module_is_loaded_by_its_file_path():
    offenders = [f"{path.relative_to(ROOT)}:{number}" for folder in ("lib", "tools", "bench", "tests", "hub")
                 for path in sorted((ROOT / folder).rglob("*.py"))
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if PATH_IMPORTS.search(line)]
    assert not offenders, f"modules loaded by path or sys.path changed: {offenders}"
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "pythonpath" not in pytest_options, "tests import the packages as installed, not through pythonpath"


def test_tools_holds_only_commands_and_stays_small():
    scripts = sorted(path.name for path in (ROOT / "tools").rglob("*") if path.is_file() and "__pycache__" not in path.parts)
    assert scripts == ["build_book.py", "modern_block_runs.py", "sweep.py", "translations.py", "warmup_runs.py"], scripts
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in (ROOT / "tools").glob("*.py"))
    assert lines < 700, f"tools/ has {lines} lines"          # the work is in the library (addnorm.lab), not here


def test_one_version_in_one_place():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("addnorm") == addnorm.__version__


def test_the_course_constants_are_read_from_course_toml():
    from addnorm_grading.course import read_course

    course = read_course(ROOT / "course.toml")
    constants = tomllib.loads((ROOT / "course.toml").read_text())
    assert course.id == constants["course"]["id"] and course.students == tuple(constants["hub"]["students"])
    for path in [ROOT / "hub" / "hubctl.py", ROOT / "hub" / "jupyter" / "everyone" / "nbgrader_config.py",
                 ROOT / "hub" / "solo" / "nbgrader_config.py", ROOT / "tests" / "test_hub.py"]:
        text = path.read_text(encoding="utf-8")
        assert "course.toml" in text, f"{path.relative_to(ROOT)} does not read course.toml"
        for value in (str(course.exchange), *course.hub_users[1:]):
            assert f'"{value}"' not in text, f"{path.relative_to(ROOT)} writes {value!r} again"


def test_sandbox_limits_come_from_course_toml_and_the_environment_overrides_them(monkeypatch):
    from addnorm_grading.course import CourseFileError, read_course

    monkeypatch.setenv("ADDNORM_SANDBOX_MEMORY", "2G")
    monkeypatch.setenv("ADDNORM_SANDBOX_THREADS", "2")
    limits = read_course(ROOT / "course.toml").sandbox
    assert (limits.memory, limits.threads) == ("2G", 2)
    monkeypatch.setenv("ADDNORM_SANDBOX_PROCESSES", "many")
    try:
        read_course(ROOT / "course.toml")
    except CourseFileError as error:
        assert "ADDNORM_SANDBOX_PROCESSES" in str(error) and "'many'" in str(error)
    else:
        raise AssertionError("a non-numeric ADDNORM_SANDBOX_PROCESSES was accepted")


def test_sandboxed_execute_takes_its_limits_from_course_toml_unless_configured(tmp_path, monkeypatch):
    from traitlets.config import Config

    from addnorm_grading.execute import SandboxedExecute

    course_file = tmp_path / "course.toml"
    course_file.write_text((ROOT / "course.toml").read_text().replace('memory = "4G"', 'memory = "3G"'))
    monkeypatch.delenv("ADDNORM_SANDBOX_MEMORY", raising=False)
    monkeypatch.delenv("ADDNORM_UNSAFE_GRADING", raising=False)
    from_file = SandboxedExecute(config=Config({"SandboxedExecute": {"course_file": str(course_file)}}))
    assert from_file.settings().limits.memory == "3G" and from_file.sandboxed
    configured = SandboxedExecute(config=Config({"SandboxedExecute": {"course_file": str(course_file),
                                                                      "memory": "8G", "threads": 2}}))
    assert (configured.settings().limits.memory, configured.settings().limits.threads) == ("8G", 2)
    monkeypatch.setenv("ADDNORM_UNSAFE_GRADING", "1")
    assert not SandboxedExecute(config=Config()).sandboxed, "ADDNORM_UNSAFE_GRADING=1 is the documented opt-out"
