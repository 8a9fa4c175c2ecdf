"""The machine lent whole to one timing check at a time (autograder/pipeline/lease.py)."""
import os
import threading
import time

import pytest

from autograder import course, notebooks
from autograder.pipeline import lease, verify


def _holder(folder, exclusive, log, name, seconds, started=None, waiting=None):
    """A thread holding the lease `seconds`; `started` is set once it holds it, `waiting` once it
    had to wait for it (the order of the threads taken from the lease, not from sleeps)."""
    def run():
        with lease.hold(exclusive, folder=folder, on_wait=waiting.set if waiting is not None else None):
            log.append((name, "in", time.monotonic()))
            if started is not None:
                started.set()
            time.sleep(seconds)
            log.append((name, "out", time.monotonic()))
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _span(log, name):
    return next(t for n, e, t in log if n == name and e == "in"), next(t for n, e, t in log if n == name and e == "out")


def test_shared_holders_overlap_and_an_exclusive_one_is_alone(tmp_path):
    log, first_in = [], threading.Event()
    a = _holder(tmp_path, False, log, "cell A", 0.6, first_in)
    first_in.wait(5)
    b_in, timing_waits = threading.Event(), threading.Event()
    b = _holder(tmp_path, False, log, "cell B", 0.6, b_in)
    b_in.wait(5)
    timing = _holder(tmp_path, True, log, "timing check", 0.4, waiting=timing_waits)
    timing_waits.wait(5)
    late = _holder(tmp_path, False, log, "later cell", 0.2)  # comes after the check: waits behind it
    for thread in (a, b, timing, late):
        thread.join(10)
    (a0, a1), (b0, b1) = _span(log, "cell A"), _span(log, "cell B")
    t0, t1 = _span(log, "timing check")
    l0, _ = _span(log, "later cell")
    assert b0 < a1, "two shared holders run at the same time"
    assert t0 >= max(a1, b1), "the exclusive holder waits for the shared ones in progress"
    assert l0 >= t1, "a shared holder that came while it waited queues behind it"


def _machine(monkeypatch, cores_busy):
    """The cores' load that the lease reads, as if `cores_busy` cores were busy all along."""
    monkeypatch.setattr(lease, "busy_cpu_seconds", lambda: cores_busy * time.monotonic())
    monkeypatch.setattr(lease, "QUIET_FOR", 0.5)
    monkeypatch.setattr(lease, "OPEN_FOR", 0.4)


def _an_exclusive_taker_waits_for_an_asleep_holder(tmp_path):
    log, inside, timing_waits = [], threading.Event(), threading.Event()
    asleep = _holder(tmp_path, False, log, "a hung cell", 2.5, inside)
    inside.wait(5)
    timing = _holder(tmp_path, True, log, "timing check", 0.2, waiting=timing_waits)
    timing_waits.wait(5)
    late = _holder(tmp_path, False, log, "later cell", 0.2)
    for thread in (asleep, timing, late):
        thread.join(15)
    return _span(log, "a hung cell"), _span(log, "timing check"), _span(log, "later cell")


def test_while_the_holders_sleep_newcomers_work_and_the_check_still_measures_alone(tmp_path, monkeypatch):
    """A cell that hung holds the machine shared with the cores idle: the exclusive taker waiting
    for it lets newcomers work meanwhile, and still measures only once every one of them ended."""
    _machine(monkeypatch, cores_busy=0.0)
    (h0, h1), (t0, t1), (l0, l1) = _an_exclusive_taker_waits_for_an_asleep_holder(tmp_path)
    assert l1 < h1, "the newcomer ran while the hung cell held the machine"
    assert t0 >= max(h1, l1), "the timing check measured alone"


def test_while_the_holders_compute_newcomers_queue_behind_the_check(tmp_path, monkeypatch):
    _machine(monkeypatch, cores_busy=1.0)
    (h0, h1), (t0, t1), (l0, l1) = _an_exclusive_taker_waits_for_an_asleep_holder(tmp_path)
    assert t0 >= h1 and l0 >= t1, "the newcomer waited behind the timing check"


def test_the_machines_load_is_read_where_it_can_be():
    import sys
    first = lease.busy_cpu_seconds()
    if not sys.platform.startswith("linux"):
        assert first is None
        return
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    assert lease.busy_cpu_seconds() - first >= 0.25, "the spin above shows in the cores' load"


def test_without_a_lease_folder_holding_is_free(monkeypatch):
    monkeypatch.delenv(lease.ENV, raising=False)
    with lease.hold(True) as waited:
        assert waited == 0.0


def test_no_holder_waits_for_ever(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "MAX_WAIT", 0.3)
    log, inside = [], threading.Event()
    stuck = _holder(tmp_path, True, log, "stuck", 3.0, inside)
    inside.wait(5)
    started = time.monotonic()
    with lease.hold(True, folder=tmp_path):
        assert time.monotonic() - started < 2.5, "it goes on without the lease after MAX_WAIT"
    stuck.join(10)


def test_a_judge_waiting_for_the_machine_is_not_out_of_time(tmp_path, monkeypatch):
    """The grader's clock for a judge stops while the judge waits for the machine: a judge held
    up by a long timing check elsewhere is not killed for overrunning.

    The judge's clock here is CLOCK seconds between messages and the check elsewhere holds the
    machine CLOCK + 5 s, so only a stopped clock lets the judge live. CLOCK is large because the
    same clock also times the judge's own start (about 1.4 s on a quiet machine, more than 3 s
    once on a loaded CI machine): it must not be what this test measures."""
    clock = 20.0
    folder = tmp_path / "lease"
    folder.mkdir()
    monkeypatch.setenv(lease.ENV, str(folder))
    assignment = "05_multiprocessing_pools"
    answer = notebooks.answer_cells(notebooks.read(course.source_notebook(assignment)))["amdahl_speedup"]
    payload = {"cells": [("amdahl_speedup", answer)], "exercises": [(assignment, "amdahl_speedup")]}
    verify.verify(payload, str(tmp_path), cell_timeout=60)  # zygotes started, checks loaded
    log, inside = [], threading.Event()
    elsewhere = _holder(folder, True, log, "a long timing check elsewhere", clock + 5, inside)
    inside.wait(5)
    started = time.monotonic()
    verdicts = verify.verify(payload, str(tmp_path), cell_timeout=clock)
    elsewhere.join(clock + 10)
    passed, report, _ = verdicts["amdahl_speedup"]
    assert passed, report
    assert time.monotonic() - started > clock + 2, "the judge did wait for the machine, longer than its clock"


def test_alone_waits_for_the_others_then_shares_again(tmp_path):
    """A shared holder that asks for the machine alone waits for the shared holders in progress;
    a newcomer meanwhile queues behind it; afterwards it shares again with the newcomer."""
    log, first_in = [], threading.Event()
    cell = _holder(tmp_path, False, log, "cell", 0.6, first_in)
    first_in.wait(5)
    with lease.hold(folder=tmp_path):
        log.append(("check, shared", "in", time.monotonic()))
        late, late_in, late_waits = None, threading.Event(), threading.Event()
        with lease.alone() as waited:
            log.append(("check, alone", "in", time.monotonic()))
            late = _holder(tmp_path, False, log, "later cell", 0.6, late_in, late_waits)
            late_waits.wait(5)
            log.append(("check, alone", "out", time.monotonic()))
        late_in.wait(10)  # it gets in while the check holds the machine shared again
        log.append(("check, shared", "out", time.monotonic()))
    for thread in (cell, late):
        thread.join(10)
    c0, c1 = _span(log, "cell")
    s0, s1 = _span(log, "check, shared")
    a0, a1 = _span(log, "check, alone")
    l0, l1 = _span(log, "later cell")
    assert s0 < c1, "the check held the machine shared beside the cell"
    assert a0 >= c1 and waited > 0, "alone, it waited for the cell in progress"
    assert l0 >= a1, "a newcomer waited while the check was alone"
    assert l0 < s1, "back to shared, the check runs beside the newcomer"


def test_alone_costs_nothing_outside_a_hold(monkeypatch):
    monkeypatch.delenv(lease.ENV, raising=False)
    with lease.hold(), lease.alone() as waited:
        assert waited == 0.0
    with lease.alone() as waited:
        assert waited == 0.0


def test_a_check_waiting_to_be_alone_is_not_out_of_time(tmp_path, monkeypatch):
    """The wait for the machine alone happens inside a check; it does not count in the check's
    time limit (autograder/hidden.py)."""
    from autograder import hidden
    log, inside = [], threading.Event()
    other = _holder(tmp_path, False, log, "a long cell", 3.0, inside)
    inside.wait(5)

    def check():
        with lease.alone():
            return "measured"
    with lease.hold(folder=tmp_path):  # waits about 3 s for the cell, against a limit of 1.5 s
        assert hidden._call_with_timeout(check, {}, 1.5) == "measured"
    other.join(10)


_SPEEDUP_CHECKS = ["test_creation_cost_process_dearer", "test_gil_experiment_ratios",
                   "test_numpy_threads_speedup_gains", "test_cdist_vectorized_fast"]


@pytest.mark.parametrize("name", _SPEEDUP_CHECKS)
def test_checks_that_judge_a_speedup_measure_alone(name):
    import inspect
    from autograder import hidden
    found = [fn for a in course.assignments() for fn in hidden.load_checks(a).__dict__.values()
             if getattr(fn, "__name__", None) == name]
    assert found and all(getattr(fn, "exclusive", False) for fn in found)
    assert all("with alone():" in inspect.getsource(fn) for fn in found)


def test_a_blank_answer_never_takes_the_machine_alone(tmp_path, monkeypatch):
    """The speed-up checks call the answer once before their measurement: an answer that raises
    fails there, under the shared hold, and never asks for the machine alone (a spy on
    lease.alone: no clock, which a loaded machine stretches)."""
    from autograder import hidden
    monkeypatch.setenv(lease.ENV, str(tmp_path))
    asked = []
    real_alone = lease.alone

    def spy():
        asked.append(True)
        return real_alone()
    monkeypatch.setattr(lease, "alone", spy)

    def blank(*args, **kwargs):
        raise NotImplementedError
    checks = [fn for a in course.assignments() for fn in hidden.load_checks(a).__dict__.values()
              if getattr(fn, "__name__", None) in _SPEEDUP_CHECKS]
    assert len(checks) == len(_SPEEDUP_CHECKS)
    for fn in checks:
        with lease.hold():
            with pytest.raises((NotImplementedError, pytest.skip.Exception)):  # skip: one usable core
                fn(blank)
    assert not asked, "a blank answer asked for the machine alone"


def test_the_tests_short_commands_hold_the_runs_lease(tmp_path, monkeypatch, course_tools):
    """What the tests run beside grading without grading (a release, nbgrader's exchange verbs)
    holds the test run's lease shared: a timing check cannot take the machine alone meanwhile."""
    import fcntl
    import os
    monkeypatch.setenv(lease.ENV, str(tmp_path))
    with course_tools.beside_timing_checks():
        fd = os.open(tmp_path / "lease", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    with lease.hold(exclusive=True, folder=str(tmp_path)) as waited:  # given back afterwards
        assert waited < 1.0


def test_a_dask_clusters_graders_share_each_machines_cores_and_lease(tmp_path, monkeypatch):
    """On a Dask cluster the graders of all the workers on one machine divide its cores for their
    BLAS threads (each took every core: 4 workers of 1 thread, 4 times the cores) and hold one
    lease there (they held none: no timing check got the machine alone)."""
    import tempfile

    from autograder.pipeline import cluster

    workers = {"tcp://10.0.0.1:4001": {"host": "10.0.0.1", "nthreads": 1},
               "tcp://10.0.0.1:4002": {"host": "10.0.0.1", "nthreads": 1},
               "tcp://10.0.0.1:4003": {"host": "10.0.0.1", "nthreads": 2},
               "tcp://10.0.0.2:4001": {"host": "10.0.0.2", "nthreads": 1}}
    assert cluster.graders_per_host(workers) == {"10.0.0.1": 4, "10.0.0.2": 1}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    first, again = cluster.lease_folder("run1"), cluster.lease_folder("run1")
    assert first == again and os.stat(first).st_mode & 0o777 == 0o700
    assert cluster.lease_folder("run2") != first
    cluster.drop_lease("run1")
    assert not os.path.exists(first)


def test_a_holder_whose_lease_folder_is_gone_goes_on_as_without_one(tmp_path):
    """A grader whose run's lease folder was removed under it (a cluster's run ended on a host whose
    other worker did not answer the stop) failed each cell it held for with FileNotFoundError."""
    gone = tmp_path / "course-lease-gone"
    with lease.hold(folder=str(gone)) as waited:
        with lease.alone() as alone_waited:
            assert waited == 0.0 and alone_waited == 0.0
    assert not gone.exists()
