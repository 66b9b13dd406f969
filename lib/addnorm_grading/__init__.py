"""addnorm_grading: the Add & Norm course's grading code, installed with the course; nbgrader_config.py names it.

One idea per module:

| module | holds |
|---|---|
| `course.py` | `read_course`: the course's constants from course.toml (id, exchange, sandbox limits, hub users) |
| `execute.py` | `BudgetedExecute` (a time budget per notebook), `SandboxedExecute` (each kernel in the sandbox) |
| `sandbox.py` | the sandbox launcher behind the `addnorm-sandbox` kernelspec (`kernels/`): bubblewrap, setpriv, prlimit |
| `withheld.py` | the copy of `addnorm` a grading kernel reads: the functions an exercise withholds raise in it |
| `restore.py` | `LogEditedCells`: deleted and edited test cells put back, edits logged |
| `tracebacks.py` | `CleanTracebacks`, `WrapErrorMessages`: error outputs a learner can read |
| `validate.py` | `nbgrader validate` wraps long messages instead of cutting them |
| `grade_class.py` | `python -m addnorm_grading.grade_class`: a class on every core (`make grade`) |
| `self_check.py` | `python -m addnorm_grading.self_check`: a learner grades their own notebooks (`make check`) |
| `coursework.py` | a throw-away course folder: make it, hand in, run nbgrader, read scores (tests, benches, self-check) |
| `submissions.py` | learner notebooks written from the instructor's: mistakes, alternatives, hostile cells |

Nothing here computes an exercise's answer: a sandboxed kernel can read the installed package (and reads addnorm
only in the copy `withheld.py` makes).
"""
