"""Feedback the minute a learner submits: a JupyterHub-managed service that grades each new submission on its own.

nbgrader grades a class when the instructor runs collect → autograde → generate_feedback → release_feedback; its
maintainers leave feedback on submit out of scope (nbgrader#988). This service, started by the hub as the instructor
(hub/jupyterhub_config.py), watches the exchange's inbound folder and for each new submission, one at a time per
student and assignment:

1. checks that it is the named student's own work (`addnorm_grading.exchange.refusal`: every file theirs, no
   symbolic link) and within the attempt limit; a refused submission is logged and changes nobody's grade;
2. waits out the cooldown after the student's previous graded submission (a newer submission meanwhile supersedes
   the waiting one);
3. copies it into submitted/, autogrades it (the sandboxed kernel and the judge of nbgrader_config.py), generates
   and releases that student's feedback — the visible checks only before the due date
   (`addnorm_grading.feedback`), the whole grade after it, when the service releases it again.

Every step is recorded in the ledger (`ledger`), one line each; the gradebook is SQLite in WAL mode, so the
formgrader reads while the service writes, or PostgreSQL (`addnorm_grading.postgres`). With `engine=dask` the
grading runs on Dask workers that share no disk with the service (`remote`). With `identity=exchange` it reads the
HTTP exchange's store instead (addnorm_grading.http_exchange): the student and the time are what the exchange
service wrote from the hub's token and its clock, and feedback goes back into the store. The service has no HTTP API: nothing a student can call. Killed, it is
restarted by the hub; it grades what the ledger does not show as finished, and nothing twice.

    python -m addnorm_grading.feedback_service [--FeedbackService.cooldown=120] [--FeedbackService.attempt_limit=10]
                                              [--FeedbackService.workers=2] [--course=.]
"""
