"""The course JupyterHub, one assignment's whole nbgrader cycle, in headless Chromium (`make hub` / `make hub-down`).

The test starts the hub exactly as a person does (`make hub`: real Unix users `instructor`, `student1`..`student3`,
each logging in through PAM with a password of their own, the exchange in /usr/local/share/nbgrader/exchange), adds
a class list with `make hub-enroll` (one more student, who can log in), then, in the browser, with every request to
a host other than 127.0.0.1 aborted (and a wrong password refused):

1. the instructor opens the formgrader (its pages, not a blank panel), sees every assignment of solutions/ there and
   releases each of them;
2. student1 opens the Assignment List, fetches, writes a correct solution, submits; student2 submits a wrong one
   (Post-LN and Pre-LN swapped); neither student's menu has Formgrader or Create Assignment;
3. the feedback service grades both submissions as they arrive (its ledger); then the instructor collects in the
   formgrader, autogrades (`nbgrader autograde 01_residual` as the instructor, the
   command the guide gives), enters a manual grade for the written answer, generates and releases feedback;
4. student1 fetches the feedback and sees their own score;
5. as the Unix user student2 (runuser): student1's work, the exchange's inbound and feedback listings, the
   instructor's solutions/ and gradebook (PostgreSQL: its password, its data, a connection without the password)
   are all out of reach, while student2's own notebook is readable.

Finally `make hub-down` runs and the test checks that no user (the enrolled one too), home or process of the hub
is left. Screenshots of
each step go to _build/screenshots/hub/. Any hub already running is taken down first (it needs a clean course).
Needs root (it creates users): skipped otherwise, with that reason.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from addnorm_grading.feedback_service.ledger import Ledger

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the course hub creates Unix users: run the tests as root"),
]

ROOT = Path(__file__).resolve().parent.parent
HUB_HOME = Path("/opt/addnorm-hub")
BASE = "http://127.0.0.1:8000"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
CONSTANTS = tomllib.loads((ROOT / "course.toml").read_text())       # what hub/hubctl.py reads too
INSTRUCTOR = CONSTANTS["hub"]["instructor"]
USERS = (INSTRUCTOR, *CONSTANTS["hub"]["students"])
FIRST, SECOND = CONSTANTS["hub"]["students"][:2]                    # student1 answers right, student2 wrong
ENROLLED = "student9"                                               # added by `make hub-enroll` from a class list
COURSE = Path("/home") / INSTRUCTOR / CONSTANTS["course"]["id"]
EXCHANGE = Path(CONSTANTS["course"]["exchange"]) / CONSTANTS["course"]["id"]
ASSIGNMENTS = sorted(folder.name for folder in (ROOT / "solutions").iterdir() if folder.is_dir())
GRADEBOOK = HUB_HOME / "postgres"                                  # the gradebook's cluster, the instructor's
ASSIGNMENT = "01_residual"
NOTEBOOK = "residual.ipynb"
SHOTS = ROOT / "_build" / "screenshots" / "hub"
TIMEOUT_MS = 120_000
WRITTEN_ANSWER = ("Post-LN normalizes after every addition, so the stream is re-scaled at every block. In Pre-LN "
                  "the stream is an un-normalized running sum that grows with depth; a final LayerNorm is needed.")


def make(target: str, *variables: str) -> subprocess.CompletedProcess:
    """Run `make <target> [NAME=value …]` in the repository, as a person would."""
    return subprocess.run(["make", "-C", str(ROOT), target, *variables], capture_output=True, text=True, timeout=1200)


def as_user(user: str, *cmd: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run a command as a hub user in a clean environment with the hub's Python first on PATH (as their terminal)."""
    env = ["env", "-i", f"HOME=/home/{user}", f"USER={user}", f"LOGNAME={user}", "LANG=C.UTF-8",
           f"PATH={HUB_HOME}/venv/bin:/usr/bin:/bin"]
    return subprocess.run(["runuser", "-u", user, "--", *env, *cmd], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=600)


def processes_of(uids: set[int]) -> list[int]:
    """PIDs of live processes owned by any of `uids`."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid in uids:
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


# --------------------------------------------------------------------------- the hub and the browser


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A fresh course hub started with `make hub`; `make hub-down` afterwards must leave nothing behind."""
    make("hub-down")                                   # a clean course, whatever ran before
    shutil.rmtree(SHOTS, ignore_errors=True)
    started = time.monotonic()
    result = make("hub")
    assert result.returncode == 0, f"make hub failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    print(f"make hub: {time.monotonic() - started:.0f} s")
    learners_read_it = subprocess.run(["runuser", "-u", "nobody", "--", "ls", str(ROOT / "solutions")],
                                      capture_output=True).returncode == 0
    warned = f"every user on this machine, learners included, can read {ROOT}'s" in result.stdout
    assert warned == learners_read_it, f"readable by others: {learners_read_it}; make hub said:\n{result.stdout}"
    again = make("hub")
    assert again.returncode == 0 and "already running" in again.stdout, f"a second make hub:\n{again.stdout}"
    class_list = tmp_path_factory.mktemp("class") / "students.csv"
    class_list.write_text(f"id,first_name,last_name,email\n{ENROLLED},Ada,Lovelace,ada@example.org\n")
    enrolled = make("hub-enroll", f"CLASS={class_list}")
    assert enrolled.returncode == 0, f"make hub-enroll failed:\n{enrolled.stdout[-3000:]}\n{enrolled.stderr[-3000:]}"
    listed = as_user(INSTRUCTOR, "nbgrader", "db", "student", "list", cwd=COURSE)
    assert ENROLLED in listed.stdout and "Lovelace" in listed.stdout, f"not in the gradebook:\n{listed.stdout}"
    everyone = (*USERS, ENROLLED)
    uids = {pwd.getpwnam(user).pw_uid for user in everyone}
    for user in everyone:
        assert os.stat(f"/home/{user}").st_mode & 0o777 == 0o700, f"/home/{user} must be mode 0700"
    passwords_file = HUB_HOME / "state" / "passwords"
    mode = os.stat(passwords_file)
    assert mode.st_uid == 0 and mode.st_mode & 0o777 == 0o600, "the passwords file must be root's alone (0600)"
    passwords = dict(line.split(" ", 1) for line in passwords_file.read_text().splitlines())
    assert set(passwords) == set(everyone) and len(set(passwords.values())) == len(everyone), "one password each"
    try:
        yield passwords
    finally:
        down = make("hub-down")
        assert down.returncode == 0, f"make hub-down failed:\n{down.stdout}\n{down.stderr}"
        left_users = [user for user in everyone if _exists(user)]
        left_homes = [user for user in everyone if Path(f"/home/{user}").exists()]
        assert not left_users and not left_homes, f"make hub-down left users {left_users}, homes {left_homes}"
        assert not processes_of(uids), "make hub-down left processes of the hub's users"
        assert not (HUB_HOME / "state").exists() and not EXCHANGE.exists() and not GRADEBOOK.exists()


def _exists(user: str) -> bool:
    """Whether a Unix user of that name exists."""
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium through Playwright (fails, not skips, when missing: `make browser` installs it)."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} is missing: install it with `make browser`")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def loopback_only(route: Any) -> None:
    """Let requests to 127.0.0.1 through; abort every other host."""
    if urlsplit(route.request.url).hostname in {"127.0.0.1", "localhost"}:
        route.continue_()
    else:
        route.abort()


def log_in(browser: Any, user: str, password: str) -> Any:
    """A page in a fresh browser context, logged in as `user`, with their JupyterLab loaded."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.route("**/*", loopback_only)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{BASE}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_selector("#jp-main-dock-panel")
    page.wait_for_selector(".jp-DirListing-content")
    return page


def shot(page: Any, name: str) -> None:
    """Save a screenshot of the page as _build/screenshots/hub/<name>.png."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"))


def nbgrader_menu(page: Any, screenshot: str) -> list[str]:
    """The entries of JupyterLab's Nbgrader menu, with a screenshot of it open (it is closed again afterwards)."""
    page.click(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
    entries = page.locator(".lm-Menu .lm-Menu-itemLabel").all_inner_texts()
    shot(page, screenshot)
    page.keyboard.press("Escape")
    return [entry.strip() for entry in entries]


def open_from_menu(page: Any, entry: str) -> None:
    """Open an entry of the Nbgrader menu."""
    page.click(".lm-MenuBar-itemLabel:text-is('Nbgrader')")
    page.click(f".lm-Menu .lm-Menu-itemLabel:text-is('{entry}')")


# --------------------------------------------------------------------------- the formgrader (inside JupyterLab)


def formgrader(page: Any) -> Any:
    """The formgrader's frame in the instructor's JupyterLab, on Manage Assignments, with its table loaded."""
    with page.expect_response(lambda response: "/formgrader/manage_assignments" in response.url) as loaded:
        open_from_menu(page, "Formgrader")
    policy = loaded.value.headers.get("content-security-policy", "")
    assert "frame-ancestors 'self'" in policy, f"the formgrader may not be framed by JupyterLab: CSP {policy!r}"
    frame = page.frame_locator("iframe[src*='formgrader']")
    frame.locator("h1:text-is('Manage Assignments')").wait_for()
    frame.locator(f"td.name:has-text('{ASSIGNMENT}')").wait_for()
    return frame


def assignment_action(page: Any, frame: Any, column: str, message: str, screenshot: str,
                      assignment: str = ASSIGNMENT) -> None:
    """Click a Manage Assignments button (release, collect, ...) for an assignment; wait for its success message.

    The formgrader redraws its table whenever it reloads it, and a click on a link that is redrawn at that moment
    opens no dialog: then the click is repeated (at most three times; every action here may be run again).
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    row = frame.locator("tr", has=frame.locator(f"td.name:has-text('{assignment}')"))
    dialog = frame.locator(".modal-dialog:visible")
    for attempt in range(1, 4):
        row.locator(f"td.{column} a").click()
        try:
            dialog.wait_for(timeout=40_000)
            break
        except PlaywrightTimeout:
            shot(page, f"{screenshot}-no-dialog-after-attempt-{attempt}")
    else:
        raise AssertionError(f"formgrader {column} of {assignment}: three clicks opened no dialog")
    text = dialog.inner_text()
    shot(page, screenshot)
    assert message in text, f"formgrader {column}: expected {message!r}, got:\n{text}"
    dialog.locator("button:has-text('OK')").click()
    dialog.wait_for(state="hidden")


# --------------------------------------------------------------------------- the students' side


def assignment_list(page: Any) -> None:
    """Open the Assignment List and wait until it has loaded the released assignments."""
    open_from_menu(page, "Assignment List")
    page.wait_for_selector(f"#released_assignments_list:has-text('{ASSIGNMENT}'), "
                           f"#fetched_assignments_list:has-text('{ASSIGNMENT}')")


def solved(notebook: dict, correct: bool) -> dict:
    """The fetched notebook with the instructor's solution code pasted in (Post-/Pre-LN swapped unless `correct`)."""
    source = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    solutions = {cell["metadata"]["nbgrader"]["grade_id"]: "".join(cell["source"])
                 for cell in source["cells"] if cell["metadata"].get("nbgrader", {}).get("solution")}
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in solutions and cell["cell_type"] == "code":
            code = "\n".join(line for line in solutions[grade_id].split("\n") if "### " not in line)
            cell["source"] = code if correct else code.replace("if self.norm_first:", "if not self.norm_first:")
        elif grade_id in solutions:
            cell["source"] = WRITTEN_ANSWER
    return notebook


def write_solution(student: str, correct: bool) -> None:
    """Write the student's answers into their fetched notebook, as that Unix user."""
    path = Path(f"/home/{student}/{ASSIGNMENT}/{NOTEBOOK}")
    notebook = solved(json.loads(path.read_text()), correct)
    result = as_user(student, "sh", "-c", 'cat > "$0"', str(path), stdin=json.dumps(notebook, indent=1))
    assert result.returncode == 0, result.stderr


def fetch_and_submit(browser: Any, password: str, student: str, correct: bool) -> Any:
    """A student logs in, fetches the assignment in the Assignment List, answers, and submits it there."""
    page = log_in(browser, student, password)
    menu = nbgrader_menu(page, f"04-{student}-menu")
    assert "Assignment List" in menu and not {"Formgrader", "Create assignment", "Course List"} & set(menu), (
        f"{student}'s Nbgrader menu should offer only the student tools, it has {menu}")
    formgrader_page = page.context.request.get(f"{BASE}/user/{student}/formgrader/manage_assignments")
    assert formgrader_page.status == 404, f"{student}'s server serves the formgrader (HTTP {formgrader_page.status})"
    assignment_list(page)
    released = page.locator("#released_assignments_list .list_item",
                            has=page.locator(f".item_name:has-text('{ASSIGNMENT}')"))
    released.locator("button:has-text('Fetch')").click()
    page.wait_for_selector(f"#fetched_assignments_list:has-text('{ASSIGNMENT}')")
    shot(page, f"05-{student}-fetched")
    write_solution(student, correct)
    page.locator("#fetched_assignments_list button:has-text('Submit')").first.click()
    page.wait_for_selector(f"#submitted_assignments_list:has-text('{ASSIGNMENT}')")
    shot(page, f"06-{student}-submitted")
    return page


# --------------------------------------------------------------------------- the cycle


def refused(browser: Any, user: str, password: str) -> bool:
    """Whether the hub's login page turns this user and password away (it stays on the login page, saying so)."""
    context = browser.new_context()
    context.route("**/*", loopback_only)
    page = context.new_page()
    page.goto(f"{BASE}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_load_state()
    turned_away = "/hub/login" in page.url and "Invalid username or password" in page.locator("body").inner_text()
    context.close()
    return turned_away


def test_course_cycle_on_the_hub(hub: dict[str, str], browser: Any) -> None:
    """Release, fetch, submit, collect, autograde, manual grade, feedback on the hub; students see only their own."""
    started = time.monotonic()
    passwords = hub
    assert refused(browser, FIRST, passwords[SECOND]), "student1 logged in with student2's password"
    assert refused(browser, "root", passwords[FIRST]), "a user outside the course's group was let in"
    enrolled = log_in(browser, ENROLLED, passwords[ENROLLED])          # enrolled from the class list
    shot(enrolled, f"00-{ENROLLED}-enrolled-logged-in")
    enrolled.context.close()

    teacher = log_in(browser, INSTRUCTOR, passwords[INSTRUCTOR])
    assert {"Formgrader", "Create assignment", "Assignment List"} <= set(nbgrader_menu(teacher, "01-instructor-menu"))
    frame = formgrader(teacher)
    listed = frame.locator("td.name").all_inner_texts()
    shot(teacher, "02-instructor-formgrader")
    assert sorted(name.strip() for name in listed) == ASSIGNMENTS, f"the formgrader lists {listed}, not {ASSIGNMENTS}"
    for assignment in ASSIGNMENTS:
        assignment_action(teacher, frame, "release", f"Successfully released '{assignment}'",
                          f"03-instructor-released-{assignment}", assignment)

    student1 = fetch_and_submit(browser, passwords[FIRST], FIRST, correct=True)
    student2 = fetch_and_submit(browser, passwords[SECOND], SECOND, correct=False)
    student2.context.close()
    early = graded_by_the_service([FIRST, SECOND])
    assert early[FIRST].startswith("score 6/8") and early[SECOND].startswith("score 1/8"), early

    frame.locator("a:text-is('Manage Assignments')").click()            # reload it: now with a Collect button
    assignment_action(teacher, frame, "collect", f"Successfully collected submissions of '{ASSIGNMENT}'",
                      "07-instructor-collected")
    for student in (FIRST, SECOND):
        assert (COURSE / "submitted" / student / ASSIGNMENT / NOTEBOOK).is_file(), f"{student}'s work not collected"
    graded = as_user(INSTRUCTOR, "nbgrader", "autograde", ASSIGNMENT, cwd=COURSE)
    assert graded.returncode == 0, f"autograde failed:\n{graded.stdout[-3000:]}\n{graded.stderr[-3000:]}"

    grade_written_answer(teacher, frame, FIRST, points=2)
    assignment_action(teacher, frame, "generate-feedback", f"Successfully generated feedback of '{ASSIGNMENT}'",
                      "09-instructor-feedback-generated")
    assignment_action(teacher, frame, "release-feedback", f"Successfully released feedback of '{ASSIGNMENT}'",
                      "10-instructor-feedback-released")
    assert scores() == {FIRST: 8.0, SECOND: 1.0}, "the gradebook's totals (out of 8) are not as expected"
    assert not (COURSE / "gradebook.db").exists(), "the hub's course graded into SQLite, not its PostgreSQL cluster"

    student1.reload()
    student1.wait_for_selector("#jp-main-dock-panel")
    feedback = fetch_feedback(student1, FIRST)
    shot(student1, f"11-{FIRST}-feedback-fetched")
    student1.goto(f"{BASE}/user/{FIRST}/files/{feedback.relative_to(f'/home/{FIRST}').as_posix()}")
    body = student1.locator("body").inner_text()
    shot(student1, f"12-{FIRST}-feedback")
    assert re.search(r"residual \(Score: 8\.0 / 8\.0\)", body), f"student1's feedback lacks 8 / 8:\n{body[:1500]}"

    check_student2_sees_only_their_own(feedback)
    print(f"hub browser cycle: {time.monotonic() - started:.0f} s; user servers' memory: {server_memory()}")


def graded_by_the_service(students: list[str], timeout: float = 180) -> dict[str, str]:
    """Wait until the feedback service's ledger shows each student's submission graded; return their details."""
    ledger = Ledger(COURSE / "feedback-service" / "ledger")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        graded = {entry.submission.split("+")[0]: entry.detail for entry in ledger.graded()}
        if set(students) <= set(graded):
            return graded
        time.sleep(1)
    raise AssertionError(f"the feedback service did not grade {students} within {timeout:.0f} s: {ledger.entries()}")


def grade_written_answer(page: Any, frame: Any, student: str, points: int) -> None:
    """In the formgrader, open the student's notebook (Manage Students) and score its written answer."""
    frame.locator("a:text-is('Manage Students')").click()
    frame.locator(f"a[href$='/manage_students/{student}']").click()
    frame.locator(f"a[href$='/manage_students/{student}/{ASSIGNMENT}']").click()
    frame.locator("a[href*='/formgrader/submissions/']").click()      # the assignment's one notebook
    score = frame.locator("input.score.needs_manual_grade")
    score.wait_for()
    score.fill(str(points))
    with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT") as saved:
        score.press("Tab")                              # the change event saves the grade
    assert saved.value.ok, f"the formgrader did not save the grade: HTTP {saved.value.status}"
    shot(page, "08-instructor-manual-grade")
    go_to_manage_assignments(page)


def go_to_manage_assignments(page: Any) -> None:
    """Navigate the formgrader frame back to Manage Assignments."""
    frame = page.frame_locator("iframe[src*='formgrader']")
    frame.locator("a:text-is('Manual Grading')").first.click()      # the grading page's breadcrumb
    frame.locator("a:text-is('Manage Assignments')").click()
    frame.locator(f"td.name:has-text('{ASSIGNMENT}')").wait_for()


def scores() -> dict[str, float]:
    """Each student's total score for the assignment, from `nbgrader export` run as the instructor."""
    exported = as_user(INSTRUCTOR, "nbgrader", "export", cwd=COURSE)          # writes grades.csv
    assert exported.returncode == 0, exported.stderr
    lines = (COURSE / "grades.csv").read_text().strip().splitlines()
    header = lines[0].split(",")
    rows = [line.split(",") for line in lines[1:] if line.startswith(ASSIGNMENT)]
    return {row[header.index("student_id")]: float(row[header.index("score")])
            for row in rows if row[header.index("timestamp")]}


def feedback_file(student: str, timeout: float = 60) -> Path | None:
    """The feedback HTML the student fetched, once it is there (None if it is not there within `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(Path(f"/home/{student}/{ASSIGNMENT}/feedback").glob(f"*/{Path(NOTEBOOK).stem}.html"))
        if found:
            return found[-1]
        time.sleep(0.5)
    return None


def fetch_feedback(page: Any, student: str, attempts: int = 3) -> Path:
    """Click Fetch Feedback in the student's Assignment List; return the feedback file it fetched.

    The Assignment List loads its three lists one after the other and redraws them as each arrives; a click on a
    button that is redrawn at that moment is lost. So the list is opened afresh and the click repeated, at most
    `attempts` times, until the file is there.
    """
    for attempt in range(1, attempts + 1):
        assignment_list(page)
        button = page.locator("#submitted_assignments_list button:has-text('Fetch Feedback')").first
        button.wait_for()
        page.wait_for_load_state("networkidle")
        button.click()
        found = feedback_file(student, timeout=30)
        if found:
            return found
        shot(page, f"11-{student}-no-feedback-after-attempt-{attempt}")
    listed = page.locator("#submitted_assignments_list").inner_text()
    raise AssertionError(f"{student} fetched no feedback in {attempts} attempts; the list shows:\n{listed}")


def check_student2_sees_only_their_own(student1_feedback: Path) -> None:
    """As the Unix user student2: their own work is readable; student1's, the exchange's, the instructor's are not."""
    own = as_user(SECOND, "cat", f"/home/{SECOND}/{ASSIGNMENT}/{NOTEBOOK}")
    assert own.returncode == 0 and "not self.norm_first" in own.stdout, "student2 cannot read their own notebook"
    forbidden = {
        "student1's notebook": ["cat", f"/home/{FIRST}/{ASSIGNMENT}/{NOTEBOOK}"],
        "student1's feedback": ["cat", str(student1_feedback)],
        "student1's home": ["ls", f"/home/{FIRST}"],
        "the exchange's inbound submissions": ["ls", str(EXCHANGE / "inbound")],
        "the exchange's feedback": ["ls", str(EXCHANGE / "feedback")],
        "the instructor's solutions/": ["cat", str(COURSE / "solutions" / ASSIGNMENT / NOTEBOOK)],
        "the gradebook's password": ["cat", str(GRADEBOOK / "password")],
        "the gradebook's data": ["ls", str(GRADEBOOK / "data")],
        "the gradebook, without its password": ["psql", "--no-password", "--host=127.0.0.1",
                                                f"--port={(GRADEBOOK / 'port').read_text().strip()}",
                                                "--username=addnorm", "--dbname=gradebook", "--command=select 1"],
        "the hidden checks": ["ls", str(COURSE / "checks")],
        "the course's secret": ["cat", str(COURSE / "checks" / "secret")],
        "the collected submissions": ["ls", str(COURSE / "submitted")],
        "the feedback service's ledger": ["cat", str(COURSE / "feedback-service" / "ledger")],
        "the feedback service's PID": ["kill", "-0", (COURSE / "feedback-service" / "service.pid").read_text().strip()],
    }
    readable = [what for what, cmd in forbidden.items() if as_user(SECOND, *cmd).returncode == 0]
    assert not readable, f"student2 can read {readable}"
    refused = as_user(SECOND, *forbidden["the gradebook, without its password"])
    assert "no password supplied" in refused.stderr, f"not refused by PostgreSQL itself: {refused.stderr}"


def server_memory() -> str:
    """The resident memory of each running user server (jupyterhub-singleuser), in MB."""
    sizes = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"jupyterhub-singleuser" in (entry / "cmdline").read_bytes():
                rss = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("VmRSS"))
                sizes.append(f"{pwd.getpwuid(entry.stat().st_uid).pw_name} {int(rss.split()[1]) // 1024} MB")
        except (OSError, StopIteration, KeyError):
            pass
    return ", ".join(sorted(sizes))
