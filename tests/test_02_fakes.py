"""02's evidence against reported times, on readings made up here: what the judge concludes from
the kernel's per-thread record (_BusyWatch) when an answer claims a serial job or pure-Python work
that it never ran. No clock, no machine: the readings are given."""
import pytest

from autograder import hidden

checks = hidden.load_checks("02_gil")


def _watch(readings, available=True):
    """A _BusyWatch holding `readings`: [(time, process CPU, {tid: (run, wait, runnable)})]."""
    watch = checks._BusyWatch.__new__(checks._BusyWatch)
    watch.readings, watch.available = readings, available
    return watch


def _timeline(phases, step=0.005):
    """Readings every `step` s through `phases`: [(seconds, {tid: CPU share})], every listed
    thread runnable while its share is above 0."""
    readings, t, cpu, runs = [], 0.0, 0.0, {}
    readings.append((t, cpu, {}))
    for seconds, shares in phases:
        for _ in range(round(seconds / step)):
            t += step
            for tid, share in shares.items():
                runs[tid] = runs.get(tid, 0.0) + share * step
                cpu += share * step
            readings.append((t, cpu, {tid: (runs[tid], 0.0, shares.get(tid, 0) > 0) for tid in runs}))
    return readings


def test_a_serial_run_and_a_threaded_run_show_the_serial_job():
    """The reference's shape: making the data and three serial runs on the main thread, then
    three threaded runs on two pool threads: the serial job is seen, the try can pass."""
    watch = _watch(_timeline([(0.04, {1: 1.0}), (0.18, {1: 1.0}), (0.12, {1: 0.0, 2: 0.9, 3: 0.9})]))
    alone, rest = watch.cpu_alone_and_rest()
    assert alone >= rest / checks.SERIAL_SEEN
    assert not checks._serial_work_missing(watch)


def test_threads_that_only_burn_show_no_serial_job():
    """exp 5's shape: a moment of making data, then two threads burning for 0.3 s: no serial job."""
    watch = _watch(_timeline([(0.01, {1: 1.0}), (0.3, {1: 0.0, 2: 1.0, 3: 1.0})]))
    assert checks._serial_work_missing(watch)


def test_burning_threads_kept_off_the_cores_still_show_no_serial_job():
    """Under load the burning threads get half a core each, and wait for one the rest of the
    time: they are still two working threads, never one working alone."""
    watch = _watch(_timeline([(0.01, {1: 1.0}), (0.3, {1: 0.0, 2: 0.5, 3: 0.5})]))
    assert checks._serial_work_missing(watch)


def test_readings_too_far_apart_decide_nothing():
    watch = _watch(_timeline([(0.01, {1: 1.0}), (0.3, {1: 0.0, 2: 1.0, 3: 1.0})], step=0.05))
    assert not checks._serial_work_missing(watch)


def _work(seconds_busy, gap=0.005):
    """Readings of a call whose threads worked `seconds_busy` s in all, `gap` s apart."""
    return _watch(_timeline([(seconds_busy, {1: 1.0}), (0.4, {1: 0.0})], step=gap))


OUT = {"serial": 0.3, "threads": 0.3, "processes": 0.2, "io_serial": 0.2, "io_threads": 0.05}


def test_pure_python_times_the_process_worked_for_count():
    assert checks._cpu_work_seen(_work(0.62), OUT, 4)


def test_times_made_up_while_the_process_slept_fail():
    """exp 6's shape: the process itself only slept (its children spun) yet claims 0.6 s of work."""
    with pytest.raises(AssertionError, match="not what this call measured"):
        checks._cpu_work_seen(_work(0.05), OUT, 4)


def test_too_little_work_seen_with_readings_far_apart_decides_nothing():
    """What a thread that ended since the last reading leaves out of the kernel's count could
    make up the difference: the try counts for nothing, neither way."""
    assert not checks._cpu_work_seen(_work(0.3, gap=0.04), OUT, 4)


def test_no_statistics_decide_nothing():
    assert not checks._cpu_work_seen(_watch([], available=False), OUT, 4)
