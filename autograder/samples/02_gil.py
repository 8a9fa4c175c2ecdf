"""Wrong and alternative answers of 02_gil (see autograder/samples/__init__.py)."""
from autograder.samples import WITNESS_HELPER, variant

# Threads of the calling process run the calls, results in order: what the forged answers start from.
_IN_THREADS = """
import threading
def _in_threads(fn, args_list):
    results = [None] * len(args_list)
    def call(i, args):
        results[i] = fn(*args)
    threads = [threading.Thread(target=call, args=(i, a)) for i, a in enumerate(args_list)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
"""

# A Process per call, its target defined in the notebook: a spawned child cannot import it.
_RUN_ONE_IN_THE_NOTEBOOK = '''
from helpers.workers import mp_context


def run_one(queue, i, fn, args):
    queue.put((i, fn(*args)))


def run_processes(fn, args_list):
    ctx = mp_context()
    queue = ctx.Queue()
    procs = [ctx.Process(target=run_one, args=(queue, i, fn, tuple(a))) for i, a in enumerate(args_list)]
    for p in procs:
        p.start()
    results = dict(queue.get() for _ in procs)
    for p in procs:
        p.join()
    return [results[i] for i in range(len(args_list))]
'''

# Exercise 2 done as the notebook asks, for wrong answers that differ from it by a line or two.
_GIL_EXPERIMENT = '''
import threading
import time

from helpers.gil import draw_randoms, wait
from helpers.workers import mp_context


def gil_experiment(n_workers, work):
    if n_workers < 1 or work < 1:
        raise ValueError("n_workers and work must be at least 1")
    shares = [work // n_workers + (i < work % n_workers) for i in range(n_workers)]

    def timed(make, target, args_each):
        made = [make(target=target, args=args) for args in args_each]
        start = time.perf_counter()
        for each in made:
            each.start()
        for each in made:
            each.join()
        return time.perf_counter() - start

    seconds = {}
    start = time.perf_counter()
    draw_randoms(work)
    seconds["serial"] = time.perf_counter() - start
    seconds["threads"] = timed(threading.Thread, draw_randoms, [(s,) for s in shares])
    seconds["processes"] = timed(mp_context().Process, draw_randoms, [(s,) for s in shares])
    start = time.perf_counter()
    for _ in range(n_workers):
        wait(0.05)
    seconds["io_serial"] = time.perf_counter() - start
    seconds["io_threads"] = timed(threading.Thread, wait, [(0.05,)] * n_workers)
    return seconds
'''

_TWO_LISTS = '''
CPU = ["estimate pi with random.random() in a Python loop", "sort a list of 10 million Python tuples",
       "find primes below 10 million with a pure-Python sieve", "train a decision tree written in pure Python"]
IO = ["download 200 web pages", "read 1,000 files from a network drive",
      "wait for replies to 50 database queries", "poll a web API every second for new results",
      "wait for a GPU kernel to finish (torch.cuda.synchronize)"]
WORKLOAD_KIND = {**{t: "cpu" for t in CPU}, **{t: "io" for t in IO}}
'''
_KINDS_LINE = 'WORKLOAD_KIND = {**{t: "cpu" for t in CPU}, **{t: "io" for t in IO}}'
_KIND_CLASS = '''from enum import Enum, StrEnum
class Kind({bases}):
    CPU = "cpu"
    IO = "io"
'''
_KIND_MEMBERS = 'WORKLOAD_KIND = {**{t: Kind.CPU for t in CPU}, **{t: Kind.IO for t in IO}}'

WRONG = {
    "run_threads": {
        "serial calls": '''
def run_threads(fn, args_list):
    return [fn(*args) for args in args_list]
''',
        "results in completion order": '''
import threading
def run_threads(fn, args_list):
    results = []
    ts = [threading.Thread(target=lambda a=a: results.append(fn(*a))) for a in args_list]
    for t in ts: t.start()
    for t in ts: t.join()
    return results
''',
        "each thread joined before the next starts": '''
import threading
def run_threads(fn, args_list):
    results = [None] * len(args_list)
    for i, a in enumerate(args_list):
        t = threading.Thread(target=lambda i=i, a=a: results.__setitem__(i, fn(*a)))
        t.start(); t.join()
    return results
''',
        "a pool of 2 threads": '''
from concurrent.futures import ThreadPoolExecutor
def run_threads(fn, args_list):
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda a: fn(*a), args_list))
''',
        "one lock around every call": '''
import threading
_TURN = threading.Lock()
def run_threads(fn, args_list):
    results = [None] * len(args_list)
    def call(i, args):
        with _TURN:                      # the threads take turns: no two calls overlap
            results[i] = fn(*args)
    ts = [threading.Thread(target=call, args=(i, a)) for i, a in enumerate(args_list)]
    for t in ts: t.start()
    for t in ts: t.join()
    return results
''',
        "an empty list not handled": '''
from concurrent.futures import ThreadPoolExecutor


def run_threads(fn, args_list) -> list:
    """[fn(*args) for args in args_list], each call in its own thread, all at once."""
    with ThreadPoolExecutor(max_workers=len(args_list)) as pool:
        futures = [pool.submit(fn, *args) for args in args_list]
        return [f.result() for f in futures]
''',
        "one call for tuples that repeat": '''
import threading


def run_threads(fn, args_list) -> list:
    """[fn(*args) for args in args_list], each call in its own thread, all at once."""
    ### BEGIN SOLUTION
    uniq = list(dict.fromkeys(tuple(a) for a in args_list))
    got = {}
    def call1(a):
        got[a] = fn(*a)
    ts = [threading.Thread(target=call1, args=(a,)) for a in uniq]
    [t.start() for t in ts]; [t.join() for t in ts]
    return [got[tuple(a)] for a in args_list]
    results = [None] * len(args_list)

    def call(index, args):
        results[index] = fn(*args)

    threads = [threading.Thread(target=call, args=(i, tuple(args))) for i, args in enumerate(args_list)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
    ### END SOLUTION
''',
    },
    "run_processes": {
        # Read the checks, then forge: threads run the calls while idle processes are started
        # (the kernel sees them start, the judge sees them alive), and the pids are rewritten.
        "threads; the pids forged for idle processes started meanwhile": _IN_THREADS + '''
import os, time
from helpers.workers import mp_context
def run_processes(fn, args_list):
    args_list = list(args_list)
    idle = [mp_context().Process(target=time.sleep, args=(600,), daemon=True) for _ in args_list]
    for p in idle:
        p.start()
    results = _in_threads(fn, args_list)
    for p in idle:
        p.kill()
        p.join()
    return [{**r, "pid": p.pid} if type(r) is dict and r.get("pid") == os.getpid() else r
            for r, p in zip(results, idle)]
''',
        # The same, with the witnesses forged too: each process started meanwhile starts a thread on
        # request and reports its kernel id, which the result then names. What remains is the
        # calls' work (a puzzle each), done by threads of the caller, whose CPU the judge reads.
        "threads; the pids and witnesses forged by processes started meanwhile": _IN_THREADS + WITNESS_HELPER + '''
import os
from helpers.workers import start_method
def run_processes(fn, args_list):
    args_list = list(args_list)
    helpers = [_WitnessHelper(start_method()) for _ in args_list]
    results = _in_threads(fn, args_list)
    forged = [{**r, "pid": h.pid, "witness": h.witness()} if type(r) is dict and r.get("pid") == os.getpid() else r
              for r, h in zip(results, helpers)]
    for h in helpers:
        h.stop()
    return forged
''',
        "serial calls": '''
def run_processes(fn, args_list):
    return [fn(*args) for args in args_list]
''',
        "threads instead of processes": '''
from concurrent.futures import ThreadPoolExecutor
def run_processes(fn, args_list):
    if not args_list:
        return []
    with ThreadPoolExecutor(len(args_list)) as pool:
        return [f.result() for f in [pool.submit(fn, *a) for a in args_list]]
''',
        "results in completion order": '''
from concurrent.futures import ProcessPoolExecutor, as_completed
from helpers.workers import mp_context
def run_processes(fn, args_list):
    if not args_list:
        return []
    with ProcessPoolExecutor(len(args_list), mp_context=mp_context()) as pool:
        return [f.result() for f in as_completed([pool.submit(fn, *a) for a in args_list])]
''',
        "one process for all calls": '''
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context
def run_processes(fn, args_list):
    with ProcessPoolExecutor(1, mp_context=mp_context()) as pool:
        return [f.result() for f in [pool.submit(fn, *a) for a in args_list]]
''',
        "a helper defined in the notebook, run by a ProcessPoolExecutor (breaks under spawn)": '''
from concurrent.futures import ProcessPoolExecutor

from helpers.workers import mp_context


def _call(packed):
    """a helper defined in the notebook: unpicklable in spawned workers"""
    fn, args = packed
    return fn(*args)


def run_processes(fn, args_list) -> list:
    if not args_list:
        return []
    with ProcessPoolExecutor(max_workers=len(args_list), mp_context=mp_context()) as pool:
        return list(pool.map(_call, [(fn, tuple(a)) for a in args_list]))
''',
        "a helper defined in the notebook, run by a Pool (its spawned workers die; map waits)": '''
from helpers.workers import mp_context


def call_one(packed):
    fn, args = packed
    return fn(*args)


def run_processes(fn, args_list):
    if not args_list:
        return []
    with mp_context().Pool(len(args_list)) as pool:
        return pool.map(call_one, [(fn, tuple(a)) for a in args_list], chunksize=1)
''',
        "a Process per call whose target is defined in the notebook, results through a Queue": _RUN_ONE_IN_THE_NOTEBOOK,
        "a Process per call whose target is defined in the notebook, the context made once at the top of the cell": variant(
            _RUN_ONE_IN_THE_NOTEBOOK, ("from helpers.workers import mp_context\n", "from helpers.workers import mp_context\nctx = mp_context()\n"),
            ("    ctx = mp_context()\n", "")),
        "a pool of len(args_list) processes, no case for an empty list": '''
from concurrent.futures import ProcessPoolExecutor

from helpers.workers import mp_context


def run_processes(fn, args_list) -> list:
    """[fn(*args) for args in args_list], each call in its own process, all at once."""
    with ProcessPoolExecutor(max_workers=len(args_list), mp_context=mp_context()) as pool:
        futures = [pool.submit(fn, *args) for args in args_list]
        return [future.result() for future in futures]
''',
        "one call for tuples that repeat": '''
from concurrent.futures import ProcessPoolExecutor

from helpers.workers import mp_context


def run_processes(fn, args_list) -> list:
    """[fn(*args) for args in args_list], each call in its own process, all at once."""
    ### BEGIN SOLUTION
    if not args_list:
        return []
    with ProcessPoolExecutor(max_workers=len(args_list), mp_context=mp_context()) as pool:
        uniq = list(dict.fromkeys(tuple(a) for a in args_list))
        futures = {a: pool.submit(fn, *a) for a in uniq}
        return [futures[tuple(a)].result() for a in args_list]
    ### END SOLUTION
''',
    },
    "gil_experiment": {
        "threads take turns on one lock": '''
import threading, time
from helpers.gil import draw_randoms, wait
from helpers.workers import mp_context
_TURN = threading.Lock()
def _in_turn(fn, *args):
    with _TURN:                          # no two thread tasks overlap, waits included
        fn(*args)
def gil_experiment(n_workers, work):
    if n_workers < 1 or work < 1:
        raise ValueError("bad arguments")
    def timed(make, target, args_each):
        t = time.perf_counter()
        ws = [make(target=target, args=a) for a in args_each]
        for w in ws: w.start()
        for w in ws: w.join()
        return time.perf_counter() - t
    share = [(work // n_workers,)] * n_workers
    t = time.perf_counter(); draw_randoms(work); serial = time.perf_counter() - t
    out = {"serial": serial,
           "threads": timed(threading.Thread, _in_turn, [(draw_randoms,) + a for a in share]),
           "processes": timed(mp_context().Process, draw_randoms, share)}
    t = time.perf_counter()
    for _ in range(n_workers): wait(0.05)
    out["io_serial"] = time.perf_counter() - t
    out["io_threads"] = timed(threading.Thread, _in_turn, [(wait, 0.05)] * n_workers)
    return out
''',
        "hard-coded times": '''
def gil_experiment(n_workers, work):
    if n_workers < 1 or work < 1:
        raise ValueError("bad arguments")
    return {"serial": 1.0, "threads": 1.0, "processes": 0.5, "io_serial": 0.2, "io_threads": 0.05}
''',
        "everything serial": '''
import time
from helpers.gil import draw_randoms, wait
def gil_experiment(n_workers, work):
    if n_workers < 1 or work < 1:
        raise ValueError("bad arguments")
    out = {}
    for key in ("serial", "threads", "processes"):
        t = time.perf_counter(); draw_randoms(work); out[key] = time.perf_counter() - t
    for key in ("io_serial", "io_threads"):
        t = time.perf_counter()
        for _ in range(n_workers): wait(0.05)
        out[key] = time.perf_counter() - t
    return out
''',
        # Read the checks, then forge: no experiment at all. The times are made up as fractions of
        # the call's own duration (so that each fits in it), while processes only spin (the judge
        # sees children busy in parallel) and threads only sleep (it sees them alive at once).
        "made-up times while processes spin and threads sleep": '''
import threading, time
from helpers.workers import mp_context
def _spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def gil_experiment(n_workers, work):
    if n_workers < 1 or work < 1:
        raise ValueError("bad arguments")
    start = time.perf_counter()
    sleepers = [threading.Thread(target=time.sleep, args=(0.2,)) for _ in range(2 * n_workers)]
    for t in sleepers:
        t.start()
    spinners = [mp_context().Process(target=_spin, args=(0.4,)) for _ in range(n_workers)]
    for p in spinners:
        p.start()
    for p in spinners:
        p.join()
    for t in sleepers:
        t.join()
    wall = time.perf_counter() - start
    return {"io_serial": n_workers * 0.05, "io_threads": 0.05,
            "serial": 0.3 * wall, "threads": 0.3 * wall, "processes": 0.15 * wall}
''',
        "io_threads joined one by one": '''
import threading, time
from helpers.gil import draw_randoms, wait
from helpers.workers import mp_context
def gil_experiment(n_workers, work):
    if n_workers < 1 or work < 1:
        raise ValueError("bad arguments")
    def timed(make, target, args_each, one_by_one=False):
        t = time.perf_counter()
        ws = [make(target=target, args=a) for a in args_each]
        for w in ws:
            w.start()
            if one_by_one: w.join()
        for w in ws: w.join()
        return time.perf_counter() - t
    share = [(work // n_workers,)] * n_workers
    t = time.perf_counter(); draw_randoms(work); serial = time.perf_counter() - t
    out = {"serial": serial, "threads": timed(threading.Thread, draw_randoms, share),
           "processes": timed(mp_context().Process, draw_randoms, share)}
    t = time.perf_counter()
    for _ in range(n_workers): wait(0.05)
    out["io_serial"] = time.perf_counter() - t
    out["io_threads"] = timed(threading.Thread, wait, [(0.05,)] * n_workers, one_by_one=True)
    return out
''',
        "the processes' target defined in the notebook (its spawned children die)": variant(
            _GIL_EXPERIMENT, ("mp_context().Process, draw_randoms,", "mp_context().Process, share_in_process,")) + '''

def share_in_process(n):
    draw_randoms(n)   # defined in the notebook: a spawned child cannot import it
''',
        "each thread and process given all of work, not a share": variant(
            _GIL_EXPERIMENT, ("threading.Thread, draw_randoms, [(s,) for s in shares]",
                              "threading.Thread, draw_randoms, [(work,)] * n_workers"),
            ("mp_context().Process, draw_randoms, [(s,) for s in shares]",
             "mp_context().Process, draw_randoms, [(work,)] * n_workers")),
        "the CPU threads started and joined one after another": variant(
            _GIL_EXPERIMENT, ('    seconds["threads"] = timed(threading.Thread, draw_randoms, [(s,) for s in shares])\n', '''    start = time.perf_counter()
    for s in shares:                               # one thread at a time: never two at once
        t = threading.Thread(target=draw_randoms, args=(s,))
        t.start()
        t.join()
    seconds["threads"] = time.perf_counter() - start
''')),
        "the processes started and joined one after another": variant(
            _GIL_EXPERIMENT, ('    seconds["processes"] = timed(mp_context().Process, draw_randoms, [(s,) for s in shares])\n', '''    start = time.perf_counter()
    for s in shares:                               # one process at a time: never two at once
        p = mp_context().Process(target=draw_randoms, args=(s,))
        p.start()
        p.join()
    seconds["processes"] = time.perf_counter() - start
''')),
        "only a work of 0 refused (a negative one taken)": variant(
            _GIL_EXPERIMENT, ("if n_workers < 1 or work < 1:", "if n_workers < 1 or work == 0:")),
    },
    "numpy_threads_speedup": {
        "one lock around every chunk": '''
import threading, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from helpers.gil import numpy_chunk
_TURN = threading.Lock()
def numpy_threads_speedup(n, n_threads):
    if n < 1 or n_threads < 1:
        raise ValueError("bad arguments")
    parts = np.array_split(np.random.default_rng(0).random(n), n_threads)
    def locked_chunk(p):
        with _TURN:                      # the threads take turns: no two chunks overlap
            return numpy_chunk(p)
    def best(fn):
        times = []
        for _ in range(3):
            t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
        return min(times)
    with ThreadPoolExecutor(n_threads) as pool:
        threaded = best(lambda: list(pool.map(locked_chunk, parts)))
    return best(lambda: [numpy_chunk(p) for p in parts]) / threaded
''',
        "hard-coded speedup": '''
def numpy_threads_speedup(n, n_threads):
    if n < 1 or n_threads < 1:
        raise ValueError("bad arguments")
    return float(min(n_threads, 2))
''',
        # Read the checks, then forge: a typed-in speedup, while two threads burn CPU outside the
        # GIL for a moment, so that the process looks busy on two cores; no job is ever timed.
        "a typed-in speedup while threads burn CPU": '''
import threading, time
import numpy as np
def numpy_threads_speedup(n, n_threads):
    if n < 1 or n_threads < 1:
        raise ValueError("bad arguments")
    x = np.random.default_rng(0).random(1_000_000)
    stop = threading.Event()
    def burn():
        while not stop.is_set():
            np.sqrt(x * x + 1.0)
    threads = [threading.Thread(target=burn) for _ in range(max(2, n_threads))]
    for t in threads:
        t.start()
    time.sleep(0.3)
    stop.set()
    for t in threads:
        t.join()
    return 1.5
''',
        "no threads at all": '''
import time
import numpy as np
from helpers.gil import numpy_chunk
def numpy_threads_speedup(n, n_threads):
    if n < 1 or n_threads < 1:
        raise ValueError("bad arguments")
    parts = np.array_split(np.random.default_rng(0).random(n), n_threads)
    t = time.perf_counter(); [numpy_chunk(p) for p in parts]; a = time.perf_counter() - t
    t = time.perf_counter(); [numpy_chunk(p) for p in parts]; b = time.perf_counter() - t
    return a / b
''',
        "accepts zero threads": '''
import time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from helpers.gil import numpy_chunk
def numpy_threads_speedup(n, n_threads):
    n_threads = max(n_threads, 1)
    parts = np.array_split(np.random.default_rng(0).random(max(n, 1)), n_threads)
    t = time.perf_counter(); [numpy_chunk(p) for p in parts]; serial = time.perf_counter() - t
    with ThreadPoolExecutor(n_threads) as pool:
        t = time.perf_counter(); list(pool.map(numpy_chunk, parts)); threaded = time.perf_counter() - t
    return serial / threaded
''',
        "the serial time of all 3 repeats over the best threaded one (about 5.8)": '''
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from helpers.gil import numpy_chunk


def numpy_threads_speedup(n: int, n_threads: int) -> float:
    """WRONG QUANTITY: the serial time is the total of 3 runs, the threaded time the best of 3
    (about 3x too large a speedup)."""
    if n < 1 or n_threads < 1:
        raise ValueError("n and n_threads must be at least 1")
    parts = np.array_split(np.random.default_rng(0).random(n), n_threads)
    start = time.perf_counter()
    for _ in range(3):
        [numpy_chunk(p) for p in parts]
    serial = time.perf_counter() - start
    best = float("inf")
    with ThreadPoolExecutor(n_threads) as pool:
        for _ in range(3):
            start = time.perf_counter()
            list(pool.map(numpy_chunk, parts))
            best = min(best, time.perf_counter() - start)
    return serial / best
''',
    },
    "fetch_all": {
        "awaits one after another": '''
import asyncio
async def fetch_all(delays):
    out = []
    for d in delays:
        await asyncio.sleep(d)
        out.append(d)
    return out
''',
        "results in completion order": '''
import asyncio
async def fetch_all(delays):
    async def one(d):
        await asyncio.sleep(d)
        return d
    return [await f for f in asyncio.as_completed([one(d) for d in delays])]
''',
        "blocking sleep inside the coroutine": '''
import asyncio, time
async def fetch_all(delays):
    async def one(d):
        time.sleep(d)
        return d
    return list(await asyncio.gather(*(one(d) for d in delays)))
''',
        "not a coroutine function": '''
def fetch_all(delays):
    return list(delays)
''',
        "one asyncio.Lock around every request": '''
import asyncio
async def fetch_all(delays):
    turn = asyncio.Lock()
    async def fetch(d):
        async with turn:                 # the requests take turns: no two waits overlap
            await asyncio.sleep(d)
        return d
    return list(await asyncio.gather(*(fetch(d) for d in delays)))
''',
        "no wait at all: the delays handed back at once": '''
import asyncio


async def fetch_all(delays: list) -> list:
    """Simulate one request per delay, all at once; return the delays in input order."""
    return list(delays)
''',
        "one wait of the longest delay for every request": '''
import asyncio


async def fetch_all(delays: list) -> list:
    """One wait of the longest delay stands for all the requests."""
    await asyncio.sleep(max(delays, default=0))
    return list(delays)
''',
        "one wait of the longest delay, sleep imported by name": '''
from asyncio import sleep


async def fetch_all(delays: list) -> list:
    """One wait of the longest delay stands for all the requests (sleep imported by name)."""
    if delays:
        await sleep(max(delays))
    return list(delays)
''',
        "one wait of the longest delay, in a thread (time.sleep)": '''
import asyncio
import time


async def fetch_all(delays: list) -> list:
    """One blocking wait of the longest delay, in a worker thread, stands for all the requests."""
    if delays:
        await asyncio.to_thread(time.sleep, max(delays))
    return list(delays)
''',
        "a semaphore lets 3 requests through at a time": '''
import asyncio


async def fetch_all(delays: list) -> list:
    """WRONG: at most 3 requests in flight (a semaphore): not all awaited concurrently."""
    limit = asyncio.Semaphore(3)

    async def fetch(d):
        async with limit:
            await asyncio.sleep(d)
        return d

    return list(await asyncio.gather(*(fetch(d) for d in delays)))
''',
        "one request for delays that repeat": '''
import asyncio


async def fetch_all(delays: list) -> list:
    """Simulate one request per delay, all at once; return the delays in input order."""
    ### BEGIN SOLUTION
    async def fetch(delay):
        await asyncio.sleep(delay)
        return delay

    uniq = list(dict.fromkeys(delays))
    return list(await asyncio.gather(*(fetch(d) for d in uniq)))
    ### END SOLUTION
''',
    },
    "WORKLOAD_KIND": {
        "a str subclass equal to both kinds, holding '?'": variant(_TWO_LISTS, (_KINDS_LINE, '''class Kind(str):
    """Equal to "cpu" and to "io" alike (its str() says "io"): holds "?"."""
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = str.__hash__
    def __str__(self):
        return "io"
WORKLOAD_KIND = {t: Kind("?") for t in CPU + IO}''')),
        "an OrderedDict subclass holding cpu for every task, whose get() and values() give the right kinds": variant(
            _TWO_LISTS, (_KINDS_LINE, '''import collections
class Kinds(collections.OrderedDict):
    def values(self):
        return ["cpu", "io"]
    def get(self, task, default=None):
        return "io" if task in IO else "cpu"
WORKLOAD_KIND = Kinds((t, "cpu") for t in CPU + IO)''')),
        "everything cpu": '''
TASKS = ["download 200 web pages"]
WORKLOAD_KIND = {t: "cpu" for t in [
    "download 200 web pages", "estimate pi with random.random() in a Python loop",
    "read 1,000 files from a network drive", "sort a list of 10 million Python tuples",
    "wait for replies to 50 database queries", "find primes below 10 million with a pure-Python sieve",
    "poll a web API every second for new results", "train a decision tree written in pure Python",
    "wait for a GPU kernel to finish (torch.cuda.synchronize)"]}
''',
        "the GPU wait counted as CPU work": '''
WORKLOAD_KIND = {
    "download 200 web pages": "io",
    "estimate pi with random.random() in a Python loop": "cpu",
    "read 1,000 files from a network drive": "io",
    "sort a list of 10 million Python tuples": "cpu",
    "wait for replies to 50 database queries": "io",
    "find primes below 10 million with a pure-Python sieve": "cpu",
    "poll a web API every second for new results": "io",
    "train a decision tree written in pure Python": "cpu",
    "wait for a GPU kernel to finish (torch.cuda.synchronize)": "cpu",
}
''',
        "a task left out": '''
WORKLOAD_KIND = {"download 200 web pages": "io", "sort a list of 10 million Python tuples": "cpu"}
''',
        "other labels": '''
WORKLOAD_KIND = {
    "download 200 web pages": "I/O",
    "estimate pi with random.random() in a Python loop": "CPU",
    "read 1,000 files from a network drive": "I/O",
    "sort a list of 10 million Python tuples": "CPU",
    "wait for replies to 50 database queries": "I/O",
    "find primes below 10 million with a pure-Python sieve": "CPU",
    "poll a web API every second for new results": "I/O",
    "train a decision tree written in pure Python": "CPU",
    "wait for a GPU kernel to finish (torch.cuda.synchronize)": "I/O",
}
''',
    },
}

ALTERNATIVE = {
    "run_threads": {
        "ThreadPoolExecutor sized to the calls": '''
from concurrent.futures import ThreadPoolExecutor
def run_threads(fn, args_list):
    if not args_list:
        return []
    with ThreadPoolExecutor(max_workers=len(args_list)) as pool:
        futures = [pool.submit(fn, *args) for args in args_list]
    return [f.result() for f in futures]
''',
        "multiprocessing.dummy ThreadPool starmap": '''
from multiprocessing.dummy import Pool as ThreadPool
def run_threads(fn, args_list):
    if len(args_list) == 0:
        return []
    with ThreadPool(len(args_list)) as pool:
        return pool.starmap(fn, args_list, chunksize=1)
''',
    },
    "run_processes": {
        "multiprocessing Pool starmap, one worker per call": '''
from helpers.workers import mp_context
def run_processes(fn, args_list):
    if not args_list:
        return []
    with mp_context().Pool(len(args_list)) as pool:
        return pool.starmap(fn, args_list, chunksize=1)
''',
        "joblib with two workers at least, its pool reused from call to call": '''
from joblib import Parallel, delayed


def run_processes(fn, args_list) -> list:
    """[fn(*args) for args in args_list], each call in its own process, all at once.
    (joblib runs n_jobs=1 in the caller, so ask for two workers at least.)"""
    if not args_list:
        return []
    return Parallel(n_jobs=max(2, len(args_list)))(delayed(fn)(*args) for args in args_list)
''',
    },
    "gil_experiment": {
        "the times gathered in a defaultdict(float)": variant(
            _GIL_EXPERIMENT, ("import time\n", "import time\nfrom collections import defaultdict\n"),
            ("    seconds = {}\n", "    seconds = defaultdict(float)\n")),
        "executors and helpers.timing": '''
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from helpers.gil import draw_randoms, wait
from helpers.timing import stopwatch
from helpers.workers import mp_context
def gil_experiment(n_workers, work):
    if n_workers < 1:
        raise ValueError("n_workers must be positive")
    if work < 1:
        raise ValueError("work must be positive")
    q, r = divmod(work, n_workers)
    shares = [q + 1] * r + [q] * (n_workers - r)
    out = {}
    with stopwatch() as sw:
        draw_randoms(work)
    out["serial"] = sw.seconds
    with stopwatch() as sw:
        with ThreadPoolExecutor(n_workers) as pool:
            list(pool.map(draw_randoms, shares))
    out["threads"] = sw.seconds
    with stopwatch() as sw:
        with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as pool:
            list(pool.map(draw_randoms, shares))
    out["processes"] = sw.seconds
    with stopwatch() as sw:
        for _ in range(n_workers):
            time.sleep(0.05)
    out["io_serial"] = sw.seconds
    with stopwatch() as sw:
        with ThreadPoolExecutor(n_workers) as pool:
            list(pool.map(wait, [0.05] * n_workers))
    out["io_threads"] = sw.seconds
    return out
''',
        # From the twentieth review: failed, decided, until the threads' CPU was counted per threaded run.
        "threads, processes and io_threads timed with timing.measure (best of 3), serial once": '''
import threading

from helpers import gil, timing, workers


def gil_experiment(n_workers: int, work: int) -> dict:
    if n_workers < 1 or work < 1:
        raise ValueError("n_workers and work must be >= 1")
    shares = [work // n_workers + (i < work % n_workers) for i in range(n_workers)]

    def all_at_once(make, target, args_each):
        ws = [make(target=target, args=a) for a in args_each]
        for w in ws:
            w.start()
        for w in ws:
            w.join()

    out = {}
    with timing.stopwatch() as sw:
        gil.draw_randoms(work)
    out["serial"] = sw.seconds
    # start-up of workers is noisy: best of a few runs (timing.measure, repeat=3 by default)
    out["threads"] = timing.measure(all_at_once, threading.Thread, gil.draw_randoms, [(s,) for s in shares])
    out["processes"] = timing.measure(all_at_once, workers.mp_context().Process, gil.draw_randoms,
                                      [(s,) for s in shares])
    with timing.stopwatch() as sw:
        for _ in range(n_workers):
            gil.wait(0.05)
    out["io_serial"] = sw.seconds
    out["io_threads"] = timing.measure(all_at_once, threading.Thread, gil.wait, [(0.05,)] * n_workers)
    return out
''',
    },
    "numpy_threads_speedup": {
        "matrix-vector products with helpers.timing.compare": '''
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from helpers import timing
def numpy_threads_speedup(n, n_threads):
    if n < 1 or n_threads < 1:
        raise ValueError("n and n_threads must be at least 1")
    x = np.random.default_rng(7).random(n)
    pieces = np.array_split(x, 4 * n_threads)
    job = lambda p: float(np.sqrt(p * p + 1.0).sum() + np.cos(p).sum())
    pool = ThreadPoolExecutor(n_threads)
    try:
        result = timing.compare({"serial": lambda: [job(p) for p in pieces],
                                 "threads": lambda: list(pool.map(job, pieces))}, repeat=3)
    finally:
        pool.shutdown()
    return result["serial"] / result["threads"]
''',
    },
    "fetch_all": {
        "tasks created then awaited in order": '''
import asyncio
async def fetch_all(delays):
    async def one(d):
        await asyncio.sleep(d)
        return d
    tasks = [asyncio.create_task(one(d)) for d in delays]
    return [await t for t in tasks]
''',
        "tasks started 10 ms apart": '''
import asyncio
async def fetch_all(delays):
    async def one(d):
        await asyncio.sleep(d)
        return d
    tasks = []
    for d in delays:
        tasks.append(asyncio.create_task(one(d)))
        await asyncio.sleep(0.01)          # requests started 10 ms apart
    return [await t for t in tasks]
''',
        "each wait in a thread of its own, with an event loop of its own": '''
import asyncio
from concurrent.futures import ThreadPoolExecutor
async def fetch_all(delays):
    def one(d):
        return asyncio.run(asyncio.sleep(d, d))
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max(len(delays), 1)) as pool:
        return list(await asyncio.gather(*(loop.run_in_executor(pool, one, d) for d in delays)))
''',
        "TaskGroup": '''
import asyncio
async def request(delay):
    await asyncio.sleep(delay)
    return delay
async def fetch_all(delays):
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(request(d)) for d in delays]
    return [t.result() for t in tasks]
''',
        "gather's results in a tuple (the text says a list; lists of results may be tuples throughout)": '''
import asyncio


async def fetch_all(delays: list) -> list:
    """All requests at once; the results handed back as gather built them, in a tuple."""
    async def fetch(d):
        await asyncio.sleep(d)
        return d

    return tuple(await asyncio.gather(*(fetch(d) for d in delays)))
''',
        "tasks awaited with asyncio.wait, results read in input order": '''
import asyncio


async def fetch_all(delays: list) -> list:
    async def fetch(d):
        await asyncio.sleep(d)
        return d
    tasks = [asyncio.create_task(fetch(d)) for d in delays]
    await asyncio.wait(tasks)
    return [t.result() for t in tasks]
''',
    },
    "WORKLOAD_KIND": {
        "built from two lists": _TWO_LISTS,
        "numpy str_ values, from np.where": variant(_TWO_LISTS, (_KINDS_LINE, '''import numpy as np
TASKS = CPU + IO
WORKLOAD_KIND = dict(zip(TASKS, np.where(np.isin(TASKS, IO), "io", "cpu")))   # numpy str_ values''')),
        "StrEnum members": variant(_TWO_LISTS, (_KINDS_LINE, _KIND_CLASS.format(bases="StrEnum") + _KIND_MEMBERS)),
        "members of a (str, Enum) class, whose str() is 'Kind.IO'": variant(
            _TWO_LISTS, (_KINDS_LINE, _KIND_CLASS.format(bases="str, Enum") + _KIND_MEMBERS)),
        "an OrderedDict built from two lists": '''
from collections import OrderedDict

TASKS = [
    "download 200 web pages",
    "estimate pi with random.random() in a Python loop",
    "read 1,000 files from a network drive",
    "sort a list of 10 million Python tuples",
    "wait for replies to 50 database queries",
    "find primes below 10 million with a pure-Python sieve",
    "poll a web API every second for new results",
    "train a decision tree written in pure Python",
    "wait for a GPU kernel to finish (torch.cuda.synchronize)",
]
KINDS = ["io", "cpu", "io", "cpu", "io", "cpu", "io", "cpu", "io"]
WORKLOAD_KIND = OrderedDict(zip(TASKS, KINDS))   # keeps the order of TASKS
''',
    },
}

# The "partly wrong" sample student: these answers wrong (or left blank), the rest right.
PARTIAL = {
    "fetch_all": "awaits one after another",
    "numpy_threads_speedup": None,
    "gil_experiment": None,
    "run_processes": None,
}
