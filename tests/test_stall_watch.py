"""The stall watch of the checks' meetings (autograder/checks/_support.broken_when_stalled).

The checks that show calls running at once make them meet at a barrier with a long limit. The
watch breaks the barrier early only when nothing in the process tree is working towards the
parties still missing; these tests attack both sides of that rule.
"""
import multiprocessing
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from autograder.checks import _support
from autograder.checks._support import STALL_GRACE, STALL_SECONDS, broken_when_stalled


def _arrive_after_work(barrier, cpu_seconds):
    """(a worker process) spin for `cpu_seconds` of CPU, then wait at the barrier."""
    start = time.thread_time()
    while time.thread_time() - start < cpu_seconds:
        pass
    barrier.wait(60)


def _in_a_process_of_its_own(fn, *args):
    """fn(*args) in a forked process: the watch reads the tree of the process it runs in, and a
    test's own process may have children that earlier tests left (which would only delay it)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        return pool.submit(fn, *args).result(timeout=120)


def _nobody_comes():
    """(own process) one party waits for one that never comes: (broken, the watch alive at the
    end of the meeting, seconds waited)."""
    with multiprocessing.get_context("fork").Manager() as manager:
        barrier = manager.Barrier(2)
        start = time.monotonic()
        with broken_when_stalled(barrier) as watch:
            try:
                barrier.wait(60)
                broken = False
            except threading.BrokenBarrierError:
                broken = True
            alive = watch.is_alive()
        return broken, alive, time.monotonic() - start


def _late_but_working(cpu_seconds):
    """(own process) the other party is a process that spins `cpu_seconds` of CPU, then comes:
    whether the two met."""
    with multiprocessing.get_context("fork").Manager() as manager:
        barrier = manager.Barrier(2)
        late = multiprocessing.get_context("fork").Process(target=_arrive_after_work, args=(barrier, cpu_seconds))
        with broken_when_stalled(barrier):
            late.start()
            try:
                barrier.wait(60)
                met = True
            except threading.BrokenBarrierError:
                met = False
        late.join(30)
        return met


def test_a_party_that_never_comes_ends_the_wait_early():
    """One party waits, nothing else runs: the barrier breaks after the grace and the quiet
    readings, long before the wait's own limit."""
    broken, alive, waited = _in_a_process_of_its_own(_nobody_comes)
    assert broken, "nobody came, and the wait ran to its limit"
    assert alive, "the watch's thread ended before the meeting did"
    assert STALL_GRACE + STALL_SECONDS <= waited < 20, waited


def test_a_party_still_working_is_waited_for():
    """The other party is a process that works (here: spins) for longer than the grace and the
    quiet readings together before it arrives: the meeting is not cut short."""
    assert _in_a_process_of_its_own(_late_but_working, STALL_GRACE + STALL_SECONDS + 1.0), (
        "the watch broke the barrier while the missing party was still working")


def test_a_tree_it_cannot_read_is_never_taken_for_stalled(monkeypatch):
    """Where /proc cannot be read, what cannot be seen may be working: the wait keeps its limit."""
    monkeypatch.setattr(_support, "_tree_threads", lambda root, skip: None)
    barrier, limit = threading.Barrier(2), STALL_GRACE + STALL_SECONDS + 1.5
    start = time.monotonic()
    with broken_when_stalled(barrier) as watch:
        with pytest.raises(threading.BrokenBarrierError):
            barrier.wait(limit)
        # It stays until the meeting ends: the judge leaves exactly one thread out of its counts.
        assert watch.is_alive(), "the watch's thread ended before the meeting did"
    assert time.monotonic() - start >= limit - 0.05, "the watch broke a barrier it could not see the tree of"
    assert not watch.is_alive()


def test_the_watchs_thread_is_not_counted_as_the_answers():
    """The judge's record of created threads loses the watch's thread, and only it."""
    class Made:
        def __init__(self):
            self.thread_owners, self.threads, self.ids_handed_out = {11: {5}, 12: {5}}, 2, 2

    from importlib import import_module
    gil_checks = import_module("autograder.checks.02_gil")
    made = gil_checks._without_thread(Made(), 12)
    assert made.thread_owners == {11: {5}} and made.threads == 1 and made.ids_handed_out == 1
    # An id edited by the student's code to name no thread: the count still loses the watch.
    made = gil_checks._without_thread(Made(), 99)
    assert made.thread_owners == {11: {5}, 12: {5}} and made.threads == 1 and made.ids_handed_out == 1
