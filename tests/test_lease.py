"""The machine lent whole to one timing check at a time (autograder/pipeline/lease.py)."""
import threading
import time

import pytest

from autograder import course, notebooks
from autograder.pipeline import lease, verify


def _holder(folder, exclusive, log, name, seconds, started=None):
    def run():
        with lease.hold(exclusive, folder=folder):
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
    b = _holder(tmp_path, False, log, "cell B", 0.6)
    time.sleep(0.1)
    timing = _holder(tmp_path, True, log, "timing check", 0.4)
    time.sleep(0.1)
    late = _holder(tmp_path, False, log, "later cell", 0.2)  # comes after the check: waits behind it
    for thread in (a, b, timing, late):
        thread.join(10)
    (a0, a1), (b0, b1) = _span(log, "cell A"), _span(log, "cell B")
    t0, t1 = _span(log, "timing check")
    l0, _ = _span(log, "later cell")
    assert b0 < a1, "two shared holders run at the same time"
    assert t0 >= max(a1, b1), "the exclusive holder waits for the shared ones in progress"
    assert l0 >= t1, "a shared holder that came while it waited queues behind it"


def test_without_a_lease_folder_holding_is_free(monkeypatch):
    monkeypatch.delenv(lease.ENV, raising=False)
    with lease.hold(True) as waited:
        assert waited == 0.0


def test_no_holder_waits_for_ever(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "MAX_WAIT", 0.3)
    log, inside = [], threading.Event()
    stuck = _holder(tmp_path, True, log, "stuck", 2.0, inside)
    inside.wait(5)
    started = time.monotonic()
    with lease.hold(True, folder=tmp_path):
        assert time.monotonic() - started < 1.5, "it goes on without the lease after MAX_WAIT"
    stuck.join(5)


def test_a_judge_waiting_for_the_machine_is_not_out_of_time(tmp_path, monkeypatch):
    """The grader's clock for a judge stops while the judge waits for the machine: a judge held
    up by a long timing check elsewhere is not killed for overrunning."""
    folder = tmp_path / "lease"
    folder.mkdir()
    monkeypatch.setenv(lease.ENV, str(folder))
    monkeypatch.setattr(verify, "_time_budget", lambda assignment, exercise: 2.0)
    assignment = "05_multiprocessing_pools"
    answer = notebooks.answer_cells(notebooks.read(course.source_notebook(assignment)))["amdahl_speedup"]
    payload = {"cells": [("amdahl_speedup", answer)], "exercises": [(assignment, "amdahl_speedup")]}
    verify.verify(payload, str(tmp_path), cell_timeout=60)  # zygotes started, checks loaded
    log, inside = [], threading.Event()
    elsewhere = _holder(folder, True, log, "a long timing check elsewhere", 10.0, inside)
    inside.wait(5)
    started = time.monotonic()
    verdicts = verify.verify(payload, str(tmp_path), cell_timeout=3)
    elsewhere.join(15)
    passed, report, _ = verdicts["amdahl_speedup"]
    assert passed, report
    assert time.monotonic() - started > 8, "the judge did wait for the machine, longer than its own time"


@pytest.mark.parametrize("name", ["test_creation_cost_process_dearer", "test_gil_experiment_ratios",
                                  "test_numpy_threads_speedup_gains", "test_cdist_vectorized_fast"])
def test_checks_that_judge_a_speedup_need_the_machine_alone(name):
    from autograder import hidden
    found = [fn for a in course.assignments() for fn in hidden.load_checks(a).__dict__.values()
             if getattr(fn, "__name__", None) == name]
    assert found and all(getattr(fn, "exclusive", False) for fn in found)
