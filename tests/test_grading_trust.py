"""Grading that survives dead kernels and cheating: each exploit a student could try scores zero.

All cases grade variants of assignment 01 in one temporary course, in parallel.
Plain nbgrader gives full marks to the first two cheats (measured); here the
hidden checks run in a judge that runs no student code, so they cannot.
"""
import copy
import json
import os
import stat
import tempfile
from pathlib import Path

import shutil

import nbformat
import pytest

from autograder import course, notebooks, samples
from autograder.pipeline import confine
from autograder.sandbox.limits import Limits

A = "01_processes_threads"
EXERCISES = course.contract()[A]


def _perfect():
    return samples.submissions(A)["sample_perfect"]


def _blank():
    return samples.submissions(A)["sample_blank"]


def _with_cell_after(nb, grade_id, source):
    """Insert a student-added code cell right after the cell `grade_id` (or first)."""
    nb = copy.deepcopy(nb)
    cell = nbformat.v4.new_code_cell(source)
    index = 0
    for i, c in enumerate(nb.cells):
        if notebooks.nbgrader_meta(c).get("grade_id") == grade_id:
            index = i + 1
    nb.cells.insert(index, cell)
    return nb


def _with_cell_first(nb, source):
    """The notebook with a student-added code cell before everything else."""
    nb = copy.deepcopy(nb)
    nb.cells.insert(0, nbformat.v4.new_code_cell(source))
    return nb


def _with_cell_last(nb, source):
    nb = copy.deepcopy(nb)
    nb.cells.append(nbformat.v4.new_code_cell(source))
    return nb


def _with_markdown_last(nb, source):
    nb = copy.deepcopy(nb)
    nb.cells.append(nbformat.v4.new_markdown_cell(source))
    return nb


def _replace_answer(nb, exercise, code):
    nb = copy.deepcopy(nb)
    for c in nb.cells:
        if notebooks.nbgrader_meta(c).get("grade_id") == exercise:
            c.source = code
    return nb


TRANSFORMER = '''
def _skip_tests(lines):
    text = "".join(lines)
    return ["pass\\n"] if ("assert" in text or "check(" in text) else lines
get_ipython().input_transformers_cleanup.append(_skip_tests)
'''
CUSTOM_EXC = '''
get_ipython().set_custom_exc((BaseException,), lambda shell, etype, value, tb, tb_offset=None: None)
'''
SHOWTRACEBACK = '''
get_ipython().showtraceback = lambda *args, **kwargs: None
'''
NUMPY_PATCH = '''
import numpy as np
np.allclose = lambda *args, **kwargs: True
'''
# os.getpid lies to the notebook's own code (a pid one above its own: "another process") and tells
# the truth to the libraries, so the kernel and its pools keep working. (`lambda: -1` for everyone
# hung the kernel itself, which scored zero without reaching the checks, and held the machine's
# lease for the whole cell time limit.)
GETPID_PATCH = '''
import os, sys, sysconfig
_real = os.getpid
_libraries = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})
def _getpid():
    caller = sys._getframe(1).f_code.co_filename
    return _real() if caller.startswith(_libraries) else _real() + 1
os.getpid = _getpid
'''
FAKE_WHEN_GRADED = '''
import os
if os.environ.get("NBGRADER_EXECUTION"):
    def run_in_child(fn, *args):
        return os.getpid() + 1, fn(*args)
'''
ALWAYS_EQUAL = '''
class Anything(int):
    def __eq__(self, other): return True
    def __le__(self, other): return True
    def __ge__(self, other): return True
    def __hash__(self): return 1
def cpu_info():
    return {"logical": Anything(), "physical": None, "usable": Anything(1)}
'''
WRITE_GRADEBOOK = '''
import os, pathlib
work = pathlib.Path(os.environ.get("COURSE_WORKDIR", "../../.."))
for path in [work / "gradebook.db", work / "submitted" / "victim" / "01_processes_threads" / "01_processes_threads.ipynb"]:
    try:
        path.write_text("overwritten by another student")
    except OSError as err:
        print("blocked:", err)
'''
# --- round 2: a student who has read all of autograder/ and runs as root in a container ---
# Modules handed in beside the notebook, named like the grader's (a kernel that turns
# every cell into `pass`, a re-run that reports passes, a `check` that passes).
HANDED_IN_GRADER = {
    "autograder/__init__.py": "",
    "autograder/hidden.py": "def check(*args, **kwargs):\n    print('all hidden checks passed')\n",
    "autograder/sandbox/__init__.py": "",
    "autograder/sandbox/kernel.py": (
        "if __name__ == '__main__':\n"
        "    from ipykernel.kernelapp import IPKernelApp\n"
        "    app = IPKernelApp.instance()\n"
        "    app.initialize()\n"
        "    app.shell.input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"
        "    app.start()\n"),
    "autograder/pipeline/__init__.py": "",
    "autograder/pipeline/judge.py": (
        "import json, os, sys\n"
        "def main():\n"
        "    spec = json.load(open(sys.argv[2]))\n"
        "    for _, ex in spec['exercises']:\n"
        "        os.write(int(sys.argv[1]), (json.dumps({'exercise': ex, 'passed': True, 'report': ''}) + '\\n').encode())\n"
        "    os._exit(0)\n"),
    "helpers/__init__.py": "",
    "numpy.py": "raise SystemExit('a handed-in numpy')\n",
}
# Undo the sandbox's mounts (as root could), then read the reference notebook and run its
# solutions; also look for the catalogue, the checks, tests/, .git and the gradebook, directly
# and through other processes' views of the file system.
SNOOP = '''
import ctypes, glob, json, os
import helpers
libc = ctypes.CDLL(None, use_errno=True)
root = os.path.dirname(os.path.dirname(os.path.abspath(helpers.__file__)))
work = os.environ.get("COURSE_WORKDIR", root)
for target in (root, os.path.join(root, "source"), work, "/tmp", "/"):
    libc.umount2(target.encode(), 2)
views = ["", "/proc/1/root", "/proc/%d/root" % os.getppid()]
secret = ["source", "autograder/samples", "autograder/checks", "tests", ".git", "gradebook.db"]
readable = []
for view in views:
    for rel in secret:
        for base in {root, work}:
            path = view + os.path.join(base, rel)
            try:
                if os.path.isdir(path):
                    os.listdir(path)
                else:
                    open(path, "rb").read(1)
                readable.append(path)
            except OSError:
                pass
print("READABLE:", readable)
import sys  # warm starts: nothing of the grader's may be in this process's memory either
print("IN MEMORY:", sorted(m for m in sys.modules if m.startswith(("autograder.checks", "autograder.samples",
                                                                    "autograder.pipeline"))))
started_with = open("/proc/self/environ", "rb").read()  # what the process was started with
print("SECRETS:", [name for name in ("PGPASSWORD", "COURSE_DB_URL") if name in os.environ or name.encode() in started_with])
for path in glob.glob(root + "/source/*/*.ipynb") + glob.glob("/proc/1/root" + root + "/source/*/*.ipynb"):
    if path.endswith("01_processes_threads.ipynb"):
        for cell in json.load(open(path))["cells"]:
            text = "".join(cell["source"])
            if "### BEGIN SOLUTION" in text:
                exec(text.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""), globals())
'''
# Signal, ptrace or reach the grading processes (they run as root; this code does not).
REACH_GRADER = '''
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
me = os.getuid()
reached = []
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == os.getpid():
        continue
    pid = int(name)
    try:
        uid = int(open(f"/proc/{pid}/status").read().split("Uid:")[1].split()[0])
    except (OSError, IndexError):
        continue
    if uid == me:
        continue  # our own processes
    try:
        os.kill(pid, 0)
        reached.append(("signal", pid))
    except OSError:
        pass
    if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
        reached.append(("ptrace", pid))
        libc.ptrace(17, pid, None, None)
    try:
        os.listdir(f"/proc/{pid}/root/")
        reached.append(("root view", pid))
    except OSError:
        pass
try:
    os.kill(os.getppid(), signal.SIGKILL)
except OSError:
    pass
print("REACHED:", reached)
'''
# In the student's process while grading: once the notebook has loaded, make the
# server answer every request with True and write "passed" verdicts (JSON lines and
# well-formed frames) to every file descriptor it has; in the kernel, blank the tests.
FORGE_VERDICT = '''
import gc, json, os, pickle, struct, sys, threading, time
def _forge():
    time.sleep(0.5)
    for obj in gc.get_objects():
        if type(obj).__name__ == "Server" and hasattr(obj, "reply"):
            type(obj).handle = lambda self, request: True
    lines = b"".join((json.dumps({"exercise": ex, "passed": True, "report": ""}) + "\\n").encode()
                     for ex in ("cpu_info", "run_in_child", "creation_cost", "visible_appends"))
    frame = pickle.dumps(("ok", True))
    for fd in map(int, os.listdir("/proc/self/fd")):
        for data in (lines, struct.pack("!Q", len(frame)) + frame):
            try:
                os.write(fd, data)
            except OSError:
                pass
# The judge's student process stands in a QuietShell for get_ipython() (autograder/sandbox/student.py);
# ipykernel itself is imported there too (the warm zygote preloads it), so it cannot tell them apart.
if type(get_ipython()).__name__ == "QuietShell":  # the student's process of the judge
    threading.Thread(target=_forge, daemon=True).start()
else:
    def _skip_tests(lines):
        return ["pass\\n"] if "assert" in "".join(lines) else lines
    get_ipython().input_transformers_cleanup.append(_skip_tests)
'''
# Answers that tell the checks they "cannot decide" (pytest.skip), hoping an undecided
# check counts as a pass, or that raise the runner's own exceptions.
SKIP_IN_CHECK = '''
import pytest
def _undecided(*args, **kwargs):
    pytest.skip("the machine is too busy to decide")
cpu_info = run_in_child = visible_appends = _undecided
def creation_cost(*args, **kwargs):
    raise KeyboardInterrupt
'''
# A thread that outlives its cell: in the clean re-run it makes every check pass while a
# check runs, and puts the runner back in between, when the snapshot is compared.
BACKGROUND_THREAD = '''
import sys, threading, time
def _meddle():
    real = None
    while True:
        hidden = sys.modules.get("autograder.hidden")
        checking = any(t.name.startswith("check:") for t in threading.enumerate())
        if hidden is not None and checking and real is None:
            real, hidden._call_with_timeout = hidden._call_with_timeout, lambda *a, **k: None
        elif hidden is not None and not checking and real is not None:
            hidden._call_with_timeout, real = real, None
        time.sleep(0.001)
# The judge's student process stands in a QuietShell for get_ipython() (autograder/sandbox/student.py);
# ipykernel itself is imported there too (the warm zygote preloads it), so it cannot tell them apart.
if type(get_ipython()).__name__ == "QuietShell":  # the clean re-run
    threading.Thread(target=_meddle, daemon=True).start()
else:
    def _skip_tests(lines):
        return ["pass\\n"] if "assert" in "".join(lines) else lines
    get_ipython().input_transformers_cleanup.append(_skip_tests)
'''
# Links planted where the grader writes next (the graded notebook, file permissions, the
# feedback's copy of the folder): each points at a file of the grader's that only it may read.
CANARY_DIR = Path(tempfile.gettempdir()) / f"course-trust-canaries-{os.getpid()}"
CANARIES = {"notebook": "01_processes_threads.ipynb", "permissions": "planted", "judge_log": ".verify.log",
            "feedback": "leak.txt"}
PLANT_LINKS = f'''
import os
for name, link in {CANARIES!r}.items():
    try:
        os.remove(link)
    except OSError:
        pass
    os.symlink(os.path.join({str(CANARY_DIR)!r}, name), link)
os.mkfifo("blocking.fifo")
print("planted:", sorted(os.listdir(".")))
'''
# HTML that a browser would run, in an output the notebook displays and in a markdown cell it adds:
# formgrader shows the graded notebook inside the instructor's Jupyter server, with their session.
INJECTS_HTML = '''
from IPython.display import HTML, SVG, Javascript, display
display(HTML('<b>kept</b><script>document.title = "injected"</script><img src=x onerror="alert(1)">'))
display(Javascript('document.title = "injected"'))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'))
'''
INJECTED_MARKDOWN = '<script>document.title = "injected"</script> <img src=x onerror="alert(1)"> **kept**'
# A file written past the largest a process may write (COURSE_MAX_FILE_MB, 64 in this course):
# it would stay in autograded/ after grading.
FILLS_DISK = '''
chunk = b'x' * 2**24
with open('blob.bin', 'wb') as blob:
    for _ in range(8):  # 128 MiB
        blob.write(chunk)
'''
# An error under the name the grader gives a check that could not decide, raised by the notebook
# itself: the submission would be graded again alone, then sent to a person.
CLAIMS_UNDECIDED = '''
class ManualReviewNeeded(Exception):
    pass
raise ManualReviewNeeded("a hidden check could not decide")
'''
EXIT = "import os\nos._exit(1)\n"
SEGFAULT = "import ctypes\nctypes.string_at(0)\n"
MEMORY_HOG = "hog = b'x' * (3 * 2**30)\n"
FORK_BOMB = '''
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import os\\nwhile True: os.fork()  # course-fork-bomb"])
print("fork bomb started")
'''
STUBBORN = '''
import time
while True:
    try:
        time.sleep(0.2)
    except KeyboardInterrupt:
        pass
'''


# What an editor does to graded cells (autograder/pipeline/mend.py): copy, split, paste from another
# notebook, strip the metadata, retype an answer and lose its test cell, change the marks.
def _at(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells) if notebooks.nbgrader_meta(c).get("grade_id") == grade_id)


def _edited_in_an_editor(nb):
    """A copied answer, a test cell copied above its answer, an answer split
    (its head, with the imports only it has, keeps the id), another notebook's answer pasted in,
    and the marks of a test cell changed."""
    nb = copy.deepcopy(nb)
    answer = _at(nb, "cpu_info")
    pasted = copy.deepcopy(nb.cells[answer])
    pasted["id"] = "cpu-info-pasted"  # one with the id copied too: tests/test_mend.py (nbformat.write renames it)
    nb.cells.insert(answer + 1, pasted)
    above = copy.deepcopy(nb.cells[_at(nb, "test_run_in_child")])
    above["id"] = "test-copied-above"
    nb.cells.insert(_at(nb, "run_in_child"), above)
    split = _at(nb, "creation_cost")
    lines = nb.cells[split].source.split("\n")
    cut = next(i for i, line in enumerate(lines) if line.startswith("def "))
    head = copy.deepcopy(nb.cells[split])
    head.source = "\n".join(lines[:cut])
    nb.cells[split].source, nb.cells[split]["id"] = "\n".join(lines[cut:]), "split-off"
    nb.cells.insert(split, head)
    foreign = next(c for c in samples.submissions("02_gil")["sample_perfect"].cells if notebooks.is_answer_cell(c))
    nb.cells.insert(1, copy.deepcopy(foreign))
    nb.cells[_at(nb, "test_visible_appends")].metadata["nbgrader"].update(grade=False, solution=True)
    return nb


def _stripped_and_retyped(nb):
    """Every cell's nbgrader metadata gone, one answer retyped into a new cell and its test deleted."""
    nb = copy.deepcopy(nb)
    del nb.cells[_at(nb, "test_run_in_child")]
    answer = _at(nb, "run_in_child")
    nb.cells[answer] = nbformat.v4.new_code_cell(nb.cells[answer].source)
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    return nb


def _fake_test_copies(nb):
    """Below each test cell, a copy of it that passes (the last copy keeps the grade_id)."""
    nb = copy.deepcopy(nb)
    for grade_id in [g for g in (notebooks.nbgrader_meta(c).get("grade_id") for c in nb.cells) if g and g.startswith("test_")]:
        fake = copy.deepcopy(nb.cells[_at(nb, grade_id)])
        fake.source, fake["id"] = "pass", f"fake-{grade_id}".replace("_", "-")
        fake.metadata["nbgrader"].update(grade=False, points=0)
        nb.cells.insert(_at(nb, grade_id) + 1, fake)
    return nb


def _can_contain_processes():
    """A fork bomb is only safe to try where a pids cgroup will stop it."""
    probe = confine.Cgroups(Limits())
    probe.remove()
    return probe.available and any(k in probe.paths for k in ("pids", "unified"))


def _cases():
    blank = _blank()
    perfect = _perfect()
    wrong_child = _replace_answer(perfect, "run_in_child",
                                  "import os\ndef run_in_child(fn, *args):\n    return os.getpid(), fn(*args)\n")
    deleted = copy.deepcopy(blank)
    deleted.cells = [c for c in deleted.cells if not notebooks.nbgrader_meta(c).get("grade_id", "").startswith("test_")]
    edited = copy.deepcopy(blank)
    for c in edited.cells:
        if notebooks.nbgrader_meta(c).get("grade_id", "").startswith("test_"):
            c.source = "pass"
    cases = {
        # student: (notebook, what the exercises must score)
        "input_transformer": (_with_cell_after(blank, None, TRANSFORMER), "zero"),
        "custom_exc": (_with_cell_after(blank, None, CUSTOM_EXC), "zero"),
        "showtraceback": (_with_cell_after(blank, None, SHOWTRACEBACK), "zero"),
        "numpy_allclose": (_with_cell_after(perfect, None, NUMPY_PATCH), "zero"),
        "getpid_patch": (_with_cell_after(wrong_child, None, GETPID_PATCH), "zero"),
        "fake_when_graded": (_with_cell_after(_replace_answer(perfect, "run_in_child", "def run_in_child(fn, *args):\n    raise NotImplementedError\n"),
                                              "run_in_child", FAKE_WHEN_GRADED), "run_in_child zero"),
        "always_equal": (_replace_answer(perfect, "cpu_info", ALWAYS_EQUAL), "cpu_info zero"),
        "deleted_tests": (deleted, "zero"),
        "edited_tests": (edited, "zero"),
        "os_exit_midway": (_with_cell_after(perfect, "test_cpu_info", EXIT), "cpu_info only"),
        "segfault_midway": (_with_cell_after(perfect, "test_cpu_info", SEGFAULT), "cpu_info only"),
        "ignores_interrupt": (_with_cell_after(perfect, "test_run_in_child", STUBBORN), "first two only"),
        "writes_gradebook": (_with_cell_after(perfect, None, WRITE_GRADEBOOK), "full"),
        "memory_hog": (_with_cell_after(perfect, "test_cpu_info", MEMORY_HOG), "cpu_info only"),
        "handed_in_grader": (blank, "zero"),
        "snoop": (_with_cell_first(blank, SNOOP), "zero"),
        "reach_grader": (_with_cell_first(blank, REACH_GRADER), "zero"),
        "forge_verdict": (_with_cell_first(blank, FORGE_VERDICT), "zero"),
        "background_thread": (_with_cell_first(blank, BACKGROUND_THREAD), "zero"),
        "skip_in_check": (_with_cell_last(blank, SKIP_IN_CHECK), "zero"),
        "plants_links": (_with_cell_first(blank, PLANT_LINKS), "zero"),
        "fills_disk": (_with_cell_last(perfect, FILLS_DISK), "full"),
        "injects_html": (_with_markdown_last(_with_cell_last(perfect, INJECTS_HTML), INJECTED_MARKDOWN), "full"),
        "claims_undecided": (_with_cell_last(perfect, CLAIMS_UNDECIDED), "full"),
        "edited_in_an_editor": (_edited_in_an_editor(perfect), "full"),
        "stripped_and_retyped": (_stripped_and_retyped(perfect), "full"),
        "fake_test_copies": (_fake_test_copies(blank), "zero"),
        "forged_spy_counts": (_replace_answer(perfect, "visible_appends", samples.catalogue(A).WRONG["visible_appends"][
            "hard-coded 0 without starting processes, the spy's counts forged"]), "visible_appends zero"),
    }
    if _can_contain_processes():
        cases["fork_bomb"] = (_with_cell_after(perfect, "test_cpu_info", FORK_BOMB), "survives")
    return cases


@pytest.fixture(scope="module")
def trust(workdir_factory):
    work = workdir_factory("trust", [A])
    cases = _cases()
    work.submit("victim", A, _perfect())
    for student, (nb, _) in cases.items():
        folder = work.submit(student, A, nb)
        if student == "handed_in_grader":
            for rel, text in HANDED_IN_GRADER.items():
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_text(text)
    CANARY_DIR.mkdir(mode=0o700)
    for name in CANARIES:
        (CANARY_DIR / name).write_text(f"the grader's own {name}\n")
        (CANARY_DIR / name).chmod(0o600)
    (CANARY_DIR / "solutions.ipynb").write_text(nbformat.writes(_perfect()))
    (CANARY_DIR / "solutions.ipynb").chmod(0o600)
    linked = work.path / "submitted" / "linked_notebook" / A
    linked.mkdir(parents=True)
    (linked / f"{A}.ipynb").symlink_to(CANARY_DIR / "solutions.ipynb")
    tree_before = _tree_digest(course.ROOT)
    try:
        results = work.grade(env={"COURSE_CELL_TIMEOUT": "20", "COURSE_MEMORY_MB": "1536", "COURSE_MAX_FILE_MB": "64",
                                  "PGPASSWORD": "the-gradebook-password"})
        work.tree_changed = _tree_digest(course.ROOT) != tree_before
        from autograder.pipeline import jobs
        jobs.run_all("generate_feedback", [(A, "plants_links")], work=work.course)
        work.canaries = {name: (oct(stat.S_IMODE((CANARY_DIR / name).stat().st_mode)),
                                (CANARY_DIR / name).read_text()) for name in CANARIES}
    finally:
        shutil.rmtree(CANARY_DIR, ignore_errors=True)
    return work, cases, results


def _tree_digest(root):
    """A digest of the course's own files (what grading must never change)."""
    import hashlib
    import os
    digest = hashlib.sha256()
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in (".venv", "__pycache__", ".git"))
        for name in sorted(files):
            path = os.path.join(top, name)
            digest.update(path.encode())
            try:
                with open(path, "rb") as f:
                    digest.update(f.read())
            except OSError:
                pass
    return digest.hexdigest()


def _by_exercise(work, student):
    scores = {}
    for row in work.scores():
        if row["student"] == student:
            got, top = scores.get(row["exercise"], (0.0, 0.0))
            scores[row["exercise"]] = (got + row["score"], top + row["max_score"])
    return scores


EXPECTED = {
    "zero": lambda ex: 0,
    "full": lambda ex: None,
    "cpu_info zero": lambda ex: 0 if ex == "cpu_info" else None,
    "run_in_child zero": lambda ex: 0 if ex == "run_in_child" else None,
    "visible_appends zero": lambda ex: 0 if ex == "visible_appends" else None,
    "cpu_info only": lambda ex: None if ex == "cpu_info" else 0,
    "first two only": lambda ex: None if ex in ("cpu_info", "run_in_child") else 0,
}


KNOWN_OPEN = {}  # exploits known to work still (strict xfail): none


def _student_params():
    return [pytest.param(s, marks=pytest.mark.xfail(reason=KNOWN_OPEN[s], strict=True)) if s in KNOWN_OPEN
            else s for s in _cases()]


@pytest.mark.parametrize("student", _student_params())
def test_exploit_or_crash_is_scored_as_expected(trust, student):
    work, cases, results = trust
    result = next(r for r in results if r.student == student)
    assert result.ok, result.log.read_text()[-3000:]
    scores = _by_exercise(work, student)
    assert set(scores) == set(EXERCISES), f"graded exercises: {sorted(scores)}"
    if cases[student][1] == "survives":
        return  # see test_fork_bomb_is_contained
    rule = EXPECTED[cases[student][1]]
    for exercise, (got, top) in scores.items():
        want = rule(exercise)
        want = top if want is None else want
        assert got == want, f"{student}: {exercise} scored {got}/{top}, expected {want}"


def test_grading_says_what_it_mended(trust):
    """The graded notebook lists what was mended (the feedback page shows it); a notebook as
    released has nothing to list."""
    from autograder.pipeline.mend import MENDED
    work, _, _ = trust
    said = " ".join(work.graded_notebook("edited_in_an_editor", A).metadata.get(MENDED, []))
    for part in ("'cpu_info' was in 2 cells", "'test_run_in_child' was in 2 cells", "'creation_cost' was in 2 cells",
                 "which this notebook does not have", "grading marks of the cell 'test_visible_appends'"):
        assert part in said, said
    assert "had lost its grading marks" in " ".join(work.graded_notebook("stripped_and_retyped", A).metadata[MENDED])
    assert MENDED not in work.graded_notebook("victim", A).metadata


def test_only_an_edited_test_cell_raises_the_checksum_alarm(trust):
    """nbgrader warned "Attribute 'checksum' ... has changed!" for every test cell with hidden
    tests, edited or not (jupyter/nbgrader#1961): 192 false alarms per student would bury a real
    one. The course's OverwriteCellsAsReleased keeps the alarm for test cells that differ from
    the release only."""
    _, _, results = trust
    logs = {r.student: r.log.read_text() for r in results if r.student in ("edited_tests", "always_equal")}
    alarm = "Attribute 'checksum' for cell test_"
    assert logs["edited_tests"].count(alarm) == len(EXERCISES), logs["edited_tests"][-3000:]
    assert alarm not in logs["always_equal"], logs["always_equal"][-3000:]


def test_a_notebook_cannot_mark_itself_undecided(trust):
    """Its own ManualReviewNeeded error is not the grader's mark: not graded again, no person asked."""
    work, _, _ = trust
    assert (A, "claims_undecided") not in work.undecided, work.undecided
    review = (work.path / "reports" / "manual_review.csv").read_text()
    assert "claims_undecided" not in review, review


def test_no_file_grows_past_the_limit(trust):
    """The notebook's own folder is kept after grading: a file its code writes stops at the limit,
    and the writing cell fails there, saying so."""
    work, _, _ = trust
    blob = work.path / "autograded" / "fills_disk" / A / "blob.bin"
    assert blob.is_file() and blob.stat().st_size <= 64 * 2**20, blob
    nb = work.graded_notebook("fills_disk", A)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert any("File too large" in o.get("evalue", "") for o in errors), [o.get("evalue") for o in errors]


def test_the_graded_notebook_carries_no_script_of_the_students(trust):
    """What formgrader and the feedback pages would run (scripts, event handlers, JavaScript and SVG
    outputs) is made inert; the course's own text is left as source/ has it."""
    work, _, _ = trust
    nb = work.graded_notebook("injects_html", A)
    # Code is shown as code (escaped); what a browser renders is the text cells and the outputs.
    text = json.dumps([c.source if c.cell_type != "code" else c.get("outputs", []) for c in nb.cells])
    assert "kept" in text, "the notebook's harmless HTML went too"
    for live in ("<script", "onerror=", "application/javascript", "image/svg+xml"):
        assert live not in text, f"{live} survived grading"
    source = {c.get("id"): c.source for c in notebooks.read(course.source_notebook(A)).cells
              if c.cell_type == "markdown"}
    graded = [c for c in nb.cells if c.cell_type == "markdown" and c.get("id") in source]
    assert graded and all(c.source == source[c.get("id")] for c in graded)


def test_kernel_death_is_explained(trust):
    work, _, _ = trust
    nb = work.graded_notebook("os_exit_midway", A)
    text = "\n".join(o.get("evalue", "") for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error")
    assert "kernel died" in text


def test_victim_and_gradebook_untouched(trust):
    work, _, _ = trust
    victim = work.path / "submitted" / "victim" / A / f"{A}.ipynb"
    assert "overwritten" not in victim.read_text()
    got, top = work.total("victim", A)
    assert got == top


def test_fork_bomb_is_contained(trust):
    """Grading finished (above), and nothing of the bomb outlives its submission."""
    import subprocess
    work, cases, results = trust
    if "fork_bomb" not in cases:
        pytest.skip("no pids cgroup here: a fork bomb would not be contained")
    assert next(r for r in results if r.student == "fork_bomb").ok
    left = subprocess.run(["pgrep", "-f", "course-fork-bomb"], capture_output=True, text=True).stdout.split()
    assert not left, f"{len(left)} fork-bomb processes survived grading"
    assert "fork bomb started" in _outputs(work.graded_notebook("fork_bomb", A)), "the bomb never ran"


def _outputs(nb):
    return "\n".join(o.get("text", "") if o.output_type == "stream" else str(o.get("evalue", ""))
                     for c in nb.cells for o in c.get("outputs", []))


def test_course_tree_unchanged_by_grading(trust):
    work, _, _ = trust
    assert not work.tree_changed, "grading changed files of the course itself"


def test_instructor_files_unreadable_while_grading(trust):
    work, _, _ = trust
    text = _outputs(work.graded_notebook("snoop", A))
    assert "READABLE: []" in text, text[-2000:]
    assert "IN MEMORY: []" in text, text[-2000:]
    assert "SECRETS: []" in text, "the grader's secrets reach student code"


def test_grading_processes_out_of_reach(trust):
    work, _, results = trust
    text = _outputs(work.graded_notebook("reach_grader", A))
    if os.geteuid() == 0:  # only a root grader drops student code to another uid
        assert "REACHED: []" in text, text[-2000:]
    assert all(r.ok for r in results if r.student != "linked_notebook")


def test_handed_in_modules_are_not_graded(trust):
    work, _, _ = trust
    folder = work.path / "autograded" / "handed_in_grader" / A
    assert not (folder / "autograder").exists() and not (folder / "numpy.py").exists()
    assert (work.path / "submitted" / "handed_in_grader" / A / "numpy.py").exists(), "the submission keeps them"


def test_links_planted_by_student_code_lead_the_grader_nowhere(trust):
    """The grader writes the graded notebook, sets permissions and copies the feedback after
    student code ran: no file of the grader's is written, opened up or handed out."""
    work, _, _ = trust
    for name, (mode, text) in work.canaries.items():
        assert (mode, text) == ("0o600", f"the grader's own {name}\n"), f"the grader's {name} file was touched"
    for folder in (work.path / "autograded" / "plants_links" / A, work.path / "feedback" / "plants_links" / A):
        assert folder.is_dir(), f"{folder} is missing"
        for path in folder.rglob("*"):
            kind = path.lstat().st_mode
            assert stat.S_ISREG(kind) or stat.S_ISDIR(kind), f"{path} is a link or special file"
            if stat.S_ISREG(kind):  # (the release's img/ folder comes along)
                assert path.suffix == ".html" or "the grader's own" not in path.read_text(errors="replace")
    assert "planted:" in _outputs(work.graded_notebook("plants_links", A)), "the cell never ran"


def test_a_linked_notebook_is_not_graded(trust):
    """A submitted notebook that is a link (to the solutions, say) is refused, not graded."""
    work, _, results = trust
    assert not next(r for r in results if r.student == "linked_notebook").ok
    assert not [row for row in work.scores() if row["student"] == "linked_notebook" and row["score"] > 0]
    assert not (work.path / "autograded" / "linked_notebook" / A / f"{A}.ipynb").exists()


def test_handed_in_links_are_found_without_following_them(tmp_path):
    """Files handed in as links (named like a file the release has, say) are left out of grading;
    what they point to is the grader's to read, not the student's."""
    from autograder.pipeline.preprocessors import KeepExpectedFiles
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.txt").write_text("the grader's")
    submitted = tmp_path / "submitted" / "mallory" / "05_multiprocessing_pools"
    submitted.mkdir(parents=True)
    (submitted / "05_multiprocessing_pools.ipynb").write_text("{}")
    (submitted / "pool_tasks.py").symlink_to(outside / "secret.txt")
    (submitted / "data").symlink_to(outside / "deep")
    found = KeepExpectedFiles._handed_in_links(submitted, "05_multiprocessing_pools")
    assert found == {Path("pool_tasks.py"), Path("data")}
    (submitted / "05_multiprocessing_pools.ipynb").unlink()
    (submitted / "05_multiprocessing_pools.ipynb").symlink_to(outside / "secret.txt")
    with pytest.raises(ValueError, match="symbolic link"):
        KeepExpectedFiles._handed_in_links(submitted, "05_multiprocessing_pools")


def test_a_test_cell_tagged_demo_by_the_student_still_runs(tmp_path, monkeypatch):
    """Grading skips the course's `demo` cells; a test cell the student tagged `demo` runs anyway
    (nbgrader restores a test cell's source and nbgrader metadata, not its tags: skipped, it
    raised nothing and scored full marks, whatever the answer)."""
    import nbformat
    from jupyter_client.manager import AsyncKernelManager

    from autograder.pipeline.preprocessors import ResilientExecute

    monkeypatch.setenv("COURSE_SANDBOX_OFF", "1")
    nb = nbformat.v4.new_notebook()
    graded = nbformat.v4.new_code_cell("assert 1 + 1 == 3, 'the visible test fails'")
    graded.metadata = {"tags": ["demo"], "nbgrader": {"grade": True, "grade_id": "test_sum", "points": 2,
                                                      "solution": False, "locked": True, "schema_version": 3}}
    teaching = nbformat.v4.new_code_cell("raise RuntimeError('a demo ran')")
    teaching.metadata = {"tags": ["demo"]}
    nb.cells = [graded, teaching]
    executor = ResilientExecute(skip_cells_with_tag="demo", kernel_manager_class=AsyncKernelManager, timeout=60)
    ran, _ = executor.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    errors = [o for o in ran.cells[0].outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "AssertionError", ran.cells[0].outputs
    assert ran.cells[1].outputs == [], "the course's own demo cell ran"
