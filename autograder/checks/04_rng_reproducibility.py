"""Hidden checks of 04_rng_reproducibility (random numbers in forks, seeding)."""
import multiprocessing
import multiprocessing.process
import os
import random
from contextlib import contextmanager

import numpy as np
import pytest

from autograder.checks._support import (assert_worked_outside, caller_cpu, capped, counted, count_starts_and_joins,
                                        created, exact_list, kernel_decides, notes_folder, plain_array,
                                        raises_value_error, read_answers, read_notes, reused_workers, student_pid,
                                        tasks_wrapped, there, timeout, stop_idle_joblib_workers, witnessed_in, witnessed_processes,
                                        work_for_workers)
from autograder.checks._support import works_under_spawn
from helpers import workers


def _arrays(value, n, size, what):
    items = exact_list(value, what, n)
    for item in items:
        plain_array(item, "each element")
        assert item.shape == (size,), f"each array must have shape ({size},), got {item.shape}"
    return items


# --- forked_draws -----------------------------------------------------------------
needs_fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="this platform cannot fork")


@needs_fork
@timeout(60)
def test_forked_draws_identical_children(forked_draws):
    """every child draws what the parent's global generator would draw next

    False failure of a correct answer: 0 (random seeds and sizes, exact comparison
    with the parent's state; nothing depends on timing).
    """
    for n, size in ((random.randint(2, 4), random.randint(3, 9)), (1, random.randint(1, 5))):
        seed = random.randrange(2**32)
        expected = np.random.RandomState(seed).random_sample(size)
        with created() as made:
            draws, counts, unmoved = there(_forked_case, forked_draws, seed, n, size)
        counts = capped(counts, made)
        draws = _arrays(draws, n, size, "forked_draws(...)")
        for d in draws:
            assert np.array_equal(d, expected), (
                "a child's draws differ from what the parent's generator holds: each child should be "
                "forked afresh (not spawned, not a reused worker) and draw without seeding, from the "
                "parent's state")
        assert counts["process start"] >= n, f"{n} child processes should have been started, saw {counts['process start']}"
        assert unmoved, "the parent's global generator moved: the draws must be made in the children"


def _forked_case(forked_draws, seed, n, size):
    """(in the student's process) seed NumPy's global generator, call forked_draws under a spy;
    (draws, spy counts, whether the parent's generator state is unchanged)."""
    np.random.seed(seed)
    state = np.random.get_state()
    with count_starts_and_joins() as counts:
        draws = forked_draws(n, size)
    return draws, counts, _same_state(state, np.random.get_state())


@needs_fork
@timeout(60)
def test_forked_draws_made_in_the_children(forked_draws):
    """each array is drawn in a forked child of its own, not copied from the parent's state or another child

    False failure of a correct answer: 0 (exact comparison, nothing depends on timing).
    For this call hooks in the student's process seed NumPy's global generator afresh in every
    child forked from it (os.register_at_fork), child k (the k-th fork of the call) with
    child_seed + k, seeds the parent never holds: the n_procs children of a correct answer each
    draw the numbers of their own seed, so the arrays come from n_procs different seeds. An answer
    that draws in the caller, from a copy of the parent's state, returns the parent's numbers; one
    that copies one child's array returns the numbers of one seed more than once (the same >= 3 doubles
    from two MT19937 states: about 2**-159).
    """
    n, size = random.randint(2, 4), random.randint(3, 9)
    parent_seed, child_seed = random.randrange(2**31, 2**32), random.randrange(2**31)
    draws, unmoved, forks = there(_children_reseeded, forked_draws, parent_seed, child_seed, n, size)
    draws = _arrays(draws, n, size, "forked_draws(...)")
    assert unmoved, "the parent's global generator moved: the draws must be made in the children"
    streams = [np.random.RandomState(child_seed + k).random_sample(size) for k in range(min(forks, 256))]
    children = [next((k for k, s in enumerate(streams) if np.array_equal(d, s)), None) for d in draws]
    assert None not in children, (
        "an array is not what a forked child's global generator drew: each child must draw from NumPy's "
        "global generator as the fork left it, without setting its state or seeding it (numbers drawn in "
        "the parent, from a copy of its state, do not count)")
    assert len(set(children)) == n, (
        f"of the {n} arrays, some are the draws of one and the same child: each of the n_procs children must "
        "draw its own array (copies of one child's draws do not count)")


def _children_reseeded(forked_draws, parent_seed, child_seed, n, size):
    """(in the student's process) seed the global generator with parent_seed, then call
    forked_draws with the k-th child forked meanwhile starting from child_seed + k's state instead;
    (draws, whether the parent's state is unchanged, how many forks the call made)."""
    streams = _child_streams()
    np.random.seed(parent_seed)
    state = np.random.get_state()
    streams["forks"], streams["seed"] = 0, child_seed
    try:
        draws = forked_draws(n, size)
    finally:
        streams["seed"] = None
    return draws, _same_state(state, np.random.get_state()), streams["forks"]


def _child_streams():
    """(in the student's process) the process's fork hooks that, while streams["seed"] is set, count
    its forks and seed NumPy's global generator in each new child with seed + the number of forks
    made before it (a grandchild too: the hooks and the count are inherited). Kept on the os
    module, as _support's fork counter is: this module arrives anew with every request, and a
    fork hook cannot be removed."""
    import os
    import sys
    streams = getattr(os, "_course_child_streams", None)
    if streams is None:
        streams = {"seed": None, "forks": 0}

        def after_in_parent():
            if streams["seed"] is not None:
                streams["forks"] += 1

        def after_in_child():
            seed, numpy = streams["seed"], sys.modules.get("numpy")
            if seed is not None and numpy is not None:
                numpy.random.seed((seed + streams["forks"]) % 2**32)
        os.register_at_fork(after_in_parent=after_in_parent, after_in_child=after_in_child)
        os._course_child_streams = streams
    return streams


def _same_state(before, after):
    """Whether two np.random.get_state() tuples hold the same position of the same MT19937 state."""
    return bool(after[2] == before[2] and np.array_equal(after[1], before[1]))


def _seeded_call(seed, fn, *args):
    """(in the student's process) np.random.seed(seed), then fn(*args)."""
    np.random.seed(seed)
    return fn(*args)


@needs_fork
@timeout(60)
def test_forked_draws_uses_fork(forked_draws):
    """the children are forked (not spawned), each from the parent's current state

    False failure of a correct answer: < 1e-90. The two seeds are distinct (drawn
    without replacement), and two MT19937 states give the same 6 doubles with
    probability about 2**-318.
    """
    n = random.randint(3, 5)
    first_seed, second_seed = random.sample(range(2**32), 2)
    draws = there(_seeded_call, first_seed, forked_draws, n, 6)
    assert all(np.array_equal(d, draws[0]) for d in draws), (
        "the children drew different numbers: they must be forked, one fresh child per array")
    other = there(_seeded_call, second_seed, forked_draws, n, 6)
    assert not np.array_equal(other[0], draws[0]), "the draws must follow the parent's current state"
    # The same where the course's start method and the platform's default are another one: an
    # answer that takes its context from workers.mp_context() or multiprocessing's default then
    # starts children that do not hold the parent's state.
    third = there(_under_another_default, first_seed, forked_draws, n, 6)
    assert all(np.array_equal(d, draws[0]) for d in third), (
        "with the course's start method (COURSE_START_METHOD) and multiprocessing's default set to another "
        "one, the children drew other numbers: use the fork context explicitly, "
        "multiprocessing.get_context('fork')")


def _under_another_default(seed, forked_draws, *args):
    """(in the student's process) _seeded_call with COURSE_START_METHOD and multiprocessing's default
    start method set to one that is not fork (forkserver, else spawn), both restored afterwards."""
    other = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    saved_env, saved_default = os.environ.get(workers.START_METHOD_VARIABLE), multiprocessing.get_start_method(True)
    os.environ[workers.START_METHOD_VARIABLE] = other
    multiprocessing.set_start_method(other, force=True)
    try:
        return _seeded_call(seed, forked_draws, *args)
    finally:
        multiprocessing.set_start_method(saved_default, force=True)
        if saved_env is None:
            os.environ.pop(workers.START_METHOD_VARIABLE, None)
        else:
            os.environ[workers.START_METHOD_VARIABLE] = saved_env


def test_forked_draws_errors(forked_draws):
    """n_procs < 1 or a negative size raises ValueError; a size of 0 gives empty arrays"""
    with raises_value_error("forked_draws(0, 3)"):
        forked_draws(0, 3)
    with raises_value_error("forked_draws(2, -1)"):
        forked_draws(2, -1)
    if "fork" in multiprocessing.get_all_start_methods():
        _arrays(forked_draws(2, 0), 2, 0, "forked_draws(2, 0) (a size of 0 is allowed: 2 empty arrays)")


# --- independent_draws -----------------------------------------------------------------
@timeout(90)
def test_independent_draws_distinct_and_reproducible(independent_draws):
    """arrays differ between workers, repeat for the same seed, change with the seed

    False failure of a correct answer: < 1e-40. Two independent streams give the
    same array of >= 3 doubles with probability about 2**-159 per pair (at most 16 pairs across
    the two seeds).
    """
    seed = random.randrange(2**31)
    for n in (random.randint(2, 4), 1):
        size = random.randint(3, 8)
        a = _arrays(independent_draws(n, seed, size), n, size, "independent_draws(...)")
        b = _arrays(independent_draws(n, seed, size), n, size, "independent_draws(...)")
        c = _arrays(independent_draws(n, seed + 1, size), n, size, "independent_draws(...)")
        for x in a:
            assert np.all((x >= 0) & (x < 1)), "the draws must be uniform numbers in [0, 1)"
        for i in range(n):
            for j in range(i):
                assert not np.array_equal(a[i], a[j]), "two workers drew the same numbers"
        for x, y in zip(a, b):
            assert np.array_equal(x, y), "the same seed gave different draws: not reproducible"
        for x, y in zip(a, c):
            assert not np.array_equal(x, y), "another seed gave the same draws"
        # Worker i seeded with seed + i (the notebook's "half right" fix): worker 1 for this seed
        # draws what worker 0 for the next one draws. Streams spawned from each seed share nothing.
        assert not any(np.array_equal(x, y) for x in a for y in c), (
            "the call with the next seed repeats some arrays of this one (worker i seeded with seed + i?): "
            "spawn each worker's seed from the one seed (SeedSequence(seed).spawn)")


@timeout(90)
def test_independent_draws_in_workers(independent_draws):
    """the draws are made in worker processes, also with more workers than cores

    False failure of a correct answer: < 1e-25 (two independent streams give the
    same 2 doubles with probability about 2**-106, at most a few dozen pairs). Workers started
    during the call count, and so do the idle workers of a pool the answer keeps between calls
    (the notebook's visible test may have started it) that run during the call (reused_workers).
    """
    n = multiprocessing.cpu_count() + 1
    there(stop_idle_joblib_workers)  # joblib reuses the workers of an earlier call: started unseen
    with reused_workers() as woken:  # a pool of the answer's own, kept from an earlier call
        out, counts = counted(independent_draws, n, random.randrange(2**31), 2)
    out = _arrays(out, n, 2, "independent_draws(...)")
    assert counts["process start"] >= 1 or woken.pids, (
        "no worker process was started or given work: the draws were made in the caller")
    assert len({x.tobytes() for x in out}) == n, "two workers drew the same numbers"


@timeout(90)
def test_independent_draws_drawn_in_workers(independent_draws):
    """each array is what a task in a worker process drew and returned, not drawn in the caller

    False failure of a correct answer: 0 (exact comparison, nothing depends on timing). For this
    call every task the answer sends its workers (pickled by multiprocessing: Pool, executor,
    Process under spawn and forkserver; or by cloudpickle: joblib) carries its drawing function
    wrapped in a spy (_support.tasks_wrapped): a function of helpers.rng, Generator.random,
    RandomState.random_sample, a method of a generator (rng.random), or a function of the notebook's (which only cloudpickle can send a
    worker started afresh: it sends it by value, spied). In the worker the spy notes its process, a
    witness thread the kernel sees created there, the doubles the function returned and those it
    was given. A correct answer draws inside that function and returns what it returned: each
    array is among the returned doubles of a call in a worker process, and among no call's
    arguments. Arrays drawn in the caller, beside worker processes or not, were returned by no
    such call (the same >= 3 doubles from another stream: about 2**-159). An array the caller cast
    to float32 is compared at that precision (another stream's >= 3 float32s: about 2**-72).
    """
    n, size, seed = random.randint(2, 4), random.randint(3, 8), random.randrange(2**31)
    with created() as made:
        out, notes = there(_drawn_case, independent_draws, n, seed, size)
    out = _arrays(out, n, size, "independent_draws(...)")
    caller, decides = student_pid(), kernel_decides(made)
    drawn = [note["out"] for note in notes
             if note["pid"] != caller and (not decides or witnessed_in(made, note["pid"], note["witness"]))]
    sent = b"".join(note["sent"] for note in notes)
    for x in out:
        # An array cast to a narrower float (float32) after it came back holds the workers'
        # doubles rounded: compare at its precision.
        at_its_precision = _rounded_to(x.dtype)
        x = x.astype(float).tobytes()
        assert any(_holds(at_its_precision(d), x) for d in drawn) and not _holds(at_its_precision(sent), x), (
            "an array was not drawn in a worker process: each must be what the function your pool runs "
            "drew there and returned (arrays drawn in the calling process do not count, even beside "
            "worker processes)")


def _rounded_to(dtype):
    """doubles -> the same doubles rounded to a narrower float dtype and back (unchanged otherwise)."""
    if dtype.kind != "f" or dtype.itemsize >= 8:
        return lambda doubles: doubles
    return lambda doubles: np.frombuffer(doubles, np.float64).astype(dtype).astype(float).tobytes()


def _holds(doubles, x):
    """Whether the bytes `x` of doubles lie in the bytes `doubles`, at a double's boundary."""
    at = doubles.find(x)
    while at != -1 and at % 8:
        at = doubles.find(x, at + 1)
    return at != -1


# The functions that draw in an answer's workers, besides the notebook's own.
_DRAWERS = (("helpers.rng", "uniform_draws"), ("helpers.rng", "draws_with_pid"), ("helpers.rng", "legacy_draws"),
            ("helpers.rng", "pid_seeded_draws"), ("numpy.random", "Generator.random"),
            ("numpy.random", "RandomState.random_sample"))


def _noting_spy():
    """The spy's call, made here so that cloudpickle sends it by value (a function of this module,
    which no worker can import): spied(folder, fn, *args, **kwargs) -> fn(*args, **kwargs), after
    noting in `folder` the process, a witness thread, and the doubles returned and given."""
    def spied(folder, fn, *args, **kwargs):
        import os
        import pickle
        import threading
        import time
        import numpy as np
        from helpers.workers import witness_thread
        result = fn(*args, **kwargs)

        def doubles(value, depth=0):
            if isinstance(value, np.ndarray):
                return value.astype(float).ravel().tobytes() if value.dtype.kind == "f" else b""
            if isinstance(value, float):
                return np.float64(value).tobytes()
            if isinstance(value, dict):
                value = list(value.values())
            if isinstance(value, (list, tuple)) and depth < 4:
                return b"".join(doubles(v, depth + 1) for v in value)
            return b""
        note = {"pid": os.getpid(), "witness": witness_thread(), "out": doubles(result),
                "sent": doubles([args, kwargs])}
        with open(os.path.join(folder, f"{os.getpid()}-{threading.get_native_id()}-{time.monotonic_ns()}"), "wb") as f:
            pickle.dump(note, f)
        return result
    return spied


def _drawing(drawers):
    """chosen(obj) for tasks_wrapped: one of the functions `drawers`, or a generator's own method
    sent as the task (rng.random, rng.uniform)."""
    import types
    generators = (np.random.Generator, np.random.RandomState)

    def chosen(obj):
        return any(obj is d for d in drawers) or (type(obj) is types.MethodType
                                                  and isinstance(obj.__self__, generators))
    return chosen


def _drawn_case(fn, *args):
    """(in the student's process) fn(*args) with the drawing functions spied; (result, the notes)."""
    import functools
    import importlib
    import pickle
    import shutil
    import tempfile
    from pathlib import Path
    drawers = [functools.reduce(getattr, name.split("."), importlib.import_module(module)) for module, name in _DRAWERS]
    folder = tempfile.mkdtemp(prefix="course-draws-")
    try:
        spy = _noting_spy()
        with tasks_wrapped(lambda fn: functools.partial(spy, folder, fn), _drawing(drawers), by_value=True):
            out = fn(*args)
        return out, [pickle.loads(path.read_bytes()) for path in Path(folder).iterdir()]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_independent_draws_errors(independent_draws):
    """n_workers < 1 or a negative size raises ValueError; a size of 0 gives empty arrays"""
    with raises_value_error("independent_draws(0, 1, 3)"):
        independent_draws(0, 1, 3)
    with raises_value_error("independent_draws(2, 1, -3)"):
        independent_draws(2, 1, -3)
    _arrays(independent_draws(2, 1, 0), 2, 0, "independent_draws(2, 1, 0) (a size of 0 is allowed: 2 empty arrays)")


@timeout(120)
def test_independent_draws_under_spawn(independent_draws):
    """works under the spawn start method too (macOS, Windows): the workers run nothing defined in the notebook

    False failure of a correct answer: 0 (see _support.works_under_spawn).
    """
    out = exact_list(works_under_spawn(independent_draws, 2, random.randrange(2**32), 5), "the result", 2)
    assert all(len(draws) == 5 for draws in out), "under the spawn start method the arrays do not have `size` draws"



# --- set_seed --------------------------------------------------------------------------
@contextmanager
def _torch_state():
    import torch
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
             torch.are_deterministic_algorithms_enabled())
    try:
        yield torch
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[:2]
        torch.use_deterministic_algorithms(saved[2])


def test_set_seed_generators(set_seed):
    """random, NumPy's global generator and torch give the seeded sequences

    False failure of a correct answer: 0 (random seeds, exact comparison; the
    expected sequences are drawn here, by the judge, from fresh generators).
    """
    import torch
    for _ in range(3):
        seed = random.randrange(2**31)
        returned, got_random, got_numpy, got_torch = there(_seed_and_draw, set_seed, seed)
        assert returned is None, f"set_seed should return None; it returned an object of type {returned} (drop the return)"
        expected = random.Random(seed)
        assert got_random == [expected.random() for _ in range(3)], (
            "Python's random module is not seeded with the seed")
        assert np.array_equal(got_numpy, np.random.RandomState(seed).random_sample(3)), (
            "NumPy's global generator (np.random.*) is not seeded with the seed")
        assert torch.equal(got_torch, torch.rand(3, generator=torch.Generator().manual_seed(seed))), (
            "torch's CPU generator is not seeded with the seed")


def _seed_and_draw(set_seed, seed):
    """(in the student's process) scramble the generators, set_seed(seed), draw 3 from each."""
    with _torch_state() as torch:
        random.seed(seed + 1); np.random.seed(seed + 1); torch.manual_seed(seed + 1)
        returned = set_seed(seed)
        returned = None if returned is None else type(returned).__name__
        return returned, [random.random() for _ in range(3)], np.random.random(3), torch.rand(3)


def test_set_seed_cuda_and_cudnn(set_seed):
    """every CUDA device is seeded, cuDNN is deterministic and not benchmarking

    False failure of a correct answer: 0 (a random seed, exact comparison). Every device is seeded
    when torch.cuda.manual_seed_all(seed) ran, however the answer named it (torch.manual_seed
    calls it; one imported by name, `from torch.cuda import manual_seed_all`, is seen where torch
    queues it until CUDA starts), or, with CUDA started, when every device's generator has the
    seed. An answer that seeds CUDA only after asking whether there is a GPU (torch.cuda.
    is_available() or device_count()) cannot show it on a machine without one: undecided there,
    for a person (until 2026-11-30 it failed, and so did the seed function imported by name:
    a review, 3 of 3 each).
    """
    seed = random.randrange(2**31)
    calls, deterministic, benchmark, asked, devices = there(_cuda_calls, set_seed, seed)
    assert deterministic is True, "cuDNN must be set deterministic"
    assert benchmark is False, "cuDNN benchmark mode must be off"
    seeded = (["all", seed] in [list(c) for c in calls]
              or bool(devices) and all(device_seed == seed for device_seed in devices))
    if not seeded and asked and not devices:
        pytest.skip("set_seed seeds CUDA only where it finds a GPU, and this machine has none: "
                    "whether it would seed every device is for a person to see")
    assert seeded, "not every CUDA device is seeded (torch.manual_seed or torch.cuda.manual_seed_all does that)"


def _queued_seed(entry):
    """The seed of a CUDA seeding call torch queued until CUDA starts (torch.cuda._lazy_seed_tracker:
    (callback, traceback); the callback of torch.cuda.manual_seed_all holds it), or None."""
    if entry is None:
        return None
    callback = entry[0]
    cells = dict(zip(callback.__code__.co_freevars, (c.cell_contents for c in callback.__closure__ or ())))
    return cells.get("seed")


def _cuda_calls(set_seed, seed):
    """(in the student's process) set_seed(seed) under spies on CUDA seeding: (the seeding calls
    seen, as ("all" or "one", seed), cuDNN's flags after, whether the answer asked if CUDA is
    there, every device's seed where CUDA has started)."""
    with _torch_state() as torch:
        cuda = torch.cuda
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = False, True
        calls, asked = [], []
        tracker = cuda._lazy_seed_tracker
        before = tracker.manual_seed_all_cb
        tracker.manual_seed_all_cb = None
        original_all, original_one, original_compiled = cuda.manual_seed_all, cuda.manual_seed, cuda._is_compiled
        cuda.manual_seed_all = lambda s: (calls.append(("all", s)), original_all(s))[1]
        cuda.manual_seed = lambda s: (calls.append(("one", s)), original_one(s))[1]
        # is_available() and device_count() both ask this first, however the answer named them.
        cuda._is_compiled = lambda: (asked.append(True), original_compiled())[1]
        try:
            set_seed(seed)
        finally:
            cuda.manual_seed_all, cuda.manual_seed, cuda._is_compiled = original_all, original_one, original_compiled
            queued = _queued_seed(tracker.manual_seed_all_cb)
            if tracker.manual_seed_all_cb is None:
                tracker.manual_seed_all_cb = before
        if queued is not None:
            calls.append(("all", queued))
        devices = ([cuda.default_generators[i].initial_seed() for i in range(cuda.device_count())]
                   if cuda.is_initialized() else [])
        return calls, torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, bool(asked), devices


# --- seeded_loader ---------------------------------------------------------------------
def _scramble():
    import torch
    torch.manual_seed(random.randrange(2**31))
    np.random.seed(random.randrange(2**31))
    random.seed(random.randrange(2**31))


def _run(loader):
    import torch
    from torch.utils.data import DataLoader
    assert isinstance(loader, DataLoader), f"seeded_loader must return a DataLoader, got {type(loader).__name__}"
    there(_scramble)  # someone else draws between making the loader and using it
    return torch.cat([batch for batch in loader])


def _workers_started(made, num_workers, readers):
    """The kernel's record (as root) that iterating the loader started its worker processes and
    that the items were read in them: the worker-id column is written in the student's process,
    whose code can fake get_worker_info() or rewrite the rows. `readers` (read_notes) are the
    dataset's notes of where items were read (helpers.workers.note_where); each reading worker's
    witness thread must be one the kernel saw created there. A fresh loader starts its workers
    when it is first iterated, persistent ones included."""
    if not kernel_decides(made):
        return
    assert made.processes >= num_workers, (
        f"with num_workers={num_workers} the loader must start {num_workers} worker processes; "
        f"{made.processes} were started")
    in_workers = witnessed_processes(made, readers)
    assert len(in_workers) >= num_workers, (
        f"with num_workers={num_workers} the items must be read in {num_workers} worker processes; "
        f"the operating system saw them read in {len(in_workers)}")


@timeout(150)
def test_seeded_loader_reproducible(seeded_loader):
    """the same seed gives the same order and augmentation; workers draw different numbers

    False failure of a correct answer: < 1e-10. The dataset's generator draws
    doubles (a tie among 11 has probability < 2**-46); torch.rand() draws
    float32 with 2**24 values, so two items tie with probability
    C(11, 2) * 2**-24 = 3.3e-6: one tie is allowed, two or more happen with
    probability < 1e-11. Wrong answers (workers sharing one stream) tie at least
    3 times: each of the 2 workers draws >= 4 items.
    """
    import torch
    from helpers.rng_data import OwnRngNoise
    n, batch_size, seed = random.randint(8, 11), random.choice((1, 2)), random.randrange(2**31)
    data = OwnRngNoise(n)
    data.readers = there(notes_folder)
    puzzles, allowance = work_for_workers(n, 2)
    data.puzzles = dict(enumerate(p.task for p in puzzles))
    there(_scramble)
    with created() as made, caller_cpu() as spent:
        first = _run(seeded_loader(data, batch_size, 2, seed))
        # Read inside the window: work the student's process finished after the call is its own too.
        answers = there(read_answers, data.readers)
    _workers_started(made, 2, there(read_notes, data.readers))
    # A worker's note and witness can be forged by a process that starts a thread on request;
    # the items' puzzles cannot be solved without their CPU time, which the caller must not spend.
    assert_worked_outside(puzzles, [answers.get(i) for i in range(n)], spent, allowance, "seeded_loader")
    data.readers = data.puzzles = None
    data.rng = np.random.default_rng()  # the main process's copy moves on
    there(_scramble)
    second = _run(seeded_loader(data, batch_size, 2, seed))
    assert first.shape == (n, 4), "every item of the dataset must come out exactly once"
    assert sorted(first[:, 0].tolist()) == list(range(n)), "every item of the dataset must come out exactly once"
    assert set(first[:, 1].tolist()) == {0.0, 1.0}, "the loader must use num_workers worker processes"
    assert len(set(first[:, 2].tolist())) >= n - 1, (
        "two workers drew the same numbers from the dataset's own generator (dataset.rng)")
    assert len(set(first[:, 3].tolist())) >= n - 1, "two workers drew the same torch random numbers"
    assert torch.equal(first[:, 0], second[:, 0]), "the same seed gave another shuffling order"
    assert torch.equal(first, second), "the same seed gave other random augmentations"


@timeout(150)
def test_seeded_loader_depends_on_seed(seeded_loader):
    """shuffling follows the seed: other seeds give other orders and other numbers

    False failure of a correct answer: < 1e-12. Three seeds give three
    permutations of 16 items; two coincide with probability 3 / 16! = 1.4e-13.
    The workers' torch numbers of two seeds coincide with probability < 2**-100.
    """
    import torch
    from helpers.rng_data import GlobalNoise
    n = 16
    data = GlobalNoise(n)
    seed = random.randrange(2**31)
    orders = []
    # All three made before any is used: a loader's randomness is its own from the moment it is made
    # (one generator shared by every loader, seeded again by each call, is not).
    loaders = [seeded_loader(data, 3, 0, s) for s in (seed, seed + 1, seed + 2)]
    for loader in loaders:
        out = _run(loader)
        assert out.shape == (n, 6), "every item of the dataset must come out exactly once"
        orders.append(tuple(out[:, 0].tolist()))
    assert all(sorted(o) == list(range(n)) for o in orders), "every item must come out exactly once"
    assert len(set(orders)) == 3, "the order does not change with the seed: is the loader shuffling?"
    assert orders[0] == tuple(_run(seeded_loader(data, 3, 0, seed))[:, 0].tolist()), (
        "without workers too, the same seed must give the same order, also for a loader made before "
        "loaders of other seeds (each loader needs a generator of its own)")
    a = _run(seeded_loader(data, 2, 2, seed))
    b = _run(seeded_loader(data, 2, 2, seed + 1))
    assert not torch.equal(a[:, 3:], b[:, 3:]), "another seed gave the same random numbers in the workers"


def test_seeded_loader_batches_and_errors(seeded_loader):
    """batch_size is honoured; invalid batch_size or num_workers raise ValueError

    False failure of a correct answer: 0 (a random batch size, exact comparison).
    """
    from helpers.rng_data import GlobalNoise
    size = random.randint(2, 4)
    loader = seeded_loader(GlobalNoise(9), size, 0, 1)
    assert loader.num_workers == 0, "the loader must use the num_workers given"
    # From the batches, not loader.batch_size: with a batch_sampler of its own, that is None.
    batches = [b for b in loader]
    assert [len(b) for b in batches[:-1]] == [size] * (len(batches) - 1) and 1 <= len(batches[-1]) <= size, (
        "the loader must use the batch_size given: batches must hold batch_size items (the last one may hold fewer)")
    for bad in ((0, 0), (2, -1)):
        with raises_value_error(f"seeded_loader(data, {bad[0]}, {bad[1]}, 1)"):
            iter(seeded_loader(GlobalNoise(4), bad[0], bad[1], 1))
    # batch_size=None (DataLoader's "no batching") is not graded: the text leaves it to the answer.
