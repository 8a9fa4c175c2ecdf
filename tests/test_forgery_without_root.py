"""The catalogue's forgers, judged where the grader is not root.

As root, the judge hears the kernel's process events (autograder/pipeline/creations.py): a pid,
a witness thread or a spy's count that an answer writes for work it did not start is caught
against the kernel's own record. A grader that is not root (a laptop, a rootless container)
gets no such events, and each check's docstring names the evidence that then stands alone:
/proc seen from outside, and the puzzles that only work done in other processes can solve
within the calling process's CPU allowance. This runs every catalogue answer that forges such
evidence with the kernel's events refused, as they are to a grader that is not root: each must
still fail, decided (a check left undecided would send every such forger to a person).

The spy's counts have one bound there: each real start takes an id from the kernel, so a record
claiming more starts than the ids handed out on the whole machine meanwhile was edited
(_support.capped). The catalogue's count forgers claim 64 more of each kind (samples.
FORGE_SPY_COUNTS); where the machine handed out that many ids during the call (a busy machine),
the bound cannot tell, and the test is skipped, saying so.
"""
import pytest

from autograder import course, samples
from autograder.checks import _support
from autograder.pipeline import creations


def _forgers(assignment):
    for exercise, answers in samples.catalogue(assignment).WRONG.items():
        for label in answers:
            if "forged" in label:
                yield pytest.param(exercise, label, id=f"{exercise}:{label}")


@pytest.fixture
def not_root(monkeypatch):
    def refused():
        raise PermissionError("the kernel's process events need root")
    monkeypatch.setattr(creations, "_listen", refused)
    monkeypatch.setattr(_support, "_told_unavailable", [True])  # the judge's notice, once is enough


def _forgery_tests(assignment):
    class Forgers:
        @pytest.mark.parametrize("exercise,label", list(_forgers(assignment)))
        def test_a_forger_fails_decided_without_the_kernels_events(self, judge, not_root, exercise, label):
            code = samples.catalogue(assignment).WRONG[exercise][label]
            first = creations.last_id()
            outcomes = judge(assignment, exercise, code, until_failure=True)
            handed_out = creations.ids_between(first, creations.last_id())
            decided = [o for o in outcomes if not o.passed and not o.undecided]
            if not decided and "spy's counts forged" in label and (handed_out is None or handed_out >= 2 * 64):
                pytest.skip(f"the machine handed out {handed_out} ids while the answer ran: "
                            "the bound on the spy's counts cannot tell here")
            assert decided, (f"'{label}' is not failed, decided, without the kernel's events: "
                             f"{[(o.description, o.passed, o.message) for o in outcomes]}")

    Forgers.__name__ = Forgers.__qualname__ = f"TestForgers_{assignment}"
    return Forgers


for _assignment in course.assignments():
    if any(True for _ in _forgers(_assignment)):
        globals()[f"TestForgers_{_assignment}"] = _forgery_tests(_assignment)


def test_the_kernels_events_are_refused_as_to_a_grader_that_is_not_root(not_root):
    """The fixture above does what a grader that is not root meets (tests/test_creations.py)."""
    with _support.created() as made:
        pass
    assert not made.available
