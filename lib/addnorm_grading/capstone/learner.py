"""The learner's code, loaded in the kernel: one namespace per exercise, its setup cells then its solution cells."""

from __future__ import annotations

from dataclasses import dataclass, field

from addnorm_grading.capstone import COMPONENTS

MESSAGE = 160                      # characters of an error's text shown in the report


def short(error: BaseException) -> str:
    """'ValueError: the text' on one line, cut to MESSAGE characters."""
    text = " ".join(str(error).split())
    text = text if len(text) <= MESSAGE else text[:MESSAGE] + " …"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass
class Learner:
    """Each exercise's namespace, what its cells raised, and the components found in them."""

    namespaces: dict[str, dict] = field(default_factory=dict)
    cell_errors: dict[str, list[str]] = field(default_factory=dict)   # assignment -> "cell <id>: ValueError: …"
    missing_notebooks: list[str] = field(default_factory=list)
    components: dict[str, object] = field(default_factory=dict)      # as the learner's cells defined them

    def component(self, name: str):
        """The learner's class or function called `name` (as their cells defined it, whatever is bound since), or None."""
        return self.components.get(name)

    def bind(self, assignment: str, **names) -> None:
        """Set names in an exercise's namespace (its code looks them up when it runs): LayerNorm, causal_mask, …"""
        if assignment in self.namespaces:
            self.namespaces[assignment].update(names)


def load(code: dict[str, dict]) -> Learner:
    """code: assignment -> {"setup": [source…], "cells": [[grade_id, source]…]} or None (no notebook)."""
    learner = Learner()
    for assignment, parts in code.items():
        if parts is None:
            learner.missing_notebooks.append(assignment)
            continue
        namespace = {"__name__": f"learner_{assignment}"}
        errors = learner.cell_errors.setdefault(assignment, [])
        for where, source in [("setup", s) for s in parts["setup"]] + [(f"cell {g}", s) for g, s in parts["cells"]]:
            try:
                exec(compile(source, f"<{assignment} {where}>", "exec"), namespace)
            except BaseException as error:          # a learner's cell that raises: said, and the rest still loaded
                errors.append(f"{where}: {short(error)}")
        learner.namespaces[assignment] = namespace
    learner.components = {name: learner.namespaces.get(assignment, {}).get(name) for name, assignment in COMPONENTS.items()}
    return learner
