"""On a quiet machine a timing check decides: an answer whose threads never compute at once fails
rather than going to a person.

02's check of two NumPy threads (test_numpy_threads_speedup_gains) has nothing but timings and
CPU time to go on. Its lock-serialised answer was left undecided in 2 of 3 gradings on an idle
machine: its tries counted only when our own threads gained >= 1.4 right after, all 5 had to,
and our own run missed 1.4 about 1 try in 5. Each such submission was graded again alone and
then listed for a person. Now 7 quiet tries of up to 20 must count. bin/test runs this in part 3,
with the machine to itself: under load, undecided is the right verdict. Chance of a false failure
here: our own run missed 1.4 in 9 tries of 115 on a quiet machine; taking a try as counting with
probability >= 0.85, fewer than 7 of 20 count with probability below 5e-8 (binomial).
"""
import pytest

from autograder import samples

EXERCISE = "numpy_threads_speedup"
# The serial answer ("no threads at all") fails the check of the threads it starts, which
# needs no clock; the lock-serialised one starts its threads and can only be caught by timing.
LOCKED = "one lock around every chunk"


def test_a_lock_serialised_numpy_answer_fails_decided(judge):
    code = samples.catalogue("02_gil").WRONG[EXERCISE][LOCKED]
    outcomes = judge("02_gil", EXERCISE, code)
    gains = next(o for o in outcomes if o.check == "test_numpy_threads_speedup_gains")
    assert not gains.passed and not gains.undecided, (gains.message, [(o.check, o.passed) for o in outcomes])
