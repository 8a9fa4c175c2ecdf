"""Hidden checks of 06_joblib_vectorization (joblib, vectorising, blocks, bootstrap, BLAS threads)."""
import functools
import math
import os
import random
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import cloudpickle
import joblib.parallel
import numpy as np
import pytest
from scipy.spatial.distance import cdist as scipy_cdist
from threadpoolctl import threadpool_info

from autograder.checks._support import (alone, arrays_close, assert_worked_outside, caller_cpu, caller_threads_cpu, exact_list,
                                        exclusive, helped, notes_folder, plain_array, raises_value_error, read_answers,
                                        read_notes, stop_idle_joblib_workers, student_pid, there, timeout, witnessed_processes,
                                        work_for_workers)
from helpers import distances


# --- tools ---------------------------------------------------------------------------------
def _send_by_value(*functions):
    """Let loky workers receive the answers' module-level functions by value.

    In a notebook, answers live in __main__, which cloudpickle already pickles
    by value. When the checks run against answers executed into a module that
    no worker can import, register that module for pickling by value as well.
    """
    for fn in functions:
        name = getattr(fn, "__module__", None)
        module = sys.modules.get(name) if name else None
        if module is None or name == "__main__":
            continue
        file = getattr(module, "__file__", None)
        if getattr(module, "__spec__", None) is None and not (file and Path(file).is_file()):
            try:
                cloudpickle.register_pickle_by_value(module)
            except (ValueError, TypeError):
                pass


@contextmanager
def spy_parallel(notes=None, puzzles=(), withhold=False):
    """Record every joblib.Parallel call made while the block runs: n_jobs, backend, tasks. With
    `notes` (a folder), each task runs through helpers.workers.noted_call, which notes there where
    it ran; the judge reads in the kernel's record whether those threads were created during the
    call, and where (_ran_elsewhere). Task j < len(puzzles) also solves puzzles[j] first and notes
    the answer (helpers.workers.noted_solving_call), CPU work the judge sees not spent by the caller.
    With `withhold`, no task runs: each is replaced by helpers.workers.noop, which returns None."""
    from helpers.workers import noop, noted_call, noted_solving_call
    calls = []
    original = joblib.parallel.Parallel.__call__
    caller = os.getpid()

    def noting(j, fn):
        if j < len(puzzles):
            return functools.partial(noted_solving_call, notes, caller, j, puzzles[j], fn)
        return functools.partial(noted_call, notes, caller, fn)

    def spying_call(self, iterable):
        tasks = list(iterable)
        record = {"n_jobs": self.n_jobs, "tasks": tasks, "backend": None}
        calls.append(record)
        run = tasks if notes is None else [(noting(j, fn), args, kwargs) for j, (fn, args, kwargs) in enumerate(tasks)]
        if withhold:
            run = [(noop, (), {}) for _ in tasks]
        try:
            return original(self, run)
        finally:
            record["backend"] = type(self._backend).__name__

    joblib.parallel.Parallel.__call__ = spying_call
    try:
        yield calls
    finally:
        joblib.parallel.Parallel.__call__ = original


def _spied(fn, *args, whole_of=(), notes=None, puzzles=()):
    """(in the student's process) fn(*args) under spy_parallel(notes, puzzles); (result, summary of
    the busiest Parallel call: n_jobs, number of tasks, backend class name, and for each task
    whether it received one of the arrays in `whole_of` whole, and how many arrays it received).

    The judge runs it with the objects alive before the call frozen out of the garbage
    collector's sight (caller_cpu): joblib's multiprocessing backend runs gc.collect() before
    starting its pool, and that full collection would otherwise charge the caller for every
    object the notebook holds (measured 0.1 s of the 0.12 s it spent, with torch loaded)."""
    with spy_parallel(notes, puzzles) as calls:
        result = fn(*args)
    call = _busiest(calls)
    if call is None:
        return result, None
    tasks = []
    for task in call["tasks"]:
        arrays = _task_arrays(task)
        whole = any(a.shape == M.shape and np.array_equal(a, M) for a in arrays for M in whole_of)
        tasks.append((len(arrays), whole))
    return result, {"n_jobs": call["n_jobs"], "tasks": tasks, "backend": call["backend"]}


def _spied_and_helped(fn, *args, whole_of=(), workers=2):
    """_spied in the student's process, the tasks noting where they ran, and the kernel's record
    of what started meanwhile (helped()): the spy's record and the notes live where the student's
    code can write them, the kernel's record and /proc do not. The first two tasks (every check
    asks for at least two) solve a puzzle each (work.puzzles, sized for `workers` workers;
    work.answers), and the judge reads the CPU time that the calling process (work.process_cpu)
    and the threads it had before the call (work.threads_cpu) spent meanwhile."""
    there(stop_idle_joblib_workers)
    notes = there(notes_folder)
    work_puzzles, allowance = work_for_workers(2, workers)
    with helped() as work, caller_cpu() as process_cpu, caller_threads_cpu() as threads_cpu:
        result, call = there(_spied, fn, *args, whole_of=whole_of, notes=notes,
                             puzzles=[p.task for p in work_puzzles])
        # Read inside the windows: work the student's process finished after the call is its own too.
        work.answers = there(read_answers, notes)
    work.puzzles, work.allowance, work.process_cpu, work.threads_cpu = work_puzzles, allowance, process_cpu, threads_cpu
    work.notes = there(read_notes, notes)
    return result, call, work


def _withheld(fn, *args):
    """(in the student's process) fn(*args) with none of its joblib tasks run (spy_parallel's
    withhold): (its result, or None; the name of the exception it raised, or None; the number of
    Parallel calls it made)."""
    import numpy
    real = numpy.empty, numpy.empty_like

    def unwritten(array):  # an array made with np.empty holds NaN here, not what freed memory held
        if isinstance(array, numpy.ndarray) and array.dtype.kind in "fc":
            array.fill(numpy.nan)
        return array

    numpy.empty = lambda *a, **k: unwritten(real[0](*a, **k))
    numpy.empty_like = lambda *a, **k: unwritten(real[1](*a, **k))
    try:
        with spy_parallel(withhold=True) as calls:
            try:
                return fn(*args), None, len(calls)
            except Exception as err:  # noqa: BLE001  a correct answer cannot assemble what never came back
                return None, type(err).__name__, len(calls)
    finally:
        numpy.empty, numpy.empty_like = real


def _assert_made_by_tasks(fn, args, right, what):
    """The result comes from the joblib tasks: called again with every task withheld (each returns
    None and runs nothing of the answer's), fn(*args) must raise or return something other than
    `right` (right(result) says whether a result is the right one). Decoy tasks (that return a
    shape or a length) beside work done by the caller leave the result unchanged.

    False failure of a correct answer: 0. Its result is assembled from what its tasks returned,
    or wrote into memory they share; with no task run, assembling Nones raises, or leaves parts
    never written. The inputs are fresh random values, never passed before (bootstrap_ci's, which
    its own result must be read for, with another call in between), and np.empty hands out arrays
    of NaN meanwhile, so no memory left over from an earlier call can hold the right values."""
    result, raised, n_calls = there(_withheld, fn, *args)
    if raised is not None or not n_calls:  # no Parallel call at all: the checks beside this one fail it
        return
    assert not right(result), (
        f"{what} returned the right result even with none of its joblib tasks run (the grader replaced "
        "each by a task that returns None): the work was done outside the tasks, whose results were "
        "not used. Compute the parts in the tasks and assemble the result from what they return")


def _same_array(expected, rtol, atol):
    """right(result) for _assert_made_by_tasks: an array of expected's shape, close to it."""
    def right(result):
        try:
            found = np.asarray(result, dtype=float)
        except (TypeError, ValueError):
            return False
        return found.shape == expected.shape and bool(np.allclose(found, expected, rtol=rtol, atol=atol))
    return right


def _ran_elsewhere(work, what, kind="any"):
    """The judge's own evidence that tasks of the Parallel call ran in workers of the kind asked
    for: a task noted a process other than the caller's, where the kernel saw its witness thread
    created during the call; or a thread of the caller's process that the kernel saw created
    during the call. A record the student's code writes (a forged spy record, idle workers)
    names no such thread. And the work: the first two tasks' puzzles were solved while the
    calling process (kind "processes"), or the threads it had before the call (otherwise: threads
    are an accepted kind of worker, and theirs is the calling process's CPU), spent less than
    half their CPU time (assert_worked_outside); a notes folder and witnesses can be forged by a
    thread or process started to do only that. Where a thread of before ended during the call,
    the whole process decides if it spent less than the allowance; otherwise the work cannot be
    told, and the call is undecided unless the kernel's record of its workers fails it."""
    spent = work.process_cpu if kind == "processes" else work.threads_cpu
    undecided = None
    if kind != "processes" and spent.ended:
        if work.process_cpu.seconds >= work.allowance:  # the whole process decides when it spent little
            undecided = (f"{what}: threads of the student's process ended during the call, so the grader "
                         "cannot tell whose CPU time was whose")
        spent = work.process_cpu
    if undecided is None:
        assert_worked_outside(work.puzzles, [work.answers.get(j) for j in range(2)], spent, work.allowance, what)
    if work.decided:
        _workers_seen(work, what, kind)
    if undecided:
        pytest.skip(undecided)


def _workers_seen(work, what, kind):
    """The kernel's record: some task ran in a worker of the kind asked for, started for the call."""
    caller = student_pid()
    in_processes = witnessed_processes(work.made, work.notes)
    in_threads = [tid for pid, tid, _ in work.notes if pid == caller and caller in work.made.thread_owners.get(tid, ())]
    if kind == "threads":
        assert in_threads, f"{what}: no task ran in a thread started for the call: the tasks ran in the calling thread"
    elif kind == "processes":
        assert in_processes, (
            f"{what}: no task ran in a worker process started for the call: the tasks ran in the calling process")
    else:
        assert in_threads or in_processes, (
            f"{what}: no task ran in a worker thread or process started for the call: "
            "the tasks ran in the calling thread")


def _busiest(calls):
    return max(calls, key=lambda c: len(c["tasks"])) if calls else None


def _task_arrays(task):
    """The arrays a task receives, also inside lists, tuples and dicts."""
    _fn, args, kwargs = task
    found, todo = [], [*args, *kwargs.values()]
    while todo:
        item = todo.pop()
        if isinstance(item, np.ndarray):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
        elif isinstance(item, dict):
            todo.extend(item.values())
    return found


@contextmanager
def count_lines():
    """Count the Python lines executed while the block runs (sys.settrace), in this thread and in
    the threads started meanwhile (threading.settrace; _thread.start_new_thread wrapped). A call
    of sys.settrace or threading.settrace meanwhile (a tracer switched off, then restored) is
    ignored: the lines stay counted."""
    import _thread
    import threading
    counter = {"lines": 0, "on": True}  # off after the block: threads it started stop tracing

    def local(frame, event, arg):
        if not counter["on"]:
            return None
        if event == "line":
            counter["lines"] += 1
        return local

    def global_trace(frame, event, arg):
        return local if counter["on"] else None

    real_settrace, real_thread_settrace, real_start = sys.settrace, threading.settrace, _thread.start_new_thread

    def settrace(fn):
        if fn is global_trace:  # threading's own start of a thread it traces
            real_settrace(fn)

    def start_new_thread(function, args, kwargs=None):
        def traced(*args, **kwargs):
            real_settrace(global_trace)
            return function(*args, **kwargs)
        return real_start(traced, args, kwargs or {})

    previous, previous_threads = sys.gettrace(), threading.gettrace()
    real_settrace(global_trace)
    real_thread_settrace(global_trace)
    sys.settrace, threading.settrace, _thread.start_new_thread = settrace, lambda fn: None, start_new_thread
    try:
        yield counter
    finally:
        counter["on"] = False
        sys.settrace, threading.settrace, _thread.start_new_thread = real_settrace, real_thread_settrace, real_start
        real_thread_settrace(previous_threads)
        real_settrace(previous)


def _points(rows, cols, scale=1.0):
    return (np.random.default_rng(random.randrange(2**32)).standard_normal((rows, cols)) * scale)


# --- cdist_joblib ------------------------------------------------------------------------------
@timeout(120)
def test_cdist_joblib_values(cdist_joblib):
    """the distances equal the serial reference, for any n_jobs and both kinds of worker

    False failure of a correct answer: < 1e-25. A chunk may use
    |x|^2 - 2 x.y + |y|^2: the square root of its rounding residue is at most
    2 sqrt(eps) (|x| + |y|) = 3e-8 (|x| + |y|), under atol = 1e-6 while |x|, |y| < 16
    (standard normal points in <= 6 dimensions: P(|x| >= 16) < 1e-25); plain
    differences agree to 1e-15.
    """
    there(_send_by_value, cdist_joblib)
    p = random.randint(2, 6)
    X, Y = _points(random.randint(40, 70), p), _points(random.randint(20, 40), p)
    expected = distances.cdist_naive(X, Y)
    # Chunking is tried with threads at several n_jobs, and what only processes get wrong (results
    # written to the caller's memory) at one: each loky worker is a new interpreter (about 1 CPU-s),
    # and a pool that changes size starts more; the later calls reuse these two.
    for n_jobs, prefer in ((1, "processes"), (1, "threads"), (3, "threads"), (5, "threads"), (2, "processes")):
        arrays_close(cdist_joblib(X, Y, n_jobs, prefer), expected,
                     f"cdist_joblib(X, Y, {n_jobs}, {prefer!r})", rtol=1e-9, atol=1e-6)
    arrays_close(cdist_joblib(X, Y, 2), expected, "cdist_joblib(X, Y, 2) with the default prefer",
                 rtol=1e-9, atol=1e-6)
    one_row = X[:1]
    arrays_close(cdist_joblib(one_row, Y, 2), expected[:1], "a single row of X with n_jobs=2", rtol=1e-9,
                 atol=1e-6)


@timeout(120)
def test_cdist_joblib_uses_joblib(cdist_joblib):
    """the row chunks run as joblib tasks on n_jobs workers of the kind asked for

    False failure of a correct answer: 0 (random sizes; the spy records the
    Parallel call exactly, nothing depends on timing). That the tasks left the calling
    thread the judge sees itself, without a clock: joblib's reusable executor is shut down
    first, so a correct answer starts its threads or processes during the call, and the
    kernel reports each start (helped()). The first two tasks also solve a puzzle each
    (autograder/checks/_puzzles.py), of whose CPU time the calling process (with
    processes), or the threads it had before the call (with threads), may spend only half
    meanwhile: a correct answer spends a fixed cost per worker there (measured 0.02 s
    for 5 loky workers, 0.03 s for joblib's multiprocessing backend, see _spied), which a busy
    machine does not stretch. Called once more with no task run, the distances must not come
    out right (_assert_made_by_tasks, false failure 0): they are assembled from the chunks.
    """
    there(_send_by_value, cdist_joblib)
    p = random.randint(2, 6)
    X, Y = _points(random.randint(40, 70), p), _points(random.randint(10, 30), p)
    undecided = []  # a call whose workers the judge could not tell apart: the next calls still can fail
    # Each kind of worker is judged once (where the work ran: worker processes start afresh for
    # the judge to see, about 1 CPU-s each, so the larger n_jobs goes to threads), and its n_jobs
    # is read from the spy at a second value too (a constant, even for one kind only, fails), the
    # processes' call reusing the judged call's two workers and starting one more.
    for n_jobs, prefer, judged in ((2, "processes", True), (3, "processes", False),
                                   (5, "threads", True), (3, "threads", False)):
        if judged:
            _, call, work = _spied_and_helped(cdist_joblib, X, Y, n_jobs, prefer, workers=n_jobs)
        else:
            _, call = there(_spied, cdist_joblib, X, Y, n_jobs, prefer)
        assert call is not None, "cdist_joblib did not use joblib.Parallel"
        # What the spy read first: these name the mistake (one chunk, prefer ignored), where the
        # judge's view of the workers, which such answers fail too, could only say what it saw.
        assert call["n_jobs"] == n_jobs, (
            f"with n_jobs={n_jobs} the Parallel call had n_jobs={call['n_jobs']}")
        assert len(call["tasks"]) >= n_jobs, (
            f"with n_jobs={n_jobs} there should be at least {n_jobs} row chunks, found {len(call['tasks'])}")
        backend = call["backend"] or ""
        if prefer == "threads":
            assert "Threading" in backend, "prefer='threads' should run the chunks in threads"
        else:
            assert "Threading" not in backend and "Sequential" not in backend, (
                "prefer='processes' should run the chunks in worker processes")
        if judged:
            try:
                _ran_elsewhere(work, f"cdist_joblib(..., n_jobs={n_jobs}, prefer={prefer!r})", prefer)
            except pytest.skip.Exception as err:
                undecided.append(str(err))
    # A few rows where chunks of ceil(m / n_jobs) rows make fewer than n_jobs chunks (12 rows in
    # chunks of 3 for 5 jobs): the notebook asks for at least n_jobs chunks whenever X has the rows.
    m, n_jobs = random.choice(((12, 5), (10, 6), (9, 4)))
    _, call = there(_spied, cdist_joblib, X[:m], Y, n_jobs, "threads")
    assert call is not None and len(call["tasks"]) >= n_jobs, (
        f"with {m} rows and n_jobs={n_jobs} there should be at least {n_jobs} row chunks, found "
        f"{len(call['tasks']) if call else 0} (rows shared out as evenly as np.array_split does)")
    X, Y = _points(random.randint(40, 70), p), _points(random.randint(10, 30), p)
    _assert_made_by_tasks(cdist_joblib, (X, Y, 3, "threads"), _same_array(scipy_cdist(X, Y), 1e-9, 1e-6),
                          "cdist_joblib")
    if undecided:
        pytest.skip("; ".join(undecided))


def test_cdist_joblib_errors(cdist_joblib):
    """n_jobs < 1 or an unknown prefer raises ValueError (values joblib itself accepts too: -1 means
    every core to joblib, and prefer=None its default)"""
    X, Y = _points(5, 2), _points(4, 2)
    for n_jobs in (0, -1):
        with raises_value_error(f"cdist_joblib(X, Y, {n_jobs})"):
            cdist_joblib(X, Y, n_jobs)
    for prefer in ("gpu", None):
        with raises_value_error(f"cdist_joblib(X, Y, 2, prefer={prefer!r})"):
            cdist_joblib(X, Y, 2, prefer=prefer)


# --- cdist_vectorized -----------------------------------------------------------------------------
def test_cdist_vectorized_values(cdist_vectorized):
    """the distances equal scipy's cdist, with float and integer input

    False failure of a correct answer: < 1e-10. The |x|^2 - 2 x.y + |y|^2 form
    errs by at most 2 sqrt(eps) (|x| + |y|) = 3e-8 (|x| + |y|) near d = 0 and far
    less elsewhere; that exceeds atol = 1e-6 only if a point has |x| > 16 (scale
    3: 5.3 sigma in 1-D, < 1e-7 per point) AND lies within 1e-6 of a point of the
    other set (< 2e-5 over 40 points): < 1e-10 together, rarer in more dimensions.
    Integers: exact.
    """
    p = random.randint(1, 8)
    X, Y = _points(random.randint(20, 50), p, 3.0), _points(random.randint(10, 40), p, 3.0)
    arrays_close(cdist_vectorized(X, Y), scipy_cdist(X, Y), "cdist_vectorized(X, Y)", rtol=1e-6, atol=1e-6)
    arrays_close(cdist_vectorized(Y, X), scipy_cdist(Y, X), "cdist_vectorized(Y, X)", rtol=1e-6, atol=1e-6)
    Xi = np.random.default_rng(random.randrange(2**32)).integers(-50, 50, (12, 3))
    Yi = np.random.default_rng(random.randrange(2**32)).integers(-50, 50, (7, 3))
    arrays_close(cdist_vectorized(Xi, Yi), scipy_cdist(Xi, Yi), "cdist_vectorized on integer arrays",
                 rtol=1e-6, atol=1e-6)
    # Narrow integers wrap around in their own type (uint8: 0 - 20 is 236): scipy computes in floats.
    Xu = np.random.default_rng(random.randrange(2**32)).integers(0, 256, (9, 2)).astype(np.uint8)
    Yu = np.random.default_rng(random.randrange(2**32)).integers(0, 256, (5, 2)).astype(np.uint8)
    arrays_close(cdist_vectorized(Xu, Yu), scipy_cdist(Xu, Yu),
                 "cdist_vectorized on uint8 arrays (the differences wrap around unless converted to floats first)",
                 rtol=1e-6, atol=1e-6)


def test_cdist_vectorized_same_points(cdist_vectorized):
    """points that coincide are at distance 0 (never nan), even far from the origin

    False failure of a correct answer: 0. The worst rounding of the expanded
    form is 2 sqrt(eps) (|x| + |y|) <= 4 sqrt(eps p) * scale <= 1.5e-7 * scale for
    p <= 6 (scale = max |coordinate|), below the 1e-6 * scale allowed.
    """
    X = _points(60, random.randint(3, 6), 10.0) + random.uniform(50, 500)
    D = plain_array(cdist_vectorized(X, X), "cdist_vectorized(X, X)")
    assert D.shape == (60, 60), f"cdist_vectorized(X, X) has shape {D.shape}, expected (60, 60)"
    assert not np.isnan(D).any(), "some distances are nan (a negative number under the square root?)"
    diagonal = np.abs(np.diag(D))
    scale = np.abs(X).max()
    assert diagonal.max() <= 1e-6 * scale, "a point should be at distance 0 from itself"
    arrays_close(D, scipy_cdist(X, X), "cdist_vectorized(X, X)", rtol=1e-6, atol=1e-6 * scale)


def test_cdist_vectorized_no_row_loop(cdist_vectorized):
    """no Python loop over the rows of X or of Y: the Python lines run do not grow with the number of rows

    False failure of a correct answer: 0 (counts executed lines, not time).
    """
    p = random.randint(2, 5)
    small, large = 100, 2100
    few = _points(random.randint(5, 15), p)
    for label, make in (("rows of X", lambda rows: (_points(rows, p), few)),
                        ("rows of Y", lambda rows: (few, _points(rows, p)))):
        counts = []
        for rows in (small, large):
            X, Y = make(rows)
            counts.append(there(_lines_run, cdist_vectorized, X, Y))
        grown = counts[1] - counts[0]
        assert grown < 0.25 * (large - small), (
            f"with {large - small} more {label} your function ran {grown} more lines of Python: "
            "it loops over the rows")


def _lines_run(fn, *args):
    """(in the student's process) the Python lines fn(*args) executes."""
    with count_lines() as counter:
        fn(*args)
    return counter["lines"]


def _call_n(fn, X, Y, n):
    for _ in range(n):
        fn(X, Y)


def _best_seconds(fn, X, Y, repeat, per_try=10):
    """Best of `repeat` tries of fn(X, Y), each try `per_try` calls in the student's process,
    timed on the judge's clock (one request per try, so its cost is shared by per_try calls)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        there(_call_n, fn, X, Y, per_try)
        times.append((time.perf_counter() - start) / per_try)
    return min(times)


def _own_broadcast(X, Y):
    return np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(axis=-1))


def _pair_loop(X, Y):
    """A loop over every pair run by C iterators (no Python line per pair): a Python object per pair."""
    import itertools
    pairs = itertools.starmap(math.dist, itertools.product(X.tolist(), Y.tolist()))
    return np.fromiter(pairs, float, len(X) * len(Y)).reshape(len(X), len(Y))


@exclusive
@timeout(120)
def test_cdist_vectorized_fast(cdist_vectorized):
    """far faster than the double loop on the same input, and as fast as broadcasting where a loop
    over the pairs, even one run by C iterators, is far slower (measured in the same run)

    False failure of a correct answer: < 1e-10 (assumption stated). Against the double
    loop: measured idle, the loop about 60 ms, broadcasting under 1 ms (about 100x); 10x is
    asked. A try that misses 10x counts against the answer only when our own
    broadcasting, timed right after on the same input, was 30x faster than the loop; the
    check fails only after 5 such tries (otherwise it is undecided: pytest.skip). A
    correct answer fails only if, in each of 5 tries, the best of its 5 runs came out 3x
    slower than the best of 5 runs of the same work moments later: taking such a swing
    as rarer than 1 try in 100 and the tries as independent, < 1e-10.
    Against a loop over the pairs (itertools.starmap, map, np.fromiter: C iterators, no
    Python line to count): on 100 x 100 points of one coordinate, where every temporary
    array stays in cache (80 kB), array operations cost about 2.5 ns a pair and any loop
    over the pairs handles Python objects for each (measured: 13x our broadcasting with
    operator.sub, 28-31x with math.dist). Every correct form measured runs within 2.2x of
    our broadcasting there (einsum, np.linalg.norm, the expansion with clipping and
    input checks, scipy's cdist and distance_matrix, torch.cdist); 6x is asked. A try
    that misses it counts against the answer only when our own loop over the pairs, timed
    in the same try, was 18x slower than our broadcasting; 5 such tries fail the answer.
    A correct answer fails only after a 2.7x swing in each of 5 tries: < 1e-10 as above.
    """
    X, Y = _points(150, 8), _points(150, 8)
    P, Q = _points(100, 1), _points(100, 1)
    conclusive_slow = 0
    cdist_vectorized(X[:3], Y[:3])  # untimed: an answer that raises does so before the machine is taken
    with alone():
        for _ in range(5):
            loop = _best_seconds(distances.cdist_naive, X, Y, 1, per_try=2)
            mine = _best_seconds(cdist_vectorized, X, Y, 5)
            if mine * 10 < loop:
                break
            own = _best_seconds(_own_broadcast, X, Y, 5)
            loop = min(loop, _best_seconds(distances.cdist_naive, X, Y, 1, per_try=2))
            conclusive_slow += own * 30 < loop
        else:
            if conclusive_slow < 5:
                pytest.skip("the machine is too busy to time the vectorised version against the loop right now")
            raise AssertionError(
                f"cdist_vectorized took {mine * 1e3:.1f} ms, the double loop {loop * 1e3:.1f} ms: "
                "a vectorised version should be at least 10 times faster")
        # Calls of about 25 us: 100 a request, so that the request's own cost stays small.
        conclusive_slow = 0
        for _ in range(5):
            mine = _best_seconds(cdist_vectorized, P, Q, 5, per_try=100)
            own = _best_seconds(_own_broadcast, P, Q, 5, per_try=100)
            if mine < 6 * own:
                return
            pairs = _best_seconds(_pair_loop, P, Q, 2, per_try=10)
            conclusive_slow += own * 18 < pairs
    if conclusive_slow < 5:
        pytest.skip("the machine is too busy to time the vectorised version against a loop over the pairs right now")
    raise AssertionError(
        f"on 100 x 100 points of one coordinate cdist_vectorized took {mine * 1e3:.2f} ms, broadcasting "
        f"{own * 1e3:.2f} ms and a loop over the pairs run by C iterators (itertools.starmap(math.dist, ...)) "
        f"{pairs * 1e3:.2f} ms: it should be within 6 times broadcasting. A loop over every pair, even one "
        "that runs no Python line per pair, is not vectorised")


def test_cdist_vectorized_errors(cdist_vectorized):
    """rows of different lengths raise ValueError, a row of length 1 too (broadcasting alone would
    pair it with every coordinate of the other side)"""
    for rows, cols in (((4, 3), (5, 2)), ((4, 1), (5, 3)), ((4, 3), (5, 1))):
        with raises_value_error(f"cdist_vectorized on {rows} and {cols} arrays"):
            cdist_vectorized(_points(*rows), _points(*cols))


# --- block_matmul ------------------------------------------------------------------------------
@timeout(120)
def test_block_matmul_values(block_matmul):
    """equals A @ B for non-square shapes that n_blocks does not divide, any n_jobs

    False failure of a correct answer: 0. Summing block products in another
    order errs by at most k eps sum|a b| ~ 40 * 1.1e-16 * 60 < 1e-12, far below
    atol = 1e-9.
    """
    there(_send_by_value, block_matmul)
    for n_blocks, n_jobs in ((1, 1), (2, 1), (2, 2), (3, 2), (4, 5)):
        m, k, n = (random.randint(4 * n_blocks + 1, 40) for _ in range(3))
        while m == k or k == n or n_blocks > 1 and (m % n_blocks == 0 or k % n_blocks == 0):
            m, k, n = (random.randint(4 * n_blocks + 1, 40) for _ in range(3))
        A, B = _points(m, k), _points(k, n)
        arrays_close(block_matmul(A, B, n_blocks, n_jobs), A @ B,
                     f"block_matmul with shapes ({m}, {k}) @ ({k}, {n}), n_blocks={n_blocks}",
                     rtol=1e-9, atol=1e-9)


@timeout(120)
def test_block_matmul_parallel_blocks(block_matmul):
    """the block products run as joblib tasks on n_jobs workers, each task on blocks only

    False failure of a correct answer: 0 (random shapes, exact spy records;
    rounding as in test_block_matmul_values; the judge's evidence of workers as in
    test_cdist_joblib_uses_joblib; the product assembled from the tasks' blocks:
    _assert_made_by_tasks, false failure 0).
    """
    there(_send_by_value, block_matmul)
    for n_blocks, n_jobs in ((2, 2), (3, 3)):
        m, k, n = (random.randint(5 * n_blocks, 40) for _ in range(3))
        A, B = _points(m, k), _points(k, n)
        C, call, work = _spied_and_helped(block_matmul, A, B, n_blocks, n_jobs, whole_of=(A, B), workers=n_jobs)
        arrays_close(C, A @ B, "block_matmul", rtol=1e-9, atol=1e-9)
        assert call is not None, "block_matmul did not use joblib.Parallel"
        _ran_elsewhere(work, "block_matmul")
        assert call["n_jobs"] == n_jobs, f"with n_jobs={n_jobs} the Parallel call had n_jobs={call['n_jobs']}"
        assert len(call["tasks"]) >= n_blocks ** 2, (
            f"{n_blocks} x {n_blocks} blocks need at least {n_blocks ** 2} tasks, found {len(call['tasks'])}")
        for n_arrays, whole in call["tasks"]:
            assert n_arrays, "each task should receive its blocks as arrays"
            assert not whole, (
                "a task received a whole matrix: hand each task its blocks only")
    m, k, n = (random.randint(10, 40) for _ in range(3))
    A, B = _points(m, k), _points(k, n)
    _assert_made_by_tasks(block_matmul, (A, B, 2, 3), _same_array(A @ B, 1e-9, 1e-9), "block_matmul")


def test_block_matmul_errors(block_matmul):
    """n_blocks < 1, n_jobs < 1 or shapes that cannot be multiplied raise ValueError"""
    A, B = _points(6, 4), _points(4, 5)
    with raises_value_error("block_matmul(A, B, 0, 2)"):
        block_matmul(A, B, 0, 2)
    for n_jobs in (0, -1):  # -1 is every core to joblib: only the answer's own check refuses it
        with raises_value_error(f"block_matmul(A, B, 2, {n_jobs})"):
            block_matmul(A, B, 2, n_jobs)
    with raises_value_error("block_matmul with shapes (6, 4) and (5, 4)"):
        block_matmul(A, _points(5, 4), 2, 1)


# --- bootstrap_ci ----------------------------------------------------------------------------------
def _interval(result, what):
    low, high = exact_list(result, what, length=2)
    assert isinstance(low, (float, np.floating)) and isinstance(high, (float, np.floating)), (
        f"{what} must return two floats")
    assert math.isfinite(low) and math.isfinite(high), f"{what} returned a non-finite bound"
    return float(low), float(high)


def _sample(n=300):
    rng = np.random.default_rng(random.randrange(2**32))
    return rng.normal(random.uniform(-20, 20), random.uniform(0.5, 5), n)


@timeout(120)
def test_bootstrap_ci_reproducible(bootstrap_ci):
    """the same seed gives the same interval whatever n_jobs; another seed another interval

    False failure of a correct answer: < 1e-100. Two intervals from other
    resamples coincide only if their percentile means coincide: two resamples of
    300 continuous values with the same multiset, about 300!^-1. The same holds of
    the two resamples of n_boot=2 (measured: widths from 1.6e-4 up, 120 of 120).
    """
    there(_send_by_value, bootstrap_ci)
    data = _sample()
    seed = random.randrange(10**6)
    one = _interval(bootstrap_ci(data, 1000, 1, seed), "bootstrap_ci")
    three = _interval(bootstrap_ci(data, 1000, 3, seed), "bootstrap_ci")
    again = _interval(bootstrap_ci(data, 1000, 2, seed), "bootstrap_ci")
    assert np.allclose(one, three, rtol=0, atol=1e-12) and np.allclose(one, again, rtol=0, atol=1e-12), (
        "the same seed gave different intervals for n_jobs=1, 2 and 3")
    other = _interval(bootstrap_ci(data, 1000, 3, seed + 1), "bootstrap_ci")
    assert one != other, ("another seed should give another interval: is the interval made of the means "
                          "of resamples drawn with the seed, rather than of the data alone?")
    more = _interval(bootstrap_ci(data, 3000, 3, seed), "bootstrap_ci")
    assert one != more, "3000 resamples gave exactly the interval of 1000: are the batches all the same?"
    # 1005 resamples are 1005 means, not the 1000 of whole batches: percentiles of more means move.
    odd = _interval(bootstrap_ci(data, 1005, 3, seed), "bootstrap_ci")
    assert one != odd, ("1005 resamples gave exactly the interval of 1000: are the n_boot % batch "
                        "resamples left over after the whole batches drawn too?")
    # The default alpha: at alpha=0.5 an alpha not halved put both bounds at the median, and this
    # message then blamed the seeds for what the interval check reports (a student's walk-through).
    low, high = _interval(bootstrap_ci(data, 2, 2, seed), "bootstrap_ci with n_boot=2")
    assert low < high, ("with n_boot=2 the two resamples had the same mean: do the batches all draw "
                        "with the same seed?")


@timeout(120)
def test_bootstrap_ci_interval(bootstrap_ci):
    """the interval contains the mean and has the width of a percentile interval of the mean

    False failure of a correct answer: < 1e-12. Simulated (4000 normal samples
    of 300, 2000 resamples): width / (3.92 s / sqrt(n)) = 0.996 +- 0.021, the
    bounds 0.75 and 1.25 are 11.7 and 12.1 standard deviations away; the 90/95
    width ratio = 0.840 +- 0.013, the bounds 0.7 and 0.95 are 10.5 and 8.2 away
    (P(Z > 8.2) = 1e-16). The mean lies outside the interval only if over 1950 of
    2000 resample means fall on one side of it: < 1e-300. The 50/95 width ratio
    (alpha 0.5, the same resamples) = 0.344 +- 0.013 (the reference and two
    alternatives, 40 samples each): the bounds 0.25 and 0.45 are 7.2 and 8.1
    standard deviations away (P < 1e-12); an alpha not halved gives 0 there. For 90
    zeros and 10 ones, a resample's mean is 0 with chance 0.9**100 = 2.7e-5, and the
    lower bound (the 2.5th percentile of 1000 means) is 0 only if 25 of them are:
    < 1e-70 (measured: 0.04, 120 of 120); the median's interval is 0 to 0.
    """
    there(_send_by_value, bootstrap_ci)
    data = _sample()
    seed = random.randrange(10**6)  # the same resamples for both alphas: only alpha differs
    low, high = _interval(bootstrap_ci(data, 2000, 2, seed), "bootstrap_ci")
    assert low < data.mean() < high, "the interval should contain the sample mean"
    expected = 2 * 1.96 * data.std(ddof=1) / math.sqrt(data.size)
    assert 0.75 * expected < high - low < 1.25 * expected, (
        "the interval's width is far from that of the mean's 95% interval")
    low90, high90 = _interval(bootstrap_ci(data, 2000, 2, seed, alpha=0.1),
                              "bootstrap_ci with alpha=0.1")
    ratio = (high90 - low90) / (high - low)
    assert 0.7 < ratio < 0.95, "the 90% interval (alpha=0.1) should be about 0.84 times as wide as the 95% one (alpha=0.05)"
    low50, high50 = _interval(bootstrap_ci(data, 2000, 2, seed, alpha=0.5), "bootstrap_ci with alpha=0.5")
    assert 0.25 < (high50 - low50) / (high - low) < 0.45, (
        "the 50% interval (alpha=0.5) should be about 0.34 times as wide as the 95% one: are the bounds "
        "the percentiles 100 * alpha / 2 and 100 * (1 - alpha / 2)?")
    skewed = np.array([0.0] * 90 + [1.0] * 10)
    np.random.default_rng(seed).shuffle(skewed)
    low_skewed, _ = _interval(bootstrap_ci(skewed, 1000, 2, seed), "bootstrap_ci of 90 zeros and 10 ones")
    assert low_skewed > 0, ("for 90 zeros and 10 ones the interval of the mean lies above 0 (the median's "
                            "is 0 to 0): is it the mean of each resample?")


@timeout(120)
def test_bootstrap_ci_parallel(bootstrap_ci):
    """the resamples are drawn by several joblib tasks on n_jobs workers

    False failure of a correct answer: 0 (exact spy records, no timing; the judge's
    evidence of workers as in test_cdist_joblib_uses_joblib; the interval made of the
    tasks' resamples: _assert_made_by_tasks, false failure 0).
    """
    there(_send_by_value, bootstrap_ci)
    data = _sample(100)
    for n_jobs in (2, 3):
        _, call, work = _spied_and_helped(bootstrap_ci, data, 2000, n_jobs, random.randrange(10**6), workers=n_jobs)
        assert call is not None, "bootstrap_ci did not use joblib.Parallel"
        _ran_elsewhere(work, "bootstrap_ci")
        assert call["n_jobs"] == n_jobs, f"with n_jobs={n_jobs} the Parallel call had n_jobs={call['n_jobs']}"
        assert len(call["tasks"]) >= 2, "the resamples should be split over several tasks"
    data, seed = _sample(100), random.randrange(10**6)
    interval = np.asarray(_interval(bootstrap_ci(data, 500, 3, seed), "bootstrap_ci"))
    bootstrap_ci(_sample(100), 500, 3, seed + 1)  # memory freed by the call above now holds other means
    _assert_made_by_tasks(bootstrap_ci, (data, 500, 3, seed), _same_array(interval, 0, 1e-12), "bootstrap_ci")


def test_bootstrap_ci_errors(bootstrap_ci):
    """empty data, n_boot < 1, n_jobs < 1 or alpha outside (0, 1) raise ValueError"""
    data = _sample(20)
    with raises_value_error("bootstrap_ci([], 100, 1, 0)"):
        bootstrap_ci(np.array([]), 100, 1, 0)
    with raises_value_error("bootstrap_ci(data, 0, 1, 0)"):
        bootstrap_ci(data, 0, 1, 0)
    for n_jobs in (0, -1):  # -1 is every core to joblib: only the answer's own check refuses it
        with raises_value_error(f"bootstrap_ci(data, 100, {n_jobs}, 0)"):
            bootstrap_ci(data, 100, n_jobs, 0)
    for alpha in (0.0, 1.0, 1.5):
        with raises_value_error(f"bootstrap_ci(data, 100, 1, 0, alpha={alpha})"):
            bootstrap_ci(data, 100, 1, 0, alpha=alpha)


# --- run_with_blas_threads ------------------------------------------------------------------------------
# What the student's process says of its BLAS pools (threadpoolctl) is only as trustworthy as that
# process: its code can rewrite threadpoolctl. The judge also reads which threads do the work.
# BLAS keeps its worker threads for the life of the process, the calling thread always takes a
# part of a product, and a limit of n lets a product use n - 1 workers; a worker that is not used
# sleeps and gets no CPU at all. So the judge reads each thread's CPU time from the kernel
# (ProcessTree.thread_runtimes) around products run in the student's process: with BLAS at the
# starting limit (which workers exist), inside fn (at most n - 1 of them may work) and after the
# call (all of them work again).
_PRODUCT_SIZE, _PRODUCTS = 600, 4  # far above the size under which BLAS stays in one thread
_USED_NS = 1_000_000  # a worker's share of the products is several ms; an unused one gets 0 ns
_QUIET_STEP, _QUIET_MAX = 0.05, 1.0  # BLAS workers spin ~0.1-0.2 s after a product, then sleep


def _blas_counts():
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


def _pool_counts():
    """(in the student's process) every thread pool's count, BLAS and OpenMP, by library path."""
    return {info["filepath"]: info["num_threads"] for info in threadpool_info()}


def _pools_set(counts):
    """(in the student's process) set the pools' thread counts ({library path: n}), as a plain
    call that lasts until the next; the counts before, by library path."""
    from threadpoolctl import ThreadpoolController
    libraries = ThreadpoolController().lib_controllers
    before = {lib.filepath: lib.num_threads for lib in libraries}
    for lib in libraries:
        if lib.filepath in counts:
            lib.set_num_threads(counts[lib.filepath])
    return before


def _distinct_counts():
    """(the judge) another starting count for each pool of the student's process (3 to 6 threads,
    so that BLAS keeps worker threads): an answer that restores every pool to one pool's count
    (`threadpool_info()[0]`) changes the others. NumPy's and SciPy's BLAS are two libraries here."""
    paths = sorted(there(_pool_counts))
    return dict(zip(paths, random.sample(range(3, 3 + max(4, len(paths))), len(paths))))


def _products():
    """(in the student's process) products large enough that BLAS spreads them over its threads."""
    a = np.full((_PRODUCT_SIZE, _PRODUCT_SIZE), 0.5)
    for _ in range(_PRODUCTS):
        a @ a


def _counts_around_products():
    """(in the student's process) every pool's thread count as threadpoolctl reports it, then products."""
    counts = _pool_counts()
    _products()
    return counts


def _calling_thread():
    """(in the student's process) its pid and the kernel id of the thread that runs there() calls."""
    import os
    import threading
    return os.getpid(), threading.get_native_id()


class _BlasWorkers:
    """(the judge) which BLAS worker threads of the student's process work while a there() call
    runs, read from the kernel; `decided` is False where it cannot say (no scheduler statistics
    here, or a BLAS with no worker thread), and the checks then rest on threadpoolctl's report."""

    def __init__(self):
        from autograder.pipeline.judge import ProcessTree
        self.tree = ProcessTree(student_pid())
        pid, tid = there(_calling_thread)
        # The judge requests run in the main thread, whose id is the process's pid in any pid
        # namespace; without a judge there() is a plain call in the checking thread.
        self.caller = student_pid() if tid == pid else tid if pid == student_pid() else None
        self.workers = set()
        self.decided = False

    def start(self):
        """Set the starting limit's workers: the threads other than the caller that the products use."""
        _, used = self.used(_products)
        self.workers = (used or set()) - {self.caller}
        self.decided = used is not None and self.caller is not None and bool(self.workers)
        if not self.decided:
            print("[judge] which threads do BLAS work cannot be read here (no scheduler statistics, or "
                  "BLAS runs no worker thread): run_with_blas_threads is judged by threadpoolctl's report alone",
                  flush=True)

    def used(self, fn, *args):
        """there(fn, *args) once the student's threads are quiet: (its result, the threads that
        got at least _USED_NS of CPU meanwhile, less those busy while the process only slept;
        None where the kernel keeps no per-thread CPU time)."""
        start, background = self._quiet()
        result = there(fn, *args)
        end = self.tree.thread_runtimes()
        if start is None or end is None:
            return result, None
        return result, {t for t, ns in end.items() if ns - start.get(t, 0) >= _USED_NS} - background

    def _quiet(self):
        """Let BLAS's workers stop spinning after the last product: (the thread runtimes once no
        thread but the caller runs, or waits to run, or got CPU while the student's process slept;
        or after _QUIET_MAX, with the threads still busy then, which are not BLAS's workers)."""
        before, waited = self.tree.thread_runtimes(), 0.0
        while before is not None:
            there(time.sleep, _QUIET_STEP)
            waited += _QUIET_STEP
            now, states = self.tree.thread_runtimes(), self.tree.thread_states()
            if now is None:
                break
            # A spinning worker stays runnable ("R") even when a busy machine gives it no CPU.
            busy = {t for t, ns in now.items() if ns - before.get(t, 0) >= _USED_NS or states.get(t) == "R"}
            busy.discard(self.caller)
            if not busy or waited >= _QUIET_MAX:
                return now, busy
            before = now
        return None, set()

    def assert_limited(self, used, n_threads):
        if self.decided and used is not None:
            working = len(used & self.workers)
            assert working <= n_threads - 1, (
                f"inside fn, {working + 1} threads did BLAS work: the products were not limited to {n_threads}")

    def assert_restored(self, used):
        # By count: a threading layer that makes its pool anew after a limit (OpenMP) may use
        # other threads than at the start, never fewer.
        if self.decided and used is not None:
            working = len(used - {self.caller})
            assert working >= len(self.workers), (
                f"after the call, {working} of BLAS's {len(self.workers)} worker threads work: not restored")


def test_run_with_blas_threads_limits_and_restores(run_with_blas_threads):
    """BLAS runs n_threads threads inside fn, and the pools are restored afterwards: as
    threadpoolctl reports them, and as the BLAS threads' work shows

    False failure of a correct answer: 0 (random limits, exact thread counts; a worker the limit
    leaves out sleeps and gets no CPU, one it lets in gets milliseconds of products).
    """
    original = there(_pools_set, _distinct_counts())
    try:
        before = there(_pool_counts)
        assert there(_blas_counts), "no BLAS library is loaded (is NumPy installed?)"
        judge = _BlasWorkers()
        judge.start()
        for n_threads in (1, 2):
            (inside, returned), used = judge.used(_blas_case, run_with_blas_threads, n_threads)
            assert inside is not None, "fn was never called"
            assert returned, "run_with_blas_threads must return what fn() returns"
            assert all(c == n_threads for c in inside), (
                f"inside fn, BLAS ran {inside} threads instead of {n_threads}")
            judge.assert_limited(used, n_threads)
            after, used = judge.used(_counts_around_products)
            after = _those_of(after, before)
            assert after == before, (
                f"after the call the pools run {_named(after)} threads instead of {_named(before)}: not "
                "restored (each pool to its own count)")
            judge.assert_restored(used)
    finally:
        there(_pools_set, original)


def _those_of(after, before):
    """The counts after a call, of the pools that existed before it: a library the call loaded
    (torch's OpenMP, imported by the answer) had no count to restore."""
    return {path: n for path, n in after.items() if path in before}


def _named(counts):
    """{library path: n} as 'libname: n' pairs."""
    return ", ".join(f"{path.rsplit('/', 1)[-1]}: {n}" for path, n in sorted(counts.items()))


def _blas_case(run_with_blas_threads, n_threads):
    """(in the student's process) BLAS thread counts inside fn, which also runs products, and
    whether fn's value came back."""
    seen = {}
    token = object()

    def fn():
        seen["counts"] = _blas_counts()
        _products()
        return token

    result = run_with_blas_threads(fn, n_threads)
    return seen.get("counts"), result is token


def test_run_with_blas_threads_restores_on_error(run_with_blas_threads):
    """when fn raises, the exception reaches the caller and the pools are still restored (as
    threadpoolctl reports them, and as the BLAS threads' work shows)

    False failure of a correct answer: 0 (a random limit, exact thread counts).
    """
    original = there(_pools_set, _distinct_counts())
    try:
        before = there(_pool_counts)
        judge = _BlasWorkers()
        judge.start()
        reached = there(_blas_error_case, run_with_blas_threads)
        assert reached, "the exception raised by fn did not reach the caller"
        after, used = judge.used(_counts_around_products)
        assert _those_of(after, before) == before, "after fn raised, the BLAS pools were not restored"
        judge.assert_restored(used)
    finally:
        there(_pools_set, original)


def _blas_error_case(run_with_blas_threads):
    """(in the student's process) whether fn's exception reached the caller."""
    class Boom(RuntimeError):
        pass

    def fn():
        raise Boom("fn failed")

    try:
        run_with_blas_threads(fn, 1)
    except Boom:
        return True
    return False


def test_run_with_blas_threads_errors(run_with_blas_threads):
    """n_threads < 1 raises ValueError (before calling fn)"""
    raised, called = there(_blas_refuses, run_with_blas_threads)
    assert raised == "ValueError", (
        f"run_with_blas_threads(fn, 0) should raise ValueError, but {raised or 'returned normally'}")
    assert not called, "fn should not run when n_threads is invalid"


def _blas_refuses(run_with_blas_threads):
    """(in the student's process) what run_with_blas_threads(fn, 0) raised, and whether fn ran."""
    called = []
    try:
        run_with_blas_threads(lambda: called.append(1), 0)
    except ValueError:
        return "ValueError", bool(called)
    except Exception as err:  # noqa: BLE001
        return f"raised {type(err).__name__}", bool(called)
    return "", bool(called)
