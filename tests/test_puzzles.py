"""The judge's puzzles (autograder/checks/_puzzles.py) and its reading of a process's CPU time:
the evidence that work handed to workers was not done by the calling process."""
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
    start = time.thread_time()
    solve_puzzle(first.task)
    spent = time.thread_time() - start
    # Sized by the fastest of three timings: the long way cannot be much quicker than that.
    assert spent >= 0.5 * first.seconds, (spent, first.seconds)


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


def test_without_a_judge_the_calling_threads_cpu_is_read():
    with _support.caller_cpu() as spent:
        solve_puzzle(_puzzles.make(0.05).task)
    assert spent.seconds >= 0.02
    puzzle = _puzzles.make(0.05)
    with pytest.raises(AssertionError, match="the calling process itself spent"):
        _support.assert_worked_outside([puzzle], [puzzle.answer], spent, 0.01, "a call")
    with pytest.raises(AssertionError, match="did not come back done"):
        _support.assert_worked_outside([puzzle], [puzzle.answer - 1], spent, 10.0, "a call")
    _support.assert_worked_outside([puzzle], [puzzle.answer], spent, 10.0, "a call")


def test_threads_started_during_the_call_are_not_the_callers():
    import threading

    with _support.caller_threads_cpu() as spent:
        worker = threading.Thread(target=solve_puzzle, args=(_puzzles.make(0.2).task,))
        worker.start()
        worker.join()
    assert spent.seconds < 0.1 and not spent.ended, spent.seconds
    with _support.caller_threads_cpu() as spent:
        solve_puzzle(_puzzles.make(0.2).task)
    assert spent.seconds >= 0.1, spent.seconds
