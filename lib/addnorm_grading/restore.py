"""Restoring a submission's test cells before it runs: deleted ones put back, edited ones replaced and logged.

nbgrader's OverwriteCells replaces every locked cell with the instructor's version. `RestoreDeletedTests` also
puts back a test cell the learner deleted together with the cell before it (where nbgrader 0.9.6 fails the whole
submission), and `LogEditedCells` makes its log tell a learner's edit apart from the usual restoring of hidden tests.
"""

from __future__ import annotations

from nbgrader import utils as nbgrader_utils
from nbgrader.preprocessors import OverwriteCells


class RestoreDeletedTests(OverwriteCells):
    """OverwriteCells that re-inserts deleted test cells even when the cell before them was deleted too.

    nbgrader 0.9.6 puts a missing test cell right after the cell that precedes it in the instructor notebook, and
    fails the whole submission (KeyError) when that cell is gone as well — e.g. a learner deleted their code cell
    and the test below it. Here the test goes after the nearest earlier cell that is still there.
    """

    def add_missing_grade_cells(self, nb, resources):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        source_cells = list(source_nb.source_cells)                   # in the instructor notebook's order
        names = [cell.name for cell in source_cells]
        grade_cells = {cell.name: cell for cell in source_nb.grade_cells}
        solution_names = {cell.name for cell in source_nb.solution_cells}
        for index, name in enumerate(names):
            present = {cell.metadata.get("nbgrader", {}).get("grade_id"): i for i, cell in enumerate(nb.cells)}
            if name not in grade_cells or name in present:
                continue
            self.log.warning(f"Missing grade cell {name} encountered, adding to notebook")
            earlier = [present[n] for n in reversed(names[:index]) if n in present]
            position = earlier[0] + 1 if earlier else 0
            cell = self.missing_cell_transform(source_cells[index], grade_cells[name].max_score,
                                               is_solution=name in solution_names)
            cell["id"] = "restored-" + name.replace("_", "-")
            nb.cells.insert(position, cell)
        return nb, resources


def released_lines(source: str) -> list[str]:
    """A test cell's source as learners receive it: without its hidden-test regions, blank lines ignored."""
    lines, hidden = [], False
    for line in source.split("\n"):
        if "BEGIN HIDDEN TESTS" in line:
            hidden = True
        elif "END HIDDEN TESTS" in line:
            hidden = False
        elif not hidden and line.strip():
            lines.append(line.rstrip())
    return lines


class LogEditedCells(RestoreDeletedTests):
    """RestoreDeletedTests whose log tells a learner's edit of a locked cell apart from the usual restoring.

    nbgrader compares every locked cell with the instructor's copy, which holds the hidden tests the learner's
    copy lacks, so it logs "Attribute 'checksum' ... has changed!" for every test cell with hidden tests. Here a
    cell that is exactly the released one is logged at debug level ("hidden tests put back"); a cell the learner
    changed is logged as a warning that says so. In both cases the instructor's version is what runs.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        self._untouched = False
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None and nbgrader_utils.is_locked(cell):
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
                self._untouched = released_lines(source_cell.source) == released_lines(cell.source)
            except Exception:                                           # unknown cell: nbgrader reports it
                pass
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name, attr, old, new):
        if attr != "checksum":
            return super().report_change(name, attr, old, new)
        if self._untouched:
            self.log.debug("Cell %s: unchanged by the student; its hidden tests were put back", name)
        else:
            self.log.warning("Cell %s was EDITED by the student (a locked cell): replaced by the instructor's version",
                             name)
