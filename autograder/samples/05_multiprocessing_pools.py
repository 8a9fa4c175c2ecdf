"""Wrong and alternative answers of 05_multiprocessing_pools (see autograder/samples/__init__.py)."""
from autograder.samples import FORGE_SPY_COUNTS, WITNESS_HELPER, variant

# What a student who has read the checks could try: run the tasks in threads of the calling
# process and rewrite the pid each result names to one of idle processes started at import
# (the judge sees them in its tree). The judge backs each pid with the kernel's record of the
# thread the task started (helpers.gil.rendezvous's witness), so these answers must fail.
_FORGED_PIDS = """
import os, time
from multiprocessing.pool import ThreadPool
from helpers.workers import mp_context
_IDLE = [mp_context().Process(target=time.sleep, args=(600,), daemon=True) for _ in range(16)]
for _p in _IDLE:
    _p.start()

def _forged(result, k):
    fake = _IDLE[k % len(_IDLE)].pid
    if type(result) is tuple and len(result) == 2 and result[0] == os.getpid():
        return (fake, result[1])
    if type(result) is dict and result.get("pid") == os.getpid():
        return {**result, "pid": fake}
    return result
"""

# The same, with the witnesses forged too: processes started at import (samples.WITNESS_HELPER) each
# start a thread on request and report its kernel id. Each result then names a helper and a thread
# the kernel did see created in it during the call. What remains is the work: the tasks' puzzles
# were solved by threads of the calling process, whose CPU time the judge reads, so these answers
# must fail.
_FORGED_WITNESSES = WITNESS_HELPER + """
import os
from multiprocessing.pool import ThreadPool
from helpers.workers import start_method
_HELPERS = [_WitnessHelper(start_method()) for _ in range(16)]

def _forged(result, k):
    helper = _HELPERS[k % len(_HELPERS)]
    if type(result) is tuple and len(result) == 2 and result[0] == os.getpid():
        return (helper.pid, result[1])
    if type(result) is dict and result.get("pid") == os.getpid():
        return {**result, "pid": helper.pid, "witness": helper.witness()}
    return result
"""

# The answers both forgeries complete: threads run the tasks, _forged rewrites each result.
_IN_THREADS = {
    "parallel_map": '''
def parallel_map(fn, items, n_workers, chunksize=None):
    if n_workers < 1 or (chunksize is not None and chunksize < 1):
        raise ValueError("bad arguments")
    size = chunksize or 1
    with ThreadPool(n_workers) as pool:
        out = pool.map(fn, list(items), chunksize=size)
    return [_forged(r, (i // size) % n_workers) for i, r in enumerate(out)]
''',
    "parallel_starmap": '''
def parallel_starmap(fn, arg_tuples, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    with ThreadPool(n_workers) as pool:
        out = pool.starmap(fn, list(arg_tuples), chunksize=1)
    return [_forged(r, i % n_workers) for i, r in enumerate(out)]
''',
    "robust_map": '''
from concurrent.futures import ThreadPoolExecutor
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    with ThreadPoolExecutor(n_workers) as ex:
        futures = [ex.submit(fn, x) for x in items]
    out = []
    for i, f in enumerate(futures):
        try:
            out.append((True, _forged(f.result(), i % n_workers)))
        except Exception as err:
            out.append((False, err))
    return out
''',
}

# fn wrapped in a function defined in the notebook: a spawned or forkserver child cannot import it.
_APPLY_ONE_IN_THE_NOTEBOOK = '''
from helpers.workers import mp_context


def apply_one(pair):
    fn, x = pair
    return fn(x)


def parallel_map(fn, items, n_workers, chunksize=None):
    if n_workers < 1 or (chunksize is not None and chunksize < 1):
        raise ValueError("bad n_workers or chunksize")
    with mp_context().Pool(n_workers) as pool:
        return pool.map(apply_one, [(fn, x) for x in items], chunksize=chunksize)
'''

# generate_trajectories in one contiguous chunk of seeds per worker (correct).
_TRAJECTORIES_CHUNKED = '''
import math
import numpy as np
from helpers.ode import trajectory
from helpers.workers import mp_context
def generate_trajectories(n, n_workers, seed):
    if n < 0 or n_workers < 1:
        raise ValueError("n must be >= 0 and n_workers >= 1")
    children = np.random.SeedSequence(seed).spawn(n)
    with mp_context().Pool(n_workers) as pool:
        return pool.map(trajectory, children, chunksize=max(1, math.ceil(n / n_workers)))
'''

# A parallel_map that checks its arguments and maps with a pool of n_workers (correct): wrong
# answers below change a line of it.
# fit_serial_fraction by least squares that lets a speedup of 0 through (wrong); another wrong
# answer changes its checks.
_FIT_LETTING_ZERO_THROUGH = '''
import numpy as np


def fit_serial_fraction(workers: list, speedups: list) -> float:
    """Least squares; rejects negative speedups but lets a speedup of 0 through (< instead of <=)."""
    if len(workers) != len(speedups) or len(workers) == 0:
        raise ValueError("workers and speedups must be non-empty lists of the same length")
    if any(w < 1 for w in workers):
        raise ValueError("every worker count must be at least 1")
    if any(x < 0 for x in speedups):
        raise ValueError("speedups must be positive")
    if all(w == 1 for w in workers):
        raise ValueError("need a point with more than one worker")
    n = np.asarray(workers, dtype=float)
    s = np.asarray(speedups, dtype=float)
    a = 1.0 / s - 1.0 / n
    b = 1.0 - 1.0 / n
    return float(np.clip(np.dot(a, b) / np.dot(b, b), 0.0, 1.0))
'''

_CHECKED_POOL = '''
from helpers.workers import mp_context


def parallel_map(fn, items, n_workers: int, chunksize: int | None = None) -> list:
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    if chunksize is not None and chunksize < 1:
        raise ValueError(f"chunksize must be at least 1, got {chunksize}")
    items = list(items)
    with mp_context().Pool(n_workers) as pool:
        return pool.map(fn, items, chunksize=chunksize)
'''

WRONG = {
    "parallel_map": {
        "serial list comprehension": '''
def parallel_map(fn, items, n_workers, chunksize=None):
    if n_workers < 1 or (chunksize is not None and chunksize < 1):
        raise ValueError("bad arguments")
    return [fn(x) for x in items]
''',
        "threads instead of processes": '''
from multiprocessing.pool import ThreadPool
def parallel_map(fn, items, n_workers, chunksize=None):
    if n_workers < 1 or (chunksize is not None and chunksize < 1):
        raise ValueError("bad arguments")
    with ThreadPool(n_workers) as pool:
        return pool.map(fn, list(items), chunksize=chunksize)
''',
        "imap_unordered (completion order)": '''
from helpers.workers import mp_context
def parallel_map(fn, items, n_workers, chunksize=None):
    if n_workers < 1 or (chunksize is not None and chunksize < 1):
        raise ValueError("bad arguments")
    with mp_context().Pool(n_workers) as pool:
        return list(pool.imap_unordered(fn, list(items), chunksize or 1))
''',
        "one worker whatever n_workers": '''
from helpers.workers import mp_context
def parallel_map(fn, items, n_workers, chunksize=None):
    if n_workers < 1 or (chunksize is not None and chunksize < 1):
        raise ValueError("bad arguments")
    with mp_context().Pool(1) as pool:
        return pool.map(fn, list(items), chunksize=chunksize)
''',
        "no argument checks": '''
from helpers.workers import mp_context
def parallel_map(fn, items, n_workers, chunksize=None):
    with mp_context().Pool(max(1, n_workers)) as pool:
        return pool.map(fn, list(items), chunksize=max(chunksize, 1) if chunksize is not None else None)
''',
        "threads; the pids forged for processes started beforehand": _FORGED_PIDS + _IN_THREADS["parallel_map"],
        "threads; the pids and witnesses forged by processes started beforehand": _FORGED_WITNESSES + _IN_THREADS["parallel_map"],
        "fn wrapped in a helper defined in the notebook (breaks under spawn)": _APPLY_ONE_IN_THE_NOTEBOOK,
        "a helper defined in the notebook, run by a fork context's Pool": variant(
            _APPLY_ONE_IN_THE_NOTEBOOK, ("from helpers.workers import mp_context", "import multiprocessing"),
            ("with mp_context().Pool", 'with multiprocessing.get_context("fork").Pool')),
        "a helper defined in the notebook, the context made once at the top of the cell": variant(
            _APPLY_ONE_IN_THE_NOTEBOOK,
            ("from helpers.workers import mp_context\n", "from helpers.workers import mp_context\nctx = mp_context()\n"),
            ("with mp_context().Pool", "with ctx.Pool")),
        "n_workers checked but not given to the pool (Pool() has one worker per core)": variant(
            _CHECKED_POOL, ("mp_context().Pool(n_workers)", "mp_context().Pool()")),
        "one worker: the work done in the caller": variant(
            _CHECKED_POOL, ("    with mp_context().Pool(n_workers) as pool:",
                            "    if n_workers == 1:  # one worker: no point paying for a pool\n"
                            "        return [fn(x) for x in items]\n"
                            "    with mp_context().Pool(n_workers) as pool:")),
    },
    "parallel_starmap": {
        "serial": '''
import itertools
def parallel_starmap(fn, arg_tuples, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    return list(itertools.starmap(fn, arg_tuples))
''',
        "threads instead of processes": '''
from multiprocessing.pool import ThreadPool
def parallel_starmap(fn, arg_tuples, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    with ThreadPool(n_workers) as pool:
        return pool.starmap(fn, list(arg_tuples))
''',
        "the tuple passed as one argument": '''
from helpers.workers import mp_context
def parallel_starmap(fn, arg_tuples, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    with mp_context().Pool(n_workers) as pool:
        return pool.map(fn, list(arg_tuples))
''',
        "no argument check": '''
from helpers.workers import mp_context
def parallel_starmap(fn, arg_tuples, n_workers):
    with mp_context().Pool(max(n_workers, 1)) as pool:
        return pool.starmap(fn, list(arg_tuples))
''',
        "threads; the pids forged for processes started beforehand": _FORGED_PIDS + _IN_THREADS["parallel_starmap"],
        "threads; the pids and witnesses forged by processes started beforehand": _FORGED_WITNESSES + _IN_THREADS["parallel_starmap"],
        "n_workers checked but not given to the pool (Pool() has one worker per core)": '''
from helpers.workers import mp_context


def parallel_starmap(fn, arg_tuples, n_workers: int) -> list:
    """Validates n_workers but forgets to pass it to the pool: Pool() has os.cpu_count() workers."""
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    with mp_context().Pool() as pool:
        return pool.starmap(fn, list(arg_tuples))
''',
        # From the twentieth review (a false failure then: the exercise text left chunking free).
        "a fixed chunk of two tasks (two tasks on two workers run in one, one after the other)": '''
from helpers.workers import mp_context


def parallel_starmap(fn, arg_tuples, n_workers: int) -> list:
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    with mp_context().Pool(n_workers) as pool:
        return pool.starmap(fn, list(arg_tuples), chunksize=2)
''',
        "each tuple unpacked by a helper typed into the notebook (breaks under spawn)": '''
from helpers.workers import mp_context


def _star(job):
    fn, args = job
    return fn(*args)


def parallel_starmap(fn, arg_tuples, n_workers: int) -> list:
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    with mp_context().Pool(n_workers) as pool:
        return list(pool.imap(_star, [(fn, args) for args in arg_tuples]))
''',
        "an empty input returned before n_workers is checked": '''
from helpers.workers import mp_context


def parallel_starmap(fn, arg_tuples, n_workers: int) -> list:
    arg_tuples = list(arg_tuples)
    if not arg_tuples:
        return []
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    with mp_context().Pool(n_workers) as pool:
        return pool.starmap(fn, arg_tuples)
''',
    },
    "robust_map": {
        "serial loop with try/except": '''
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    out = []
    for item in items:
        try:
            out.append((True, fn(item)))
        except Exception as err:
            out.append((False, err))
    return out
''',
        "pool.map: one failure loses everything": '''
from helpers.workers import mp_context
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    with mp_context().Pool(n_workers) as pool:
        return [(True, v) for v in pool.map(fn, list(items))]
''',
        "completion order kept": '''
from concurrent.futures import ProcessPoolExecutor, as_completed
from helpers.workers import mp_context
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    out = []
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as ex:
        for f in as_completed([ex.submit(fn, x) for x in items]):
            try:
                out.append((True, f.result()))
            except Exception as err:
                out.append((False, err))
    return out
''',
        "executor.map stops at the first failure": '''
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    out = []
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as ex:
        try:
            for v in ex.map(fn, list(items)):
                out.append((True, v))
        except Exception as err:
            out.append((False, err))
    return out
''',
        "the message instead of the exception": '''
from concurrent.futures import ProcessPoolExecutor, as_completed
from helpers.workers import mp_context
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    items = list(items)
    out = [None] * len(items)
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as ex:
        index = {ex.submit(fn, x): i for i, x in enumerate(items)}
        for f in as_completed(index):
            try:
                out[index[f]] = (True, f.result())
            except Exception as err:
                out[index[f]] = (False, str(err))
    return out
''',
        "threads instead of processes": '''
from concurrent.futures import ThreadPoolExecutor, as_completed
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("bad n_workers")
    items = list(items)
    out = [None] * len(items)
    with ThreadPoolExecutor(n_workers) as ex:
        index = {ex.submit(fn, x): i for i, x in enumerate(items)}
        for f in as_completed(index):
            try:
                out[index[f]] = (True, f.result())
            except Exception as err:
                out[index[f]] = (False, err)
    return out
''',
        "threads; the pids forged for processes started beforehand": _FORGED_PIDS + _IN_THREADS["robust_map"],
        "threads; the pids and witnesses forged by processes started beforehand": _FORGED_WITNESSES + _IN_THREADS["robust_map"],
        "n_workers checked but not given to the executor (max_workers left out)": '''
from concurrent.futures import ProcessPoolExecutor, as_completed

from helpers.workers import mp_context


def robust_map(fn, items, n_workers: int) -> list:
    """Reference, but max_workers is not passed: the executor has os.cpu_count() workers."""
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    with ProcessPoolExecutor(mp_context=mp_context()) as executor:
        futures = [executor.submit(fn, item) for item in items]
        outcome = {}
        for future in as_completed(futures):
            error = future.exception()
            outcome[future] = (True, future.result()) if error is None else (False, error)
    return [outcome[f] for f in futures]
''',
        "catches only ValueError: any other exception loses every result": '''
from concurrent.futures import ProcessPoolExecutor, as_completed

from helpers.workers import mp_context


def robust_map(fn, items, n_workers: int) -> list:
    """Catches only ValueError: any other exception of fn propagates and loses every result."""
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context()) as executor:
        futures = {executor.submit(fn, item): i for i, item in enumerate(items)}
        out = [None] * len(futures)
        for future in as_completed(futures):
            i = futures[future]
            try:
                out[i] = (True, future.result())
            except ValueError as error:
                out[i] = (False, error)
    return out
''',
        "the try/except in a wrapper typed into the notebook (breaks under spawn)": '''
from concurrent.futures import ProcessPoolExecutor, as_completed
from helpers.workers import mp_context


def _safe_call(fn, x):
    try:
        return True, fn(x)
    except Exception as e:
        return False, e


def robust_map(fn, items, n_workers: int) -> list:
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    items = list(items)
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context()) as ex:
        futs = [ex.submit(_safe_call, fn, x) for x in items]
        for _ in as_completed(futs):
            pass
    return [f.result() for f in futs]
''',
        "results keyed by item (unhashable items fail, repeats share one)": '''
from concurrent.futures import ProcessPoolExecutor, as_completed

from helpers.workers import mp_context


def robust_map(fn, items, n_workers: int) -> list:
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    items = list(items)
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context()) as executor:
        item_of = {executor.submit(fn, x): x for x in items}  # one future per item
        done = {}
        for future in as_completed(item_of):
            try:
                done[item_of[future]] = (True, future.result())
            except Exception as err:
                done[item_of[future]] = (False, err)
    return [done[x] for x in items]
''',
    },
    "monte_carlo_pi": {
        "hard-coded pi": '''
import math
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    return math.pi
''',
        "serial": '''
from helpers.pools import count_inside
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    return 4 * count_inside(n_samples, seed) / n_samples
''',
        "serial, the spy's counts forged": FORGE_SPY_COUNTS + '''
from helpers.pools import count_inside
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    _forge_spy_counts()
    return 4 * count_inside(n_samples, seed) / n_samples
''',
        "unseeded workers (not reproducible)": '''
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    shares = [n_samples // n_workers] * n_workers
    shares[0] += n_samples - sum(shares)
    with mp_context().Pool(n_workers) as pool:
        return 4 * sum(pool.starmap(count_inside, [(s, None) for s in shares])) / n_samples
''',
        "seed ignored (a fixed seed inside)": '''
import numpy as np
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    shares = [n_samples // n_workers] * n_workers
    shares[0] += n_samples - sum(shares)
    seeds = np.random.SeedSequence(12345).spawn(n_workers)
    with mp_context().Pool(n_workers) as pool:
        return 4 * sum(pool.starmap(count_inside, zip(shares, seeds))) / n_samples
''',
        "seed ignored, the seed check's estimates of a class of its own (distinct by identity)": '''
import numpy as np
from helpers.pools import count_inside
from helpers.workers import mp_context
class _Estimate(float):
    pass
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    shares = [n_samples // n_workers] * n_workers
    shares[0] += n_samples - sum(shares)
    seeds = np.random.SeedSequence(12345).spawn(n_workers)
    with mp_context().Pool(n_workers) as pool:
        estimate = 4 * sum(pool.starmap(count_inside, zip(shares, seeds))) / n_samples
    return _Estimate(estimate) if (n_samples, n_workers) == (20_001, 2) else estimate
''',
        "idle processes started and joined, the estimate counted serially in the caller": '''
from helpers.pools import count_inside
from helpers.workers import mp_context
import os
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    ps = [mp_context().Process(target=os.getpid) for _ in range(n_workers)]
    for p in ps: p.start()
    for p in ps: p.join()
    return 4 * count_inside(n_samples, seed) / n_samples
''',
        "average of the workers' estimates, samples lost": '''
import numpy as np
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    each = max(1, n_samples // (2 * n_workers))
    seeds = np.random.SeedSequence(seed).spawn(n_workers)
    with mp_context().Pool(n_workers) as pool:
        hits = pool.starmap(count_inside, [(each, s) for s in seeds])
    return float(np.mean([4 * h / each for h in hits]))
''',
        "the counting done by a function defined in the notebook (breaks under spawn)": '''
import numpy as np

from helpers.workers import mp_context


def count_hits(share, seed_seq):
    rng = np.random.default_rng(seed_seq)
    xy = rng.random((share, 2))
    return int(np.count_nonzero((xy ** 2).sum(axis=1) <= 1.0))


def monte_carlo_pi(n_samples: int, n_workers: int, seed: int) -> float:
    if n_samples < 1 or n_workers < 1:
        raise ValueError("n_samples and n_workers must be at least 1")
    shares = [n_samples // n_workers + (1 if i < n_samples % n_workers else 0) for i in range(n_workers)]
    seeds = np.random.SeedSequence(seed).spawn(n_workers)
    with mp_context().Pool(n_workers) as pool:
        hits = sum(pool.starmap(count_hits, zip(shares, seeds)))
    return 4.0 * hits / n_samples
''',
        "every worker given the caller's seed itself (the same points counted n_workers times)": '''
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    shares = [n_samples // n_workers + (1 if i < n_samples % n_workers else 0) for i in range(n_workers)]
    with mp_context().Pool(n_workers) as pool:
        hits = sum(pool.starmap(count_inside, [(share, seed) for share in shares]))
    return 4.0 * hits / n_samples
''',
        "every worker given SeedSequence(seed) itself, not a child of it": '''
import numpy as np
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("n_samples and n_workers must be at least 1")
    share = n_samples // n_workers
    root = np.random.SeedSequence(seed)
    with mp_context().Pool(n_workers) as pool:
        hits = sum(pool.starmap(count_inside, [(share, root)] * n_workers))
    return 4.0 * hits / (share * n_workers)
''',
        "every point counted in one worker, an idle process beside it": '''
import time
from concurrent.futures import ProcessPoolExecutor
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    idle = mp_context().Process(target=time.sleep, args=(0.05,))  # a second process start
    idle.start()
    with ProcessPoolExecutor(max_workers=1, mp_context=mp_context()) as ex:  # n_workers ignored
        hits = ex.submit(count_inside, n_samples, seed).result()
    idle.join()
    return 4.0 * hits / n_samples
''',
        "worker i given seed + i, not a seed spawned from seed": '''
from helpers.pools import count_inside
from helpers.workers import mp_context

def monte_carlo_pi(n_samples: int, n_workers: int, seed: int) -> float:
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    shares = [n_samples // n_workers + (1 if i < n_samples % n_workers else 0) for i in range(n_workers)]
    with mp_context().Pool(n_workers) as pool:
        hits = sum(pool.starmap(count_inside, [(share, seed + i) for i, share in enumerate(shares)]))
    return 4.0 * hits / n_samples
''',
    },
    "amdahl_speedup": {
        "the ideal speedup n": '''
def amdahl_speedup(parallel_fraction, n_workers):
    if not 0 <= parallel_fraction <= 1 or n_workers < 1:
        raise ValueError("bad arguments")
    return float(n_workers)
''',
        "serial and parallel fractions swapped": '''
def amdahl_speedup(parallel_fraction, n_workers):
    if not 0 <= parallel_fraction <= 1 or n_workers < 1:
        raise ValueError("bad arguments")
    return 1 / (parallel_fraction + (1 - parallel_fraction) / n_workers)
''',
        "no argument checks": '''
def amdahl_speedup(parallel_fraction, n_workers):
    return 1 / ((1 - parallel_fraction) + parallel_fraction / n_workers)
''',
    },
    "fit_serial_fraction": {
        "returns the parallel fraction": '''
import numpy as np
def fit_serial_fraction(workers, speedups):
    n, s = np.asarray(workers, float), np.asarray(speedups, float)
    if n.size == 0 or n.shape != s.shape or (n < 1).any() or (s <= 0).any():
        raise ValueError("bad input")
    a, b = 1 / s - 1 / n, 1 - 1 / n
    return float(1 - np.clip(a @ b / (b @ b), 0, 1))
''',
        "averages per-point estimates including n = 1": '''
import numpy as np
def fit_serial_fraction(workers, speedups):
    n, s = np.asarray(workers, float), np.asarray(speedups, float)
    if n.size == 0 or n.shape != s.shape or (n < 1).any() or (s <= 0).any():
        raise ValueError("bad input")
    with np.errstate(divide="ignore", invalid="ignore"):
        est = np.nan_to_num((1 / s - 1 / n) / (1 - 1 / n))
    return float(np.clip(est.mean(), 0, 1))
''',
        "no input checks": '''
import numpy as np
def fit_serial_fraction(workers, speedups):
    n, s = np.asarray(workers, float), np.asarray(speedups, float)
    m = min(n.size, s.size)
    n, s = n[:m], s[:m]
    a, b = 1 / s - 1 / n, 1 - 1 / n
    return float(np.clip(a @ b / (b @ b), 0, 1)) if m else 0.0
''',
        "clipped below only: slowdowns give a fraction above 1": '''
import numpy as np


def fit_serial_fraction(workers: list, speedups: list) -> float:
    """Least squares, all checks, but clipped only below: slowdowns give a 'fraction' above 1."""
    n = np.asarray(workers, dtype=float)
    s = np.asarray(speedups, dtype=float)
    if n.size == 0 or n.shape != s.shape:
        raise ValueError("workers and speedups must be non-empty lists of the same length")
    if np.any(n < 1):
        raise ValueError("every worker count must be at least 1")
    if np.any(s <= 0):
        raise ValueError("every speedup must be positive")
    if not np.any(n > 1):
        raise ValueError("need at least one measurement with more than one worker")
    a = 1.0 / s - 1.0 / n
    b = 1.0 - 1.0 / n
    return max(0.0, float(np.dot(a, b) / np.dot(b, b)))
''',
        "no error when no point has more than one worker": '''
import numpy as np


def fit_serial_fraction(workers: list, speedups: list) -> float:
    """Least squares on 1/S - 1/n = s (1 - 1/n); forgets 'no point with more than one worker'."""
    if len(workers) != len(speedups) or len(workers) == 0:
        raise ValueError("workers and speedups must be non-empty lists of the same length")
    n = np.asarray(workers, dtype=float)
    s = np.asarray(speedups, dtype=float)
    if np.any(n < 1):
        raise ValueError("every worker count must be at least 1")
    if np.any(s <= 0):
        raise ValueError("every speedup must be positive")
    a = 1.0 / s - 1.0 / n
    b = 1.0 - 1.0 / n
    return float(np.clip(np.dot(a, b) / np.dot(b, b), 0.0, 1.0))
''',
        "a speedup of 0 accepted (< 0 instead of <= 0)": _FIT_LETTING_ZERO_THROUGH,
        "one point with several workers refused": '''
import numpy as np

def fit_serial_fraction(workers: list, speedups: list) -> float:
    n = np.asarray(workers, dtype=float)
    s = np.asarray(speedups, dtype=float)
    if n.ndim != 1 or n.size < 2 or n.shape != s.shape:
        raise ValueError("need at least two points, lists of the same length")
    if np.any(n < 1) or np.any(s <= 0):
        raise ValueError("bad worker count or speedup")
    if not np.any(n > 1):
        raise ValueError("need a point with more than one worker")
    a, b = 1 / s - 1 / n, 1 - 1 / n
    return float(np.clip(a @ b / (b @ b), 0.0, 1.0))
''',
        "only a worker count of 0 refused (a negative one taken)": variant(
            _FIT_LETTING_ZERO_THROUGH, ("rejects negative speedups but lets a speedup of 0 through (< instead of <=)",
                                        "refuses a worker count of 0 but not a negative one"),
            ("if any(w < 1 for w in workers):", "if 0 in workers:"),
            ("if any(x < 0 for x in speedups):", "if any(x <= 0 for x in speedups):")),
    },
    "generate_trajectories": {
        "the trajectories stacked into one array (np.array: a 3-D array, not a list)": variant(
            _TRAJECTORIES_CHUNKED, ("return pool.map(trajectory, children, chunksize=max(1, math.ceil(n / n_workers)))",
                                    "return np.array(pool.map(trajectory, children, chunksize=max(1, math.ceil(n / n_workers))))")),
        "calls the serial reference": '''
from helpers.ode import serial_trajectories
def generate_trajectories(n, n_workers, seed):
    if n < 0 or n_workers < 1:
        raise ValueError("bad arguments")
    return serial_trajectories(n, seed)
''',
        "one seed per worker (depends on n_workers)": '''
import numpy as np
from helpers.ode import solve
from helpers.workers import mp_context
def generate_trajectories(n, n_workers, seed):
    if n < 0 or n_workers < 1:
        raise ValueError("bad arguments")
    rngs = np.random.default_rng(seed).spawn(n_workers)
    shares = [len(range(i, n, n_workers)) for i in range(n_workers)]
    starts = [r.random((k, 10)) for r, k in zip(rngs, shares)]
    with mp_context().Pool(n_workers) as pool:
        return pool.map(solve, [x for block in starts for x in block])
''',
        "idle processes started and joined, the serial reference called in the caller": '''
from helpers.ode import serial_trajectories
from helpers.workers import mp_context
import os
def generate_trajectories(n, n_workers, seed):
    if n < 0 or n_workers < 1:
        raise ValueError("bad arguments")
    ps = [mp_context().Process(target=os.getpid) for _ in range(n_workers)]
    for p in ps: p.start()
    for p in ps: p.join()
    return serial_trajectories(n, seed)
''',
        "per-worker lists not concatenated": '''
import numpy as np
from helpers.ode import trajectory
from helpers.workers import mp_context
def generate_trajectories(n, n_workers, seed):
    if n < 0 or n_workers < 1:
        raise ValueError("bad arguments")
    children = np.random.SeedSequence(seed).spawn(n)
    with mp_context().Pool(n_workers) as pool:
        out = pool.map(trajectory, children)
    return [out[i::n_workers] for i in range(n_workers)]
''',
        "the seeds' version: global RNG in forked workers": '''
import multiprocessing
import numpy as np
from helpers.ode import solve
def _starts(k):
    return [np.random.random(10) for _ in range(k)]
def generate_trajectories(n, n_workers, seed):
    if n < 0 or n_workers < 1:
        raise ValueError("bad arguments")
    np.random.seed(seed)
    with multiprocessing.get_context("fork").Pool(n_workers) as pool:
        blocks = pool.map(_starts, [n // n_workers] * n_workers)
        return pool.map(solve, [x for b in blocks for x in b])
''',
        "chunksize n // n_workers: 0, and Nones, for fewer trajectories than workers": variant(
            _TRAJECTORIES_CHUNKED, ("chunksize=max(1, math.ceil(n / n_workers))", "chunksize=n // n_workers")),
        "the whole serial reference in one worker, an idle process beside it": '''
import time
from concurrent.futures import ProcessPoolExecutor
from helpers.ode import serial_trajectories
from helpers.workers import mp_context
def generate_trajectories(n, n_workers, seed):
    if n < 0 or n_workers < 1:
        raise ValueError("bad arguments")
    if n == 0:
        return []
    idle = mp_context().Process(target=time.sleep, args=(0.05,))  # a second process start
    idle.start()
    with ProcessPoolExecutor(max_workers=1, mp_context=mp_context()) as ex:  # n_workers ignored
        out = ex.submit(serial_trajectories, n, seed).result()
    idle.join()
    return list(out)
''',
    },
}

_EXECUTOR_MAP = '''
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context
def parallel_map(fn, items, n_workers, chunksize=None):
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    if chunksize is not None and chunksize < 1:
        raise ValueError(f"chunksize must be >= 1, got {chunksize}")
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as ex:
        return list(ex.map(fn, items, chunksize=chunksize or 1))
'''

_EXECUTOR_STARMAP = '''
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context
def parallel_starmap(fn, arg_tuples, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    arg_tuples = list(arg_tuples)
    if not arg_tuples:
        return []
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as ex:
        return list(ex.map(fn, *zip(*arg_tuples)))
'''

ALTERNATIVE = {
    "parallel_map": {
        "ProcessPoolExecutor.map": _EXECUTOR_MAP,
        "ProcessPoolExecutor.map, the results as a tuple": variant(_EXECUTOR_MAP, ("return list(ex.map(", "return tuple(ex.map(")),
        "imap with an explicit default chunk size": '''
import math
from helpers.workers import mp_context
def parallel_map(fn, items, n_workers, chunksize=None):
    if n_workers < 1 or (chunksize is not None and chunksize < 1):
        raise ValueError("n_workers and chunksize must be positive")
    items = list(items)
    size = chunksize or max(1, math.ceil(len(items) / (4 * n_workers)))
    with mp_context().Pool(n_workers) as pool:
        return list(pool.imap(fn, items, size))
''',
        "a forkserver context asked for by name": '''
import multiprocessing


def parallel_map(fn, items, n_workers: int, chunksize: int | None = None) -> list:
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    if chunksize is not None and chunksize < 1:
        raise ValueError(f"chunksize must be at least 1, got {chunksize}")
    with multiprocessing.get_context("forkserver").Pool(n_workers) as pool:
        return pool.map(fn, list(items), chunksize=chunksize)
''',
    },
    "parallel_starmap": {
        "executor.map over unzipped arguments": _EXECUTOR_STARMAP,
        "executor.map over unzipped arguments, the results as a tuple": variant(
            _EXECUTOR_STARMAP, ("return []", "return ()"), ("return list(ex.map(", "return tuple(ex.map(")),
    },
    "robust_map": {
        "apply_async with error callbacks": '''
from helpers.workers import mp_context
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    with mp_context().Pool(n_workers) as pool:
        pending = [pool.apply_async(fn, (x,)) for x in items]
        out = []
        for p in pending:
            try:
                out.append((True, p.get(timeout=60)))
            except Exception as err:
                out.append((False, err))
    return out
''',
        "futures list, sorted afterwards": '''
from concurrent.futures import ProcessPoolExecutor, as_completed
from helpers.workers import mp_context
def robust_map(fn, items, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    done = []
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context()) as ex:
        futures = [ex.submit(fn, x) for x in items]
        position = {f: i for i, f in enumerate(futures)}
        for f in as_completed(futures):
            err = f.exception()
            done.append((position[f], (False, err) if err is not None else (True, f.result())))
    return [r for _, r in sorted(done, key=lambda t: t[0])]
''',
        # From the twentieth review's named tuples: failed until the checks read a tuple subclass item by item.
        "a named tuple (ok, value) per item": '''
from collections import namedtuple
from concurrent.futures import ProcessPoolExecutor, as_completed

from helpers.workers import mp_context

Outcome = namedtuple("Outcome", "ok value")


def robust_map(fn, items, n_workers: int) -> list:
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    items = list(items)
    out = [None] * len(items)
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context()) as executor:
        index_of = {executor.submit(fn, item): i for i, item in enumerate(items)}
        for future in as_completed(index_of):
            try:
                out[index_of[future]] = Outcome(True, future.result())
            except Exception as error:
                out[index_of[future]] = Outcome(False, error)
    return out
''',
    },
    "monte_carlo_pi": {
        "Generator.spawn, executor, last worker takes the remainder": '''
import numpy as np
from concurrent.futures import ProcessPoolExecutor
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("n_samples and n_workers must be positive")
    base = n_samples // n_workers
    shares = [base] * (n_workers - 1) + [n_samples - base * (n_workers - 1)]
    gens = np.random.default_rng(seed).spawn(n_workers)
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as ex:
        hits = sum(ex.map(count_inside, shares, gens))
    return 4 * hits / n_samples
''',
        "samples rounded down to a multiple of n_workers": '''
import numpy as np
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("bad arguments")
    each = max(1, n_samples // n_workers)
    with mp_context().Pool(n_workers) as pool:
        hits = pool.starmap(count_inside, [(each, [seed, i]) for i in range(n_workers)])
    return 4 * sum(hits) / (each * n_workers)
''',
        "an executor per size, kept from earlier calls": '''
import atexit
import numpy as np
from concurrent.futures import ProcessPoolExecutor
from helpers.pools import count_inside
from helpers.workers import mp_context
_POOLS = {}  # n_workers -> executor, started once and reused
def _pool(n_workers):
    if n_workers not in _POOLS:
        _POOLS[n_workers] = ProcessPoolExecutor(n_workers, mp_context=mp_context())
        atexit.register(_POOLS[n_workers].shutdown)
    return _POOLS[n_workers]
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("n_samples and n_workers must be positive")
    base = n_samples // n_workers
    shares = [base] * (n_workers - 1) + [n_samples - base * (n_workers - 1)]
    return 4 * sum(_pool(n_workers).map(count_inside, shares, np.random.default_rng(seed).spawn(n_workers))) / n_samples
for _n in (1, 2):  # as earlier calls (the visible test) would have
    monte_carlo_pi(1000, _n, 0)
''',
        "fixed-size tasks, one spawned seed per task": '''
import numpy as np

from helpers.pools import count_inside
from helpers.workers import mp_context

CHUNK = 50_000


def monte_carlo_pi(n_samples: int, n_workers: int, seed: int) -> float:
    """Tasks of 50,000 points, one spawned seed per task (section 7's fix), shared by n_workers processes."""
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    shares = [CHUNK] * (n_samples // CHUNK) + ([n_samples % CHUNK] if n_samples % CHUNK else [])
    seeds = np.random.SeedSequence(seed).spawn(len(shares))
    with mp_context().Pool(n_workers) as pool:
        hits = sum(pool.starmap(count_inside, zip(shares, seeds)))
    return 4 * hits / n_samples
''',
        "joblib Parallel, one spawned seed per worker": '''
import numpy as np
from joblib import Parallel, delayed

from helpers.pools import count_inside


def monte_carlo_pi(n_samples: int, n_workers: int, seed: int) -> float:
    """joblib (loky processes), one spawned seed per worker, remainder spread."""
    if n_samples < 1:
        raise ValueError(f"n_samples must be at least 1, got {n_samples}")
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    shares = [n_samples // n_workers + (1 if i < n_samples % n_workers else 0) for i in range(n_workers)]
    seeds = np.random.SeedSequence(seed).spawn(n_workers)
    hits = Parallel(n_jobs=n_workers)(delayed(count_inside)(m, s) for m, s in zip(shares, seeds))
    return 4.0 * sum(hits) / n_samples
''',
    },
    "amdahl_speedup": {
        "via the serial fraction": '''
def amdahl_speedup(parallel_fraction, n_workers):
    if parallel_fraction < 0 or parallel_fraction > 1:
        raise ValueError("parallel_fraction must lie in [0, 1]")
    if n_workers < 1:
        raise ValueError("n_workers must be >= 1")
    serial = 1 - parallel_fraction
    return n_workers / (serial * n_workers + parallel_fraction)
''',
    },
    "fit_serial_fraction": {
        "scipy curve_fit on the speedups": '''
import numpy as np
from scipy.optimize import curve_fit
def fit_serial_fraction(workers, speedups):
    n, s = np.asarray(workers, float), np.asarray(speedups, float)
    if n.size == 0 or n.shape != s.shape:
        raise ValueError("workers and speedups must be non-empty and of equal length")
    if (n < 1).any() or (s <= 0).any() or not (n > 1).any():
        raise ValueError("invalid measurements")
    (f,), _ = curve_fit(lambda k, f: 1 / (f + (1 - f) / k), n, s, p0=[0.3], bounds=(0, 1))
    return float(f)
''',
        "bounded minimize_scalar at its default tolerance": '''
import numpy as np
from scipy.optimize import minimize_scalar


def fit_serial_fraction(workers, speedups):
    n = np.asarray(workers, dtype=float)
    S = np.asarray(speedups, dtype=float)
    if n.ndim != 1 or n.size == 0 or n.shape != S.shape:
        raise ValueError("workers and speedups must be non-empty lists of the same length")
    if np.any(n < 1) or np.any(S <= 0):
        raise ValueError("worker counts must be >= 1 and speedups positive")
    if not np.any(n > 1):
        raise ValueError("need a point with more than one worker")

    def sse(s):  # least squares on the speedups themselves, s in [0, 1]
        return float(np.sum((S - 1.0 / (s + (1.0 - s) / n)) ** 2))

    return float(minimize_scalar(sse, bounds=(0.0, 1.0), method="bounded").x)
''',
    },
    "generate_trajectories": {
        "one contiguous chunk per worker": _TRAJECTORIES_CHUNKED,
        "ProcessPoolExecutor over the seeds": '''
import numpy as np
from concurrent.futures import ProcessPoolExecutor
from helpers.ode import trajectory
from helpers.workers import mp_context
def generate_trajectories(n, n_workers, seed):
    if n < 0 or n_workers < 1:
        raise ValueError("invalid arguments")
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as ex:
        return list(ex.map(trajectory, np.random.SeedSequence(seed).spawn(n), chunksize=2))
''',
        "joblib Parallel over the spawned seeds": '''
import numpy as np
from joblib import Parallel, delayed

from helpers.ode import trajectory


def generate_trajectories(n: int, n_workers: int, seed: int) -> list:
    """joblib (loky processes) over the n spawned seeds."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    children = np.random.SeedSequence(seed).spawn(n)
    return Parallel(n_jobs=n_workers)(delayed(trajectory)(c) for c in children)
''',
    },
}

PARTIAL = {
    "robust_map": "pool.map: one failure loses everything",
    "fit_serial_fraction": None,
    "parallel_map": None,
    "parallel_starmap": None,
}
