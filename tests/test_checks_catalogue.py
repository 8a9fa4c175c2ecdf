"""The hidden checks against the catalogue of wrong and alternative answers.

Every plausible wrong answer the catalogue names must fail at least one check
of its exercise; every correct alternative must pass them all; an answer that
returns None, for every exercise, must fail on a check's own words. As while
grading, the checks run here (the judge's role) and the answers in a student's
process of their own (autograder/pipeline/judge.py), on top of the reference
solutions of the other exercises: one such process per assignment, started
again when an answer stops it. The reference solutions themselves are judged by
bin/test's pass over autograder/checks (judged, under spawn) and graded to
full marks in tests/test_grading.py; the serial and lock-serialised wrong answers
are graded to zero in tests/test_timing_exercises.py, or judged on a quiet machine
in tests/test_decided_alone.py.
"""
import pytest

from autograder import course, notebooks, samples

# The serial and lock-serialised answers (samples.SERIALISED) are graded end to end in the shared
# graded course, where each must score zero (tests/test_timing_exercises.py), and those only a clock
# on a quiet machine can catch (samples.DECIDED_ALONE) are judged in tests/test_decided_alone.py:
# not judged here again.
_GRADED_ELSEWHERE = ({(a, e, label) for cases in samples.SERIALISED.values() for a, e, label in cases}
                     | set(samples.DECIDED_ALONE))


def _cases(assignment, kind):
    for exercise, answers in getattr(samples.catalogue(assignment), kind).items():
        for label in answers:
            if (assignment, exercise, label) not in _GRADED_ELSEWHERE:
                yield pytest.param(exercise, label, id=f"{exercise}:{label}")


def _catalogue_tests(assignment):
    """The catalogue's tests of one assignment, as a class: pytest-xdist's `--dist loadscope`
    keeps a class on one worker, where the assignment's student's process is started once."""

    class Catalogue:
        @pytest.mark.parametrize("exercise,label", list(_cases(assignment, "WRONG")))
        def test_wrong_answer_fails(self, judge, exercise, label):
            catalogue = samples.catalogue(assignment)
            code = catalogue.WRONG[exercise][label]
            outcomes = judge(assignment, exercise, code, until_failure=True)  # one failing check is enough
            if label in getattr(catalogue, "TO_A_PERSON", {}).get(exercise, ()):
                assert not all(o.passed for o in outcomes), (
                    f"the wrong answer '{label}' passes every hidden check (it should go to a person)")
                return
            if not any(not o.passed and not o.undecided for o in outcomes):
                _skip_if_only_undecided(outcomes)
            assert any(not o.passed and not o.undecided for o in outcomes), (
                f"the wrong answer '{label}' passes every hidden check")

        @pytest.mark.parametrize("exercise,label", list(_cases(assignment, "ALTERNATIVE")))
        def test_alternative_answer_passes(self, judge, exercise, label):
            code = samples.catalogue(assignment).ALTERNATIVE[exercise][label]
            outcomes = judge(assignment, exercise, code)
            _skip_if_only_undecided(outcomes)
            failed = [f"{o.description}: {o.message}" for o in outcomes if not o.passed]
            assert not failed, f"the correct alternative '{label}' fails: {failed}"

        @pytest.mark.parametrize("exercise", course.contract()[assignment])
        def test_an_answer_that_returns_nothing_fails_in_plain_words(self, judge, exercise):
            """The commonest slip (no `return`): a check fails it, decided, and says why in its own
            words, rather than meeting None with an error of its own (then settled on the reference,
            with only a generic message)."""
            code = f"def {exercise}(*args, **kwargs):\n    return None\n"
            outcomes = judge(assignment, exercise, code, until_failure=True)
            failed = [o for o in outcomes if not o.passed and not o.undecided]
            if not failed:
                _skip_if_only_undecided(outcomes)
            assert failed, f"an answer returning None passes every hidden check of {exercise}"
            assert "could not use what your code returned" not in failed[-1].message, failed[-1].message

    Catalogue.__name__ = Catalogue.__qualname__ = f"TestCatalogue_{assignment}"
    return Catalogue


for _assignment in course.assignments():
    globals()[f"TestCatalogue_{_assignment}"] = _catalogue_tests(_assignment)


def _skip_if_only_undecided(outcomes):
    """A timing check that cannot decide on a busy machine is inconclusive: not a failure of a
    correct answer, and no proof that a wrong one is wrong (grading regrades it alone, then asks
    a person). The test is then skipped, and the skip says so in the run's summary."""
    if not all(o.passed or o.undecided for o in outcomes):
        return
    undecided = [f"{o.description}: {o.message}" for o in outcomes if o.undecided]
    if undecided:
        pytest.skip("undecided on this machine now: " + "; ".join(undecided))


def test_catalogue_covers_every_exercise(assignment):
    catalogue = samples.catalogue(assignment)
    nb = notebooks.read(course.source_notebook(assignment))
    for exercise in notebooks.answer_cells(nb):
        assert catalogue.WRONG.get(exercise), f"{exercise}: no wrong answer in the catalogue"
    for exercise, label in catalogue.PARTIAL.items():
        assert label is None or label in catalogue.WRONG[exercise], f"PARTIAL names an unknown answer {label}"
    for exercise, labels in getattr(catalogue, "TO_A_PERSON", {}).items():
        unknown = set(labels) - set(catalogue.WRONG.get(exercise, ()))
        assert not unknown, f"TO_A_PERSON names unknown wrong answers of {exercise}: {unknown}"


def test_a_serial_run_threads_fails_without_waiting_for_a_person(judge):
    """02's serial answer (graded to zero in the shared graded course) fails a check that needs no
    clock: it runs a call in the calling thread. Left undecided, every serial answer would be
    graded again alone and then sent to a person."""
    code = samples.catalogue("02_gil").WRONG["run_threads"]["serial calls"]
    outcomes = judge("02_gil", "run_threads", code)
    assert any(not o.passed and not o.undecided for o in outcomes), [(o.description, o.message) for o in outcomes]


@pytest.mark.parametrize("label", ["awaits one after another", "one asyncio.Lock around every request"])
def test_a_serialised_fetch_all_fails_without_a_clock(judge, label):
    """02's fetch_all awaited one request at a time (graded to zero in the shared graded course)
    fails at its first slow try, on what the watch on asyncio.sleep saw, whatever the load: it does
    not sleep through four more tries holding the machine, nor end undecided on a busy one."""
    code = samples.catalogue("02_gil").WRONG["fetch_all"][label]
    outcomes = judge("02_gil", "fetch_all", code)
    failed = [o for o in outcomes if not o.passed and not o.undecided]
    assert failed and "never overlapped" in failed[-1].message, [(o.description, o.message) for o in outcomes]


_GUARDED_SET_SEED = """
import random

import numpy as np
import torch


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
"""


def test_a_set_seed_that_seeds_cuda_only_where_it_finds_a_gpu_is_undecided_without_one(judge):
    """04's set_seed that asks for a GPU before it seeds CUDA is right, and shows nothing on a
    machine without one: a person decides (it failed, decided, until 2026-11-30). The spy on
    torch.cuda._is_compiled, which is_available() and device_count() both call, holds the pinned
    torch to it."""
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the answer's seeding shows")
    outcomes = {o.check: o for o in judge("04_rng_reproducibility", "set_seed", _GUARDED_SET_SEED)}
    assert outcomes["test_set_seed_generators"].passed
    cuda = outcomes["test_set_seed_cuda_and_cudnn"]
    assert cuda.undecided and "finds a GPU" in cuda.message, (cuda.passed, cuda.message)


def _seen_on_a_gpu():
    for assignment in course.assignments():
        if samples.has_catalogue(assignment):
            for exercise, answers in getattr(samples.catalogue(assignment), "SEEN_ON_A_GPU", {}).items():
                for label in answers:
                    yield pytest.param(assignment, exercise, label, id=f"{exercise}:{label}")


@pytest.mark.parametrize("assignment,exercise,label", list(_seen_on_a_gpu()))
def test_a_wrong_answer_in_a_cuda_only_branch_fails_where_the_gpu_is_usable(judge, assignment, exercise, label):
    """The catalogue's SEEN_ON_A_GPU answers: where the answer can use a GPU, a check fails them;
    without one they pass every check, as the guide says (a check that fails one on the CPU too
    moves it to WRONG). On an H200 machine both of 08's failed, decided (tests/gpu_machine/)."""
    import torch
    code = samples.catalogue(assignment).SEEN_ON_A_GPU[exercise][label]
    outcomes = judge(assignment, exercise, code)
    if torch.cuda.is_available():
        assert any(not o.passed and not o.undecided for o in outcomes), f"'{label}' passes on the GPU"
    else:
        assert all(o.passed for o in outcomes), (
            f"'{label}' fails without a GPU: {[o.message for o in outcomes if not o.passed]}; list it in WRONG")


def test_messages_that_name_the_batch_size_twice_still_pair_off():
    """08's tensor_core_issues: where the batch size equals a layer's offending size, a correct
    answer's layer message may name it too ("Linear(15, 7): in_features=15"); the messages must
    still pair off one to one with the sizes. Taken first come first served, the batch took the
    layer's message, and 1 grading in 300 of two such correct answers failed."""
    from autograder import hidden
    check = hidden.load_checks("08_amp_tensor_cores")._check_messages
    # Linear(15, 7) then Linear(7, 9), batch 15: the sizes in the check's order, the batch last.
    messages = ["batch size 15: not a multiple of 8", "Linear(15, 7): in = 15", "Linear(15, 7): out = 7",
                "Linear(7, 9): in = 7", "Linear(7, 9): out = 9"]
    check(messages, [15, 7, 7, 9, 15], "a model of Linear layers")
    with pytest.raises(AssertionError, match="one is missing"):
        check(["batch size: not a multiple of 8", "Linear(15, 7): in = 15", "out = 7", "in = 7", "out = 9"],
              [15, 7, 7, 9, 15], "a model of Linear layers")  # the second 15 has no message


def test_a_ranking_no_stall_explains_fails_at_its_first_try():
    """11's hotspots: an entry under half the CPU time of the function ranked there (a function
    left out, or seconds that are not own time) fails the try at once (AssertionError), whereas a
    ranking that stalls could have disturbed is only a try's problem (retried up to five times).
    A right ranking, whose own times are at least those CPU times, passes."""
    import hashlib
    from autograder import hidden
    problem = hidden.load_checks("11_profiling_scaling")._ranking_problem

    def digest(name):
        return hashlib.sha256(name.encode()).hexdigest()
    expected = [digest(n) for n in ("parse_1", "<built-in method builtins.sum>", "scan_2")]
    spent = [2.40, 0.30, 0.10]                     # the CPU each of the three took
    args = dict(expected=expected, runs=1, hooked=True, wall=3.0, cpu=2.85, spent=spent)
    assert problem([("parse_1", 2.41), ("sum", 0.31), ("scan_2", 0.12)], **args) is None
    # A stall lifted another function above the smallest: retried, not failed at once.
    assert problem([("parse_1", 2.41), ("sum", 0.31), ("merge_3", 0.13)], **args) is not None
    wrong = {2: [("parse_1", 2.41), ("scan_2", 0.10), ("tiny_4", 0.001)],  # built-ins dropped
             1: [("sum", 0.31), ("scan_2", 0.10), ("tiny_4", 0.001)]}      # another file's function left out
    for entry, found in wrong.items():
        with pytest.raises(AssertionError, match=f"entry {entry} has"):
            problem(found, **args)
    with pytest.raises(AssertionError, match="entry 1 has"):               # shares of the total
        problem([("parse_1", 0.86), ("sum", 0.11), ("scan_2", 0.04)], **args)


def test_the_ranked_ranges_of_torch_top_ops_are_recorded_as_operators():
    """11's torch_top_ops ranks ranges that the check's model opens; torch's profiler must record
    them as it records operators, not as user annotations, or an answer that leaves out the
    ranges users label with record_function (a correct reading of "operators") would fail."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from autograder import hidden
    checks = hidden.load_checks("11_profiling_scaling")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with checks._operator_range("aten::probe_range"):
            torch.ones(3).clone()
        with torch.profiler.record_function("a user's label"):
            torch.ones(3).clone()
    kinds = {e.key: e.is_user_annotation for e in prof.key_averages()}
    assert kinds["aten::probe_range"] is False and kinds["a user's label"] is True, kinds


def _leaving(pidfile, target):
    """An answer to 01's run_in_child (fn called in the caller) that starts, at import, a daemon
    process running `target` and writes its pid to `pidfile`."""
    return (f"import os, time\n"
            f"from helpers.workers import mp_context\n"
            f"_LEFT = mp_context().Process(target={target}, daemon=True)\n"
            f"_LEFT.start()\n"
            f"open({str(pidfile)!r}, 'w').write(str(_LEFT.pid))\n"
            f"def run_in_child(fn, *args):\n"
            f"    return os.getpid(), fn(*args)\n")


def test_an_answer_that_leaves_a_core_busy_is_no_later_answers_neighbour(judge, tmp_path, course_tools):
    """A process left spinning by one answer (as the catalogue's forged pid of 01 does) is stopped
    with its student's process after that answer, so that no later answer is judged beside it;
    a process left asleep keeps its student's process, which is not started again for nothing."""
    a = "01_processes_threads"
    spinning, sleeping = tmp_path / "spinning.pid", tmp_path / "sleeping.pid"
    judge(a, "run_in_child", _leaving(spinning, 'exec, args=("while True: pass",)'), until_failure=True)
    assert judge.sessions[a].broken, "the student's process with a spinner beside it was kept"
    running = course_tools.running
    assert not running(int(spinning.read_text()), within=10), "the spinner still runs"

    kept = judge.session(a)
    judge(a, "run_in_child", _leaving(sleeping, "time.sleep, args=(60,)"), until_failure=True)
    assert judge.sessions[a] is kept and not kept.broken, "an answer that left an idle process restarted it"
    assert running(int(sleeping.read_text()), within=0.2)
    kept.stop()  # the sleeper goes with it: no later test shares its process
    assert not running(int(sleeping.read_text()), within=10)
