"""Hidden checks of 05_multiprocessing_pools (pools, futures, overhead, Amdahl)."""
import functools
import math
import multiprocessing
import multiprocessing.process
import random
import time

import numpy as np

import pytest

from autograder.checks._support import (WAITING_CPU, assert_worked_outside, broken_when_stalled, caller_allowance,
                                        caller_cpu, capped, counting, created, exact_float, exact_list, kernel_decides, observe,
                                        raises_value_error, reused_workers, student_pid, tasks_wrapped, there, timeout,
                                        type_name, witnessed_in, work_for_workers)
from autograder.checks._support import as_tuple, exact_tuple, works_under_spawn
from helpers import ode, pools, workers

MEET_SECONDS = 30.0  # how long the first of two tasks waits for the second at the barrier


def _not_in_caller(pids, what):
    assert student_pid() not in pids, f"{what}: tasks ran in the calling process, not in worker processes"


def _met_in_two_workers(out, what):
    """Two rendezvous tasks ran at the same time, in two worker processes (no clock involved)."""
    out = exact_list(out, f"{what}(...)", 2)
    assert all(type(r) is dict for r in out), f"{what}: the results must be what the function returned"
    _not_in_caller({r["pid"] for r in out}, what)
    assert all(r["met"] for r in out) and len({r["pid"] for r in out}) == 2, (
        f"{what}: two tasks never ran at the same time in two worker processes: are the tasks shared "
        "among n_workers processes, and not sent as one chunk of several (one worker runs a chunk's "
        "tasks one after another)?")


def _one_at_a_time(call, what, tries=2):
    """call() -> the pids that ran its tasks, in input order, for an answer given n_workers=1:
    those tasks must never have run in two processes at once. One worker at a time (one pool
    process, or a pool that replaces its worker after some tasks) runs the tasks in order, so a
    pid once left never comes back; two or more workers taking tasks of 20 ms from one queue
    alternate (A B A ...). No clock: a correct answer fails with probability 0. A pool of
    several workers that happened not to alternate passes a try; two tries of 12 tasks each."""
    for _ in range(tries):
        pids = call()
        _not_in_caller(set(pids), f"{what} with n_workers=1 (one worker process, not none)")
        runs = [pid for i, pid in enumerate(pids) if i == 0 or pid != pids[i - 1]]
        assert len(runs) == len(set(runs)), (
            f"{what} with n_workers=1 ran its tasks in {len(set(pids))} processes taking turns: "
            "is n_workers given to the pool (Pool(n_workers), max_workers=n_workers)?")


def _run_meeting(call, n_workers, what):
    """call(fn_of_one_item, items, barrier) with two tasks that only finish when they run at once,
    run in the student's process by an answer given n_workers. The pids the results name are the
    student's to write, so the judge backs them from outside: it sees, in /proc, that they were
    processes of its tree, and, from the kernel's process events, that each task's witness
    thread (helpers.gil.rendezvous) was created in the process its result names. Rewriting the
    pids of tasks run by threads of the calling process (to those of idle processes started
    beforehand) therefore fails. So does naming the witness of a thread that a cooperating
    process starts on request: each task first solves a puzzle (_puzzles; helpers.workers.
    meet_solving), and the calling process may spend only half the puzzles' CPU time meanwhile
    (assert_worked_outside), so the work itself must run in other processes.

    Not seeing the processes (a judge starved of CPU for the whole meeting) or losing events
    leaves the check undecided, never passed. Without the kernel's events (the grader is not
    root) the /proc evidence and the puzzles stand alone."""
    puzzles, allowance = work_for_workers(2, n_workers)
    with created() as made, observe(0.002) as seen, caller_cpu() as spent:
        out = there(_meeting, call, [p.task for p in puzzles])
    reports = _reports(out)
    reported = {r["pid"] for r in reports if type(r.get("pid")) is int}
    if reported and not reported <= seen.pids:
        pytest.skip("the grader did not see the worker processes that the results name (a busy machine?)")
    if reports and kernel_decides(made):
        assert all(witnessed_in(made, r.get("pid"), r.get("witness")) for r in reports), (
            "a task's result names a process that did not run it: results must be what the "
            "function returned in the worker")
    proofs = {r.get("value"): r.get("proof") for r in reports}
    assert_worked_outside(puzzles, [proofs.get(i) for i in range(2)], spent, allowance, what)
    return out


def _judge_cpu(fn, *args):
    """(the judge) CPU seconds that fn(*args) costs in this thread, and its result."""
    start = time.thread_time()
    result = fn(*args)
    return time.thread_time() - start, result


def _judge_cpu_again(before, fn, *args):
    """(the judge, after the student's call) the lower of `before`, fn(*args)'s CPU seconds measured
    before the call, and a measurement now. On 2 vCPUs that share a core's resources, another
    process's work stretches the CPU time of the same code (waiting does not count in CPU time, but
    a busy sibling slows the work): in a fresh clone's part 1 (2026-11-29) a caller that ran
    generate_trajectories' serial reference itself spent under half of the judge's measurement
    before the call, and passed."""
    return min(before, _judge_cpu(fn, *args)[0])


def _sized(unit_cost, n_workers, most):
    """How many units of work make the serial computation cost 3 times the caller's allowance,
    given the judge's cost of one unit (at most `most`, to bound a check's CPU on a slow machine)."""
    return max(1, min(most, math.ceil(3 * caller_allowance(n_workers) / max(unit_cost, 1e-9))))


WORKERS_DID_IT = 0.75  # of the serial CPU, spent by the workers: a busy caller then paid for handing out


def _assert_not_computed_in_caller(spent, serial, n_workers, what, workers_cpu=None):
    """The calling process spent (caller_cpu: `spent`) less than half of `serial`, the CPU seconds
    that the same work took when the judge did it serially in its own thread, on the same
    machine, in the same check: the work was not done in the calling process.

    The limit is never under the allowance for a correct answer's caller (caller_allowance), so
    a correct answer fails only if its caller spends more than the course's measured fixed cost
    of a pool or executor,
    and no more than waiting could explain over the call's wall time (WAITING_CPU, as in
    assert_worked_outside: then undecided). As there, only user time, the process's own code,
    can fail it; system time that takes the caller over the limit leaves it undecided. An answer
    that did the work in its caller spent about `serial` there (the same code, on the same
    machine: CPU time, which a busy machine does not stretch, unlike wall time), twice the limit;
    so a pass is decided only where `serial` is at least 1.5 times the allowance (that answer's
    caller would have spent 1.5 times the limit). The serial cost is measured in the judge, not in
    the student's process, whose code could slow the measurement down.

    `workers_cpu`, where given: the CPU seconds the student's other processes spent during the
    call (its process tree, reaped children included, less the caller). A caller over the limit
    whose workers spent WORKERS_DID_IT of the serial cost or more is undecided, not failed: the
    workers did the work, and the caller paid for sending it out. A review's correct answer sent
    tasks of 5,000 samples through ProcessPoolExecutor.map, each task sent on its own: its caller
    spent 0.37 to 0.54 s against 0.40 to 0.54 s of serial work, and failed 5 gradings of 5. An
    answer that works in its caller while idle workers wait leaves them at about none."""
    allowance = caller_allowance(n_workers)
    limit = max(allowance, serial / 2)
    own = spent.seconds if spent.user is None else spent.user
    if limit <= own < limit + WAITING_CPU * spent.wall:
        pytest.skip(f"{what}: the calling process spent {own:.2f} s of CPU during a call of {spent.wall:.1f} s: "
                    "as much as waiting for the workers may cost there, so the grader cannot tell whether "
                    "the work ran in the calling process")
    if own >= limit and workers_cpu is not None and workers_cpu >= WORKERS_DID_IT * serial:
        pytest.skip(f"{what}: the calling process spent {own:.2f} s of CPU, over the {limit:.2f} s allowed for "
                    f"handing out the work (done serially it takes {serial:.2f} s), and the workers "
                    f"{workers_cpu:.2f} s: they did the work, "
                    "and the caller most likely paid for handing it out in many small tasks (each costs the "
                    "caller a message). The grader cannot tell that from work done in the caller; send each "
                    "worker a few large tasks (a chunksize, or one task per worker)")
    assert own < limit, (
        f"{what}: the work ran in the calling process, not in the worker processes: hand it to the pool "
        f"(the calling process spent {own:.2f} s of CPU during the call, where the whole computation done "
        f"serially takes {serial:.2f} s; {spent.detail or 'user time'})")
    if serial < 1.5 * allowance:
        pytest.skip(f"{what}: the serial work took only {serial:.2f} s of CPU here, too little to tell "
                    f"from a correct answer's fixed cost ({allowance:.2f} s)")
    if spent.seconds >= limit:
        pytest.skip(f"{what}: the operating system worked {spent.seconds - own:.2f} s for the calling "
                    f"process during the call ({spent.detail}): the grader cannot tell what that work was")


def _reports(out):
    """The rendezvous reports in an answer's output: its items, or the values of (ok, value) pairs."""
    if type(out) is not list and type(out) is not tuple:
        return []
    items = [as_tuple(item) for item in out]
    items = [item[1] if type(item) is tuple and len(item) == 2 else item for item in items]
    return [item for item in items if type(item) is dict]


def _meeting(call, tasks):
    """(in the student's process) the barrier's manager and the call, on items (i, puzzle i), with
    a watch that breaks the barrier once the meeting has stalled (_support.broken_when_stalled:
    an answer that runs the two tasks one after the other fails in about 3 s, not 30)."""
    with workers.mp_context().Manager() as manager:
        barrier = manager.Barrier(2)
        with broken_when_stalled(barrier):
            return call(functools.partial(workers.meet_solving, barrier, timeout=MEET_SECONDS),
                        list(enumerate(tasks)), barrier)


# --- the work shared out: calls of the helpers the workers run, made to meet ------------------------
# generate_trajectories and monte_carlo_pi choose their own task function, so no barrier can be
# handed to them: instead every task that carries one of the helpers every answer sends its
# workers (helpers.ode's solvers, helpers.pools' counters) carries it wrapped. Whatever pickles the
# tasks (multiprocessing's ForkingPickler: Pool, ProcessPoolExecutor, Process under spawn and
# forkserver; cloudpickle: joblib's loky; joblib's own pickler: its multiprocessing backend) pickles
# the helper as a spy (_support.tasks_wrapped) that, in the worker, notes the call in a folder and, until
# some call has met another, waits for a call of another process to be in progress too: a
# meeting, as at _meeting's barrier, without a clock.
def _meeting_spy():
    """The spy's call, made here so that cloudpickle sends it by value (a function of this module,
    which no worker can import): spied(folder, fn, *args, **kwargs) -> fn(*args, **kwargs), after
    noting the call (wait-<pid>-..., holding a witness thread's kernel id, renamed left-... when it
    ends) and, while no meeting is noted ("done") and the watch has not given up ("stop"), waiting up
    to MEET_SECONDS for a call of another process in progress (then met-<pid>-<other pid>)."""
    def spied(folder, seconds, fn, *args, **kwargs):
        import os
        import threading
        import time
        from helpers.workers import witness_thread
        pid = os.getpid()
        mine = os.path.join(folder, f"wait-{pid}-{threading.get_native_id()}-{time.monotonic_ns()}")
        with open(mine, "x") as note:
            note.write(str(witness_thread()))
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                names = os.listdir(folder)
                if "done" in names or "stop" in names:
                    break
                others = {name.split("-")[1] for name in names if name.startswith("wait-")} - {str(pid)}
                if others:  # that call is in progress now, and so is this one
                    with open(os.path.join(folder, f"met-{pid}-{min(others)}"), "w") as note:
                        note.write(str(witness_thread()))
                    open(os.path.join(folder, "done"), "a").close()
                    break
                time.sleep(0.05)  # asleep between looks: the stall watch sees nothing working
            return fn(*args, **kwargs)
        finally:
            os.rename(mine, os.path.join(folder, "left-" + os.path.basename(mine)[len("wait-"):]))
    return spied


# The helpers every answer's workers run: the spied ones.
_SOLVERS = (("helpers.ode", "trajectory"), ("helpers.ode", "solve"), ("helpers.ode", "serial_trajectories"))
_COUNTERS = (("helpers.pools", "count_inside"), ("helpers.pools", "count_inside_global"))


class _Waiting:
    """The spy's folder as broken_when_stalled sees a barrier of two parties: n_waiting, the calls in
    progress while none has met another; abort() lets them go on unmet."""
    parties = 2

    def __init__(self, folder):
        self.folder = folder

    @property
    def n_waiting(self):
        import os
        names = os.listdir(self.folder)
        return 0 if "done" in names or "stop" in names else sum(name.startswith("wait-") for name in names)

    def abort(self):
        import os
        open(os.path.join(self.folder, "stop"), "a").close()


def _spied_case(names, fn, *args):
    """(in the student's process) fn(*args) with the helpers `names` ((module, name) pairs) spied and
    a watch that lets the calls go on unmet once nothing in the tree works towards a meeting
    (broken_when_stalled); (result, calls [(pid, witness)], meetings [(pid, other pid, witness)])."""
    import importlib
    import os
    import shutil
    import tempfile
    helpers = [getattr(importlib.import_module(module), name) for module, name in names]
    folder = tempfile.mkdtemp(prefix="course-meeting-")
    try:
        spy = _meeting_spy()
        with broken_when_stalled(_Waiting(folder)), tasks_wrapped(
                lambda fn: functools.partial(spy, folder, MEET_SECONDS, fn), lambda obj: any(obj is h for h in helpers)):
            out = fn(*args)
        calls, meetings = [], []
        for name in os.listdir(folder):
            parts = name.split("-")
            if parts[0] in ("wait", "left", "met"):
                with open(os.path.join(folder, name)) as note:
                    witness = int(note.read() or 0)
                (meetings.append((int(parts[1]), int(parts[2]), witness)) if parts[0] == "met"
                 else calls.append((int(parts[1]), witness)))
        return out, calls, meetings
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _shared_out(names, what, fn, *args):
    """(the judge) fn(*args) for an answer given n_workers=2, with the helpers `names` spied
    (_spied_case): two calls of them, in two worker processes, were in progress at once; its result.

    False failure of a correct answer: 0 while the machine makes progress, as at _run_meeting's
    barrier. A correct answer splits the work into several tasks and hands them to 2 worker
    processes that take them from one queue (a pool's, an executor's, joblib's). The first call of
    a helper waits, in its worker, holding its task; a task is left in the queue, so the other
    worker takes it, whenever it gets to run, and its call meets the first (no clock: the wait ends
    sooner only once nothing in the student's tree works towards it, _support.broken_when_stalled;
    its limit is MEET_SECONDS). One worker process, however many idle ones stand beside it, runs
    its calls one after the other: never a meeting. Seeing no call of the helpers (an answer that
    sends its workers a function of its own that calls none of them, or a kept pool's workers
    forked before the spy) leaves the check undecided."""
    with created() as made, observe(0.002) as seen:
        out, calls, meetings = there(_spied_case, names, fn, *args)
    caller = student_pid()
    if not any(pid != caller for pid, _ in calls):
        pytest.skip(f"{what}: the grader saw no call of {' or '.join(n for _, n in names)} in a worker "
                    "process, so it cannot tell how the work was shared out")
    met = [(pid, other, witness) for pid, other, witness in meetings if caller not in (pid, other) and pid != other]
    assert met, (
        f"{what} with n_workers=2: the work ran in one worker process, never in two at the same time "
        "(the first task waited for a second worker to start another one, in vain): share the work out "
        "among n_workers processes (a pool of n_workers, the work split into several tasks)")
    pid, other, witness = met[0]
    if not {pid, other} <= seen.pids:
        pytest.skip("the grader did not see the worker processes that the calls name (a busy machine?)")
    if kernel_decides(made):
        assert witnessed_in(made, pid, witness) and any(witnessed_in(made, other, w) for p, w in calls if p == other), (
            f"{what}: a call names a process that did not make it: the work must run in the worker processes")
    return out


# --- parallel_map ------------------------------------------------------------------
@timeout(150)
def test_parallel_map_values_and_workers(parallel_map):
    """results equal [fn(x) for x in items] in order, computed by several worker processes

    False failure of a correct answer: 0 while the machine makes progress. The
    values are exact; that two workers share the tasks is shown without a
    clock: two tasks wait for each other at a barrier, so they return only when
    both run at once (the second worker has 30 s to start; the wait ends sooner
    only once nothing in the student's process tree works towards it, see
    _support.broken_when_stalled); the CPU time the calling process spends
    meanwhile is a fixed cost per worker, which a busy machine does not
    stretch, at most a third of what it may spend.
    """
    for n_workers in (2, multiprocessing.cpu_count() + 2):
        items = random.sample(range(-50, 50), random.randint(8, 12))
        out = exact_list(parallel_map(pools.slow_pid_square, items, n_workers, chunksize=1),
                         "parallel_map(...)", len(items))
        assert [v for _, v in out] == [x * x for x in items], "the results are wrong or out of input order"
        _not_in_caller({pid for pid, _ in out}, "parallel_map")
        _met_in_two_workers(_run_meeting(lambda fn, items, _: parallel_map(fn, items, n_workers, chunksize=1),
                                         n_workers, "parallel_map"), "parallel_map")


@timeout(60)
def test_parallel_map_order_and_chunks(parallel_map):
    """input order is kept with uneven tasks; each chunk of chunksize items goes to one worker

    False failure of a correct answer: 0 (a chunk is one task of the pool: it
    runs in one worker whatever the timing; the order is checked exactly).
    """
    specs = [(i, 0.12 - 0.02 * i, False) for i in range(6)]
    out = parallel_map(pools.task, specs, 2, chunksize=1)
    assert [v for _, v in out] == [i * 10 for i in range(6)], "results came back in completion order"
    size = random.choice((3, 4))
    items = list(range(4 * size))
    out = parallel_map(pools.slow_pid_square, items, 2, size)
    assert [v for _, v in out] == [x * x for x in items], "the results are wrong or out of input order"
    blocks = [{pid for pid, _ in out[i:i + size]} for i in range(0, len(items), size)]
    assert all(len(b) == 1 for b in blocks), "chunksize was not passed on: chunks were split among workers"


@timeout(60)
def test_parallel_map_edges(parallel_map):
    """one worker (one process at a time) and empty input work; invalid n_workers or chunksize raise ValueError

    False failure of a correct answer: 0 (random items, exact comparison; see _one_at_a_time).
    """
    items = [random.randint(0, 99) for _ in range(5)]
    assert exact_list(parallel_map(workers.square, items, 1), "parallel_map(fn, items, 1)") == [x * x for x in items], (
        "fails with one worker")
    _one_at_a_time(lambda: [pid for pid, _ in exact_list(
        parallel_map(pools.slow_pid_square, list(range(12)), 1, chunksize=1), "parallel_map(...)", 12)], "parallel_map")
    assert exact_list(parallel_map(workers.square, [], 2), "parallel_map(fn, [], 2)") == [], "an empty input gives an empty list"
    assert exact_list(parallel_map(workers.square, iter(items), 2), "parallel_map(fn, iter(items), 2)") == [
        x * x for x in items], "items may be any iterable"
    for bad in ((0, None), (-1, None), (2, 0)):
        with raises_value_error(f"parallel_map(fn, items, {bad[0]}, chunksize={bad[1]})"):
            parallel_map(workers.square, items, *bad)
    with raises_value_error("parallel_map(fn, [], 0)"):
        parallel_map(workers.square, [], 0)


@timeout(120)
def test_parallel_map_under_spawn(parallel_map):
    """works under the spawn start method too (macOS, Windows): the workers run nothing defined in the notebook

    False failure of a correct answer: 0 (see _support.works_under_spawn).
    """
    xs = [random.randint(-100, 100) for _ in range(6)]
    out = works_under_spawn(parallel_map, workers.square, xs, 2)
    assert exact_list(out, "the result", len(xs)) == [x * x for x in xs], (
        "under the spawn start method the result is not [fn(x) for x in items]")



# --- parallel_starmap ------------------------------------------------------------------
@timeout(150)
def test_parallel_starmap_values_and_workers(parallel_starmap):
    """results equal [fn(*args) ...] in order, computed by several worker processes

    False failure of a correct answer: 0 while the machine makes progress
    (exact values; two workers shown by a barrier and the caller's CPU, as for
    parallel_map).
    """
    for n_workers in (2, multiprocessing.cpu_count() + 1):
        args = [(random.randint(-99, 99), random.randint(-99, 99)) for _ in range(random.randint(8, 12))]
        out = exact_list(parallel_starmap(pools.slow_pid_add, args, n_workers), "parallel_starmap(...)", len(args))
        assert [v for _, v in out] == [a + b for a, b in args], "the results are wrong or out of input order"
        _not_in_caller({pid for pid, _ in out}, "parallel_starmap")
        _met_in_two_workers(_run_meeting(lambda fn, items, barrier: parallel_starmap(
            workers.meet_solving, [(barrier, item, MEET_SECONDS) for item in items], n_workers),
            n_workers, "parallel_starmap"), "parallel_starmap")


@timeout(60)
def test_parallel_starmap_edges(parallel_starmap):
    """one worker (one process at a time), three arguments and empty input work; n_workers < 1 raises ValueError

    False failure of a correct answer: 0 (random arguments, exact comparison; see _one_at_a_time).
    """
    args = [(random.randint(0, 9), random.randint(0, 9)) for _ in range(4)]
    assert exact_list(parallel_starmap(workers.add, args, 1), "parallel_starmap(fn, args, 1)") == [a + b for a, b in args], (
        "fails with one worker")
    _one_at_a_time(lambda: [pid for pid, _ in exact_list(
        parallel_starmap(pools.slow_pid_add, [(i, i) for i in range(12)], 1), "parallel_starmap(...)", 12)],
        "parallel_starmap")
    assert exact_list(parallel_starmap(workers.add, [], 2), "parallel_starmap(fn, [], 2)") == [], "an empty input gives an empty list"
    assert exact_list(parallel_starmap(workers.slow_square, [(3, 0.0), (4, 0.0)], 2), "parallel_starmap(...)") == [9, 16], (
        "each tuple must be unpacked into the function's arguments")
    with raises_value_error("parallel_starmap(fn, args, 0)"):
        parallel_starmap(workers.add, args, 0)
    with raises_value_error("parallel_starmap(fn, [], 0)"):
        parallel_starmap(workers.add, [], 0)


@timeout(120)
def test_parallel_starmap_under_spawn(parallel_starmap):
    """works under the spawn start method too (macOS, Windows): the workers run nothing defined in the notebook

    False failure of a correct answer: 0 (see _support.works_under_spawn).
    """
    pairs = [(random.randint(-100, 100), random.randint(-100, 100)) for _ in range(6)]
    out = works_under_spawn(parallel_starmap, workers.add, pairs, 2)
    assert exact_list(out, "the result", len(pairs)) == [a + b for a, b in pairs], (
        "under the spawn start method the result is not [fn(*args) for args in arg_tuples]")



# --- robust_map ---------------------------------------------------------------------------
def _robust_case(robust_map, n_workers):
    n = random.randint(7, 10)
    failing = set(random.sample(range(n), 2))
    # Early items take longest: completion order is far from input order.
    specs = [(i, 0.02 + 0.015 * (n - i), i in failing) for i in range(n)]
    out = exact_list(robust_map(pools.task, specs, n_workers), "robust_map(...)", n)
    pids = set()
    for i, item in enumerate(out):
        ok, value = exact_tuple(item, "each result, the tuple (ok, value_or_exception),", 2)
        assert type(ok) is bool, f"each result's ok must be True or False, got {type_name(ok)}"
        assert ok is (i not in failing), "a result is marked ok/failed wrongly, or results are out of input order"
        if ok:
            assert value[1] == i * 10, "a value is wrong, or results are out of input order"
            pids.add(value[0])
        else:
            assert isinstance(value, ValueError), (
                "a failed item must carry the exception object the task raised")
            assert f"task {i} " in str(value), "a failed item carries another item's exception (order?)"
    _not_in_caller(pids, "robust_map")
    met = [as_tuple(item) for item in exact_list(
        _run_meeting(lambda fn, items, _: robust_map(fn, items, n_workers), n_workers, "robust_map"), "robust_map(...)")]
    assert all(type(item) is tuple and len(item) == 2 and item[0] is True for item in met), (
        "robust_map: tasks that succeed must come back as (True, value)")
    _met_in_two_workers([value for _, value in met], "robust_map")


@timeout(150)
def test_robust_map_keeps_other_results(robust_map):
    """failing items become (False, exception) and every other result is kept, in input order

    False failure of a correct answer: 0 while the machine makes progress
    (exact values and order; two workers shown by a barrier and the caller's
    CPU, as for parallel_map).
    """
    _robust_case(robust_map, 2)
    _robust_case(robust_map, multiprocessing.cpu_count() + 1)


@timeout(60)
def test_robust_map_edges(robust_map):
    """all-good input, one worker (one process at a time) and empty input work; any exception is caught; n_workers < 1 raises ValueError

    False failure of a correct answer: 0 (random items, exact comparison; see _one_at_a_time).
    """
    items = [random.randint(0, 9) for _ in range(4)]
    one = exact_list(robust_map(workers.square, items, 1), "robust_map(square, items, 1)", len(items))
    assert [as_tuple(pair) for pair in one] == [(True, x * x) for x in items], "fails with one worker"
    _one_at_a_time(lambda: [tuple(pair)[1][0] for pair in exact_list(
        robust_map(pools.task, [(i, 0.02, False) for i in range(12)], 1), "robust_map(...)", 12)], "robust_map")
    assert list(robust_map(workers.square, [], 2)) == [], "an empty input gives an empty list"
    # Any exception, not only the ValueError of the other checks' tasks: "x" * "x" raises TypeError.
    try:
        out = exact_list(robust_map(workers.square, [2, "x", 3], 2), "robust_map(square, [2, 'x', 3], 2)", 3)
    except TypeError as err:
        raise AssertionError(f"a task's TypeError ({err}) came out of robust_map: every exception a task "
                             "raises must become (False, exception), not only ValueError") from None
    assert [tuple(pair)[0] for pair in out] == [True, False, True] and isinstance(tuple(out[1])[1], TypeError), (
        "an item whose task raises TypeError must become (False, the TypeError), the others kept")
    with raises_value_error("robust_map(fn, items, 0)"):
        robust_map(workers.square, items, 0)
    with raises_value_error("robust_map(fn, [], 0)"):
        robust_map(workers.square, [], 0)
    # Items need not be hashable, and may repeat: each keeps its own place.
    lists = exact_list(robust_map(sum, [[1, 2], [3], [1, 2]], 2), "robust_map(sum, [[1, 2], [3], [1, 2]], 2)", 3)
    assert [as_tuple(pair) for pair in lists] == [(True, 3), (True, 3), (True, 3)], (
        "robust_map(sum, [[1, 2], [3], [1, 2]], 2) must give (True, 3) three times: items may be lists "
        "(unhashable) and may repeat")


@timeout(120)
def test_robust_map_under_spawn(robust_map):
    """works under the spawn start method too (macOS, Windows): the workers run nothing defined in the notebook

    False failure of a correct answer: 0 (see _support.works_under_spawn).
    """
    xs = [random.randint(-100, 100) for _ in range(4)]
    out = exact_list(works_under_spawn(robust_map, workers.square, xs, 2), "the result", len(xs))
    assert [tuple(pair) for pair in out] == [(True, x * x) for x in xs], (
        "under the spawn start method the result is not [(True, fn(x)) for x in items]")



# --- monte_carlo_pi ----------------------------------------------------------------------
def _is_count_ratio(estimate, n, n_workers):
    """4 * hits / m for an integer hits and some m in [n - n_workers, n]."""
    for m in range(max(1, n - n_workers), n + 1):
        hits = estimate * m / 4
        if abs(hits - round(hits)) < 1e-6:
            return True
    return False


@timeout(120)
def test_monte_carlo_pi_accurate_and_reproducible(monte_carlo_pi):
    """within 6.5 standard errors of pi, and the same estimate again for the same seed

    False failure of a correct answer: < 2e-10 (P(|Z| > 6.5) = 8e-11 per estimate, two
    estimates).
    """
    for n_workers in (2, multiprocessing.cpu_count() + 1):
        # n % (2 * n_workers) > n_workers: an answer that drops half the samples
        # cannot pass for 4 * hits / n by luck (its sample count is out of range).
        n = random.randint(75_000, 150_000) // (2 * n_workers) * (2 * n_workers) + 2 * n_workers - 1
        seed = random.randrange(2**31)
        est = exact_float(monte_carlo_pi(n, n_workers, seed), "the estimate")
        se = 4 * math.sqrt(math.pi / 4 * (1 - math.pi / 4) / n)
        assert abs(est - math.pi) < 6.5 * se, "the estimate is more than 6.5 standard errors from pi"
        assert _is_count_ratio(est, n, n_workers), "the estimate is not 4 * hits / samples from n_samples points (or the multiple of n_workers just below)"
        assert monte_carlo_pi(n, n_workers, seed) == est, "the same seed gave another estimate"


@timeout(120)
def test_monte_carlo_pi_seed_matters(monte_carlo_pi):
    """other seeds give other estimates, and each worker draws its own points

    False failure of a correct answer: < 1e-11. An estimate is 4 * hits / 20,000, with hits
    ~ Binomial(20,000, pi/4), so two seeds give one estimate when their hit counts are equal:
    sum over h of P(hits = h) ** 2 = 0.0049. The check fails only if all six are equal:
    sum over h of P(hits = h) ** 6 = 6.3e-12 (not 0.0049 ** 5: the five equalities with the
    first estimate are not independent). Two workers given the caller's seed itself (an int, its
    SeedSequence or a Generator made from it: the same stream) count the same 10,000 points
    each, so their hits are exactly 2 * count_inside(10_000, seed), which the judge computes;
    the check fails when all six estimates are that. A correct answer's hits hit one given value
    with a chance of at most 0.0069 (the largest binomial probability), all six about 1e-13.
    Worker i given seed + i counts count_inside(10_000, seed) + count_inside(10_000, seed + 1)
    exactly: the same bound, about 1e-13 more.
    """
    from helpers.pools import count_inside
    first = random.randrange(2**30)
    seeds = [first + k for k in range(6)]
    estimates = [exact_float(monte_carlo_pi(20_000, 2, seed), "monte_carlo_pi(...)") for seed in seeds]
    assert len(set(estimates)) > 1, "six different seeds gave the same estimate: is the seed used?"
    hits = [round(est * 20_000 / 4) for est in estimates]
    alone = {seed: count_inside(10_000, seed) for seed in range(first, first + 7)}  # one worker's hits
    assert hits != [2 * alone[seed] for seed in seeds], (
        "every worker drew the same points: each was given the caller's seed itself. Give each worker a "
        "seed of its own spawned from it (np.random.SeedSequence(seed).spawn(n_workers)), as the notebook says")
    assert hits != [alone[seed] + alone[seed + 1] for seed in seeds], (
        "worker i was given seed + i: the estimate for the next seed then shares a worker's points with this one "
        "(assignment 04's half-right seeding). Spawn each worker's seed from the one seed "
        "(np.random.SeedSequence(seed).spawn(n_workers)), as the notebook says")


@timeout(90)
def test_monte_carlo_pi_in_workers(monte_carlo_pi):
    """the sampling runs in worker processes; one worker works; bad counts raise ValueError

    False failure of a correct answer: < 1e-9 (stated; < 2e-10 computed). Process starts are
    counted exactly; the idle workers of a pool kept from an earlier call count when they run
    during this one (reused_workers). The samples are sized so that counting them serially costs the judge,
    in its own thread, 3 times the allowance for a correct caller's fixed cost (0.19 s with 2
    workers), measured on 1,000,000 of them; the serial cost is then measured on a quarter of
    that many samples, times 4, before the call and again after it, the lower counting
    (_judge_cpu_again). The calling process must spend less than half the serial
    cost, never less than the allowance (_assert_not_computed_in_caller: a correct
    caller only starts the pool and sends a count and a seed per worker, 0.03 s measured; an
    answer that counts in its caller and starts idle processes spends the serial cost there).
    The estimate of the big call must be within 6.5 standard errors of pi: P(|Z| > 6.5) =
    8e-11. With one worker and 20,001 samples, 0.1 is 8.6 standard errors (0.0116) of the
    estimate: P(|Z| > 8.6) = 8e-18.
    """
    from helpers.pools import count_inside
    count_inside(1_000_000, 0)  # the first calls pay for setting up and memory: not the unit cost
    unit, _ = _judge_cpu(count_inside, 1_000_000, random.randrange(2**31))
    n = _sized(unit / 1_000_000, 2, 60_000_000)
    n = n // 2 * 2 + 1
    quarter, _ = _judge_cpu(count_inside, n // 4, random.randrange(2**31))
    with reused_workers() as woken, created() as made, observe() as seen, caller_cpu() as spent:
        est, counts = there(counting, monte_carlo_pi, n, 2, random.randrange(2**31))
    quarter = _judge_cpu_again(quarter, count_inside, n // 4, random.randrange(2**31))
    counts = capped(counts, made)
    assert counts["process start"] >= 2 or len(woken.pids) >= 2, (
        "no worker processes were started or given work: the sampling ran serially")
    est = exact_float(est, "the estimate")
    se = 4 * math.sqrt(math.pi / 4 * (1 - math.pi / 4) / n)
    assert abs(est - math.pi) < 6.5 * se and _is_count_ratio(est, n, 2), (
        f"monte_carlo_pi({n}, 2, seed) is not 4 * hits / samples within 6.5 standard errors of pi")
    _assert_not_computed_in_caller(spent, 4 * quarter, 2, "monte_carlo_pi", max(0.0, seen.cpu - spent.seconds))
    # One worker may run in the caller: joblib's n_jobs=1 does (a catalogued correct answer).
    est = monte_carlo_pi(20_001, 1, 3)
    assert abs(est - math.pi) < 0.1 and _is_count_ratio(est, 20_001, 1), "fails with one worker"
    for bad in ((0, 2), (1000, 0)):
        with raises_value_error(f"monte_carlo_pi({bad[0]}, {bad[1]}, 1)"):
            monte_carlo_pi(bad[0], bad[1], 1)


@timeout(120)
def test_monte_carlo_pi_shared_out(monte_carlo_pi):
    """with 2 workers, the points are counted in two worker processes at the same time

    False failure of a correct answer: < 1e-10. Two calls of helpers.pools' counters meet in two
    worker processes (see _shared_out: 0 while the machine makes progress; 400,000 points or more
    make several tasks of any sensible split); the estimate must be within 6.5 standard errors of
    pi: P(|Z| > 6.5) = 8e-11.
    """
    n, seed = random.randint(400_000, 600_000), random.randrange(2**31)
    est = exact_float(_shared_out(_COUNTERS, "monte_carlo_pi", monte_carlo_pi, n, 2, seed), "the estimate")
    se = 4 * math.sqrt(math.pi / 4 * (1 - math.pi / 4) / n)
    assert abs(est - math.pi) < 6.5 * se and _is_count_ratio(est, n, 2), (
        f"monte_carlo_pi({n}, 2, seed) is not 4 * hits / samples within 6.5 standard errors of pi")


@timeout(120)
def test_monte_carlo_pi_under_spawn(monte_carlo_pi):
    """works under the spawn start method too (macOS, Windows): the workers run nothing defined in the notebook

    False failure of a correct answer: 0 (see _support.works_under_spawn).
    """
    got = exact_float(works_under_spawn(monte_carlo_pi, 20_000, 2, random.randrange(2**32)), "the estimate")
    assert 2.5 < got < 3.8, f"under the spawn start method the estimate is {got}, nowhere near pi"



# --- amdahl_speedup -----------------------------------------------------------------------
def test_amdahl_speedup_values(amdahl_speedup):
    """the speedup equals Amdahl's formula for random fractions and worker counts

    False failure of a correct answer: 0 (rel_tol 1e-9 against a few roundings
    of 1e-16).
    """
    for _ in range(50):
        p, n = random.random(), random.randint(1, 128)
        got = exact_float(amdahl_speedup(p, n), "the speedup")
        assert math.isclose(got, 1 / ((1 - p) + p / n), rel_tol=1e-9), (
            f"the speedup does not follow Amdahl's law: amdahl_speedup({p:.3f}, {n}) gave {got:.4g}, "
            f"expected 1 / ((1 - p) + p / n) = {1 / ((1 - p) + p / n):.4g}")
    n = random.randint(2, 64)
    assert math.isclose(amdahl_speedup(1.0, n), n), "a fully parallel program speeds up n times"
    assert math.isclose(amdahl_speedup(0.0, n), 1.0), "a fully serial program does not speed up"
    assert math.isclose(amdahl_speedup(random.random(), 1), 1.0), "one worker means no speedup"


def test_amdahl_speedup_errors(amdahl_speedup):
    """a fraction outside [0, 1] or n_workers < 1 raises ValueError"""
    for bad in ((-0.1, 4), (1.5, 4), (0.5, 0), (0.5, -3)):
        with raises_value_error(f"amdahl_speedup{bad}"):
            amdahl_speedup(*bad)


# --- fit_serial_fraction -------------------------------------------------------------------
def _amdahl(s, n):
    return 1 / (s + (1 - s) / n)


def test_fit_serial_fraction_noiseless(fit_serial_fraction):
    """recovers the serial fraction from exact Amdahl speedups

    False failure of a correct answer: 0. Exact speedups: a fit in closed form recovers s up to
    rounding; an iterative solver stops at its own tolerance, which by default is looser than
    rounding (scipy's bounded minimize_scalar, xatol = 1e-5, erred by up to 1.7e-6 and failed the
    1e-6 allowed before in 23 % of points). 1e-4 is allowed: the catalogue's wrong answers err by
    0.05 or more (a fraction averaged with n = 1's empty estimate, the parallel fraction).
    """
    for _ in range(20):
        s = random.uniform(0.0, 0.7)
        w = sorted(random.sample(range(1, 33), random.randint(3, 7)))
        if max(w) == 1:
            w.append(4)
        got = exact_float(fit_serial_fraction(w, [_amdahl(s, n) for n in w]), "the fitted fraction")
        assert abs(got - s) < 1e-4, (
            f"the serial fraction is not recovered from exact speedups: {got:.4g} where it is {s:.4g} "
            "(the serial fraction, not the parallel one?)")
    # One point with more than one worker is enough (the notebook raises only when there is none).
    got = exact_float(fit_serial_fraction([4], [2.5]), "fit_serial_fraction([4], [2.5])")
    assert abs(got - 0.2) < 1e-4, "one point, 4 workers and a speedup of 2.5, has the serial fraction 0.2"


def test_fit_serial_fraction_noisy(fit_serial_fraction):
    """recovers the serial fraction from slightly noisy speedups, within [0, 1]

    False failure of a correct answer: 0. The noise is bounded (|u| <= 2 %), so
    each point's implied fraction errs by at most 0.0204 * (1/S) / (1 - 1/n)
    <= 0.0204 * (1 + s) <= 0.033 for n >= 2, s <= 0.6; a least-squares fit
    averages such points (n = 1 carries no information), so it errs < 0.04.
    """
    for _ in range(20):
        s = random.uniform(0.02, 0.6)
        w = sorted(random.sample(range(1, 17), random.randint(4, 7)))
        speedups = [_amdahl(s, n) * (1 + random.uniform(-0.02, 0.02)) for n in w]
        got = exact_float(fit_serial_fraction(w, speedups), "the fitted fraction")
        assert abs(got - s) < 0.04, "the fit is too far from the serial fraction of noisy speedups"
    # Super-linear noise must not give a negative fraction.
    got = fit_serial_fraction([1, 2, 4], [1.0, 2.1, 4.3])
    assert 0.0 <= got <= 0.05, "speedups above the ideal must give a serial fraction of about 0 (clipped to [0, 1])"
    # Slowdowns (tiny tasks measured, as in the notebook's chunksize demo) must not give one above 1: both
    # points imply s = 7/3 exactly, so a fit clipped to [0, 1] gives 1 (a bounded solver stops near it).
    got = exact_float(fit_serial_fraction([1, 2, 4], [1.0, 0.6, 0.5]), "the fitted fraction")
    assert 0.95 <= got <= 1.0, "speedups below 1 must give a serial fraction of about 1 (clipped to [0, 1])"


def test_fit_serial_fraction_errors(fit_serial_fraction):
    """mismatched or empty lists, workers < 1, non-positive speedups or no point with several workers raise ValueError"""
    for bad in (([1, 2, 4], [1.0, 1.8]), ([], []), ([0, 2, 4], [1.0, 1.5, 2.0]), ([-2, 4], [1.0, 2.5]),
                ([1, 2, 4], [1.0, -1.5, 2.0]), ([1, 2, 4], [1.0, 0.0, 2.0]), ([1, 1], [1.0, 1.0]), ([1], [1.0])):
        with raises_value_error(f"fit_serial_fraction({bad[0]}, {bad[1]})"):
            fit_serial_fraction(*bad)


# --- generate_trajectories -----------------------------------------------------------------
def _same_trajectories(got, expected):
    got = exact_list(got, "generate_trajectories(...)", len(expected))
    for a, b in zip(got, expected):
        assert isinstance(a, np.ndarray), "each trajectory must be a numpy array"
        assert a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=1e-12), (
            "the trajectories differ from the serial reference for the same seed")


@timeout(120)
def test_generate_trajectories_equals_reference(generate_trajectories):
    """equals the serial reference for the same seed, whatever the number of workers

    False failure of a correct answer: < 1e-100 (exact comparison; two seeds
    give the same first double with probability about 2**-53 per value, and
    the first trajectory holds many).
    """
    n, seed = random.randint(9, 17), random.randrange(2**31)
    expected = ode.serial_trajectories(n, seed)
    # One worker may run in the caller: joblib's n_jobs=1 does (a catalogued correct answer).
    for n_workers in (1, 2, 3, multiprocessing.cpu_count() + 2):
        _same_trajectories(generate_trajectories(n, n_workers, seed), expected)
    other = generate_trajectories(n, 2, seed + 1)
    assert not np.array_equal(other[0][0], expected[0][0]), "another seed gave the same data"
    # Fewer trajectories than workers (a chunk size of n // n_workers is then 0, which Pool.map
    # meets with [None, None]).
    few = exact_list(generate_trajectories(2, 3, seed), "generate_trajectories(2, 3, seed)", 2)
    assert all(isinstance(t, np.ndarray) for t in few), (
        f"2 trajectories on 3 workers came back as {[type(t).__name__ for t in few]} (a chunk size of "
        "n // n_workers is 0 there)")
    _same_trajectories(few, expected[:2])


@timeout(90)
def test_generate_trajectories_in_workers(generate_trajectories):
    """the trajectories are computed by worker processes; invalid arguments raise ValueError

    False failure of a correct answer: 0 while the machine makes progress (process starts
    counted exactly, or the idle workers of a pool kept from an earlier call seen to run
    during this one, reused_workers; exact trajectories). The number of trajectories is sized so that solving
    them serially costs the judge, in its own thread, 3 times the allowance for a correct
    caller's fixed cost (0.19 s with 2 workers), measured on 16 trajectories of other seeds;
    the serial cost is then measured on a random quarter of the call's own trajectories (which
    are also compared), times 4, before the call and again after it, the lower counting
    (_judge_cpu_again). The calling process must spend less than half that
    (_assert_not_computed_in_caller: a correct caller starts the pool, sends seeds and takes
    back small arrays, 0.03 s measured; one that solves them itself spends the serial cost).
    """
    seed = random.randrange(2**31)
    unit, _ = _judge_cpu(lambda: [ode.trajectory(c) for c in np.random.SeedSequence(seed + 1).spawn(16)])
    n = _sized(unit / 16, 2, 2_000)
    children = np.random.SeedSequence(seed).spawn(n)
    checked = sorted(random.sample(range(n), max(1, n // 4)))
    quarter, expected = _judge_cpu(lambda: [ode.trajectory(children[i]) for i in checked])
    with reused_workers() as woken, created() as made, observe() as seen, caller_cpu() as spent:
        out, counts = there(counting, generate_trajectories, n, 2, seed)
    quarter = _judge_cpu_again(quarter, lambda: [ode.trajectory(children[i]) for i in checked])
    counts = capped(counts, made)
    assert counts["process start"] >= 2 or len(woken.pids) >= 2, (
        "fewer than 2 worker processes were started or given work: the work ran serially")
    out = exact_list(out, "generate_trajectories(...)", n)
    _same_trajectories([out[i] for i in checked], expected)
    _assert_not_computed_in_caller(spent, quarter * n / len(checked), 2, "generate_trajectories",
                                   max(0.0, seen.cpu - spent.seconds))
    assert exact_list(generate_trajectories(0, 2, 1), "generate_trajectories(0, 2, 1)") == [], "n = 0 gives an empty list"
    for bad in ((-1, 2), (5, 0)):
        with raises_value_error(f"generate_trajectories({bad[0]}, {bad[1]}, 1)"):
            generate_trajectories(bad[0], bad[1], 1)


@timeout(120)
def test_generate_trajectories_shared_out(generate_trajectories):
    """with 2 workers, the trajectories are solved in two worker processes at the same time

    False failure of a correct answer: 0 while the machine makes progress (two calls of helpers.ode's
    solvers meet in two worker processes, see _shared_out; the trajectories are compared exactly).
    """
    n, seed = random.randint(8, 12), random.randrange(2**31)
    out = _shared_out(_SOLVERS, "generate_trajectories", generate_trajectories, n, 2, seed)
    _same_trajectories(out, ode.serial_trajectories(n, seed))


@timeout(120)
def test_generate_trajectories_under_spawn(generate_trajectories):
    """works under the spawn start method too (macOS, Windows): the workers run nothing defined in the notebook

    False failure of a correct answer: 0 (see _support.works_under_spawn).
    """
    out = works_under_spawn(generate_trajectories, 3, 2, random.randrange(2**32))
    assert len(exact_list(out, "the result", 3)) == 3
