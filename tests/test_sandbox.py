"""Autograding contains hostile submissions (issue 10): a plain `nbgrader autograde` runs each kernel in the sandbox.

One class, one assignment (01_residual): a correct student, and students whose otherwise correct notebook has one
extra cell, placed before the tests, that attacks the grader — reads the hidden tests, rewrites the gradebook,
writes outside its scratch folder, forks without end, allocates 8 GiB, connects to a port this test listens on,
kills its parent and every process it can see, loops forever, exits, or floods its output. Each attack must have
no effect outside the submission, the grader must finish, and every other student must be graded as usual. A few
slow students are graded in a copy of the course by a second `nbgrader autograde` at the same time. No
opt-out is used: these tests fail (not skip) on a machine without the sandbox. Marked slow (a few minutes).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from addnorm_grading import coursework, sandbox, submissions
from addnorm_grading.course import read_course
from addnorm_grading.judge import Judge

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"

pytestmark = pytest.mark.slow

ASSIGNMENT, NOTEBOOK = "01_residual", "residual"
CELL_TIMEOUT = 15
SECRET_LINES = ["BEGIN HIDDEN TESTS", "torch.manual_seed(11)"]     # only in the instructor's test cells

TRACE_TAG = "addnorm-trace"
# One helper: argv = its kernel's token, its number. Prints "TRACES own=F,P,S,Q foreign=F,P,S,Q" (files, processes,
# sockets, queues found that are of its own kernel's other helper / of anybody else), then lingers.
TRACES_HELPER = r"""
import ctypes, glob, os, socket, sys, time
TAG = "addnorm-trace"
K, me = sys.argv[1], sys.argv[2]
name = "%s-%s-%s" % (TAG, K, me)
places = set(["/tmp", "/dev/shm", os.getcwd(), os.path.expanduser("~")])
for line in open("/proc/self/mounts"):
    point, options = line.split()[1], line.split()[3]
    if "rw" in options.split(",") and not point.startswith(("/proc", "/sys")):
        places.add(point)
for place in places:
    try:
        open(os.path.join(place, name), "w").write(K)
    except OSError:
        pass
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind("\0" + name)
server.listen()
kid = int(K[:6], 16)
ctypes.CDLL(None).msgget((kid << 4) | int(me), 0o1666)
def ancestors():
    pid, seen = os.getpid(), set()
    while pid > 0 and pid not in seen:
        seen.add(pid)
        try:
            pid = int(open("/proc/%d/status" % pid).read().split("PPid:")[1].split()[0])
        except (OSError, IndexError):
            break
    return seen
def look():
    own, foreign = [0, 0, 0, 0], [0, 0, 0, 0]
    for place in places:
        for path in glob.glob(os.path.join(place, TAG + "-*")):
            if os.path.basename(path) != name:
                (own if os.path.basename(path).startswith("%s-%s-" % (TAG, K)) else foreign)[0] += 1
    mine = ancestors()
    for entry in glob.glob("/proc/[0-9]*"):
        try:
            cmdline = open(entry + "/cmdline", "rb").read()
        except OSError:
            continue
        # a zombie has no command line; a forked kernel's sandbox holds its own waiting program (root, which the
        # kernel cannot signal: addnorm_grading.zygote), at pid 2
        waiting = entry == "/proc/2" and cmdline.startswith(b"cat\0") and cmdline.endswith(b"/kernel/alive\0")
        if int(entry[6:]) not in mine and cmdline and not waiting:
            (own if K.encode() in cmdline else foreign)[1] += 1
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        socket_name = line.split()[-1]
        if socket_name.startswith("@" + TAG) and socket_name != "@" + name:
            (own if socket_name.startswith("@%s-%s-" % (TAG, K)) else foreign)[2] += 1
    for line in open("/proc/sysvipc/msg").read().splitlines()[1:]:
        key = int(line.split()[0])
        if key != (kid << 4) | int(me):
            (own if key >> 4 == kid else foreign)[3] += 1
    return own, foreign
found_own, found_foreign = [0, 0, 0, 0], [0, 0, 0, 0]
started = time.monotonic()
while time.monotonic() - started < 8:
    own, foreign = look()
    found_own = [max(a, b) for a, b in zip(found_own, own)]
    found_foreign = [max(a, b) for a, b in zip(found_foreign, foreign)]
    time.sleep(0.5)
print("TRACES own=%s foreign=%s" % (",".join(map(str, found_own)), ",".join(map(str, found_foreign))), flush=True)
time.sleep(600)
"""
TRACES_CELL = f"""
import secrets, subprocess, sys
token = secrets.token_hex(4)
helpers = [subprocess.Popen([sys.executable, "-c", {TRACES_HELPER!r}, token, str(n)], stdout=subprocess.PIPE,
                            text=True, start_new_session=True) for n in (1, 2)]
for helper in helpers:
    print(helper.stdout.readline().strip())
print("ATTEMPTED")
""".replace("{", "{{").replace("}", "}}")      # ATTACKS are str.format templates

# student -> the code of the extra cell; {course}, {port} and {drop} are filled in by the fixture
ATTACKS = {
    "reads_hidden_tests": '''
import glob, os
import addnorm
installed = os.path.dirname(os.path.dirname(addnorm.__file__))   # lib/ of the course's packages (editable install)
print("UID", os.geteuid())
for pattern in ["{course}/solutions/**/*.ipynb", "{course}/**/*.ipynb", "{course}/../**/*.ipynb", "**/*.ipynb",
                "/tmp/**/*", "/root/**/*.ipynb", "/home/**/*.ipynb", "/usr/local/share/nbgrader/**/*"]:
    for path in glob.glob(pattern, recursive=True):
        # the Python environment and the installed packages are visible by design (read-only; under /tmp when the
        # checkout is, and nbgrader's and addnorm_grading's code name the hidden-test markers): skip them, and print
        # a file only if it holds a secret, so that the output stays short enough to be kept whole
        try:
            if (os.path.isfile(path) and "/site-packages/" not in path and not path.startswith(installed + "/")
                    and os.path.getsize(path) < 4_000_000):
                text = open(path, errors="replace").read()
                if any(secret in text for secret in {secrets}):
                    print("READ", path, text)
        except OSError as error:
            print("DENIED", path, error)
for path in ["{course}/solutions/{assignment}/{notebook}.ipynb", "{course}/gradebook.db", "/root/.bash_history",
             "/etc/shadow"]:
    try:
        print("READ", path, open(path, errors="replace").read())
    except OSError as error:
        print("DENIED", path, error)
print("ATTEMPTED")
''',
    "writes_gradebook": '''
import sqlite3
for target in ["{course}/gradebook.db", "gradebook.db"]:
    try:
        db = sqlite3.connect(target)
        db.execute("UPDATE grade SET manual_score = 100")
        db.commit()
        print("WROTE", target)
    except Exception as error:
        print("DENIED", target, error)
for path in ["{course}/pwned.txt", "{course}/solutions/pwned.txt", "{drop}/pwned.txt", "../../pwned.txt"]:
    try:
        open(path, "w").write("pwned")
        print("WROTE", path)
    except OSError as error:
        print("DENIED", path, error)
open("scratch.txt", "w").write("a file in the scratch folder")
print("ATTEMPTED")
''',
    "counts_forks": '''
import os, signal, time
children = []
try:
    while len(children) < 10000:
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children.append(pid)
except OSError as error:
    print("FORKS", len(children), error)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
''',
    "fork_bomb": '''
import os
while True:
    os.fork()
''',
    "memory_hog": '''
import torch
try:
    hog = torch.ones(8 * 2**30 // 4)
    print("ALLOCATED", hog.sum())
except (MemoryError, RuntimeError) as error:
    print("MEMORY-CAPPED", type(error).__name__)
try:
    hog = bytearray(8 * 2**30)
    print("ALLOCATED")
except MemoryError:
    print("MEMORY-CAPPED MemoryError")
''',
    "network": '''
import socket
for host in ["127.0.0.1", "localhost"]:
    try:
        socket.create_connection((host, {port}), timeout=3).sendall(b"leak")
        print("CONNECTED", host)
    except OSError as error:
        print("NO-NETWORK", host, error)
''',
    "kills_parent": '''
import os, signal, sys, time
for pid, what in [(os.getppid(), "parent"), (-1, "every process"), (1, "init")]:
    try:
        os.kill(pid, signal.SIGKILL)
        print("SIGNALLED", what)
    except OSError as error:
        print("DENIED", what, error)
sys.stdout.flush()
time.sleep(1)
os.kill(os.getpid(), signal.SIGKILL)
''',
    "infinite_loop": '''
while True:
    pass
''',
    "sys_exit": '''
import sys
sys.exit("bye")
''',
    "os_exit": '''
import os
os._exit(0)
''',
    "floods_output": '''
for i in range(2_000_000):
    print("flood", i, "x" * 80)
''',
    # 20 observation messages of 40 MB (the judge's own kind of output, kept apart from the output cap)
    "floods_observations": '''
from IPython.display import display
print("flood")
for i in range(20):
    display({{"application/vnd.addnorm.observation+json": {{"observation": "z" * 40_000_000}}}}, raw=True)
''',
    # one line of 100 MB, in pieces of 5 MB (nbgrader's LimitOutput counts lines: this is one)
    "floods_one_line": '''
import sys
for i in range(20):
    sys.stdout.write("flood" + "y" * 5_000_000)
    sys.stdout.flush()
print()
''',
    # the launcher's settings (limits, the user to become): out of the kernel's sight, so a restart could not use
    # settings the kernel wrote
    "reads_sandbox_settings": '''
import glob
connection = glob.glob("/tmp/addnorm-kernel-*/kernel")                 # its own, bound there
found = glob.glob("/tmp/**/sandbox.json", recursive=True)
print("CONNECTION FOLDER SEEN", bool(connection), "SETTINGS FOUND", found)
print("ATTEMPTED")
''',
    # both kernels of the notebook run this cell: each holds a read lock on one byte of a file that every sandbox
    # reads, and looks for another's (the red team's channel from the hidden kernel to the visible one); the visible
    # kernel's output says whether it saw one
    "looks_for_the_other_kernels_lock": '''
import fcntl, os, random, struct, time
import torch
BASE, SPAN = 7 << 40, 1 << 30
fd = os.open(os.path.realpath(torch.__file__), os.O_RDONLY)
mine = BASE + random.randrange(SPAN - 1)
fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, mine)      # a read lock on one byte of a file every sandbox reads
def foreign():
    query = struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, BASE, SPAN, 0)
    l_type, _, start, _, pid = struct.unpack("hhqqi4x", fcntl.fcntl(fd, fcntl.F_GETLK, query))
    return l_type != fcntl.F_UNLCK
seen = False
for _ in range(30):
    seen = seen or foreign()
    time.sleep(0.2)
print("FOREIGN LOCK SEEN" if seen else "NO FOREIGN LOCK")
''',
    # messages of the kernel's own making, signed as its own: types nbclient logs by name (escape characters and
    # the lines grade_class once looked for), outputs nbformat refuses, and one display id shown 100 times, then
    # updated with 1 MB 30 times (100 MB in the notebook, without a cap that counts every output an update lands in)
    "forges_kernel_messages": '''
from IPython.display import display
kernel = get_ipython().kernel
def send(msg_type, content):
    kernel.session.send(kernel.iopub_socket, msg_type, content, parent=kernel.get_parent("shell"))
send("\\x1b[2Jdatabase is locked", {{}})
send("FORGED-TYPE", {{"text": "There was an error processing assignment '{assignment}' for student 'correct'"}})
send("error", {{"ename": 5, "evalue": "x", "traceback": []}})
send("stream", {{"name": None, "text": "x"}})
send("display_data", {{"data": {{"text/plain": 5}}, "metadata": {{}}}})
send("execute_result", {{"data": {{"text/plain": "x"}}, "metadata": {{}}, "execution_count": "many"}})
send("status", {{}})
for i in range(100):
    display({{"text/plain": "small"}}, raw=True, display_id="same")
for i in range(30):
    send("update_display_data", {{"data": {{"text/plain": "u" * 1_000_000}}, "metadata": {{}},
                                  "transient": {{"display_id": "same"}}}})
print("FORGED")
''',
    # a message whose content is nested 200,000 lists deep: jupyter_client's JSON decoder raises RecursionError on
    # it, in the grader, before nbclient sees it. The kernel counts as no longer answering: this notebook loses the
    # tests after it, and the grading goes on
    "sends_a_message_nested_too_deep": '''
kernel = get_ipython().kernel
kernel.session.send(kernel.iopub_socket, "display_data", b"[" * 200_000 + b"]" * 200_000,
                    parent=kernel.get_parent("shell"))
import time
time.sleep(5)
''',
    # input requests on the kernel's stdin socket, addressed to the grader's stdin channel (its identity is in every
    # request's header), each 256 MB, the same buffer sent zero-copy: the kernel pays for it once. A client that
    # listens on stdin keeps them all in the grader's memory, as nbclient never reads that channel
    "floods_the_stdin_channel": '''
import time
kernel = get_ipython().kernel
parent = kernel.get_parent("shell")
who = parent["header"]["session"].encode()
buffer = memoryview(bytearray(256 << 20))
for i in range(6):
    request = kernel.session.msg("input_request", {{"prompt": "", "password": False}}, parent=parent)
    kernel.stdin_socket.send_multipart(kernel.session.serialize(request, ident=[who]) + [buffer], copy=False)
time.sleep(4)
print("FLOODED")
''',
    # small messages that decode to a lot: 12 MB of `{{}},` is 4 million dicts (1.8 GB in the grader for four)
    "inflates_its_messages": '''
kernel = get_ipython().kernel
for i in range(4):
    kernel.session.send(kernel.iopub_socket, "display_data", b"[" + b"{{}}," * 4_000_000 + b"{{}}]",
                        parent=kernel.get_parent("shell"))
print("INFLATED")
''',
    # files written into the kernel's connection folder (the only folder on the host's disk it could write)
    "fills_its_connection_folder": '''
import os
from ipykernel.kernelapp import IPKernelApp
folder = os.path.dirname(IPKernelApp.instance().connection_file)
try:
    with open(os.path.join(folder, "fill"), "wb") as out:
        out.write(b"x" * 1_000_000)
    print("WROTE INTO THE CONNECTION FOLDER")
except OSError as error:
    print("CONNECTION FOLDER WRITE DENIED", type(error).__name__)
''',
    # HTML and JavaScript of the learner's, above the first test: kept in the autograded notebook (as all output
    # there), but rendered in the feedback and the formgrader, in an instructor's browser, only sanitized
    "shows_a_script": '''
from IPython.display import HTML, Javascript, display
tag = "scr" + "ipt"                           # whole only in the output, not in the cell's source
display(HTML(f"<b>bold</b><{{tag}}>document.title = 'script-ran'</{{tag}}>"))
display(Javascript("document.title = 'javascript-ran-" + "in-feedback'"))
''',
    # Linux's key retention service has no namespace: a key one kernel adds is listed in /proc/keys and readable
    # by every kernel of the same host user graded at the same time (the red team's channel between sandboxes)
    "uses_the_kernel_keyring": '''
import ctypes, errno, platform
ADD_KEY = {{"x86_64": 248, "aarch64": 217}}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
serial = libc.syscall(ADD_KEY, b"user", b"addnorm-probe", b"hidden", 6, -3)     # into the session keyring
print("KEY ADDED" if serial > 0 else "KEYRING DENIED " + errno.errorcode[ctypes.get_errno()])
''',
    # not an attack: what a forked kernel (addnorm_grading.zygote) is, seen from inside
    "describes_its_kernel": '''
import os, signal, sys
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print("FORKED", "torch" in sys.modules, "CAPS", status["CapEff"].strip(), status["CapBnd"].strip(),
      "NNP", status["NoNewPrivs"].strip(), "UID", os.getuid(), "PPID", os.getppid())
for pid in (1, 2):
    try:
        os.kill(pid, signal.SIGKILL)
        print("SIGNALLED", pid)
    except OSError as error:
        print("DENIED", pid, type(error).__name__)
''',
    # not an attack: reports what the kernel computes with (the grader's environment asks for 2 threads)
    "counts_threads": '''
import os, torch
print("THREADS", torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"), os.environ.get("TQDM_DISABLE"))
''',
    # not an attack alone: run by two students (graded one after the other), in both kernels of each notebook at
    # once. Two helper processes per kernel each leave a trace in every channel between processes — a file in every
    # folder they can write, an abstract socket, a System V message queue, themselves as processes that try to
    # linger — then look for the traces of others. The helpers of one kernel must find each other (the probes
    # work); nothing of the other kernel of the notebook, or of an earlier kernel, may be found (TRACES_HELPER).
    "traces_a": TRACES_CELL,
    "traces_b": TRACES_CELL,
}
# raw HTML in a markdown cell, which nbgrader's feedback and formgrader templates render as they find it
MARKDOWN_SCRIPT = ("My answer. <img src=x onerror=\"document.title='markdown-ran'\"> "
                   "[see my derivation](javascript:document.title='link-ran') ![a figure](attachment:missing.png)")
# a file name that would clear nbgrader's terminal and print a line of the learner's as nbgrader's own
FORGED_LOG_NAME = "x\x1b[2J\x1b[H\n[AutogradeApp | INFO] Autograding done: all points PASSED\n.ipynb"
# what the kernel's death or a cut-short cell costs: the tests after the extra cell score zero
LOSES_ALL_POINTS = {"kills_parent", "os_exit", "sends_a_message_nested_too_deep"}


def solution() -> nbformat.NotebookNode:
    return nbformat.read(SOLUTIONS / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)


def outputs_text(path: Path) -> str:
    """Every output of a graded notebook, as one text."""
    nb = nbformat.read(path, as_version=4)
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            parts += [output.get("text", ""), output.get("evalue", ""), output.get("ename", ""),
                      *output.get("traceback", []), json.dumps(output.get("data", {}))]
    return "\n".join(parts)


class Listener:
    """A TCP server on loopback that records whether anybody connected."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.5)
        self.port = self.server.getsockname()[1]
        self.connections = 0
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while self.running:
            try:
                self.server.accept()[0].close()
                self.connections += 1
            except OSError:
                pass

    def close(self):
        self.running = False
        self.thread.join()
        self.server.close()


def gradebook_rows(course: Path) -> dict[str, list[tuple]]:
    """Every table of the gradebook except the grades and comments, which autograde writes."""
    with sqlite3.connect(course / "gradebook.db") as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {table: sorted(map(repr, db.execute(f"SELECT * FROM {table}")))
                for table in tables if table not in {"grade", "comment", "submitted_assignment",
                                                     "submitted_notebook", "student"}}


# students graded in a second course folder, by a second plain `nbgrader autograde` at the same time as the first
# (each waits out a cell's time limit or floods its outputs: half of the class's grading time); the others, the
# traces students among them (each must find nothing of the kernels graded before it), in the first
BESIDE = ("infinite_loop", "floods_output", "floods_observations", "sends_a_message_nested_too_deep")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A class of one correct student and one student per attack, autograded with a plain `nbgrader autograde`:
    the students of BESIDE in a copy of the course, by a second one running at the same time."""
    check = subprocess.run([sys.executable, "-m", "addnorm_grading.sandbox", "--check"], cwd=ROOT,
                           capture_output=True, text=True)
    assert check.returncode == 0, f"the grading sandbox does not work here: {check.stdout}{check.stderr}"
    base = tmp_path_factory.mktemp("sandbox")
    course = coursework.make_course(base / "course")
    beside = Path(shutil.copytree(course, base / "beside"))
    drop = base / "drop"
    drop.mkdir()
    drop.chmod(0o1777)                                  # anyone may write here: the sandbox must still stop it
    listener = Listener()
    before = {folder: gradebook_rows(folder) for folder in (course, beside)}
    fill = {"course": course, "port": listener.port, "drop": drop, "assignment": ASSIGNMENT, "notebook": NOTEBOOK,
            "secrets": repr([*SECRET_LINES, "SQLite format"])}
    coursework.submit(course, "correct", ASSIGNMENT, {f"{NOTEBOOK}.ipynb": nbformat.writes(solution())})
    coursework.submit(course, "names_files_with_escapes", ASSIGNMENT, {
        f"{NOTEBOOK}.ipynb": nbformat.writes(solution()), FORGED_LOG_NAME: "{}", "y\x1b]0;set-title\x07.txt": "data"})
    for student, code in ATTACKS.items():
        coursework.submit(beside if student in BESIDE else course, student, ASSIGNMENT, {
            f"{NOTEBOOK}.ipynb": submissions.with_cell_before_tests(nbformat.writes(solution()), code.format(**fill))})
    with_script = nbformat.reads(submissions.with_cell_before_tests(
        nbformat.writes(solution()), ATTACKS["shows_a_script"].format(**fill)), as_version=4)
    with_script.cells.append(nbformat.v4.new_markdown_cell(MARKDOWN_SCRIPT))       # a markdown cell of their own
    coursework.submit(course, "shows_a_script", ASSIGNMENT, {f"{NOTEBOOK}.ipynb": nbformat.writes(with_script)})
    env = {k: v for k, v in coursework.nbgrader_env().items() if k != "ADDNORM_UNSAFE_GRADING"}
    env["OMP_NUM_THREADS"] = "2"                        # the sandbox decides: one thread per kernel
    processes = [subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT,
                                   f"--ExecutePreprocessor.timeout={CELL_TIMEOUT}"],
                                  cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for folder in (course, beside)]
    peaks = [PeakMemory(process.pid) for process in processes]
    with ThreadPoolExecutor(len(processes)) as pool:
        outputs = list(pool.map(lambda process: process.communicate(timeout=1500), processes))
    run = subprocess.CompletedProcess(processes[0].args, max(process.returncode for process in processes),
                                      "".join(stdout for stdout, _ in outputs), "".join(stderr for _, stderr in outputs))
    listener.close()
    return {"course": course, "beside": beside, "drop": drop, "run": run, "log": run.stdout + run.stderr,
            "peak_bytes": max(peak.stop() for peak in peaks),
            "scores": coursework.scores(course) | coursework.scores(beside), "connections": listener.connections,
            "gradebook_before": before, "gradebook_after": {folder: gradebook_rows(folder) for folder in before}}


def autograded_notebook(graded, student: str) -> Path:
    """The student's autograded notebook, in whichever of the two course folders they were graded."""
    course = graded["beside"] if student in BESIDE else graded["course"]
    return course / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"


class PeakMemory(threading.Thread):
    """The peak resident memory of one process (its VmHWM, which only grows), read every 0.2 s while it runs."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()
        self.start()

    def run(self) -> None:
        while not self.done.wait(0.2):
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
            self.peak = max(self.peak, kib * 1024)

    def stop(self) -> int:
        self.done.set()
        self.join()
        return self.peak


def graded_outputs(graded, student: str) -> str:
    return outputs_text(autograded_notebook(graded, student))


def points(graded, student: str) -> tuple[float, float]:
    result = graded["scores"][(student, ASSIGNMENT, NOTEBOOK)]
    return result["code"], result["max_code"]


def test_the_grader_finishes_and_grades_everybody(graded):
    assert graded["run"].returncode == 0, graded["log"][-6000:]
    students = {student for (student, _, _) in graded["scores"]}
    assert students == {"correct", "names_files_with_escapes", *ATTACKS}, graded["log"][-6000:]


def test_a_correct_student_keeps_full_marks(graded):
    code, max_code = points(graded, "correct")
    assert max_code > 0 and code == max_code


@pytest.mark.parametrize("student", sorted(set(ATTACKS) - LOSES_ALL_POINTS - {"fork_bomb"}))
def test_an_attack_that_is_stopped_does_not_cost_the_tests_after_it(graded, student):
    """The attacks that fail inside the sandbox leave the kernel working: the solution's tests still pass."""
    code, max_code = points(graded, student)
    assert code == max_code, (student, code, max_code, graded_outputs(graded, student)[-3000:])


@pytest.mark.parametrize("student", sorted(LOSES_ALL_POINTS))
def test_a_kernel_that_dies_loses_its_own_points_with_a_message(graded, student):
    code, max_code = points(graded, student)
    assert code == 0 and max_code > 0
    assert "KernelDied" in graded_outputs(graded, student)


def test_the_hidden_tests_and_the_gradebook_cannot_be_read(graded):
    text = graded_outputs(graded, "reads_hidden_tests")
    assert "ATTEMPTED" in text, text[-3000:]
    for secret in SECRET_LINES:
        assert secret not in text, f"the submission printed the hidden tests ({secret!r})"
    assert "SQLite format" not in text, "the submission read gradebook.db"
    if os.geteuid() == 0:
        assert "UID 0" not in text, "the kernel ran as root"


def test_the_gradebook_and_the_course_folder_cannot_be_written(graded):
    text = graded_outputs(graded, "writes_gradebook")
    assert "ATTEMPTED" in text, text[-3000:]
    assert "WROTE gradebook.db" not in text and f"WROTE {graded['course']}/gradebook.db" not in text
    # (a write may succeed inside the sandbox, on its private RAM disks: what counts is that nothing reached the host)
    course = graded["course"]
    assert not (course / "pwned.txt").exists() and not (course / "solutions" / "pwned.txt").exists()
    assert not (graded["drop"] / "pwned.txt").exists()
    assert not list(course.rglob("pwned.txt")) and not list(course.rglob("scratch.txt"))
    assert graded["gradebook_after"] == graded["gradebook_before"]
    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM grade WHERE manual_score = 100").fetchone() == (0,)


def test_the_launchers_settings_are_out_of_the_kernels_reach(graded):
    text = outputs_text(autograded_notebook(graded, "reads_sandbox_settings"))
    assert "CONNECTION FOLDER SEEN True SETTINGS FOUND []" in text, text[-2000:]


def test_forks_stop_at_the_process_cap(graded):
    text = graded_outputs(graded, "counts_forks")
    forks = [line for line in text.splitlines() if line.startswith("FORKS")]
    assert forks, text[-3000:]
    assert 0 < int(forks[0].split()[1]) < 100, forks


def test_memory_is_capped(graded):
    text = graded_outputs(graded, "memory_hog")
    assert "ALLOCATED" not in text and text.count("MEMORY-CAPPED") == 2, text[-3000:]


def test_there_is_no_network(graded):
    text = graded_outputs(graded, "network")
    assert graded["connections"] == 0 and "CONNECTED" not in text and "NO-NETWORK" in text, text[-3000:]


def test_the_grader_cannot_be_signalled(graded):
    text = graded_outputs(graded, "kills_parent")
    assert "DENIED parent" in text and "DENIED init" in text, text[-3000:]


def test_a_cell_that_never_ends_times_out(graded):
    text = graded_outputs(graded, "infinite_loop")
    assert "CellTimeoutError" in text or "KeyboardInterrupt" in text, text[-3000:]


def test_a_fork_bomb_runs_into_the_process_cap(graded):
    """The bomb's processes fill the cap: the kernel's own fork fails, and the tests that need a thread fail."""
    text = graded_outputs(graded, "fork_bomb")
    assert "BlockingIOError" in text or "CellTimeoutError" in text, text[-3000:]
    code, max_code = points(graded, "fork_bomb")
    assert code < max_code


def test_each_kernel_computes_on_one_thread(graded):
    """One torch thread per kernel whatever the grader's environment says (grading in parallel gains nothing from a
    second thread per kernel), and the grader's TQDM_DISABLE reaches the kernel."""
    text = graded_outputs(graded, "counts_threads")
    assert "THREADS 1 1 1" in text, text[-3000:]


def test_the_notebook_is_graded_with_two_kernels():
    """The traces tests below need the hidden kernel: the attacked notebook has judged tests (addnorm_grading.judge)."""
    judge = Judge(ROOT)
    assert any(judge.judges(cell.source) for cell in solution().cells if cell.cell_type == "code")


@pytest.mark.parametrize("student", ["traces_a", "traces_b"])
def test_a_kernel_finds_nothing_of_the_other_kernel_or_of_earlier_ones(graded, student):
    """The visible kernel (whose outputs the learner gets back) cannot receive anything from the hidden kernel that
    runs the same cells (after it: a file lock shows it, test_the_visible_kernel_never_meets_the_hidden_one), nor
    from any earlier kernel (the other traces student's, graded before):
    no file in any folder it can write, no process it can see or signal, no abstract socket, no message queue."""
    text = graded_outputs(graded, student)
    traces = [line.split() for line in text.splitlines() if line.startswith("TRACES")]
    assert len(traces) == 2, text[-3000:]          # the visible kernel's two helpers
    for _, own, foreign in traces:
        assert all(int(n) > 0 for n in own.removeprefix("own=").split(",")), (
            f"the probes did not see the kernel's own other helper ({own}): they would not see another kernel")
        assert foreign == "foreign=0,0,0,0", (
            f"a kernel found traces (files, processes, sockets, queues) of another kernel: {foreign}")


def test_no_process_of_a_kernel_outlives_it(graded):
    """The traces students' helpers try to linger for ten minutes: the sandbox ends them with their kernel."""
    left = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if TRACE_TAG.encode() in (entry / "cmdline").read_bytes():
                left.append(entry.name)
        except OSError:
            pass
    assert not left, f"processes of graded kernels are still running: {left}"


def test_kernels_are_forked_into_their_sandbox_with_nothing_of_roots(graded):
    """As root, each kernel is forked from the grading process's zygote, torch already imported (the start costs
    a fork, not an import): it has no capability at all, no_new_privs, the grader's uid, pid 1 of the sandbox as
    its parent, and can signal neither that init nor the waiting program that keeps the sandbox (both root)."""
    if not sandbox.is_root():
        pytest.skip("kernels are forked only when the grader is root (addnorm_grading.zygote)")
    text = graded_outputs(graded, "describes_its_kernel")
    grader = pwd.getpwnam(read_course(ROOT / "course.toml").sandbox.user).pw_uid
    assert (f"FORKED True CAPS 0000000000000000 0000000000000000 NNP 1 UID {grader} PPID 1") in text, text[-2000:]
    assert "DENIED 1 PermissionError" in text and "DENIED 2 PermissionError" in text, text[-2000:]


def test_sys_exit_is_an_error_in_its_cell_only(graded):
    assert "SystemExit" in graded_outputs(graded, "sys_exit")


@pytest.mark.parametrize("student", ["floods_output", "floods_one_line", "floods_observations"])
def test_output_flooding_is_cut_short(graded, student):
    path = autograded_notebook(graded, student)
    assert path.stat().st_size < 2_000_000
    assert "flood" in outputs_text(path)
    if student == "floods_one_line":          # many lines are cut by LimitOutput, one long line as it arrives
        assert "output was cut" in outputs_text(path)


def test_messages_of_the_kernels_making_reach_neither_the_log_nor_the_notebook(graded):
    """nbclient would log the made-up types by name and stop on the malformed outputs; the update would write
    100 MB: the notebook is graded (full marks, see above), small, and nbgrader's log holds none of it."""
    path = autograded_notebook(graded, "forges_kernel_messages")
    assert path.stat().st_size < 5_000_000
    assert "FORGED" in outputs_text(path)
    for forged in ("database is locked", "FORGED-TYPE", "\x1b[2J", "unhandled iopub"):
        assert forged not in graded["log"], forged


def test_a_kernel_cannot_fill_the_graders_memory(graded):
    """1.5 GB of input requests from one kernel (3 GB from both of its notebook's), and messages that decode to 31
    times their size: none of it stays in the grader, whose peak is what grading the other notebooks takes (a few
    hundred MB)."""
    assert "FLOODED" in graded_outputs(graded, "floods_the_stdin_channel")
    assert "INFLATED" in graded_outputs(graded, "inflates_its_messages")
    assert 0 < graded["peak_bytes"] < 1_200_000_000, f"the grader's peak memory: {graded['peak_bytes']:,} bytes"


@pytest.mark.skipif(not sandbox.is_root(), reason="as an ordinary user the kernel could change the folder's mode back")
def test_a_kernel_cannot_write_into_its_connection_folder(graded):
    outputs = graded_outputs(graded, "fills_its_connection_folder")
    assert "CONNECTION FOLDER WRITE DENIED PermissionError" in outputs and "WROTE" not in outputs


def test_file_names_reach_nbgraders_log_as_printable_text(graded):
    """nbgrader logs the names of a submission's files (`Copying …`, `Skipping unknown notebook: …`): shown with
    their control characters escaped, a forged line stays inside nbgrader's own."""
    assert "\x1b" not in graded["log"] and "\x07" not in graded["log"]
    assert "\\x1b[2J\\x1b[H\\x0a[AutogradeApp | INFO] Autograding done" in graded["log"]
    assert not any(line.lstrip().startswith("[AutogradeApp | INFO] Autograding done: all points")
                   for line in graded["log"].splitlines())
    assert points(graded, "names_files_with_escapes") == points(graded, "correct")


def test_a_learners_script_never_runs_in_the_feedback(graded):
    student = "shows_a_script"
    coursework.run_nbgrader(["generate_feedback", ASSIGNMENT, f"--student={student}", "--force"], graded["course"])
    html = (graded["course"] / "feedback" / student / ASSIGNMENT / f"{NOTEBOOK}.html").read_text(encoding="utf-8")
    assert "<b>bold</b>" in html                                        # the learner's HTML, sanitized, shows
    assert "<script>document.title" not in html
    assert "My answer." in html and "<img src=x onerror" not in html and "&lt;img src=x onerror" in html
    assert "see my derivation" in html and "javascript:document.title" not in html      # a dead link
    assert 'alt="a figure"' in html                     # a missing attachment: a broken image, not a failed page
    assert "javascript-ran-in-feedback" not in html


def test_no_kernel_may_use_the_kernel_keyring(graded):
    """Refused by the seccomp filter, in a kernel forked by the zygote and in one that bwrap starts."""
    student = "uses_the_kernel_keyring"
    assert "KEYRING DENIED EPERM" in graded_outputs(graded, student)
    coursework.run_nbgrader(["autograde", ASSIGNMENT, f"--student={student}", "--force",
                             "--SandboxedExecute.fork_kernels=False"], graded["course"])
    outputs = graded_outputs(graded, student)
    assert "KEYRING DENIED EPERM" in outputs and "KEY ADDED" not in outputs


def test_the_formgrader_shows_a_learners_markdown_without_running_it(graded):
    """The formgrader's own page of a submission (its exporter as nbgrader's formgrader builds it, with the course's
    config): raw HTML as text, a dead `javascript:` link, and a page at all despite a missing attachment."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(graded["course"])).load_config()
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    resources = {"assignment_id": ASSIGNMENT, "notebook_id": NOTEBOOK, "submission_id": "x", "index": 0, "total": 1,
                 "base_url": "", "student": "shows_a_script", "last_name": "", "first_name": "", "notebook_path": "/x"}
    path = autograded_notebook(graded, "shows_a_script")
    html, _ = HTMLExporter(config=config).from_filename(str(path), resources=resources)
    assert "My answer." in html and "<img src=x onerror" not in html and "javascript:document.title" not in html


def test_a_message_the_grader_cannot_decode_stops_only_its_own_notebook(graded):
    assert "KernelUnresponsive" in graded_outputs(graded, "sends_a_message_nested_too_deep")


def test_the_visible_kernel_never_meets_the_hidden_one(graded):
    """The hidden kernel runs nothing of the learner's until the visible one is gone: no lock of it to see."""
    outputs = graded_outputs(graded, "looks_for_the_other_kernels_lock")
    assert "NO FOREIGN LOCK" in outputs and "FOREIGN LOCK SEEN" not in outputs, outputs[-2000:]


def copy_of_course(graded, course: Path, names=("nbgrader_config.py", "course.toml", "gradebook.db", "solutions",
                                               "checks", "exercises")) -> Path:
    """A copy of the graded course's `names` and of the correct student's submission, at `course`."""
    (course / "submitted" / "correct").mkdir(parents=True)
    for name in names:
        subprocess.run(["cp", "-R", str(graded["course"] / name), str(course / name)], check=True)
    subprocess.run(["cp", "-R", str(graded["course"] / "submitted" / "correct" / ASSIGNMENT),
                    str(course / "submitted" / "correct" / ASSIGNMENT)], check=True)
    return course


def path_without(tool: str, folder: Path) -> str:
    """A PATH on which every program of /usr/bin and /usr/sbin is found except `tool` (as on a machine without it),
    with this interpreter's bin/ first."""
    folder.mkdir()
    for system in (Path("/usr/bin"), Path("/usr/sbin")):
        for program in system.iterdir():
            if program.name != tool and not (folder / program.name).exists():
                (folder / program.name).symlink_to(program)
    return os.pathsep.join([str(Path(sys.executable).parent), str(folder)])


def test_without_the_sandbox_autograde_refuses_and_says_how_to_opt_out(graded, tmp_path):
    """A machine without bubblewrap: nothing is graded, the log says why and names the opt-out."""
    course = copy_of_course(graded, tmp_path / "course")
    env = {k: v for k, v in coursework.nbgrader_env().items() if k != "ADDNORM_UNSAFE_GRADING"}
    env["PATH"] = path_without("bwrap", tmp_path / "bin")
    refused = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"],
                             cwd=course, env=env, capture_output=True, text=True)
    assert refused.returncode != 0
    assert "Autograding refused" in refused.stderr and "ADDNORM_UNSAFE_GRADING=1" in refused.stderr
    assert not (course / "autograded" / "correct" / ASSIGNMENT).exists()
    # the documented opt-out grades anyway, with an ordinary kernel
    unsafe = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"],
                            cwd=course, env={**env, "ADDNORM_UNSAFE_GRADING": "1"}, capture_output=True, text=True)
    assert unsafe.returncode == 0, unsafe.stderr[-3000:]
    code, max_code = (coursework.scores(course)[("correct", ASSIGNMENT, NOTEBOOK)][k] for k in ("code", "max_code"))
    assert code == max_code > 0
    # ... and so does the command-line form of it
    flag = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force",
                           "--SandboxedExecute.kernel_name=python3"],
                          cwd=course, env=env, capture_output=True, text=True)
    assert flag.returncode == 0, flag.stderr[-3000:]


def test_the_missing_pieces_are_named(monkeypatch):
    """sandbox.missing() names a missing bubblewrap and the opt-out."""
    monkeypatch.setattr(sandbox.shutil, "which", lambda tool: None if tool == "bwrap" else f"/usr/bin/{tool}")
    reason = sandbox.missing(read_course(ROOT / "course.toml").sandbox.user)
    assert "bubblewrap" in reason and "make sandbox" in reason and "ADDNORM_UNSAFE_GRADING=1" in reason


@pytest.mark.skipif(not sandbox.is_root(), reason="masking a part of /proc in a mount namespace needs root")
def test_a_proc_masked_as_containers_mask_it_is_named_before_any_kernel_dies():
    """In a container /proc has parts masked (Docker and Kubernetes bind /dev/null over /proc/kcore and others): the
    sandbox's own /proc cannot be mounted and every kernel would die. sandbox.missing() says so, and how to unmask."""
    user = read_course(ROOT / "course.toml").sandbox.user
    masked = subprocess.run(["unshare", "--mount", "--propagation=private", "sh", "-c",
                             'for f in /proc/keys /proc/timer_list /proc/kcore; do [ -e "$f" ] && mount --bind /dev/null "$f" && '
                             'exec "$@"; done; echo "no /proc file to mask"; exit 1', "sh", sys.executable, "-c",
                             f"from addnorm_grading import sandbox; print(sandbox.missing({user!r}))"],
                            capture_output=True, text=True, timeout=120)
    assert "cannot mount a /proc" in masked.stdout and "procMount: Unmasked" in masked.stdout, masked
    assert "ADDNORM_UNSAFE_GRADING=1" in masked.stdout
    assert sandbox.missing(user) is None                      # unmasked, as here: nothing is missing


def test_a_course_folder_without_course_toml_stops_nbgrader_and_says_why(graded, tmp_path):
    """Without course.toml nbgrader must not fall back to its own defaults (grading outside the sandbox): it stops."""
    course = copy_of_course(graded, tmp_path / "course", names=("nbgrader_config.py", "gradebook.db", "solutions"))
    env = {k: v for k, v in coursework.nbgrader_env().items() if k != "ADDNORM_UNSAFE_GRADING"}
    stopped = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--force"],
                             cwd=course, env=env, capture_output=True, text=True)
    assert stopped.returncode != 0
    assert "course.toml" in stopped.stderr and "nbgrader_config.py" in stopped.stderr, stopped.stderr[-3000:]
    assert not (course / "autograded").exists()


def guide_commands(section: str) -> list[str]:
    """The lines of the first bash block after `section`'s heading in the instructor guide."""
    text = (ROOT / "guide" / "instructors.md").read_text(encoding="utf-8")
    after = text[text.index(section):]
    block = after[after.index("```bash\n") + len("```bash\n"):]
    return [line for line in block[:block.index("```")].splitlines() if line.strip()]


def test_a_course_folder_made_by_the_guides_steps_grades_sandboxed(tmp_path):
    """The guide's "A course folder of your own", step by step in an empty folder (the course's .venv standing in
    for the new environment): three files beside it are enough to grade a submission, in the sandbox."""
    commands = guide_commands("### A course folder of your own")
    assert commands[0].startswith("python3.11 -m venv .venv"), commands
    (tmp_path / "add-and-norm").symlink_to(ROOT)
    folder = tmp_path / "my-course"
    folder.mkdir()
    (folder / ".venv").symlink_to(Path(sys.executable).parent.parent)      # "or use the course's own .venv"
    env = {k: v for k, v in coursework.nbgrader_env().items() if k != "ADDNORM_UNSAFE_GRADING"}
    made = subprocess.run(["bash", "-euc", "\n".join(commands[1:])], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    assert sorted(p.name for p in folder.iterdir()) == [".venv", "checks", "course.toml", "exercises",
                                                        "gradebook.db", "nbgrader_config.py", "solutions"]
    spy = f"import os\nprint('SEES COURSE FOLDER', os.path.exists({str(folder / 'solutions')!r}))"
    coursework.submit(folder, "newcomer", ASSIGNMENT,
                      {f"{NOTEBOOK}.ipynb": submissions.with_cell_before_tests(nbformat.writes(solution()), spy)})
    graded = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stderr[-3000:]
    score = coursework.scores(folder)[("newcomer", ASSIGNMENT, NOTEBOOK)]
    assert score["code"] == score["max_code"] > 0
    autograded = (folder / "autograded" / "newcomer" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").read_text(encoding="utf-8")
    assert "SEES COURSE FOLDER False" in autograded, "the kernel was not sandboxed: it could see the course folder"
