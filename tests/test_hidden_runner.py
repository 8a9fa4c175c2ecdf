"""The hidden-test runner: plain messages, bounded time, strict comparisons."""
import ast
import contextlib
import os
import re
import sys
import textwrap
import time

import numpy as np
import pytest

from autograder import course, hidden
from autograder.checks import _support


@pytest.fixture
def fake_assignment(tmp_path, monkeypatch):
    checks = tmp_path / "99_fake.py"
    checks.write_text(textwrap.dedent('''
        import time
        from autograder.checks._support import timeout

        SECRET_INPUT = 12345

        def test_double_value(double):
            """double doubles its input"""
            assert double(SECRET_INPUT) == 2 * SECRET_INPUT, "double(x) should be 2*x"

        def test_double_is_quick(double):
            """double returns at once"""
            double(1)

        @timeout(0.5)
        def test_double_no_hang(double):
            """double never hangs"""
            double(-1)

        def test_other_uses_double(other, double):
            """other adds one to double"""
            assert other(1) == double(1) + 1

        def test_halve_reports_its_value(halve):
            """halve returns {"value": x / 2}"""
            assert halve(8)["value"] == 4, "halve(8) should report 4"

        def test_tally_gets_a_descriptor(tally):
            """tally is called on what the machine gives"""
            import os
            tally(os.dup(-1))  # a machine out of descriptors (EBADF standing in for EMFILE)

        def test_tally_gets_memory(tally):
            """tally is called on a large buffer"""
            tally(bytearray(1 << 62))  # a machine out of memory

        def test_ring_sums(ring):
            """ring sums on every rank"""
            ring()

        def test_shout_upper_cases(shout):
            """shout upper-cases its input"""
            assert shout("hi").uppercase() == "HI"  # a bug of the check's own: str has no .uppercase
    '''))
    monkeypatch.setattr(hidden, "CHECKS_DIR", tmp_path)
    sys.modules.pop("autograder.checks._99_fake", None)
    yield "99_fake"
    sys.modules.pop("autograder.checks._99_fake", None)


def test_passing_answer(fake_assignment, capsys):
    hidden.check("double", {"double": lambda x: 2 * x})
    assert "all 3 hidden checks passed" in capsys.readouterr().out


def test_the_hidden_block_names_only_its_exercise(fake_assignment, capsys):
    """check("<exercise>"): the assignment is the checks file, the namespace the caller's globals."""
    notebook_globals = {"double": lambda x: 2 * x}
    exec('from autograder.hidden import check\ncheck("double")', notebook_globals)
    assert "all 3 hidden checks passed" in capsys.readouterr().out
    with pytest.raises(LookupError, match="no hidden checks for exercise 'triple'"):
        hidden.check("triple", notebook_globals)


def test_an_exercise_checked_in_two_files_is_an_error(fake_assignment, tmp_path):
    (tmp_path / "98_other.py").write_text("def test_again(double):\n    pass\n")
    with pytest.raises(LookupError, match="has checks in 98_other and 99_fake"):
        hidden.assignment_of("double")


def test_failure_message_is_plain_and_hides_inputs(fake_assignment):
    with pytest.raises(AssertionError) as err:
        hidden.check("double", {"double": lambda x: x + x + 1 if x > 0 else 2 * x})
    text = str(err.value)
    assert "1 of 3 hidden checks failed" in text
    assert "  ✗ double doubles its input\n    double(x) should be 2*x" in text
    assert "12345" not in text and "SECRET_INPUT" not in text


def _raised_in_the_students_process(trace):
    err = ValueError("max_workers must be greater than 0")
    err.student_traceback = trace
    return err


_POOL_TRACE = ('Traceback (most recent call last):\n  File "<dynamic-code>", line 12, in _call\n'
               '  File "{file}", line 7, in {function}\n'
               '  File "/usr/lib/python3.11/concurrent/futures/thread.py", line 144, in __init__\n'
               '    raise ValueError("max_workers must be greater than 0")\nValueError: max_workers must be greater than 0\n')


def test_an_error_of_the_answer_says_where_in_the_students_cells_it_was_raised():
    """"your code raised ValueError: max_workers must be greater than 0" left a student to guess
    which line of which call (02's run_threads, given an empty list, makes a pool of 0 threads):
    the message now names the innermost line of the student's own cells the error went through."""
    message = hidden._failure_message(_raised_in_the_students_process(
        _POOL_TRACE.format(file="<run_threads>", function="run_threads")))
    assert message == ("your code raised ValueError: max_workers must be greater than 0 "
                       "(line 7 of your run_threads cell)"), message
    # The course's tests name an answer cell "<answer cell x>"; a helper of the cell is named.
    message = hidden._failure_message(_raised_in_the_students_process(
        _POOL_TRACE.format(file="<answer cell run_threads>", function="_pool_for")))
    assert message.endswith("(line 7 of your run_threads cell, in _pool_for)"), message
    message = hidden._failure_message(_raised_in_the_students_process(
        _POOL_TRACE.format(file="<added cell 3f2a-b>", function="pool_for")))
    assert message.endswith("(line 7 of a cell you added, in pool_for)"), message
    # Not the student's cells (a course file, the check's code, the judge's own error): no place.
    # "<string>": the standard library's name for code it generates (a dataclass's __init__).
    for file in ("/course/helpers/workers.py", "<dynamic-code>", "<course cell ab12>", "<string>"):
        message = hidden._failure_message(_raised_in_the_students_process(
            _POOL_TRACE.format(file=file, function="run_threads")))
        assert message == "your code raised ValueError: max_workers must be greater than 0", message
    assert hidden._failure_message(ValueError("x")) == "your code raised ValueError: x"


def test_a_forged_trace_carries_nothing_out_through_the_place_it_names():
    """The student's process writes the trace: a file or function name holding text of its choice
    does not reach the message: only a cell's name as the student's process names its cells, a
    function name that is an identifier, and a line number do (less than the error's own text,
    already cut at hidden.ERROR_TEXT_LIMIT characters, can carry)."""
    secret = "the hidden inputs were 12345 and 678"
    for file, function in ((f"<{secret}>", "run_threads"), ("<run_threads>", secret.replace(" ", "_") + "!"),
                           (f"<added cell {secret}>", "f"), ("<run_threads>", "x" * 200)):
        message = hidden._failure_message(_raised_in_the_students_process(
            _POOL_TRACE.format(file=file, function=function)))
        assert "12345" not in message and "x" * 100 not in message and "(line" not in message, message


def test_a_long_message_is_wrapped_to_the_width_a_feedback_page_shows():
    """A feedback page shows an output's lines unwrapped: a 200-character message ran off the page
    before its advice (03's transfer_many, at 1200 pixels)."""
    message = " ".join(["word"] * 60) + " the-advice-at-the-end"
    text = hidden.report("x", [hidden.Outcome("test_x", "x does a thing " * 10, False, message)])
    lines = text.split("\n")
    assert lines[0] == "x: 1 of 1 hidden checks failed" and lines[1].startswith("  ✗ x does a thing")
    assert all(len(line) <= hidden.REPORT_WIDTH for line in lines), lines
    assert " ".join(line.strip() for line in lines[1:]).endswith("the-advice-at-the-end")


def test_a_check_that_could_not_decide_is_not_counted_as_failed():
    """A feedback page said "1 of 4 hidden checks failed ✗ ... could not be decided" of a check that
    could not decide: it is counted apart now, and marked ⏳, not ✗."""
    wrong = hidden.Outcome("test_a", "a is right", False, "it is not")
    unsure = hidden.Outcome("test_b", "b is fast", False, "too busy to time", undecided=True)
    ok = hidden.Outcome("test_c", "c", True, "")
    assert hidden.report("x", [unsure, ok]).split("\n")[:2] == [
        "x: 1 of 2 hidden checks could not decide (a person will look at it)", "  ⏳ b is fast"]
    assert hidden.report("x", [wrong, unsure, ok]).split("\n")[0] == "x: 1 of 3 hidden checks failed, 1 could not decide"


def test_hang_fails_one_check_in_bounded_time(fake_assignment):
    def double(x):
        if x < 0:
            time.sleep(30)
        return 2 * x
    start = time.perf_counter()
    outcomes = hidden.run(fake_assignment, "double", {"double": double})
    assert time.perf_counter() - start < 5
    assert [o.passed for o in outcomes] == [True, True, False]
    assert "did not finish within 0.5 s" in outcomes[2].message


def test_exceptions_are_reported_by_type(fake_assignment):
    def double(x):
        raise KeyError("oops")
    outcomes = hidden.run(fake_assignment, "double", {"double": double})
    assert all("your code raised KeyError" in o.message for o in outcomes)


def test_a_long_error_of_the_students_is_cut_short(fake_assignment):
    """An answer can read the code of the checks' helpers that run in its process and raise it as
    its message: the feedback shows the first few hundred characters, not pages of it."""
    def double(x):
        raise ValueError("leaked " * 1000)
    outcomes = hidden.run(fake_assignment, "double", {"double": double})
    for o in outcomes:
        assert o.message.startswith("your code raised ValueError: leaked"), o.message
        assert len(o.message) < hidden.ERROR_TEXT_LIMIT + 100 and "(cut at" in o.message, o.message


def _reference(namespace, called=None):
    """A `reference` for hidden.run that serves `namespace` in this process, counting its uses."""
    def reference(assignment, exercise):
        if called is not None:
            called.append((assignment, exercise))
        return None, namespace
    return reference


def test_an_error_the_answers_value_causes_in_the_check_fails_and_says_so(fake_assignment):
    """halve returns a bare number: the check's own code raises TypeError on it. On the reference
    solution the check passes, so the answer is at fault: a failure, but not "your code raised"."""
    called = []
    outcomes = hidden.run(fake_assignment, "halve", {"halve": lambda x: x / 2},
                          reference=_reference({"halve": lambda x: {"value": x / 2}}, called))
    assert called == [(fake_assignment, "halve")]
    [outcome] = outcomes
    assert not outcome.passed and not outcome.undecided
    assert "your code raised" not in outcome.message
    assert "could not use what your code returned or did (TypeError" in outcome.message


def test_an_error_raised_on_a_rank_inside_the_exercise_is_said_to_be_the_answers(fake_assignment):
    """helpers.ranks re-raises a rank's error in the launching process, the rank's traceback in a
    note: its last frames are the launcher's and the check's, so it is settled on the reference as
    the check's. Failing only on the answer, it was told "the check could not use what your code
    returned" (12's ring with pieces cut by torch.chunk); raised inside the exercise's own function
    on a rank, it now says so. The verdict is the same."""
    rank_trace = ('Traceback (most recent call last):\n  File "/course/helpers/ranks.py", line 725, in '
                  '_raise_first_error\n    raise error\nIndexError: list index out of range\nraised on rank 0 of 3:\n'
                  'Traceback (most recent call last):\n  File "<dynamic-code>", line 48, in _ring_on_rank\n'
                  '  File "<dynamic-code>", line 14, in {name}\nIndexError: list index out of range\n')

    def raising(name):
        def ring():
            err = IndexError("list index out of range")
            err.student_traceback = rank_trace.format(name=name)
            raise err
        return ring

    [outcome] = hidden.run(fake_assignment, "ring", {"ring": raising("ring")}, reference=_reference({"ring": lambda: None}))
    assert not outcome.passed and not outcome.undecided
    assert outcome.message == "your code raised IndexError: list index out of range on a rank, in ring", outcome.message
    # Raised on a rank but in the check's own code there: the wording stays.
    [outcome] = hidden.run(fake_assignment, "ring", {"ring": raising("_helper_of_the_check")},
                           reference=_reference({"ring": lambda: None}))
    assert not outcome.passed and "could not use what your code returned or did" in outcome.message


def test_an_error_of_the_checks_own_never_costs_a_correct_answer_its_marks(fake_assignment):
    """A bug in the check raises on every answer, the reference solution's too: the check cannot
    decide, and a person looks at it; it is neither failed nor passed, and says where it raised."""
    shout = str.upper
    [outcome] = hidden.run(fake_assignment, "shout", {"shout": shout}, reference=_reference({"shout": shout}))
    assert not outcome.passed and outcome.undecided
    assert "the check itself raised AttributeError" in outcome.message
    assert "99_fake.py, line" in outcome.message and "goes to a person" in outcome.message
    # Without a reference solution to compare with, it cannot decide either.
    [outcome] = hidden.run(fake_assignment, "shout", {"shout": shout})
    assert not outcome.passed and outcome.undecided


def test_a_reference_that_cannot_decide_or_start_never_passes_the_answer(fake_assignment):
    def undecided(x):
        pytest.skip("the machine is busy")

    def cannot_start(assignment, exercise):
        raise OSError("no memory")
    for reference in (_reference({"halve": undecided}), cannot_start):
        [outcome] = hidden.run(fake_assignment, "halve", {"halve": lambda x: x / 2}, reference=reference)
        assert not outcome.passed and outcome.undecided, outcome.message


def test_the_machines_error_in_the_check_blames_no_one(fake_assignment):
    """An OSError or MemoryError that the check's own code meets (no descriptor, process or memory
    left on a loaded machine) is not settled on the reference, which might pass a moment later and
    so blame the answer: the check is undecided, and the submission is graded again alone."""
    called = []
    outcomes = hidden.run(fake_assignment, "tally", {"tally": len}, reference=_reference({"tally": len}, called))
    assert [(o.passed, o.undecided) for o in outcomes] == [(False, True), (False, True)]
    assert all("the machine's error" in o.message for o in outcomes)
    assert called == []


def test_an_error_the_answer_raises_is_its_own_and_needs_no_reference(fake_assignment):
    """The answer's own code raised (here inside a library it called): "your code raised", and the
    reference solution is not started."""
    import json
    called = []

    def halve(x):
        return json.loads("{not json")
    [outcome] = hidden.run(fake_assignment, "halve", {"halve": halve},
                           reference=_reference({"halve": lambda x: {"value": x / 2}}, called))
    assert called == [] and not outcome.passed and not outcome.undecided
    assert outcome.message.startswith("your code raised JSONDecodeError")


def test_a_name_error_in_the_answer_is_the_answers(fake_assignment):
    """Only the runner's own "does not define" is worded as such; a NameError raised by code is
    settled like any other error."""
    def halve(x):
        return undefined_name  # noqa: F821
    [outcome] = hidden.run(fake_assignment, "halve", {"halve": halve}, reference=_reference({}))
    assert not outcome.passed and not outcome.undecided
    assert outcome.message.startswith("your code raised NameError")


def test_an_answer_that_forges_the_checks_frames_gains_nothing(fake_assignment):
    """An error from the student's process carries that process's trace, which its code may forge
    to blame the check: the check then runs on the reference solution, which passes it, and the
    answer fails all the same."""
    def halve(x):
        err = ValueError("not mine")
        err.student_traceback = f'  File "{hidden.CHECKS_DIR / "99_fake.py"}", line 1, in test_halve\n'
        raise err
    [outcome] = hidden.run(fake_assignment, "halve", {"halve": halve},
                           reference=_reference({"halve": lambda x: {"value": x / 2}}))
    assert not outcome.passed and not outcome.undecided


def test_missing_definition(fake_assignment):
    outcomes = hidden.run(fake_assignment, "other", {"other": lambda x: x})
    assert "does not define `double`" in outcomes[0].message


def test_unknown_exercise_is_an_error(fake_assignment):
    with pytest.raises(LookupError):
        hidden.run(fake_assignment, "triple", {})


class AlwaysEqual:
    def __eq__(self, other):
        return True

    def __int__(self):
        return 1


def test_strict_comparisons_reject_look_alikes():
    with pytest.raises(AssertionError):
        _support.exact_int(AlwaysEqual(), "x")
    with pytest.raises(AssertionError):
        _support.exact_int(True, "x")
    with pytest.raises(AssertionError):
        _support.arrays_close(np.ones(3).view(np.matrix), np.ones(3), "x")
    with pytest.raises(AssertionError):
        _support.arrays_close([1.0, 2.0], np.array([1.0, 2.0]), "x")
    _support.arrays_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]), "x")


def test_raises_value_error_helper():
    with _support.raises_value_error("f()"):
        raise ValueError("bad")
    with pytest.raises(AssertionError, match="returned normally"):
        with _support.raises_value_error("f()"):
            pass
    with pytest.raises(AssertionError, match="raised KeyError"):
        with _support.raises_value_error("f()"):
            raise KeyError("k")


def test_checks_run_directly_against_the_reference():
    """`pytest autograder/checks/<assignment>.py` as an instructor runs it while writing checks
    (the reference solutions in pytest's own process, no judge) passes. bin/test runs every
    check judged, as in grading; this keeps the direct mode working."""
    import os
    import subprocess

    from autograder import course

    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_CHECKS_JUDGED", "COURSE_START_METHOD")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--durations=0", "-p", "no:cacheprovider",
                           "autograder/checks/01_processes_threads.py"],
                          cwd=course.ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-2000:]


def test_until_failure_stops_at_the_first_check_that_fails(fake_assignment):
    def double(x):
        raise KeyError("oops")
    outcomes = hidden.run(fake_assignment, "double", {"double": double}, until_failure=True)
    assert len(outcomes) == 1 and not outcomes[0].passed
    assert len(hidden.run(fake_assignment, "double", {"double": lambda x: 2 * x}, until_failure=True)) == 3


def test_until_failure_goes_on_past_a_check_that_could_not_decide(fake_assignment):
    """An undecided check shows nothing about the answer: the catalogue's wrong answers must be
    failed by a check that decided, so the runner goes on to the next check."""
    def double(x):
        if x == 12345:
            pytest.skip("cannot decide here")
        raise KeyError("oops")
    outcomes = hidden.run(fake_assignment, "double", {"double": double}, until_failure=True)
    assert [(o.passed, o.undecided) for o in outcomes] == [(False, True), (False, False)]


def test_every_check_holds_the_machine(fake_assignment):
    held = []

    @contextlib.contextmanager
    def hold():
        held.append(True)
        yield
    hidden.run(fake_assignment, "double", {"double": lambda x: 2 * x}, hold=hold)
    assert held == [True, True, True]


_BOUND = re.compile(r"False failure of a correct answer: (?:0\b|< ([0-9.]+)e-([0-9]+)\b)")
_CHANCE = re.compile(r"\brandom\.|\brng\b|perf_counter|monotonic|_check_hotspots|_top_ops_tries|_check_ring"
                     r"|_check_accumulate|_check_fsdp")


def _check_functions():
    for path in sorted((course.ROOT / "autograder" / "checks").glob("[0-9]*.py")):
        source = path.read_text()
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                yield f"{path.stem}::{node.name}", ast.get_docstring(node) or "", ast.get_source_segment(source, node)


def test_every_check_that_draws_or_times_states_its_false_failure_bound():
    """A check that draws random inputs or reads a clock says, in its docstring, how likely a
    correct answer is to fail it ("False failure of a correct answer: 0" or "< Xe-Y"), and
    that is at most 1e-9."""
    missing, too_high = [], []
    for name, doc, body in _check_functions():
        bound = _BOUND.search(doc)
        if bound is None:
            if _CHANCE.search(body):
                missing.append(name)
        elif bound.group(1) and float(f"{bound.group(1)}e-{bound.group(2)}") > 1e-9:
            too_high.append(f"{name}: {bound.group(0)}")
    assert not missing, f"no stated false-failure bound: {missing}"
    assert not too_high, f"false-failure bounds above 1e-9: {too_high}"


def test_the_bound_rule_is_not_vacuous():
    assert _BOUND.search("False failure of a correct answer: < 2e-9 (two)").groups() == ("2", "9")
    assert not _BOUND.search("False failures: rare")
    stated = [name for name, doc, _ in _check_functions() if _BOUND.search(doc)]
    assert len(stated) > 100, len(stated)


def _one_task_at_a_time(executor, tasks):
    """Each task submitted once the one before has ended and its worker is idle: a pool that gives
    tasks to idle workers runs them all on one."""
    for _ in range(tasks):
        executor.submit(os.getpid).result()
        time.sleep(0.05)


@pytest.mark.parametrize("kind", ["thread", "process"])
def test_counted_executors_start_a_worker_per_task(kind):
    """Under the spy, an executor of 4 workers given 4 tasks starts 4 workers even when each task
    ends before the next is submitted (stock concurrent.futures reuses the idle one: 1 worker), so a
    check that counts starts does not depend on how long the caller was held up between submits.
    Processes by forkserver, which, like spawn, starts workers as tasks come."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    def make():
        if kind == "thread":
            return ThreadPoolExecutor(4)
        return ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("forkserver"))
    cls = ThreadPoolExecutor if kind == "thread" else ProcessPoolExecutor
    adjust = "_adjust_thread_count" if kind == "thread" else "_adjust_process_count"
    stock = getattr(cls, adjust)
    with _support.count_starts_and_joins() as counts, make() as executor:
        _one_task_at_a_time(executor, 4)
    assert counts[f"{kind} start"] == 4
    assert getattr(cls, adjust) is stock, "the executor's own behaviour is back after the block"


def test_a_checks_summary_wrapped_onto_two_lines_reaches_the_student_whole():
    """The feedback named each check by its docstring's first line, so a summary wrapped onto a
    second line stopped mid-sentence ("restored afterwards: as: ..."): the first paragraph now."""
    def check():
        """the pools are restored afterwards: as threadpoolctl reports them,
        and as the BLAS threads' work shows

        False failure of a correct answer: 0.
        """

    assert hidden.describe(check) == ("the pools are restored afterwards: as threadpoolctl reports them, "
                                      "and as the BLAS threads' work shows")
