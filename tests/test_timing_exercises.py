"""Serial and lock-serialised answers never earn the points of a parallel exercise.

For every exercise whose point is a parallel speed-up or concurrency, the
catalogue holds a serial WRONG answer (and, where a lock could quietly
serialise the work, a lock-serialised one). Here they are graded exactly as
`python -m autograder grade` grades: one temporary course, every submission in
one `grade()` call (in parallel, as many jobs as usable cores, then the
undecided ones alone). Each such exercise must score zero, whether its checks
decided (a clock-free failure) or could not decide (undecided scores zero and
goes to a person).

One student submits every serial answer, another every lock-serialised one;
the other answer cells stay blank (they fail fast and are not looked at).
"""
from collections import defaultdict

import pytest

from autograder import course, notebooks, samples

# (assignment, exercise, label of the WRONG answer in autograder/samples/<assignment>.py)
SERIAL = [
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
LOCKED = [
    ("02_gil", "run_threads", "one lock around every call"),
    ("02_gil", "gil_experiment", "threads take turns on one lock"),
    ("02_gil", "numpy_threads_speedup", "one lock around every chunk"),
    ("02_gil", "fetch_all", "one asyncio.Lock around every request"),
]
STUDENTS = {"serial_student": SERIAL, "locked_student": LOCKED}

# Six submissions graded two at a time on 2 cores, then the undecided ones again
# alone. Measured on a 2-core machine shared with other jobs (load average 6-13):
# 10 min 45 s in all, of which the parallel pass took 6.5 min; both 02 submissions
# were regraded alone because the NumPy gain check could not decide there (they
# scored zero all the same). At load 20-30 the parallel pass alone took 10 min.
pytestmark = pytest.mark.timeout(2400)
CASES = [(student, *case) for student, cases in STUDENTS.items() for case in cases]


def _submissions():
    """{(student, assignment): {exercise: code}} from the catalogue."""
    answers = defaultdict(dict)
    for student, assignment, exercise, label in CASES:
        answers[(student, assignment)][exercise] = samples.catalogue(assignment).WRONG[exercise][label]
    return answers


@pytest.fixture(scope="module")
def graded(workdir_factory):
    submissions = _submissions()
    assignments = sorted({assignment for _, assignment in submissions})
    work = workdir_factory("timing-exercises", assignments)
    for (student, assignment), answers in submissions.items():
        release_nb = notebooks.read(course.release_notebook(assignment))
        work.submit(student, assignment, samples.fill(release_nb, answers))
    results = work.grade()
    return {"work": work, "results": results, "rows": work.scores()}


def test_every_submission_was_graded(graded):
    failed = [f"{r.student}/{r.assignment}" for r in graded["results"] if not r.ok]
    assert not failed, f"autograde failed for {failed}; see {graded['work'].path}"


@pytest.mark.parametrize("student,assignment,exercise,label", CASES,
                         ids=[f"{s}:{a}:{e}" for s, a, e, _ in CASES])
def test_serialised_answer_scores_zero(graded, student, assignment, exercise, label):
    cells = [r for r in graded["rows"]
             if r["student"] == student and r["assignment"] == assignment and r["exercise"] == exercise]
    assert cells, f"{student}/{assignment}: no graded cell for {exercise}"
    scored = [f"{r['cell']} ({r['score']}/{r['max_score']})" for r in cells if r["score"] > 0]
    assert not scored, (f"the answer '{label}' to {assignment}/{exercise} scored points in {scored}: "
                        f"see {graded['work'].path}/autograded/{student}/{assignment}")


def test_every_parallel_exercise_has_a_serial_case():
    """The catalogue labels named here exist (a renamed answer must not drop out silently)."""
    for _, assignment, exercise, label in CASES:
        assert label in samples.catalogue(assignment).WRONG.get(exercise, {}), (
            f"{assignment}/{exercise}: no WRONG answer labelled {label!r}")
