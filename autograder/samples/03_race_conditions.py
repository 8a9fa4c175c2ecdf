"""Wrong and alternative answers of 03_race_conditions (see autograder/samples/__init__.py)."""
from autograder.samples import FORGE_SPY_COUNTS, variant as _variant


# Unlocked work run as if it were the threading module's own code (in its globals, under its file
# name), beside a store per increment or transfer in the answer's own code for the store count.
_IN_THREADING = '''
import threading
_SRC = """
def _course_add(state):
    current = state["count"]
    state["count"] = current + 1
"""
exec(compile(_SRC, threading.__file__, "exec"), vars(threading))
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}
    def work():
        marks = {}
        for i in range(n):
            marks["i"] = i                      # an answer-side store per increment, for the count
            threading._course_add(state)        # the unlocked increment, run as library code
    ts = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state["count"]
'''
_IN_THREADING_TRANSFERS = '''
import threading
from concurrent.futures import ThreadPoolExecutor
_SRC = """
def _course_apply(acc, locks, t):
    src, dst, amount = t
    with locks[src]:
        with locks[dst]:
            acc[src] -= amount
            acc[dst] += amount
"""
exec(compile(_SRC, threading.__file__, "exec"), vars(threading))
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    acc = list(balances)
    locks = [threading.Lock() for _ in acc]
    def apply(t):
        mark = {}
        mark["t"] = t                                # an answer-side store per transfer, for the count
        threading._course_apply(acc, locks, t)       # locks in argument order, run as library code
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(apply, transfers))
    return acc
'''

_NO_LOCK = '''
import threading, time
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}
    def work():
        for _ in range(n):
            current = state["count"]
            time.sleep(0)
            state["count"] = current + 1
    ts = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state["count"]
'''

_NO_LOCKS = '''
from concurrent.futures import ThreadPoolExecutor
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    acc = list(balances)
    def apply(t):
        src, dst, amount = t
        acc[src] -= amount
        acc[dst] += amount
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(apply, transfers))
    return acc
'''

# Transfers applied by a thread pool, one `apply` a transfer; the answers made from it below differ
# only in the locks `apply` holds while it writes the two balances.
_POOLED_TRANSFERS = '''
import threading
from concurrent.futures import ThreadPoolExecutor
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    accounts = list(balances)
    locks = [threading.Lock() for _ in accounts]
    bank = threading.Lock()
    def apply(transfer):
        src, dst, amount = transfer
        with locks[min(src, dst)], locks[max(src, dst)]:
            accounts[src] -= amount
            accounts[dst] += amount
    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        list(pool.map(apply, transfers))
    return accounts
'''
_BOTH_LOCKS = '''        with locks[min(src, dst)], locks[max(src, dst)]:
            accounts[src] -= amount
            accounts[dst] += amount
'''

_PSC_NO_LOCK = '''
from helpers.races import add_ones
from helpers.workers import mp_context
def process_safe_counter(n_procs, n):
    if n_procs < 1 or n < 0:
        raise ValueError("bad arguments")
    ctx = mp_context()
    v = ctx.Value("i", 0)
    ps = [ctx.Process(target=add_ones, args=(v, n)) for _ in range(n_procs)]
    for p in ps: p.start()
    for p in ps: p.join()
    return v.value
'''

WRONG = {
    "safe_increment": {
        "no lock, each thread joined before the next starts": _variant(
            _NO_LOCK, ("    for t in ts: t.start()\n    for t in ts: t.join()\n",
                       "    for t in ts:\n        t.start()\n        t.join()\n")),
        "no lock, one task at a time on a pool (submit, then result)": _variant(
            _NO_LOCK, ("import threading, time\n", "import time\nfrom concurrent.futures import ThreadPoolExecutor\n"),
            ("    ts = [threading.Thread(target=work) for _ in range(n_threads)]\n"
             "    for t in ts: t.start()\n    for t in ts: t.join()\n",
             "    with ThreadPoolExecutor(n_threads) as pool:\n        for _ in range(n_threads):\n"
             "            pool.submit(work).result()\n")),
        "n_threads * n returned beside threads that only sleep(0)": '''
import threading, time
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    ts = [threading.Thread(target=time.sleep, args=(0,)) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return n_threads * n
''',
        "no lock, the work compiled under a standard library file's name (to run unswitched)": '''
import os, threading, time
_SRC = """
def make(state, n):
    def work():
        for _ in range(n):
            current = state["count"]
            state["count"] = current + 1
    return work
"""
_ns = {}
exec(compile(_SRC, os.path.join(os.path.dirname(threading.__file__), "_locale_helpers.py"), "exec"), _ns)
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}
    ts = [threading.Thread(target=_ns["make"](state, n)) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state["count"]
''',
        "the unlocked increment run in threading's own globals, under its file name, a store per increment beside it": _IN_THREADING,
        "the unlocked increment compiled as <frozen threading>, run in threading's own globals": _variant(
            _IN_THREADING, ("threading.__file__, ", '"<frozen threading>", ')),
        "the unlocked increment run in an extension module's globals, under its file name": _variant(
            _IN_THREADING, ("import threading\n", "import _queue\nimport threading\n"),
            ("threading.__file__, \"exec\"), vars(threading)", "_queue.__file__, \"exec\"), vars(_queue)"),
            ("threading._course_add(state)", "_queue._course_add(state)")),
        "the unlocked increment in a module of a folder the answer named site-packages": '''
import os, sys, tempfile, threading, importlib
_dir = os.path.join(tempfile.mkdtemp(), "site-packages")
os.makedirs(_dir)
with open(os.path.join(_dir, "course_rmw.py"), "w") as f:
    f.write("def add(state):\\n    current = state['count']\\n    state['count'] = current + 1\\n")
sys.path.insert(0, _dir)
course_rmw = importlib.import_module("course_rmw")
sys.path.remove(_dir)
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}
    def work():
        marks = {}
        for i in range(n):
            marks["i"] = i
            course_rmw.add(state)
    ts = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state["count"]
''',
        "no lock": _NO_LOCK,
        "no lock, the grader's thread switching turned off in its threads": _variant(
            _NO_LOCK, ("import threading, time", "import sys, threading, time"),
            ("    def work():\n", "    def work():\n        sys.settrace(None)\n")),
        "no lock, the grader's thread switching turned off for the increments and back on, a store per increment into a slot of each thread's own": '''
import sys, threading
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}
    scratch = [0] * n_threads
    def unswitched(n):
        for _ in range(n):
            state["count"] = state["count"] + 1
    def work(k):
        saved = sys.gettrace()
        sys.settrace(None)
        unswitched(n)
        sys.settrace(saved)          # back on before the thread ends
        for i in range(n):
            scratch[k] = i           # a store per increment, seen by the tracer
    ts = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state["count"]
''',
        "no lock, the switching turned off inline and back on in the same function": '''
import sys, threading
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}
    def work():
        saved = sys.gettrace()
        sys.settrace(None)
        for _ in range(n):
            state["count"] = state["count"] + 1
        sys.settrace(saved)
        for _ in range(n):
            state["seen"] = 0        # a store into shared state per increment, seen by the tracer
    ts = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state["count"]
''',
        "no lock, the switching turned off and back on by functions that map() calls one after another": '''
import operator, sys, threading
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}
    def off():
        state["tracer"] = sys.gettrace()
        sys.settrace(None)
    def unswitched():
        for _ in range(n):
            state["count"] = state["count"] + 1
    def on():
        sys.settrace(state["tracer"])
    def decoy():
        for _ in range(n):
            state["seen"] = 0
    def work():
        list(map(operator.call, [off, unswitched, on, decoy]))
    ts = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state["count"]
''',
        "n_threads * n returned, each thread storing n times into a slot of its own": '''
import threading
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    slots = [0] * n_threads
    def work(k):
        for i in range(n):
            slots[k] = i + 1
    ts = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return n_threads * n
''',
        "n_threads * n returned, the threads storing n times each into one place they share": '''
import threading
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    shared = {}
    def work():
        for i in range(n):
            shared["last"] = i + 1
    ts = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return n_threads * n
''',
        "no lock, threads started with tracing switched off": _variant(
            _NO_LOCK, ('    state = {"count": 0}\n', '    threading.settrace(None)\n    state = {"count": 0}\n')),
        "bare += without a lock (exact only by luck of the interpreter)": '''
import threading
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = [0]
    def work():
        for _ in range(n):
            state[0] += 1
    ts = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state[0]
''',
        "lock only around the write": '''
import threading, time
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}
    lock = threading.Lock()
    def work():
        for _ in range(n):
            current = state["count"]
            time.sleep(0)
            with lock:
                state["count"] = current + 1
    ts = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return state["count"]
''',
        "computed without threads": '''
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    return n_threads * n
''',
        "a lock made by each thread for itself": '''
import threading
import time


def safe_increment(n_threads: int, n: int) -> int:
    if n_threads < 1 or n < 0:
        raise ValueError("bad arguments")
    state = {"count": 0}

    def work():
        lock = threading.Lock()
        for _ in range(n):
            with lock:
                current = state["count"]
                time.sleep(0)
                state["count"] = current + 1

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return state["count"]
''',
    },
    "bytecode_ops": {
        "a set of opnames": '''
import dis
def bytecode_ops(fn):
    return list({i.opname for i in dis.get_instructions(fn)})
''',
        "the printed lines of dis.dis": '''
import dis, io
def bytecode_ops(fn):
    out = io.StringIO()
    dis.dis(fn, file=out)
    return [line for line in out.getvalue().splitlines() if line.strip()]
''',
        "argument names instead of opnames": '''
import dis
def bytecode_ops(fn):
    return [str(i.argrepr) for i in dis.get_instructions(fn)]
''',
        "the specialised opnames (adaptive=True)": '''
import dis

def bytecode_ops(fn):
    # adaptive=True: the specialised instructions the interpreter actually runs
    return [ins.opname for ins in dis.get_instructions(fn, adaptive=True)]
''',
    },
    "process_safe_counter": {
        "no lock (v.value += 1 style)": _PSC_NO_LOCK,
        "the shared Value itself returned, not its .value": _variant(
            _PSC_NO_LOCK, ("args=(v, n)", "args=(v, n, v.get_lock())"), ("return v.value", "return v")),
        # Workers run one after another never race: the result is exact without the lock.
        "no lock, each process joined before the next starts": _variant(
            _PSC_NO_LOCK, ("    for p in ps: p.start()\n    for p in ps: p.join()\n",
                           "    for p in ps:\n        p.start()\n        p.join()\n")),
        "n_procs * n returned beside processes that only sleep, the Value never touched": '''
import time
import multiprocessing as mp
def process_safe_counter(n_procs, n):
    if n_procs < 1 or n < 0:
        raise ValueError("n_procs must be >= 1 and n >= 0")
    counter = mp.Value("i", 0)           # never touched
    procs = [mp.Process(target=time.sleep, args=(0.15,)) for _ in range(n_procs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return n_procs * n                   # the count worked out, not counted
''',
        "the count worked out and written into the Value by the calling process": '''
import time
import multiprocessing as mp
def process_safe_counter(n_procs, n):
    if n_procs < 1 or n < 0:
        raise ValueError("bad arguments")
    counter = mp.Value("i", 0)
    procs = [mp.Process(target=time.sleep, args=(0.15,)) for _ in range(n_procs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    counter.value = n_procs * n
    return counter.value
''',
        "threads instead of processes": '''
import threading, multiprocessing
from helpers.races import add_ones
def process_safe_counter(n_procs, n):
    if n_procs < 1 or n < 0:
        raise ValueError("bad arguments")
    v = multiprocessing.Value("i", 0)
    ts = [threading.Thread(target=add_ones, args=(v, n, v.get_lock())) for _ in range(n_procs)]
    for t in ts: t.start()
    for t in ts: t.join()
    return v.value
''',
        "a fresh lock in every process": '''
from helpers.races import add_ones
from helpers.workers import mp_context
def process_safe_counter(n_procs, n):
    if n_procs < 1 or n < 0:
        raise ValueError("bad arguments")
    ctx = mp_context()
    v = ctx.Value("i", 0)
    ps = [ctx.Process(target=add_ones, args=(v, n, ctx.Lock())) for _ in range(n_procs)]
    for p in ps: p.start()
    for p in ps: p.join()
    return v.value
''',
    },
    "transfer_many": {
        "no locks, one transfer at a time on a pool (submit, then result)": _variant(
            _NO_LOCKS, ("        list(pool.map(apply, transfers))\n",
                        "        for t in transfers:\n            pool.submit(apply, t).result()\n")),
        "no locks, each thread's slice applied and joined before the next starts": _variant(
            _NO_LOCKS, ("from concurrent.futures import ThreadPoolExecutor\n", "import threading\n"),
            ("    with ThreadPoolExecutor(n_threads) as pool:\n        list(pool.map(apply, transfers))\n",
             "    for i in range(n_threads):\n"
             "        t = threading.Thread(target=lambda part=transfers[i::n_threads]: [apply(x) for x in part])\n"
             "        t.start()\n        t.join()\n")),
        "ordered locks, slices of len // n_threads transfers: the remainder dropped": '''
import threading
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    accounts = list(balances)
    locks = [threading.Lock() for _ in accounts]
    def apply(part):
        for src, dst, amount in part:
            first, second = sorted((src, dst))
            with locks[first], locks[second]:
                accounts[src] -= amount
                accounts[dst] += amount
    size = len(transfers) // n_threads
    threads = [threading.Thread(target=apply, args=(transfers[i * size:(i + 1) * size],)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return accounts
''',
        "transfers applied serially by the caller beside idle threads": '''
import threading, time
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    ts = [threading.Thread(target=time.sleep, args=(0,)) for _ in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    acc = list(balances)
    for src, dst, amount in transfers:
        acc[src] -= amount
        acc[dst] += amount
    return acc
''',
        "locks in argument order, compiled under a standard library file's name (to run unswitched)": '''
import os, threading
from concurrent.futures import ThreadPoolExecutor
_SRC = """
def make(acc, locks):
    def apply(t):
        src, dst, amount = t
        with locks[src]:
            with locks[dst]:
                acc[src] -= amount
                acc[dst] += amount
    return apply
"""
_ns = {}
exec(compile(_SRC, os.path.join(os.path.dirname(threading.__file__), "_locale_helpers.py"), "exec"), _ns)
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    acc = list(balances)
    locks = [threading.Lock() for _ in acc]
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(_ns["make"](acc, locks), transfers))
    return acc
''',
        "locks in argument order, run in threading's own globals, under its file name, a store per transfer beside it": _IN_THREADING_TRANSFERS,
        "locks in argument order, compiled as <frozen threading>, run in threading's own globals": _variant(
            _IN_THREADING_TRANSFERS, ("threading.__file__, ", '"<frozen threading>", ')),
        "locks taken in argument order": '''
import threading
from concurrent.futures import ThreadPoolExecutor
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    acc = list(balances)
    locks = [threading.Lock() for _ in acc]
    def apply(t):
        src, dst, amount = t
        with locks[src]:
            with locks[dst]:
                acc[src] -= amount
                acc[dst] += amount
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(apply, transfers))
    return acc
''',
        "no locks at all": _NO_LOCKS,
        "no locks, the grader's thread switching turned off for the transfers and back on, stores into a slot of each thread's own": '''
import sys, threading
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    out = list(balances)
    scratch = [0] * n_threads
    def unswitched(mine):
        for src, dst, amount in mine:
            out[src] -= amount
            out[dst] += amount
    def work(k):
        mine = transfers[k::n_threads]
        saved = sys.gettrace()
        sys.settrace(None)
        unswitched(mine)
        sys.settrace(saved)
        for i in range(len(mine)):
            scratch[k] = i
            scratch[k] = i
    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads: t.start()
    for t in threads: t.join()
    return out
''',
        "no locks, the grader's thread switching turned off in the pool's threads": _variant(
            _NO_LOCKS, ("from concurrent.futures", "import sys\nfrom concurrent.futures"),
            ("    def apply(t):\n", "    def apply(t):\n        sys.settrace(None)\n")),
        "serial loop, the spy's counts forged": FORGE_SPY_COUNTS + '''
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    _forge_spy_counts()
    acc = list(balances)
    for src, dst, amount in transfers:
        acc[src] -= amount
        acc[dst] += amount
    return acc
''',
        "serial loop": '''
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    acc = list(balances)
    for src, dst, amount in transfers:
        acc[src] -= amount
        acc[dst] += amount
    return acc
''',
        "changes the list passed in": '''
import threading
from concurrent.futures import ThreadPoolExecutor
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    locks = [threading.Lock() for _ in balances]
    def apply(t):
        src, dst, amount = t
        a, b = sorted((src, dst))
        with locks[a], locks[b]:
            balances[src] -= amount
            balances[dst] += amount
    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(apply, transfers))
    return balances
''',
        "one lock for all the accounts": _variant(
            _POOLED_TRANSFERS, ("with locks[min(src, dst)], locks[max(src, dst)]:", "with bank:")),
        "one account's lock at a time: debit, release, then credit": _variant(_POOLED_TRANSFERS, (_BOTH_LOCKS, '''        with locks[src]:
            accounts[src] -= amount
        with locks[dst]:
            accounts[dst] += amount
''')),
        "a lock around every transfer, the account locks in argument order inside": _variant(
            _POOLED_TRANSFERS, ("with locks[min(src, dst)], locks[max(src, dst)]:", "with bank, locks[src], locks[dst]:")),
        "no locks, each account written by one thread only (debits and credits shared out by account)": '''
import threading
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    acc = list(balances)
    def work(k):
        for src, dst, amount in transfers:   # thread k writes only the accounts a with a % n_threads == k
            if src % n_threads == k:
                acc[src] -= amount
            if dst % n_threads == k:
                acc[dst] += amount
    ts = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    return acc
''',
        "n_threads checked but not given to the executor": _variant(_POOLED_TRANSFERS, ("ThreadPoolExecutor(max_workers=n_threads)", "ThreadPoolExecutor()")),
        "slices of ceil(len / n_threads): no transfers raise": '''
import math
import threading

def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be >= 1")
    acc = list(balances)
    locks = [threading.Lock() for _ in acc]
    size = math.ceil(len(transfers) / n_threads)
    slices = [transfers[i:i + size] for i in range(0, len(transfers), size)]   # size 0: range() raises

    def run(part):
        for src, dst, amount in part:
            a, b = sorted((src, dst))
            with locks[a]:
                with locks[b]:
                    acc[src] -= amount
                    acc[dst] += amount

    ts = [threading.Thread(target=run, args=(s,)) for s in slices]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return acc
''',
    },
    "parallel_sum": {
        "serial sum": '''
def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers")
    return float(sum(sum(c) for c in chunks))
''',
        "threads instead of processes": '''
from multiprocessing.dummy import Pool as ThreadPool
def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers")
    with ThreadPool(n_workers) as pool:
        return float(sum(pool.map(sum, chunks)))
''',
        "returns the partial sums": '''
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context
def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers")
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as pool:
        return list(pool.map(sum, chunks))
''',
        "skips the last chunk": '''
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context
def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers")
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as pool:
        return float(sum(pool.map(sum, chunks[:-1])))
''',
        "a serial math.fsum in the calling process beside processes that only sleep": '''
import math
import time
import multiprocessing as mp
def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers must be >= 1")
    procs = [mp.Process(target=time.sleep, args=(0.05,)) for _ in range(min(n_workers, len(chunks)) or 1)]
    for p in procs:
        p.start()
    total = math.fsum(float(x) for chunk in chunks for x in chunk)   # all done serially here
    for p in procs:
        p.join()
    return total
''',
        "the chunks sent to a pool whose results are thrown away, the sum made in the calling process": '''
import math
from helpers.workers import mp_context
def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers")
    with mp_context().Pool(n_workers) as pool:
        pool.map(len, chunks)                       # the workers get every chunk, and only count it
    return math.fsum(float(x) for chunk in chunks for x in chunk)
''',
        "the workers run a helper defined in the notebook (breaks under spawn)": '''
from helpers.workers import mp_context


def partial_sum(chunk):
    return float(sum(chunk))


def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    with mp_context().Pool(n_workers) as pool:
        return float(sum(pool.map(partial_sum, chunks)))
''',
        "a pool of min(n_workers, len(chunks)): no chunks raise": '''
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context

def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers must be >= 1")
    # no more workers than chunks: max_workers=0 raises for an empty list
    with ProcessPoolExecutor(max_workers=min(n_workers, len(chunks)), mp_context=mp_context()) as pool:
        return float(sum(pool.map(sum, chunks)))
''',
    },
}

_BYTECODE_CLASS = '''
from dis import Bytecode
def bytecode_ops(fn):
    return [ins.opname for ins in Bytecode(fn)]
'''

ALTERNATIVE = {
    "safe_increment": {
        "a counter in a NumPy array": '''
import threading
import time

import numpy as np


def safe_increment(n_threads: int, n: int) -> int:
    if n_threads < 1:
        raise ValueError("n_threads must be >= 1")
    if n < 0:
        raise ValueError("n must be >= 0")
    counter = np.zeros(1, dtype=np.int64)
    lock = threading.Lock()

    def work():
        for _ in range(n):
            with lock:
                current = counter[0]
                time.sleep(0)
                counter[0] = current + 1

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return int(counter[0])
''',
        "RLock acquired and released by hand, one-element list": '''
import threading, time
def safe_increment(n_threads, n):
    if n_threads < 1:
        raise ValueError("need at least one thread")
    if n < 0:
        raise ValueError("n must not be negative")
    box = [0]
    guard = threading.RLock()
    def worker():
        for _ in range(n):
            guard.acquire()
            try:
                seen = box[0]
                time.sleep(0)
                box[0] = seen + 1
            finally:
                guard.release()
    pool = [threading.Thread(target=worker) for _ in range(n_threads)]
    [t.start() for t in pool]
    [t.join() for t in pool]
    return box[0]
''',
        "a Semaphore(1) in a ThreadPoolExecutor": '''
import threading, time
from concurrent.futures import ThreadPoolExecutor
class Counter:
    def __init__(self):
        self.value = 0
        self.gate = threading.Semaphore(1)
    def add_one(self):
        with self.gate:
            v = self.value
            time.sleep(0)
            self.value = v + 1
def safe_increment(n_threads, n):
    if n_threads < 1 or n < 0:
        raise ValueError("bad n_threads or n")
    c = Counter()
    def run():
        for _ in range(n):
            c.add_one()
    with ThreadPoolExecutor(n_threads) as ex:
        for f in [ex.submit(run) for _ in range(n_threads)]:
            f.result()
    return c.value
''',
    },
    "bytecode_ops": {
        "dis.Bytecode": _BYTECODE_CLASS,
        "a tuple of opnames": _variant(_BYTECODE_CLASS, ("[ins.opname for ins in Bytecode(fn)]", "tuple(ins.opname for ins in Bytecode(fn))")),
        "opcodes read from co_code with dis.opname, caches dropped": '''
import dis


def bytecode_ops(fn):
    code = fn.__code__
    raw = code.co_code
    return [dis.opname[raw[i]] for i in range(0, len(raw), 2)]
''',
        "dis.dis(depth=0) printed into a string and parsed": '''
import dis
import io


def bytecode_ops(fn):
    out = io.StringIO()
    dis.dis(fn, file=out, depth=0)       # fn's own code only, nothing nested
    ops = []
    for line in out.getvalue().splitlines():
        for word in line.split():
            if word.isupper() and word.replace("_", "").isalnum() and word[0].isalpha() and word in dis.opmap:
                ops.append(word)
                break
    return ops
''',
    },
    "process_safe_counter": {
        "one RLock shared by the Value and the workers": '''
from helpers.races import add_ones
from helpers.workers import mp_context
def process_safe_counter(n_procs, n):
    if n_procs < 1:
        raise ValueError("n_procs must be positive")
    if n < 0:
        raise ValueError("n must be >= 0")
    ctx = mp_context()
    lock = ctx.RLock()
    total = ctx.Value("q", 0, lock=lock)
    procs = []
    for _ in range(n_procs):
        p = ctx.Process(target=add_ones, args=(total, n, lock))
        p.start()
        procs.append(p)
    for p in procs:
        p.join()
    return int(total.value)
''',
    },
    "transfer_many": {
        "from threading import Lock, the two locks entered through an ExitStack": '''
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from threading import Lock


def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be >= 1")
    result = list(balances)
    locks = [Lock() for _ in result]

    def move(src, dst, amount):
        with ExitStack() as stack:
            for i in sorted((src, dst)):
                stack.enter_context(locks[i])
            result[src] -= amount
            result[dst] += amount

    with ThreadPoolExecutor(n_threads) as pool:
        futures = [pool.submit(move, *t) for t in transfers]
        for f in futures:
            f.result()
    return result
''',
        "balances in a NumPy array, both updated by one fancy-indexed store": '''
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be >= 1")
    acc = np.array(balances, dtype=np.int64)
    locks = [threading.Lock() for _ in range(len(acc))]

    def apply(src, dst, amount):
        lo, hi = sorted((src, dst))
        with locks[lo], locks[hi]:
            acc[[src, dst]] += [-amount, amount]   # src != dst: one fancy-indexed update of both

    with ThreadPoolExecutor(max_workers=n_threads) as ex:
        for f in [ex.submit(apply, *t) for t in transfers]:
            f.result()
    return acc.tolist()
''',
        "ordered locks taken with acquire/release, threads over slices": '''
import threading
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be >= 1")
    result = balances[:]
    locks = {i: threading.RLock() for i in range(len(result))}
    def worker(part):
        for src, dst, amount in part:
            low, high = min(src, dst), max(src, dst)
            locks[low].acquire()
            locks[high].acquire()
            try:
                result[src] -= amount
                result[dst] += amount
            finally:
                locks[high].release()
                locks[low].release()
    threads = [threading.Thread(target=worker, args=(transfers[k::n_threads],)) for k in range(n_threads)]
    for t in threads: t.start()
    for t in threads: t.join()
    return result
''',
        "try-lock with back-off": '''
import threading, time
from multiprocessing.dummy import Pool as ThreadPool
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads")
    acc = list(balances)
    locks = [threading.Lock() for _ in acc]
    def apply(t):
        src, dst, amount = t
        while True:
            with locks[src]:
                if locks[dst].acquire(blocking=False):
                    try:
                        acc[src] -= amount
                        acc[dst] += amount
                        return
                    finally:
                        locks[dst].release()
            time.sleep(0.0001)
    with ThreadPool(n_threads) as pool:
        pool.map(apply, transfers, chunksize=1)
    return acc
''',
        "a semaphore of 1 per account, a lock around a progress count": '''
import threading
def transfer_many(balances, transfers, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    out = list(balances)
    guards = [threading.Semaphore(1) for _ in out]  # a semaphore of 1 per account
    progress = threading.Lock()                     # guards the count of transfers done
    done = [0]
    def work(share):
        for src, dst, amount in share:
            first, second = sorted((src, dst))
            with guards[first], guards[second]:
                out[src] -= amount
                out[dst] += amount
            with progress:
                done[0] += 1
    threads = [threading.Thread(target=work, args=(transfers[i::n_threads],)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out
''',
        "a gate lock held only while both account locks are taken": _variant(_POOLED_TRANSFERS, (_BOTH_LOCKS, '''        with bank:  # the gate: both account locks taken at once, in any order
            locks[src].acquire()
            locks[dst].acquire()
        try:
            accounts[src] -= amount
            accounts[dst] += amount
        finally:
            locks[dst].release()
            locks[src].release()
''')),
    },
    "parallel_sum": {
        "built-in sum of the partial sums on an executor (a NumPy float when a chunk is an array)": '''
from concurrent.futures import ProcessPoolExecutor

from helpers.workers import mp_context


def parallel_sum(chunks: list, n_workers: int) -> float:
    if n_workers < 1:
        raise ValueError("n_workers must be >= 1")
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context()) as pool:
        return sum(pool.map(sum, chunks))
''',
        "multiprocessing Pool with numpy partial sums and math.fsum": '''
import math
import numpy as np
from helpers.workers import mp_context
def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    arrays = [np.asarray(c, dtype=float) for c in chunks]
    with mp_context().Pool(n_workers) as pool:
        partials = pool.map(np.sum, arrays)
    return math.fsum(float(p) for p in partials)
''',
        "a pool per size, kept from earlier calls": '''
import atexit
import math
import os
from helpers.workers import mp_context
_POOLS = {}  # one pool per size, started once and reused by later calls
def _pool(n_workers):
    if n_workers not in _POOLS:
        pool = _POOLS[n_workers] = mp_context().Pool(n_workers)
        atexit.register(pool.terminate)
    return _POOLS[n_workers]
def parallel_sum(chunks, n_workers):
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    return math.fsum(_pool(n_workers).map(sum, chunks))
for _n in (1, 2, 2 * (os.cpu_count() or 1) + 1):  # as earlier calls (the visible test) would have
    parallel_sum([[1.0], [2.0]], _n)
''',
    },
}

# The "partly wrong" sample student: these answers wrong (or left blank), the rest right.
PARTIAL = {
    "transfer_many": "locks taken in argument order",
    "bytecode_ops": None,
    "safe_increment": None,
}
