"""Grading throughput with 1 and 2 Dask workers, back to back: what a deadline burst costs, per core.

    sudo .venv/bin/python bench/grading_scale.py [--submissions 12] [--workers 1 2] [--assignment 01_residual]

A course is made (coursework.make_course) with its gradebook in a PostgreSQL cluster of its own
(addnorm_grading.postgres, run as `nobody`: PostgreSQL refuses root). For each worker count W the feedback service
runs with `engine=dask` and a scheduler and W single-threaded workers of its own on loopback (mutual TLS), over a
store of the HTTP exchange (`identity=exchange`: no Unix user per learner), and is given `--submissions`
submissions of the assignment at once (half right, half wrong, each by a student of its own: 01_residual's wrong one
has Post-LN and Pre-LN swapped, another assignment's is its released notebook, unwritten) once its workers are
warm: a worker's first grading also starts its zygote (torch imported once: addnorm_grading.zygote) and imports
nbgrader, about three times a warm grading, so one submission per worker is graded first and timed apart (the
cold start). The time is from the burst to the last `graded` line of its ledger, which is what a deadline costs a
service that has been running. It prints one line per run and, last,

    grading scale (ASSIGNMENT): W1 1 worker(s) S1/min, W2 2 worker(s) S2/min; ratio R; P submissions/min per worker

The issue's target is a ratio of at least 1.7 on a machine with two free cores. Nothing of this is in `make test`.
With ADDNORM_SCALE_LOG=<path> each run's service output is kept in <path>.w<W>.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from addnorm_grading import coursework, submissions
from addnorm_grading.feedback_service.ledger import Ledger
from addnorm_grading.postgres import Cluster, server_programs

ROOT = Path(__file__).resolve().parent.parent
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"


def burst(store: Path, run: str, count: int, answers: dict[str, str], assignment: str, notebook: str) -> None:
    """`count` submissions as the HTTP exchange stores them, each by a student of its own (named after `run`), all
    at once."""
    inbound = store / "addnorm" / "inbound"
    inbound.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        when = datetime.datetime.now(datetime.timezone.utc).strftime(TIME_FORMAT)
        folder = inbound / f"{run}-s{number:03d}+{assignment}+{when}"
        folder.mkdir()
        (folder / f"{notebook}.ipynb").write_text(answers["right" if number % 2 == 0 else "wrong"])
        (folder / "timestamp.txt").write_text(when)


def wait_for_line(process: subprocess.Popen, words: str, said: list[str], timeout: float = 180) -> None:
    """Read the service's output (into `said`) until a line holds `words`."""
    deadline = time.monotonic() + timeout

    def read():
        for line in process.stdout:
            said.append(line.decode(errors="replace"))

    threading.Thread(target=read, daemon=True).start()
    while time.monotonic() < deadline:
        if any(words in line for line in said):
            return
        if process.poll() is not None:
            sys.exit("the feedback service exited:\n" + "".join(said)[-3000:])
        time.sleep(0.2)
    sys.exit(f"the feedback service did not say {words!r} within {timeout:.0f} s:\n" + "".join(said)[-3000:])


def graded_burst(store: Path, run: str, count: int, answers: dict[str, str], ledger: Ledger,
                 service: subprocess.Popen, said: list[str], assignment: str, notebook: str) -> float:
    """Seconds from a burst of `count` submissions to the ledger's last final line for them (all must be graded)."""
    start = time.monotonic()
    burst(store, run, count, answers, assignment, notebook)
    while True:
        finals = [e for e in ledger.entries()
                  if e.submission.startswith(run + "-") and e.outcome in ("graded", "failed", "not graded")]
        if len(finals) >= count:
            break
        if service.poll() is not None:
            sys.exit("the feedback service exited:\n" + "".join(said)[-3000:])
        time.sleep(0.2)
    elapsed = time.monotonic() - start
    failed = [e for e in finals if e.outcome != "graded"]
    if failed:
        sys.exit(f"{len(failed)} submissions were not graded: {failed[0].detail}")
    return elapsed


def one_run(course: Path, workers: int, count: int, answers: dict[str, str], top: Path, assignment: str,
            notebook: str) -> float:
    """Grade a burst of `count` with `workers` warm workers; return submissions per minute."""
    run = f"w{workers}"
    store, state = top / f"store-{run}", top / f"state-{run}"
    service = subprocess.Popen(
        [sys.executable, "-m", "addnorm_grading.feedback_service", f"--course={course}",
         f"--FeedbackService.exchange={store}", "--FeedbackService.identity=exchange",
         f"--FeedbackService.state={state}", "--FeedbackService.engine=dask", f"--FeedbackService.workers={workers}",
         "--FeedbackService.poll_interval=0.25", "--FeedbackService.settle=0", "--FeedbackService.cooldown=0"],
        env=coursework.nbgrader_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    said: list[str] = []
    try:
        wait_for_line(service, "grading on Dask workers", said)
        ledger = Ledger(state / "ledger")
        cold = graded_burst(store, f"{run}warm", workers, answers, ledger, service, said, assignment, notebook)
        elapsed = graded_burst(store, run, count, answers, ledger, service, said, assignment, notebook)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=120)
        if os.environ.get("ADDNORM_SCALE_LOG"):
            Path(os.environ["ADDNORM_SCALE_LOG"] + f".{run}").write_text("".join(said))
    rate = count / elapsed * 60
    print(f"{workers} worker(s): cold start {cold:.1f} s (one submission each); then {count} submissions in "
          f"{elapsed:.1f} s, {rate:.1f}/min", flush=True)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submissions", type=int, default=12)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--assignment", default="01_residual")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the sandboxed kernels drop to the course's grader user, and PostgreSQL runs as nobody")
    server_programs()
    top = Path(tempfile.mkdtemp(prefix="addnorm-scale-"))
    os.chmod(top, 0o711)
    cluster = Cluster(top / "postgres", "nobody")
    cluster.create()
    try:
        course = coursework.make_course(top / "course")
        with open(course / "nbgrader_config.py", "a") as config:
            config.write(f"\nc.CourseDirectory.db_url = {cluster.url()!r}\n")
        assignment = args.assignment
        coursework.run_nbgrader(["generate_assignment", assignment, "--force"], course)    # into PostgreSQL
        (released,) = (ROOT / "exercises" / assignment).glob("*.ipynb")
        right = submissions.solution_text(assignment, course / "solutions")
        wrong = right.replace("if self.norm_first:", "if not self.norm_first:") if assignment == "01_residual" \
            else released.read_text()
        answers = {"right": right, "wrong": wrong}
        rates = {workers: one_run(course, workers, args.submissions, answers, top, assignment, released.stem)
                 for workers in args.workers}
    finally:
        cluster.stop()
        shutil.rmtree(top, ignore_errors=True)
    parts = [f"{w} worker(s) {rate:.1f}/min" for w, rate in rates.items()]
    first, last = args.workers[0], args.workers[-1]
    print(f"grading scale ({args.assignment}): {', '.join(parts)}; ratio {rates[last] / rates[first]:.2f}; "
          f"{rates[first] / first:.1f} submissions/min per worker")


if __name__ == "__main__":
    main()
