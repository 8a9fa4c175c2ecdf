"""The kernel's record of the processes and threads a student's process tree creates
(autograder/pipeline/creations.py), which backs the spy's counts in the hidden checks."""
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import pytest

from autograder.checks import _support
from autograder.pipeline import creations
from autograder.pipeline.creations import watch_creations
from autograder.pipeline.judge import ProcessTree

needs_events = pytest.mark.skipif(os.geteuid() != 0, reason="the kernel's process events need root")


@needs_events
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_processes_and_threads_of_the_tree_are_counted(method):
    context = multiprocessing.get_context(method)
    with context.Pool(1) as pool:  # a forkserver (or resource tracker) from before the block
        pool.map(abs, [-1])
    # Its forks count: the block starts from the live tree, as the checks' created() does.
    with watch_creations(os.getpid(), ProcessTree(os.getpid()).members()) as made:
        with context.Pool(2) as pool:
            assert pool.map(abs, [-1, -2, -3]) == [1, 2, 3]
        threads = [threading.Thread(target=time.sleep, args=(0.001,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert made.available and not made.lost
    assert made.processes >= 2, made.processes
    assert made.threads >= 3, made.threads


@needs_events
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_each_new_thread_is_known_by_its_process(method):
    # What 05's checks rely on: a task's witness thread names the process that ran the task.
    from helpers import workers
    with multiprocessing.get_context(method).Pool(1) as pool:
        worker = pool.apply(os.getpid)  # started before the block, as a reused pool's worker is
        with watch_creations(os.getpid(), ProcessTree(os.getpid()).members()) as made:
            in_worker = pool.apply(workers.witness_thread)
            here = workers.witness_thread()
    assert made.available and not made.lost
    assert made.thread_owners[in_worker] == {worker}, made.thread_owners
    assert made.thread_owners[here] == {os.getpid()}, made.thread_owners


@needs_events
def test_a_grandchild_counts_and_strangers_do_not():
    # The "student" is a child that, once told, starts a child of its own and exits.
    code = "import os, sys, time; sys.stdin.readline(); pid = os.fork(); os._exit(0) if pid == 0 else os.waitpid(pid, 0)"
    student = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, text=True)
    try:
        with watch_creations(student.pid) as made:
            stranger = subprocess.Popen([sys.executable, "-c", "pass"])  # the judge's own child
            stranger.wait()
            threading.Thread(target=time.sleep, args=(0.001,)).start()  # the judge's own thread
            student.stdin.write("go\n")
            student.stdin.flush()
            student.wait(30)
            time.sleep(0.05)
        assert made.available
        assert made.processes == 1, made.processes
        assert made.threads == 0, made.threads
    finally:
        student.kill()


def test_without_events_the_spy_counts_stand(monkeypatch, capsys):
    def refused():
        raise PermissionError("not root")
    monkeypatch.setattr(creations, "_listen", refused)
    monkeypatch.setattr(_support, "_told_unavailable", [])
    with _support.created() as made:
        for _ in range(5):  # five real starts, which the kernel's id counter shows
            t = threading.Thread(target=int)
            t.start()
            t.join()
    assert not made.available
    spy = {"thread start": 3, "thread join": 3, "process start": 2, "process join": 2}
    assert _support.capped(spy, made) == spy
    assert "not available" in capsys.readouterr().out


def test_counts_the_kernel_cannot_back_are_capped():
    made = creations.Creations()
    made.available, made.processes, made.threads = True, 1, 0
    forged = {"thread start": 64, "thread join": 64, "process start": 64, "process join": 64}
    assert _support.capped(forged, made) == {"thread start": 0, "thread join": 64, "process start": 1,
                                             "process join": 64}


def test_lost_events_leave_the_check_undecided():
    made = creations.Creations()
    made.available, made.lost = True, True
    with pytest.raises(pytest.skip.Exception):
        _support.capped({"thread start": 1, "thread join": 1, "process start": 1, "process join": 1}, made)


@needs_events
def test_watching_costs_little():
    start = time.perf_counter()
    for _ in range(20):
        with watch_creations(os.getpid()):
            pass
    assert (time.perf_counter() - start) / 20 < 0.25


# --- without the kernel's events: the ids the kernel handed out bound the spy's starts --------
def _refuse_events(monkeypatch):
    def refused():
        raise PermissionError("not root")
    monkeypatch.setattr(creations, "_listen", refused)
    monkeypatch.setattr(_support, "_told_unavailable", [True])


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_real_starts_never_exceed_the_ids_handed_out(monkeypatch, method):
    """The bound holds for every real start, counted as the spy counts them: no false failure."""
    _refuse_events(monkeypatch)
    context = multiprocessing.get_context(method)
    with _support.count_starts_and_joins() as counts, _support.created() as made:
        with context.Pool(2) as pool:
            pool.map(abs, [-1, -2])
        threads = [threading.Thread(target=int) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not made.available and made.ids_handed_out is not None
    assert counts["thread start"] >= 40 and counts["process start"] >= 2
    assert made.ids_handed_out >= counts["thread start"] + counts["process start"]
    assert _support.capped(counts, made) == counts


def test_starts_claimed_beyond_the_ids_handed_out_fail(monkeypatch):
    _refuse_events(monkeypatch)
    with _support.created() as made:
        pass
    claimed = {"thread start": 64, "thread join": 64, "process start": 64, "process join": 64}
    assert made.ids_handed_out < 128, "the machine handed out 128 ids in a few microseconds"
    with pytest.raises(AssertionError, match="the record was edited"):
        _support.capped(claimed, made)


def test_without_a_kernels_counter_the_spy_stands(monkeypatch):
    """An /proc/loadavg that is not the kernel's (LXCFS's, mounted over it) or that does not move
    when a thread is created gives no bound: the counts stand, as before (never a failure)."""
    _refuse_events(monkeypatch)
    claimed = {"thread start": 64, "thread join": 64, "process start": 64, "process join": 64}
    monkeypatch.setattr(creations, "_LOADAVG_MOUNTED_OVER", [True])
    with _support.created() as made:
        pass
    assert made.ids_handed_out is None and _support.capped(claimed, made) == claimed
    monkeypatch.setattr(creations, "_LOADAVG_MOUNTED_OVER", [False])
    monkeypatch.setattr(creations, "_read_last_id", lambda: 4242)  # refreshed every 5 s, say
    with _support.created() as made:
        pass
    assert made.ids_handed_out is None and _support.capped(claimed, made) == claimed


def test_ids_counted_across_the_wrap_at_pid_max():
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    assert creations.ids_between(100, 130) == 30
    assert creations.ids_between(pid_max - 10, 320) >= 10 + 320 - 300  # ids restart above 300
    assert creations.ids_between(None, 5) is None
