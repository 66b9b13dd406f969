"""nbgrader settings of the Add & Norm course: the course folder is the folder of this file.

A course folder holds this file, course.toml (the course's constants) and solutions/ (the instructor notebooks),
in an environment where the course is installed (`pip install ".[course]"`: the grading package addnorm_grading).
Settings only: classes are named by dotted path, each list in the order it runs (guide/instructors.md: the commands).
"""

from pathlib import Path

import addnorm_grading.validate  # noqa: F401  (`nbgrader validate` wraps long messages instead of cutting them)
from addnorm_grading.course import read_course

c = get_config()  # noqa: F821  (provided by traitlets when it loads this file)
course = read_course(Path(__file__).with_name("course.toml"))

# --- the course: ids and folders ----------------------------------------------------------------------------
c.CourseDirectory.course_id = course.id
c.CourseDirectory.source_directory = "solutions"     # instructor versions: solutions/<assignment>/<notebook>.ipynb
c.CourseDirectory.release_directory = "exercises"    # learner versions:    exercises/<assignment>/<notebook>.ipynb
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]  # helpers live in locked cells
c.ExchangeFactory.collect = "addnorm_grading.exchange.SafeCollect"   # collect leaves a submission's symbolic links out
c.Application.logging_config = {"formatters": {"console": {"class": "addnorm_grading.printable.PrintableFormatter"}}}

# --- generate_assignment: the learner version ---------------------------------------------------------------
c.ClearSolutions.begin_solution_delimeter = "BEGIN SOLUTION"      # (nbgrader's spelling of "delimiter")
c.ClearSolutions.end_solution_delimeter = "END SOLUTION"
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.ClearSolutions.enforce_metadata = True            # a solution region outside a solution cell is an error
c.ClearHiddenTests.begin_test_delimeter = "BEGIN HIDDEN TESTS"
c.ClearHiddenTests.end_test_delimeter = "END HIDDEN TESTS"
# --- autograde: first the submission is made whole (edited or deleted tests come back; a broken structure is rebuilt)
c.Autograde.exporter_class = "addnorm_grading.structure.TolerantExporter"   # a file that is no notebook: "not graded"
c.Autograde.sanitize_preprocessors = [
    "addnorm_grading.structure.RestoreStructure", "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds", "nbgrader.preprocessors.OverwriteKernelspec",
    "addnorm_grading.restore.LogEditedCells", "nbgrader.preprocessors.CheckCellMetadata"]
c.OverwriteCells.add_missing_cells = True

# --- autograde: then it runs in the sandbox (course.toml's [sandbox] limits; guide/instructors.md, "Safe grading").
# The opt-out, at your own risk: ADDNORM_UNSAFE_GRADING=1, or --SandboxedExecute.kernel_name=python3.
c.Autograde.autograde_preprocessors = [
    "addnorm_grading.execute.SandboxedExecute", "addnorm_grading.tracebacks.CleanTracebacks",
    "nbgrader.preprocessors.IgnorePattern", "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput", "nbgrader.preprocessors.SaveAutoGrades",
    "addnorm_grading.structure.RecordStructure", "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata"]
c.SandboxedExecute.course_file = str(course.root / "course.toml")
c.ExecutePreprocessor.timeout = 60                  # seconds per cell; a longer one is interrupted, the rest still runs
c.ExecutePreprocessor.interrupt_on_timeout = True
c.ExecutePreprocessor.startup_timeout = 120         # a cold kernel that imports torch can be slow to start
c.BudgetedExecute.notebook_timeout = 300            # seconds per notebook; past it, no cell runs (NotebookTimeout)
c.Execute.extra_arguments = ["--InteractiveShell.xmode=Plain"]   # short tracebacks: the message, not the tests
c.Execute.shutdown_kernel = "immediate"             # a graded kernel has nothing to save (a graceful stop: ~0.6 s)
c.LimitOutput.max_lines = 1000                      # a runaway print cannot bloat the graded notebook
c.LimitOutput.max_traceback = 100
# --- feedback: the failing assertion messages, not the hidden tests' code; the visible ones alone before the due date
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades", "addnorm_grading.feedback.VisibleBeforeDue",
    "addnorm_grading.feedback.ClearHiddenTestsOfTests", "addnorm_grading.tracebacks.CleanTracebacks",
    "addnorm_grading.tracebacks.WrapErrorMessages", "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor"]
c.HTMLExporter.sanitize_html = True                 # feedback and formgrader: no script or raw HTML in outputs,
c.HTMLExporter.filters = {"markdown2html": "addnorm_grading.feedback.markdown_without_html",     # nor in markdown,
                          "strip_files_prefix": "addnorm_grading.feedback.strip_files_prefix"}   # in linear time
c.Validator.width = 100                             # `nbgrader validate` wraps its messages at this width
