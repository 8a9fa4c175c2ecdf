"""Serial and lock-serialised answers never earn the points of a parallel exercise.

For every exercise whose point is a parallel speed-up or concurrency, the
catalogue holds a serial WRONG answer (and, where a lock could quietly
serialise the work, a lock-serialised one). Here they are graded exactly as
`python -m autograder grade` grades, in the shared graded course (tests/conftest.py):
every submission in one `grade()` call (in parallel, as many jobs as usable cores, then the
undecided ones alone). Each such exercise must score zero, whether its checks
decided (a clock-free failure) or could not decide (undecided scores zero and
goes to a person).

One student submits every serial answer, another every lock-serialised one;
the other answer cells stay blank (they fail fast and are not looked at).
"""
import pytest

from autograder import samples

# (student, assignment, exercise, label of the WRONG answer): autograder/samples
# names them (SERIALISED); tests/conftest.py grades them in the shared graded course.
# The lock-serialised NumPy answer of 02 is not among them: only a clock on a quiet
# machine catches it, so among other jobs it was undecided every time (zero, then a
# person) and its regrade alone held the test run up for a minute; it is judged
# with the machine to itself instead (samples.DECIDED_ALONE, tests/test_decided_alone.py).
CASES = [(student, *case) for student, cases in samples.SERIALISED.items() for case in cases]
GRADED_ASSIGNMENTS = sorted({assignment for _, assignment, _, _ in CASES})


@pytest.fixture
def graded(graded_course):
    return graded_course


def test_every_submission_was_graded(graded):
    failed = [f"{r.student}/{r.assignment}" for r in graded["results"]
              if not r.ok and r.student in samples.SERIALISED]
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
