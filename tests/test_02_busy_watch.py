"""02's busy watch where no judge reads the student's process from outside (the checks run beside
the answers, in one process: `pytest autograder/checks`, or a source notebook's hidden block).

A reading thread of the watched process waited for the GIL that four pure-Python threads held:
200 ms and more between readings, so the threads never looked as if they worked at once, and
02's `gil_experiment` check stayed undecided for the reference solution (every try, on 2 cores
here and on a 16-core machine). The reader is a process of its own now (_schedstat).
"""
import threading
import time

import pytest

from autograder import hidden
from helpers import gil

checks = hidden.load_checks("02_gil")


def _four_threads(draws):
    threads = [threading.Thread(target=gil.draw_randoms, args=(draws,)) for _ in range(4)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def test_pure_python_threads_are_seen_working_at_once_without_a_judge():
    """Counted at the first of up to five tries, as the check counts its own threads (a thread
    holding the GIL that the machine takes off its core stalls the others)."""
    assert hidden.STUDENT is None  # the checks' own process is the student's
    seen_tries = []
    for _ in range(5):
        with checks._BusyWatch() as seen:
            wall = _four_threads(3_000_000)  # about 0.5 s at once here: windows of 60 ms
        assert seen.available, "no scheduler statistics here"
        assert seen._reader is not None, "the readings were taken by a thread of this process"
        # Half of one thread's share of the time: threads run one after another show at most 2 here.
        window = 0.5 * wall / 4
        most = seen.most_working_in_a_window(window, min(0.002, 0.1 * window))
        seen_tries.append(f"{most} threads ({len(seen.readings)} readings, the longest gap "
                          f"{seen.longest_gap():.3f} s, window {window:.3f} s)")
        if most >= 3:
            return
    raise AssertionError("; ".join(seen_tries))


def test_the_reader_is_not_counted_among_the_calls_processes():
    """The reader is started before the tree watch, so it is not a process the call started."""
    with checks._BusyWatch() as seen, checks._TreeWatch() as watch:
        time.sleep(0.05)
    assert seen._reader.pid in watch.before
    assert seen._reader.returncode == 0


def test_the_threads_work_is_read_against_the_serial_runs_on_cpu_clocks():
    """The serial run, then four threads on shares of its work: the others' CPU is about the
    busiest thread's; each thread on all of it: about four times (the check's bounds 2.0 and 2.5).

    As the check does, each case counts at the first try that shows it, of up to five: the CPU
    cost of one ~0.1 s serial run varies with what shares the core (0.083 to 0.135 CPU-s for the
    same 2M draws, an idle VM and a CI run), and one such run at 1.6 times the usual read the
    all-of-the-work case at 2.3 in a CI run."""
    work = 2_000_000
    for share, low, high in ((work // 4, 0.5, checks.THREADS_WORK_PASS), (work, checks.THREADS_WORK_AGAINST, 8)):
        seen_ratios = []
        for _ in range(5):
            with checks._BusyWatch() as seen:
                gil.draw_randoms(work)
                _four_threads(share)
            busiest, rest = seen.busiest_thread_and_rest()
            seen_ratios.append(rest / busiest)
            if low <= seen_ratios[-1] < high:
                break
        else:
            raise AssertionError(f"threads of {share} draws against a serial run of {work}: "
                                 f"{', '.join(f'{r:.2f}' for r in seen_ratios)}, never in [{low}, {high})")


def _watch_of(shares, dt=0.005):
    """A busy watch holding made-up readings: per interval, each thread's share of it on a core."""
    watch = checks._BusyWatch.__new__(checks._BusyWatch)
    runs, cpu, t, readings = {}, 0.0, 0.0, []
    readings.append((t, cpu, {tid: (0.0, 0.0, False) for tid in range(len(shares[0]))}))
    for interval in shares:
        t += dt
        for tid, share in enumerate(interval):
            runs[tid] = runs.get(tid, 0.0) + share * dt
        cpu += sum(interval) * dt
        readings.append((t, cpu, {tid: (run, 0.0, False) for tid, run in runs.items()}))
    watch.readings = readings
    return watch


def test_threads_side_by_side_are_told_from_threads_taking_turns():
    """02's NumPy check counts a try without a gain against the answer only where the readings show
    no two threads on cores at once (an honest job whose memory limits it runs its threads side by
    side; a lock-serialised one cannot): an interval counts where two threads each ran 3/4 of it."""
    side_by_side = _watch_of([(1.0, 1.0)] * 4 + [(1.0, 0.0)] * 4)
    assert side_by_side.cpu_side_by_side() == pytest.approx(4 * 2 * 0.005)
    # Turns on a lock: within an interval, the shares add up to one core at most, however split,
    # and a reading's skew of a tenth of the interval leaves them under 3/4 each.
    turns = _watch_of([(0.5, 0.5), (0.3, 0.7), (0.6, 0.4), (0.7, 0.3), (0.55, 0.55), (1.0, 0.0)])
    assert turns.cpu_side_by_side() == 0.0
    # A third thread that barely ran does not make two threads at once out of one.
    assert _watch_of([(1.0, 0.1, 0.0)] * 3).cpu_side_by_side() == 0.0
