"""A short feedback page for a submission the service will not grade (past the attempt limit), so that the learner
who clicks *Fetch Feedback* reads why instead of finding nothing.

It goes where nbgrader's release_feedback puts feedback (the exchange's feedback folder, under the hash of the
submission's secret and the notebook's name), so the Assignment List fetches it like any other.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from nbgrader.utils import notebook_hash

from addnorm_grading.feedback_service.inbound import Submission

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{notebook}: not graded</title></head>
<body><main><h1>{notebook}: this submission was not graded</h1><p>{message}</p></main></body></html>
"""


def release_notice(feedback_folder: Path, submission: Submission, message: str) -> None:
    """Write the notice as the feedback of each notebook of the submission (it must carry nbgrader's secret; in the
    HTTP exchange's store, the feedback folder of the submission itself)."""
    notebooks = [notebook.stem for notebook in sorted(submission.path.glob("*.ipynb"))]
    if submission.stamped_by_exchange:
        folder = feedback_folder / submission.name
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        pages = {notebook: folder / f"{notebook}.html" for notebook in notebooks}
    else:
        secret_file = submission.path / "submission_secret.txt"
        if not secret_file.is_file():
            return
        secret = secret_file.read_text()
        feedback_folder.mkdir(mode=0o711, parents=True, exist_ok=True)
        pages = {notebook: feedback_folder / f"{notebook_hash(secret=secret, notebook_id=notebook)}.html"
                 for notebook in notebooks}
    for notebook, page in pages.items():
        temporary = page.with_suffix(".tmp")
        temporary.write_text(PAGE.format(notebook=html.escape(notebook), message=html.escape(message)))
        os.chmod(temporary, 0o644)
        os.replace(temporary, page)
