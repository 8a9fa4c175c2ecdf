"""The judge's puzzles (autograder/checks/_puzzles.py) and its reading of a process's CPU time:
the evidence that work handed to workers was not done by the calling process."""
import gc
import os
import resource
import subprocess
import sys
import time

import pytest

from autograder.checks import _puzzles, _support
from helpers.workers import solve_puzzle


def test_the_long_way_and_the_judges_shortcut_agree():
    for _ in range(5):
        puzzle = _puzzles.make(0.01)
        assert solve_puzzle(puzzle.task) == puzzle.answer
        assert not puzzle.solved_by(puzzle.answer + 1)
        assert not puzzle.solved_by(None) and not puzzle.solved_by(float(puzzle.answer))
    assert solve_puzzle(None) is None


def test_puzzles_differ_and_cost_what_they_say():
    first, second = _puzzles.make(0.1), _puzzles.make(0.1)
    assert first.task != second.task and first.answer != second.answer
    # Sized by the fastest of three timings: the long way cannot be much quicker than that. The
    # same pure-Python work costs up to 1.6 times the CPU from one moment to the next on a shared
    # machine, so the size may have been taken in a slow moment: the first of three tries counts.
    seen = []
    for puzzle in (first, second, _puzzles.make(0.1)):
        start = time.thread_time()
        solve_puzzle(puzzle.task)
        seen.append((time.thread_time() - start, puzzle.seconds))
        if seen[-1][0] >= 0.5 * seen[-1][1]:
            return
    raise AssertionError(f"(CPU seconds, the puzzle's nominal seconds): {seen}")


def test_the_process_cpu_the_judge_reads_counts_every_thread_even_ended_ones():
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, threading, time\n"
        "def spin():\n"
        "    start = time.thread_time()\n"
        "    while time.thread_time() - start < 0.3:\n"
        "        pass\n"
        "sys.stdin.readline()\n"
        "t = threading.Thread(target=spin); t.start(); t.join()\n"
        "print('done', flush=True)\n"
        "sys.stdin.readline()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        before = _support._process_cpu(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        spent = _support._process_cpu(child.pid) - before
        assert 0.25 <= spent < 1.0, spent  # the thread has ended: its time stays with the process
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_the_judge_reads_how_the_process_spent_its_cpu():
    """User and system time and page faults, which say, when a caller spends more than expected,
    whether its code ran or the kernel worked for it; the message shows them."""
    before = _support._process_counts(os.getpid())
    solve_puzzle(_puzzles.make(0.2).task)  # 4 times the user time asserted: /proc's ticks, a slow moment
    touched = bytearray(64 * 2**20)  # fresh pages: a minor fault for each page first touched
    for i in range(0, len(touched), 4096):
        touched[i] = 1
    user, system, minor, major = (b - a for a, b in zip(before, _support._process_counts(os.getpid())))
    # One fault per 4 KiB page, or per 2 MiB where the kernel backs the buffer with huge pages
    # (transparent_hugepage "always", the default of some distributions): at least 32.
    assert user >= 0.05 and minor >= len(touched) // 2**21, (user, system, minor, major)
    # Each field read from /proc is the count the kernel gives the process through getrusage, read
    # just before and just after it (/proc's times are whole ticks of 10 ms, rounded down).
    first = resource.getrusage(resource.RUSAGE_SELF)
    told = _support._process_counts(os.getpid())
    then = resource.getrusage(resource.RUSAGE_SELF)
    for value, field, slack in zip(told, ("ru_utime", "ru_stime", "ru_minflt", "ru_majflt"), (0.011, 0.011, 0, 0)):
        assert getattr(first, field) - slack <= value <= getattr(then, field), (field, value, first, then)
    assert _support._process_cpu(os.getpid()) == pytest.approx(sum(_support._process_counts(os.getpid())[:2]),
                                                                abs=0.05)
    puzzle, spent = _puzzles.make(0.05), _spent(1.0, 0.5, user=0.98)
    spent.detail = "user 0.98 s, system 0.02 s, 25 minor and 0 major page faults"
    with pytest.raises(AssertionError, match=r"takes 0.05 s\) \(user 0.98 s, system 0.02 s, 25 minor"):
        _support.assert_worked_outside([puzzle], [puzzle.answer], spent, 0.1, "a call")


def test_without_a_judge_the_calling_threads_cpu_is_read():
    with _support.caller_cpu() as spent:
        solve_puzzle(_puzzles.make(0.05).task)
    assert spent.seconds >= 0.02
    puzzle = _puzzles.make(0.05)
    with pytest.raises(AssertionError, match="the work ran in the calling process"):
        _support.assert_worked_outside([puzzle], [puzzle.answer], spent, 0.01, "a call")
    with pytest.raises(AssertionError, match="do not match the work each task was given"):
        _support.assert_worked_outside([puzzle], [puzzle.answer - 1], spent, 10.0, "a call")
    _support.assert_worked_outside([puzzle], [puzzle.answer], spent, 10.0, "a call")


def _spent(seconds, wall, user=None):
    spent = _support.Spent()
    spent.seconds, spent.wall, spent.user = seconds, wall, user
    return spent


def test_a_caller_that_may_have_been_waiting_is_undecided_never_passed():
    """Over the allowance by no more than waiting could cost over the call's wall time: undecided.
    A caller that solved the puzzles itself spent their whole CPU time, twice the allowance: it
    fails unless the call took several seconds, and is then undecided, never passed."""
    puzzles = [_puzzles.make(0.1), _puzzles.make(0.1)]
    answers = [p.answer for p in puzzles]
    allowance = 0.1  # the puzzles: 0.2 s in all
    _support.assert_worked_outside(puzzles, answers, _spent(0.05, 8.0), allowance, "a call")
    with pytest.raises(pytest.skip.Exception, match="cannot tell whether the work ran in the calling process"):
        _support.assert_worked_outside(puzzles, answers, _spent(0.3, 8.0), allowance, "a call")
    with pytest.raises(AssertionError, match="the work ran in the calling process"):
        _support.assert_worked_outside(puzzles, answers, _spent(0.2, 0.3), allowance, "a call")
    with pytest.raises(pytest.skip.Exception):
        _support.assert_worked_outside(puzzles, answers, _spent(0.2, 3.0), allowance, "a call")
    with pytest.raises(AssertionError, match="do not match the work each task was given"):
        _support.assert_worked_outside(puzzles, [a + 1 for a in answers], _spent(0.3, 8.0), allowance, "a call")


def test_only_the_callers_own_code_fails_it_and_the_kernels_work_leaves_it_undecided():
    """Solving a puzzle is arithmetic in user mode, so user time alone fails a caller; system time
    (the kernel starting processes, faulting pages in, stretched on a loaded machine: a correct pool
    under spawn once spent 0.02 s of user and 0.58 s of system time) that takes the process over
    the allowance leaves the check undecided, never passed. The pass stays what it was: the whole
    CPU time under the allowance (work hidden as system time by an answer that times its system
    calls to the kernel's ticks is undecided, not passed)."""
    puzzles = [_puzzles.make(0.1), _puzzles.make(0.1)]
    answers = [p.answer for p in puzzles]
    allowance = 0.19
    _support.assert_worked_outside(puzzles, answers, _spent(0.15, 2.0, user=0.1), allowance, "a call")
    with pytest.raises(pytest.skip.Exception, match="the operating system worked 0.58 s for it"):
        _support.assert_worked_outside(puzzles, answers, _spent(0.60, 2.0, user=0.02), allowance, "a call")
    with pytest.raises(pytest.skip.Exception, match="the operating system worked"):
        _support.assert_worked_outside(puzzles, answers, _spent(0.19, 0.3, user=0.0), allowance, "a call")
    with pytest.raises(AssertionError, match="the calling process spent 0.40 s"):
        _support.assert_worked_outside(puzzles, answers, _spent(0.45, 0.5, user=0.40), allowance, "a call")
    with pytest.raises(pytest.skip.Exception, match="as much as waiting for the workers may cost"):
        _support.assert_worked_outside(puzzles, answers, _spent(0.60, 8.0, user=0.40), allowance, "a call")


def test_the_judges_split_of_the_callers_time_adds_up():
    """caller_cpu, judged, tells the user time apart from the whole, from the same reading."""
    from autograder import hidden
    from autograder.pipeline.judge import StudentProcess
    student = StudentProcess.for_reference("01_processes_threads")
    hidden.STUDENT = student
    try:
        with _support.caller_cpu() as spent:
            _support.there(solve_puzzle, _puzzles.make(0.2).task)  # 4 times the bound below
    finally:
        hidden.STUDENT = None
        student.stop()
    assert spent.user is not None and 0.05 <= spent.user <= spent.seconds, (spent.user, spent.seconds)
    assert spent.detail.startswith(f"user {spent.user:.2f} s"), spent.detail


def _process_cpu():
    times = os.times()
    return times.user + times.system


def test_waiting_for_joblib_costs_less_than_the_waiting_allowance():
    """WAITING_CPU covers a caller that waits on joblib (its retrieval loop looks every 10 ms, and
    loky's threads): measured here, a call whose two tasks sleep 4 s costs the whole process less
    than WAITING_CPU of a core beyond what a call of no wait costs."""
    from joblib import Parallel, delayed
    Parallel(n_jobs=2)(delayed(time.sleep)(0.0) for _ in range(2))  # workers started and warm
    spent = []
    gc.disable()  # a full collection over this process's heap (0.1-0.2 s with torch) is not joblib's
    try:
        for seconds in (0.0, 4.0):
            cpu, wall = _process_cpu(), time.perf_counter()
            Parallel(n_jobs=2)(delayed(time.sleep)(seconds) for _ in range(2))
            spent.append((_process_cpu() - cpu, time.perf_counter() - wall))
    finally:
        gc.enable()
    (short, _), (long, wall) = spent
    assert long - short < _support.WAITING_CPU * wall, (
        f"waiting {wall:.1f} s for joblib cost the caller {long - short:.3f} s of CPU, "
        f"more than {_support.WAITING_CPU} per second")


def test_threads_started_during_the_call_are_not_the_callers():
    import threading

    with _support.caller_threads_cpu() as spent:
        worker = threading.Thread(target=solve_puzzle, args=(_puzzles.make(0.2).task,))
        worker.start()
        worker.join()
    assert spent.seconds < 0.1 and not spent.ended, spent.seconds
    with _support.caller_threads_cpu() as spent:
        solve_puzzle(_puzzles.make(0.4).task)
    assert spent.seconds >= 0.1, spent.seconds  # a quarter of its nominal cost


def test_a_thread_ending_as_the_block_starts_ends_before_it():
    """A thread let go just before (a pool shutting down) is waited for, not left to end inside
    the block, where its CPU time could not be told apart and the call would be undecided."""
    import threading
    import time

    ending = threading.Thread(target=time.sleep, args=(0.05,))
    ending.start()
    with _support.caller_threads_cpu() as spent:
        time.sleep(0.2)
    assert not spent.ended, spent.ended



def _grow_heap(n):
    """(in the student's process) n objects the collector tracks, kept alive (a notebook's heap)."""
    import sys
    sys.course_test_heap = [[i] for i in range(n)]


def _drop_heap():
    import sys
    sys.__dict__.pop("course_test_heap", None)


def _full_collection():
    import gc
    gc.collect()


def _charged_and_real(cpu_of_caller):
    """(CPU seconds caller_cpu() charges for a full collection over a large heap, made through
    there(), and what the same collection costs unwatched, read with cpu_of_caller())."""
    for objects in (1_000_000, 2_000_000, 4_000_000):  # a faster machine collects 1M in under 0.05 s
        _support.there(_grow_heap, objects)
        try:
            with _support.caller_cpu() as spent:
                _support.there(_full_collection)
            before = cpu_of_caller()
            _support.there(_full_collection)
            charged, real = spent.seconds, cpu_of_caller() - before
        finally:
            _support.there(_drop_heap)
        if real > 0.05:
            break
    return charged, real


def test_a_full_garbage_collection_in_the_caller_is_not_charged():
    """The interpreter collects garbage when it likes; with torch loaded a full collection scans
    every object the notebook holds (0.12 s). caller_cpu() freezes the heap of before out of
    the collector's sight, so a correct answer is not charged for it."""
    charged, real = _charged_and_real(time.thread_time)
    assert real > 0.05, f"the heap is too small to show a collection's cost ({real:.3f} s)"
    assert charged < 0.02, f"a full collection was charged {charged:.3f} s"


def test_a_full_garbage_collection_in_the_students_process_is_not_charged():
    """The same across the process boundary, as in grading: the judge's caller_cpu() freezes the
    heap in the student's process (there(gc.freeze))."""
    from autograder import hidden
    from autograder.pipeline.judge import StudentProcess
    session = StudentProcess.for_reference("01_processes_threads")
    hidden.STUDENT = session
    try:
        charged, real = _charged_and_real(lambda: _support._process_cpu(session.pid))
    finally:
        hidden.STUDENT = None
        session.stop()
    assert real > 0.05, f"the heap is too small to show a collection's cost ({real:.3f} s)"
    assert charged < 0.02, f"a full collection in the student's process was charged {charged:.3f} s"
