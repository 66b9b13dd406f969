"""What a learner's feedback shows: preprocessors of `nbgrader generate_feedback` (nbgrader_config.py names them).

`VisibleBeforeDue`: feedback before the due date shows the visible checks only.

A graded notebook keeps each judged test's visible and hidden verdicts apart (`addnorm_grading.verdicts`). Until the
assignment's due date (nbgrader's gradebook), the feedback a learner gets is built from the visible verdicts alone:
each judged test shows its visible verdict, its score counts that verdict, the total is the sum, and a note at the
top says so and when the hidden checks join. After the due date, or for an assignment without one, the feedback is
the whole grade. The gradebook always holds the whole grade. It runs after nbgrader's GetGrades.

`ClearHiddenTestsOfTests`: nbgrader's ClearHiddenTests, on test cells only. nbgrader's looks for its markers in every
cell, so a learner who writes "BEGIN HIDDEN TESTS" in an answer (a hostile submission does) made feedback
generation fail for them; the markers only mean something in the instructor's test cells.

`markdown_without_html`: the markdown filter of every HTML page of a notebook (the feedback, the formgrader's
view), which shows a student's raw HTML as text: nbgrader's templates render markdown cells unsanitized.
`strip_files_prefix`: nbconvert's filter of the same name, which every markdown cell passes through after it is
rendered, in time linear in its length (nbconvert's pattern takes quadratic time: an attacking learner's markdown
cell of `[a](` repeated 300,000 times held a Dask worker's CPU for what would have been half an hour).
"""

from __future__ import annotations

import datetime
import re

from jinja2 import pass_context
from nbconvert.filters.markdown_mistune import InvalidNotebook, IPythonRenderer, MarkdownWithMath
from nbformat.v4 import new_markdown_cell
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution
from traitlets import Bool

from addnorm_grading.verdicts import SPLIT, is_test_cell, visible_only

NOTE = ("**Before the due date ({due} UTC) this feedback shows the visible checks only**, the ones in your notebook, "
        "and its score counts only them. The hidden checks have run too: they join this feedback after the due date.")


def due_date(db_url: str, assignment: str) -> datetime.datetime | None:
    """The assignment's due date in the gradebook (naive UTC, as nbgrader keeps it), or None."""
    with Gradebook(db_url) as gradebook:
        try:
            return gradebook.find_assignment(assignment).duedate
        except MissingEntry:
            return None


def utc_now() -> datetime.datetime:
    """The time now, naive UTC like nbgrader's due dates."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def before_due(db_url: str, assignment: str) -> bool:
    """Whether the assignment has a due date that has not passed yet."""
    due = due_date(db_url, assignment)
    return due is not None and utc_now() < due


class VisibleBeforeDue(NbGraderPreprocessor):
    """Before the due date: each judged test's visible verdict and score only, and a note saying so."""

    enabled = Bool(True, help="Show only the visible verdicts before the due date (False: the whole grade always)."
                   ).tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        due = due_date(info["db_url"], info["assignment"])
        if not self.enabled or due is None or utc_now() >= due:
            return nb, resources
        shown = visible_only(nb)
        for cell in shown.cells:
            if is_test_cell(cell) and SPLIT in cell.metadata and "score" in cell.metadata.nbgrader:
                visible_score = cell.metadata.nbgrader["points"] if cell.metadata[SPLIT]["visible"] is None else 0
                info["score"] += visible_score - cell.metadata.nbgrader["score"]
                cell.metadata.nbgrader["score"] = visible_score
        shown.cells.insert(0, new_markdown_cell(NOTE.format(due=f"{due:%Y-%m-%d %H:%M}")))
        return shown, resources


class ClearHiddenTestsOfTests(ClearHiddenTests):
    """Remove the hidden tests from the instructor's test cells, and leave every other cell as it is."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code" or not is_grade(cell) or is_solution(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


FILES_URL = re.compile(r"""(src|href)=(['"]?)/?files/""")                          # nbconvert's own
MARKDOWN_FILES_URL = re.compile(r"(!?)\[([^\[\]]*)\]\(/?files/([^()]*)\)")      # a caption without brackets


def strip_files_prefix(text: str) -> str:
    """nbconvert's strip_files_prefix (`src="files/x"` and `[caption](files/x)` lose their `files/`), in linear
    time: its markdown pattern's `.*?` rescans the rest of the text from every `[`."""
    return MARKDOWN_FILES_URL.sub(r"\1[\2](\3)", FILES_URL.sub(r"\1=\2", text))


@pass_context
def markdown_without_html(context, source: str) -> str:
    """nbconvert's markdown2html, with raw HTML shown as the text it is (mistune's escape) and links of harmful
    protocols (`javascript:`, `data:text/html`, …) made dead: the HTML pages of a notebook — the feedback, the
    formgrader's view — render a student's markdown answer without running what it holds (an `<img onerror=…>`, a
    `<script>`, a link to click). An image of an attachment the cell does not have (nbconvert raises, and the whole
    page failed: the formgrader showed an error instead of the submission) is shown as a broken image. Set for every
    HTMLExporter by `c.HTMLExporter.filters`."""
    cell = context.get("cell", {})
    path = context.get("resources", {}).get("metadata", {}).get("path", "")

    def render(text: str) -> str:
        renderer = IPythonRenderer(escape=True, allow_harmful_protocols=False,
                                   attachments=cell.get("attachments", {}), path=path)
        return MarkdownWithMath(renderer=renderer).render(text)

    try:
        return render(source)
    except InvalidNotebook:                          # "missing attachment: <name>"
        return render(source.replace("attachment:", "missing-attachment:"))
