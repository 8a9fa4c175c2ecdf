"""Sample submissions, and the catalogue of wrong and alternative answers.

`autograder/samples/<assignment>.py` lists, per exercise, plausible WRONG answers
(which the hidden checks must score zero), correct ALTERNATIVE answers (which
they must accept), TO_A_PERSON (optional): wrong answers no check can fail on a
machine like the grader's, which must be undecided (zero, then a person), never
passed; SEEN_ON_A_GPU (optional): wrong answers whose mistake only CUDA runs, which
must fail where the student's code can use a GPU and pass where it cannot; and PARTIAL: which wrong answers (or blanks) make up the
"partly wrong" sample student. tests/ holds the checks to that catalogue; the
main job turns it into three sample submissions per assignment:

    sample_perfect  the reference answers typed into the release notebook
    sample_blank    the release notebook untouched
    sample_partial  some answers right, some wrong, some blank

sample_partial leaves blank, beyond its wrong answers, the exercises whose
checks cost the most to grade (speed-ups, worker processes, forced thread
switches, profiles): their reference answers are graded in sample_perfect
already. tests/test_grading.py holds the right answers it keeps to full marks
beside the wrong ones.
"""
import shutil
from pathlib import Path

import nbformat

from .. import course, notebooks

HERE = Path(__file__).resolve().parent
STUDENTS = ("sample_perfect", "sample_blank", "sample_partial")


def variant(code, *edits):
    """`code` with each (old, new) edit made once: answers that differ from another by a line or two."""
    for old, new in edits:
        assert code.count(old) == 1, old
        code = code.replace(old, new)
    return code

# A tensor subclass an answer can return instead of moving a tensor: its __torch_function__ says
# it is on the meta device when torch's own device reader asks (after `import torch`).
CLAIMS_META = """
_DEVICE = torch._C.TensorBase.__dict__["device"]
class _OnMeta(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__self__", None) is _DEVICE:
            return torch.device("meta")
        return super().__torch_function__(func, types, args, kwargs)
"""

# Code a student who has read autograder/ could add to a serial answer: find the grader's spy
# (its dict of Thread/Process starts and joins) in the callers' frames and raise every count.
# The catalogue's answers that use it must still fail: the judge backs the spy's starts with
# the kernel's record of what was created (autograder/pipeline/creations.py).
FORGE_SPY_COUNTS = """
import sys
def _forge_spy_counts(extra=64):
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, dict) and "process start" in value:
                for key in value:
                    value[key] += extra
        frame = frame.f_back
"""

# Code a student who has read autograder/ could add to forge where work ran: a process of its own
# that, each time it is asked, spins for a while if told to, starts a thread and sends back the
# thread's kernel id. The kernel then did see that thread created in that process during the
# call, as if the process had run a task. The catalogue's answers that use it must still fail:
# the tasks' puzzles (autograder/checks/_puzzles.py) were solved where the answer ran them.
WITNESS_HELPER = """
import threading as _threading
from multiprocessing import get_context as _get_context

_WITNESS_LOOP = '''
import threading, time
while True:
    spin = conn.recv()
    if spin is None:
        break
    start = time.thread_time()
    while time.thread_time() - start < spin:
        pass
    seen = []
    thread = threading.Thread(target=lambda: seen.append(threading.get_native_id()))
    thread.start()
    thread.join()
    conn.send(seen[0])
'''

class _WitnessHelper:
    def __init__(self, method="fork"):
        context = _get_context(method)
        self._conn, theirs = context.Pipe()
        self.process = context.Process(target=exec, args=(_WITNESS_LOOP, {"conn": theirs}), daemon=True)
        self.process.start()
        self.pid = self.process.pid
        self._lock = _threading.Lock()

    def witness(self, spin=0.0):
        with self._lock:
            self._conn.send(spin)
            return self._conn.recv()

    def stop(self):
        self._conn.send(None)
        self.process.join()
"""

# Serial and lock-serialised answers to the exercises whose point is a parallel
# speed-up or concurrency: (assignment, exercise, label of its WRONG answer).
# Graded as two students (tests/test_timing_exercises.py): each must score zero.
SERIAL_ANSWERS = [
    ("02_gil", "run_threads", "serial calls"),
    ("02_gil", "run_processes", "serial calls"),
    ("02_gil", "gil_experiment", "everything serial"),
    ("02_gil", "numpy_threads_speedup", "no threads at all"),
    ("02_gil", "fetch_all", "awaits one after another"),
    ("03_race_conditions", "parallel_sum", "serial sum"),
    ("05_multiprocessing_pools", "parallel_map", "serial list comprehension"),
    ("05_multiprocessing_pools", "parallel_starmap", "serial"),
    ("05_multiprocessing_pools", "robust_map", "serial loop with try/except"),
    ("05_multiprocessing_pools", "monte_carlo_pi", "serial"),
    ("05_multiprocessing_pools", "generate_trajectories", "calls the serial reference"),
    ("06_joblib_vectorization", "cdist_joblib", "serial: the naive loop, no joblib"),
    ("06_joblib_vectorization", "block_matmul", "blocks computed serially"),
    ("06_joblib_vectorization", "bootstrap_ci", "serial loop"),
    ("09_data_parallel", "run_ddp", "trains in the calling process (no DDP)"),
]
LOCKED_ANSWERS = [
    ("02_gil", "run_threads", "one lock around every call"),
    ("02_gil", "gil_experiment", "threads take turns on one lock"),
    ("02_gil", "fetch_all", "one asyncio.Lock around every request"),
]
SERIALISED = {"serial_student": SERIAL_ANSWERS, "locked_student": LOCKED_ANSWERS}
# Wrong answers that only a clock can catch, and only on a quiet machine: judged with the machine
# to itself (tests/test_decided_alone.py), where each must fail, not be undecided. Graded among
# other jobs they are undecided (zero, then a person: tests/test_manual_review.py).
DECIDED_ALONE = [
    ("02_gil", "numpy_threads_speedup", "one lock around every chunk"),
    # It reports 3 times its threads' gain (about 5.8). With 4.0 as the only ceiling of a pass it
    # passed a try beside part 1's tests (2026-11-28), then once in part 3, on a quiet machine whose
    # threads gained 1.2 to 1.3 (2026-11-29). No try above 2.5, or above twice the judge's own gain
    # right after, passes now; under load it is undecided, since only quiet tries count against it.
    ("02_gil", "numpy_threads_speedup", "the serial time of all 3 repeats over the best threaded one (about 5.8)"),
    # Its processes take turns, so only their CPU use shows it; beside part 1's tests the judge's own
    # processes cannot use 1.2 cores either, and the check is rightly undecided there.
    ("02_gil", "gil_experiment", "the processes started and joined one after another"),
]
# Sample gradings whose timing checks decide only on a quiet machine: graded beside the test run's
# other work, 02's reference answers left the GIL experiment (and once the NumPy speed-up too)
# undecided twice, so for a person, in 2 of 3 runs on 2026-11-26, and each time cost a regrade
# alone. bin/test grades them end to end in part 3, with the machine to itself
# (tests/test_decided_alone.py), and leaves them out of the shared graded course.
GRADED_ALONE = [
    ("02_gil", "sample_perfect"),
]


def catalogue(assignment):
    """The WRONG/ALTERNATIVE/PARTIAL catalogue module of an assignment."""
    try:
        return course.load_module(f"autograder.samples._{assignment}", HERE / f"{assignment}.py")
    except LookupError:
        raise LookupError(f"no answer catalogue for {assignment}") from None


def fill(release_nb, answers):
    """A copy of a release notebook with the given answer cells' sources replaced."""
    nb = nbformat.from_dict(release_nb)
    for cell in nb.cells:
        if notebooks.is_answer_cell(cell):
            grade_id = notebooks.nbgrader_meta(cell)["grade_id"]
            if grade_id in answers:
                cell.source = answers[grade_id]
    return nb


def submissions(assignment):
    """{student: notebook} for the three sample students of an assignment."""
    release_nb = notebooks.read(course.release_notebook(assignment))
    source_nb = notebooks.read(course.source_notebook(assignment))
    perfect = {gid: notebooks.solution_code(src) for gid, src in notebooks.answer_cells(source_nb).items()}
    made = {"sample_perfect": fill(release_nb, perfect), "sample_blank": fill(release_nb, {})}
    if not has_catalogue(assignment):  # a new assignment still being written: no partial student yet
        return made
    partial = dict(perfect)
    cat = catalogue(assignment)
    for exercise, label in cat.PARTIAL.items():
        if label is None:
            partial.pop(exercise)
        else:
            partial[exercise] = cat.WRONG[exercise][label]
    return {**made, "sample_partial": fill(release_nb, partial)}


def has_catalogue(assignment):
    """Whether autograder/samples/<assignment>.py exists (`author new` starts an assignment without one)."""
    return (HERE / f"{assignment}.py").is_file()


def serialised_submissions(assignments=None):
    """{(student, assignment): notebook}: the SERIALISED students' answers typed into the
    release notebooks of those assignments (their other answer cells blank)."""
    answers = {}
    for student, cases in SERIALISED.items():
        for assignment, exercise, label in cases:
            if assignments is None or assignment in assignments:
                answers.setdefault((student, assignment), {})[exercise] = catalogue(assignment).WRONG[exercise][label]
    return {key: fill(notebooks.read(course.release_notebook(key[1])), code) for key, code in answers.items()}


def write(assignments=None, submitted=None):
    """Write the sample submissions into submitted/<student>/<assignment>/."""
    submitted = Path(submitted or course.Course().submitted)
    written = []
    for assignment in assignments or course.assignments():
        for student, nb in submissions(assignment).items():
            folder = submitted / student / assignment
            if folder.exists():
                shutil.rmtree(folder)
            shutil.copytree(course.RELEASE / assignment, folder,
                            ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
            nbformat.write(nb, str(folder / f"{assignment}.ipynb"))
            written.append((student, assignment))
    return written


def main(args):
    # The sample students are the release notebook with answers typed in: none without a release.
    unreleased = [a for a in args.assignments or course.assignments() if not course.release_notebook(a).is_file()]
    if unreleased:
        raise SystemExit(f"samples: {', '.join(unreleased)} not released yet (no {course.release_notebook(unreleased[0])}): "
                         f"run `python -m autograder release {' '.join(unreleased)}` first")
    written = write(args.assignments or None)
    print(f"samples: {len(written)} submissions in {course.Course().submitted}")
    for assignment in args.assignments or course.assignments():
        if not has_catalogue(assignment):
            print(f"samples: {assignment} has no answer catalogue yet (autograder/samples/{assignment}.py, "
                  "as the instructor guide's 'Adding an exercise' says): no sample_partial for it")
    return 0
