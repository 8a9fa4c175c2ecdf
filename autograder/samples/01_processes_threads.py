"""Wrong and alternative answers of 01_processes_threads (see autograder/samples/__init__.py)."""
from autograder.samples import FORGE_SPY_COUNTS, WITNESS_HELPER, variant

# visible_appends with processes made by os.fork and waited for by the answer itself (correct).
_VA_FORKED = '''
import os
import threading

APPENDED = []

def visible_appends(kind: str, n_workers: int) -> int:
    if kind not in ("thread", "process"):
        raise ValueError(f"kind must be 'thread' or 'process', not {kind!r}")
    if n_workers < 0:
        raise ValueError(f"n_workers must be >= 0, got {n_workers}")
    APPENDED.clear()
    if kind == "thread":
        threads = [threading.Thread(target=APPENDED.append, args=(i,)) for i in range(n_workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        pids = []
        for i in range(n_workers):
            pid = os.fork()
            if pid == 0:          # the child: append to its own copy, then leave at once
                try:
                    APPENDED.append(i)
                finally:
                    os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)    # join the child
    return len(APPENDED)
'''

# The argument checks and the clock's start of a creation_cost, for the answers that differ after them.
_CREATION_HEAD = '''
import threading
import time
from helpers.workers import mp_context, noop

TRIALS = 10

def creation_cost(kind: str, n: int) -> float:
    if kind not in ("thread", "process"):
        raise ValueError(f"kind must be 'thread' or 'process', not {kind!r}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    make = threading.Thread if kind == "thread" else mp_context().Process
    start = time.perf_counter()
'''.lstrip("\n")

# The start of a visible_appends that starts its workers as asked, for the answers that differ in how
# they wait for them.
_APPENDS_STARTED = variant(_VA_FORKED.split('    if kind == "thread":\n')[0], (
    "import os\n", "import time\n\nfrom helpers.workers import mp_context\n")) + '''    make = threading.Thread if kind == "thread" else mp_context().Process
    started = [make(target=APPENDED.append, args=(i,)) for i in range(n_workers)]
    for worker in started:
        worker.start()
'''

# How the catalogue's cpu_info answers that forge their counts read a cgroup quota (correctly).
_CGROUP_QUOTA = '''
def _quota(root):
    try:
        q, p = open(os.path.join(root, "cpu.max")).read().split()[:2]
        return None if q == "max" else int(q) / int(p)
    except (OSError, ValueError):
        pass
    try:
        q = int(open(os.path.join(root, "cpu", "cpu.cfs_quota_us")).read().split()[0])
        p = int(open(os.path.join(root, "cpu", "cpu.cfs_period_us")).read().split()[0])
        return None if q <= 0 else q / p
    except (OSError, ValueError, IndexError):
        return None
'''

_BEST_OF_TRIALS = '''
import threading, time
from helpers.workers import mp_context, noop
def creation_cost(kind, n):
    if kind not in ("thread", "process") or n < 1:
        raise ValueError(kind)
    best = float("inf")
    for _ in range(n):
        t0 = time.monotonic()
        worker = threading.Thread(target=noop) if kind == "thread" else mp_context().Process(target=noop)
        worker.start()
        worker.join()
        best = min(best, time.monotonic() - t0)
    return best
'''

WRONG = {
    "cpu_info": {
        "usable written into the dict by a metaclass's __eq__ while the result is read, from the course's helper": '''
import math, os
import psutil
import helpers.system as course_system
''' + _CGROUP_QUOTA + '''
class Meta(type):
    def __eq__(cls, other):
        d = cls.pending
        if d is not None and d.get("usable") is None:
            n = course_system.usable_cores()
            d["usable"] = n if cls.cap is None else min(n, cls.cap)
        return type.__eq__(cls, other)
    __hash__ = type.__hash__


def cpu_info(cgroup_root="/sys/fs/cgroup"):
    q = _quota(cgroup_root)
    d = {}
    T = Meta("T", (), {"pending": d, "cap": None if q is None else max(1, math.ceil(q)),
                       "__reduce__": lambda self: (str, ("x",))})
    d["note"] = T()
    d.update(logical=os.cpu_count(), physical=psutil.cpu_count(logical=False), usable=None)
    return d
''',
        "usable a numpy int of its own class that says it is numpy's and asks the course's helper when its bytes are read": '''
import math, os
import numpy as np, psutil
import helpers.system as course_system
''' + _CGROUP_QUOTA + '''
class Lazy(np.int64):
    __module__ = "numpy"
    def _n(self):
        n = course_system.usable_cores()
        cap = getattr(self, "cap", None)
        return n if cap is None else min(n, cap)
    def tobytes(self, *a, **k):
        return np.int64(self._n()).tobytes()
    def __reduce__(self):
        return (int, (self._n(),))

def cpu_info(cgroup_root="/sys/fs/cgroup"):
    q = _quota(cgroup_root)
    u = Lazy(0)
    u.cap = None if q is None else max(1, math.ceil(q))
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": u}
''',
        "an OrderedDict subclass that holds zeros and asks the course's helper for the counts when read, after the call": '''
import collections, math, os
import psutil
import helpers.system as course_system

class Info(collections.OrderedDict):
    def __init__(self, cap=None, fixed=None):
        super().__init__(logical=0, physical=0, usable=0)
        self._cap, self._fixed = cap, fixed
    def _now(self):
        usable = course_system.usable_cores()
        if self._cap is not None:
            usable = min(usable, self._cap)
        return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": usable}
    def __getitem__(self, k):
        return (self._fixed or self._now())[k]
    def __reduce__(self):
        return (Info, (self._cap, self._fixed or self._now()))
''' + _CGROUP_QUOTA + '''
def cpu_info(cgroup_root: str = "/sys/fs/cgroup") -> dict:
    q = _quota(cgroup_root)
    return Info(None if q is None else max(1, math.ceil(q)))
''',
        "usable is just the logical count": '''
import os, psutil
def cpu_info():
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False),
            "usable": os.cpu_count()}
''',
        "physical guessed as twice the logical count": '''
import os
def cpu_info():
    n = os.cpu_count()
    return {"logical": n, "physical": n * 2, "usable": len(os.sched_getaffinity(0))}
''',
        "borrows the course helpers": '''
import os, psutil
from helpers import system
def cpu_info():
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False),
            "usable": system.usable_cores()}
''',
        "ignores the cgroup quota": '''
import os, psutil
def cpu_info(cgroup_root="/sys/fs/cgroup"):
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False),
            "usable": len(os.sched_getaffinity(0))}
''',
        "reads cgroup v2 only": '''
import math, os, psutil
def cpu_info(cgroup_root="/sys/fs/cgroup"):
    usable = len(os.sched_getaffinity(0))
    try:
        quota, period = open(os.path.join(cgroup_root, "cpu.max")).read().split()
        if quota != "max":
            usable = min(usable, max(1, math.ceil(int(quota) / int(period))))
    except OSError:
        pass
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": usable}
''',
        "rounds a fractional quota down": '''
import os, psutil
def cpu_info(cgroup_root="/sys/fs/cgroup"):
    usable = len(os.sched_getaffinity(0))
    try:
        quota, period = open(os.path.join(cgroup_root, "cpu.max")).read().split()
    except OSError:
        try:
            quota = open(os.path.join(cgroup_root, "cpu", "cpu.cfs_quota_us")).read().strip()
            period = open(os.path.join(cgroup_root, "cpu", "cpu.cfs_period_us")).read().strip()
        except OSError:
            quota = "max"
    if quota not in ("max", "-1"):
        usable = min(usable, max(1, int(quota) // int(period)))
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": usable}
''',
        "always reads /sys/fs/cgroup, whatever the argument": '''
import math, os, psutil
def cpu_info(cgroup_root="/sys/fs/cgroup"):
    usable = len(os.sched_getaffinity(0))
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
    except OSError:
        try:
            quota = open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read().strip()
            period = open("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read().strip()
        except OSError:
            quota = "max"
    if quota not in ("max", "-1"):
        usable = min(usable, max(1, math.ceil(int(quota) / int(period))))
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": usable}
''',
        "the quota rounded to the nearest CPU, not up": '''
import os

import psutil


def cpu_info(cgroup_root: str = "/sys/fs/cgroup") -> dict:
    logical = os.cpu_count()
    physical = psutil.cpu_count(logical=False)
    usable = len(os.sched_getaffinity(0))
    quota = None
    v2 = os.path.join(cgroup_root, "cpu.max")
    if os.path.exists(v2):
        q, p = open(v2).read().split()
        if q != "max":
            quota = int(q) / int(p)
    else:
        qf = os.path.join(cgroup_root, "cpu", "cpu.cfs_quota_us")
        pf = os.path.join(cgroup_root, "cpu", "cpu.cfs_period_us")
        if os.path.exists(qf) and os.path.exists(pf):
            q = int(open(qf).read())
            if q != -1:
                quota = q / int(open(pf).read())
    if quota is not None:
        usable = min(usable, max(1, round(quota)))
    return {"logical": logical, "physical": physical, "usable": usable}
''',
        "cgroup v1's period taken as 100000 without reading it": '''
import math
import os

import psutil

def cpu_info(cgroup_root: str = "/sys/fs/cgroup") -> dict:
    logical = os.cpu_count() or 1
    physical = psutil.cpu_count(logical=False)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    quota = None
    v2 = os.path.join(cgroup_root, "cpu.max")
    v1 = os.path.join(cgroup_root, "cpu", "cpu.cfs_quota_us")
    if os.path.exists(v2):
        q, p = open(v2).read().split()[:2]
        if q != "max":
            quota = int(q) / int(p)
    elif os.path.exists(v1):
        q = int(open(v1).read().strip())
        if q > 0:
            quota = q / 100_000
    if quota is not None:
        usable = min(usable, max(1, math.ceil(quota)))
    return {"logical": logical, "physical": physical, "usable": usable}
''',
        "cpu.max of 'max' falls through to the v1 files": '''
import math, os
import psutil

def _v2(root):
    try:
        q, p = open(os.path.join(root, "cpu.max")).read().split()[:2]
    except OSError:
        return None
    return None if q == "max" else int(q) / int(p)

def _v1(root):
    try:
        q = int(open(os.path.join(root, "cpu", "cpu.cfs_quota_us")).read())
        p = int(open(os.path.join(root, "cpu", "cpu.cfs_period_us")).read())
    except OSError:
        return None
    return None if q <= 0 else q / p

def cpu_info(cgroup_root="/sys/fs/cgroup"):
    usable = len(os.sched_getaffinity(0))
    quota = _v2(cgroup_root) or _v1(cgroup_root)   # v2 "max" falls through to v1
    if quota is not None:
        usable = min(usable, max(1, math.ceil(quota)))
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": usable}
''',
        "the v1 files read before cpu.max": '''
import math, os
import psutil

def cpu_info(cgroup_root="/sys/fs/cgroup"):
    usable = len(os.sched_getaffinity(0))
    quota = None
    v1q = os.path.join(cgroup_root, "cpu", "cpu.cfs_quota_us")
    v1p = os.path.join(cgroup_root, "cpu", "cpu.cfs_period_us")
    v2 = os.path.join(cgroup_root, "cpu.max")
    if os.path.exists(v1q) and os.path.exists(v1p):      # v1 looked at first
        q = int(open(v1q).read())
        if q > 0:
            quota = q / int(open(v1p).read())
    elif os.path.exists(v2):
        q, p = open(v2).read().split()[:2]
        if q != "max":
            quota = int(q) / int(p)
    if quota is not None:
        usable = min(usable, max(1, math.ceil(quota)))
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": usable}
''',
        "physical always None": '''
import math, os
''' + _CGROUP_QUOTA + '''
def cpu_info(cgroup_root="/sys/fs/cgroup"):
    usable = len(os.sched_getaffinity(0))
    q = _quota(cgroup_root)
    if q is not None:
        usable = min(usable, max(1, math.ceil(q)))
    # "None if the system does not tell": never asked
    return {"logical": os.cpu_count(), "physical": None, "usable": usable}
''',
    },
    "run_in_child": {
        "runs fn in a thread": '''
import os
from concurrent.futures import ThreadPoolExecutor
def run_in_child(fn, *args):
    with ThreadPoolExecutor(1) as pool:
        return os.getpid(), pool.submit(fn, *args).result()
''',
        "runs fn in the caller": '''
import os
def run_in_child(fn, *args):
    return os.getpid(), fn(*args)
''',
        "reports the parent's pid": '''
import os
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context
def run_in_child(fn, *args):
    with ProcessPoolExecutor(1, mp_context=mp_context()) as pool:
        return os.getppid(), pool.submit(fn, *args).result()
''',
        # Read the checks, then forge: fn called here, its pid rewritten to a process that spins
        # from import on (so that CPU is seen spent outside the caller while fn runs).
        "runs fn in the caller; the pid forged for a process spinning since import": '''
import os
from helpers.workers import mp_context
_SPINNER = mp_context().Process(target=exec, args=("while True: pass",), daemon=True)
_SPINNER.start()
def run_in_child(fn, *args):
    result = fn(*args)
    if type(result) is tuple and len(result) >= 2 and result[0] == os.getpid():
        result = (_SPINNER.pid, os.getpid(), *result[2:])
    return _SPINNER.pid, result
''',
        # The same, with the witness forged too: the process started at import, on request, spins
        # for as long as fn's work took and starts a thread, whose kernel id the result then names.
        # What remains is fn's own work, a puzzle solved in the caller, whose CPU the judge reads.
        "runs fn in the caller; the pid and witness forged by a process started at import": WITNESS_HELPER + '''
import os, time
from helpers.workers import start_method
_HELPER = _WitnessHelper(start_method())
def run_in_child(fn, *args):
    start = time.thread_time()
    result = fn(*args)
    witness = _HELPER.witness(spin=time.thread_time() - start + 0.05)
    if type(result) is tuple and len(result) >= 4 and result[0] == os.getpid():
        result = (_HELPER.pid, os.getpid(), result[2], witness, *result[4:])
    return _HELPER.pid, result
''',
        "the child runs a helper defined in the notebook (breaks under spawn)": '''
import os
from concurrent.futures import ProcessPoolExecutor

from helpers.workers import mp_context


def pid_and_result(fn, args):
    return os.getpid(), fn(*args)


def run_in_child(fn, *args):
    with ProcessPoolExecutor(max_workers=1, mp_context=mp_context()) as pool:
        return pool.submit(pid_and_result, fn, args).result()
''',
        "one executor's worker kept and reused by every call": '''
import os
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context

_POOL = None

def run_in_child(fn, *args):
    global _POOL
    if _POOL is None:              # one worker process kept for every call
        _POOL = ProcessPoolExecutor(max_workers=1, mp_context=mp_context())
    pid = _POOL.submit(os.getpid).result()
    return pid, _POOL.submit(fn, *args).result()
''',
    },
    "visible_appends": {
        'the list read before the threads are joined': '''
import threading
from helpers.workers import mp_context

ITEMS = []


def _append(i):
    ITEMS.append(i)


def visible_appends(kind: str, n_workers: int) -> int:
    if kind not in ("thread", "process") or n_workers < 0:
        raise ValueError("bad arguments")
    ITEMS.clear()
    make = threading.Thread if kind == "thread" else mp_context().Process
    workers = [make(target=_append, args=(i,)) for i in range(n_workers)]
    for w in workers:
        w.start()
    seen = len(ITEMS)          # read before waiting for them
    for w in workers:
        w.join()
    return seen
''',
        'a sleep, then one look at is_alive(): never joined': _APPENDS_STARTED + '''
    time.sleep(0.3)  # "long enough" for them to finish
    still = [w for w in started if w.is_alive()]
    if still:
        print(len(still), "workers still running")
    return len(APPENDED)
''',
        'each worker looked at once with is_alive() right after start, never waited for': '''
import threading
from helpers.workers import mp_context

APPENDED = []


def visible_appends(kind: str, n_workers: int) -> int:
    if kind not in ("thread", "process"):
        raise ValueError(f"kind must be thread or process, not {kind!r}")
    if n_workers < 0:
        raise ValueError("n_workers must be >= 0")
    APPENDED.clear()
    make = threading.Thread if kind == "thread" else mp_context().Process
    for i in range(n_workers):
        w = make(target=APPENDED.append, args=(i,))
        w.start()
        assert w.is_alive() or True  # "make sure it started"
    return len(APPENDED)
''',
        "processes by os.fork, never reaped": variant(
            _VA_FORKED, ("        for pid in pids:\n            os.waitpid(pid, 0)    # join the child\n", "")),
        "returns n_workers for both kinds": '''
def visible_appends(kind, n_workers):
    if kind not in ("thread", "process") or n_workers < 0:
        raise ValueError(kind)
    return n_workers
''',
        "hard-coded 0 without starting processes": '''
import threading
SEEN = []
def visible_appends(kind, n_workers):
    if kind not in ("thread", "process") or n_workers < 0:
        raise ValueError(kind)
    if kind == "process":
        return 0
    SEEN.clear()
    ts = [threading.Thread(target=SEEN.append, args=(i,)) for i in range(n_workers)]
    for t in ts: t.start()
    for t in ts: t.join()
    return len(SEEN)
''',
        "hard-coded 0 without starting processes, the spy's counts forged": FORGE_SPY_COUNTS + '''
import threading
SEEN = []
def visible_appends(kind, n_workers):
    if kind not in ("thread", "process") or n_workers < 0:
        raise ValueError(kind)
    if kind == "process":
        _forge_spy_counts()
        return 0
    SEEN.clear()
    ts = [threading.Thread(target=SEEN.append, args=(i,)) for i in range(n_workers)]
    for t in ts: t.start()
    for t in ts: t.join()
    return len(SEEN)
''',
        "list never cleared": '''
import threading
from helpers.workers import mp_context
SEEN = []
def visible_appends(kind, n_workers):
    if kind not in ("thread", "process") or n_workers < 0:
        raise ValueError(kind)
    make = threading.Thread if kind == "thread" else mp_context().Process
    ws = [make(target=SEEN.append, args=(i,)) for i in range(n_workers)]
    for w in ws: w.start()
    for w in ws: w.join()
    return len(SEEN)
''',
        "accepts an unknown kind": '''
import threading
from helpers.workers import mp_context
SEEN = []
def visible_appends(kind, n_workers):
    SEEN.clear()
    make = threading.Thread if kind == "thread" else mp_context().Process
    ws = [make(target=SEEN.append, args=(i,)) for i in range(max(n_workers, 0))]
    for w in ws: w.start()
    for w in ws: w.join()
    return len(SEEN)
''',
        "threads never joined (t.join without the call)": _APPENDS_STARTED + '''
    for worker in started:
        if kind == "thread":
            worker.join      # typo: never called
        else:
            worker.join()
    return len(APPENDED)
''',
        "a negative count refused for threads only": '''
import threading
from helpers.workers import mp_context

APPENDED = []

def visible_appends(kind, n_workers):
    APPENDED.clear()
    if kind == "thread":
        if n_workers < 0:
            raise ValueError("n_workers must be >= 0")
        ws = [threading.Thread(target=APPENDED.append, args=(i,)) for i in range(n_workers)]
    elif kind == "process":
        ws = [mp_context().Process(target=APPENDED.append, args=(i,)) for i in range(n_workers)]
    else:
        raise ValueError(f"unknown kind {kind!r}")
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    return len(APPENDED)
''',
    },
    "creation_cost": {
        "a process's start() timed alone, joined after the clock stopped (under fork the fork is most of a start)": '''
import threading
import time
from helpers.workers import mp_context, noop


def creation_cost(kind: str, n: int) -> float:
    if kind not in ("thread", "process") or n < 1:
        raise ValueError("bad arguments")
    make = threading.Thread if kind == "thread" else mp_context().Process
    total = 0.0
    for _ in range(n):
        w = make(target=noop)
        t0 = time.perf_counter()
        w.start()
        if kind == "thread":
            w.join()
        total += time.perf_counter() - t0
        if kind == "process":
            w.join()                 # after the clock stopped: the fork is most of a start
    return total / n
''',
        "creates but never starts": '''
import threading, time
from helpers.workers import mp_context, noop
def creation_cost(kind, n):
    if kind not in ("thread", "process") or n < 1:
        raise ValueError(kind)
    make = threading.Thread if kind == "thread" else mp_context().Process
    t0 = time.perf_counter()
    for _ in range(n):
        make(target=noop)
    return (time.perf_counter() - t0) / n
''',
        "only the creation of the object timed (start and join after the clock stops)": '''
import threading, time
from helpers.workers import mp_context, noop
def creation_cost(kind, n):
    if kind not in ("thread", "process") or n < 1:
        raise ValueError(kind)
    make = threading.Thread if kind == "thread" else mp_context().Process
    total = 0.0
    for _ in range(n):
        t0 = time.perf_counter()
        worker = make(target=noop)
        total += time.perf_counter() - t0
        worker.start()
        worker.join()
    return total / n
''',
        "accepts an unknown kind": '''
import threading, time
from helpers.workers import mp_context, noop
def creation_cost(kind, n):
    make = mp_context().Process if kind == "process" else threading.Thread
    t0 = time.perf_counter()
    for _ in range(max(n, 1)):
        w = make(target=noop); w.start(); w.join()
    return (time.perf_counter() - t0) / max(n, 1)
''',
        "one pool for all trials": '''
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from helpers.workers import mp_context, noop
def creation_cost(kind, n):
    if kind not in ("thread", "process") or n < 1:
        raise ValueError(kind)
    t0 = time.perf_counter()
    pool = ThreadPoolExecutor(1) if kind == "thread" else ProcessPoolExecutor(1, mp_context=mp_context())
    with pool:
        for _ in range(n):
            pool.submit(noop).result()
    return (time.perf_counter() - t0) / n
''',
        "n ignored: always 10 trials": _CREATION_HEAD + '''
    for _ in range(TRIALS):
        worker = make(target=noop)
        worker.start()
        worker.join()
    return (time.perf_counter() - start) / TRIALS
''',
        # A student's walk-through: every check passed; the spy's "processes at once" catches it.
        "all started, the clock stopped, then all joined (the joins never timed)": _CREATION_HEAD + '''
    started = [make(target=noop) for _ in range(n)]
    for worker in started:
        worker.start()
    seconds = (time.perf_counter() - start) / n
    for worker in started:
        worker.join()
    return seconds
''',
    },
}

ALTERNATIVE = {
    "cpu_info": {
        'an OrderedDict': '''
import math
import os
from collections import OrderedDict

import psutil


def _quota(root):
    try:
        with open(os.path.join(root, "cpu.max")) as f:
            q, p = f.read().split()[:2]
        return None if q == "max" else int(q) / int(p)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
            q = int(f.read().split()[0])
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
            p = int(f.read().split()[0])
        return None if q <= 0 else q / p
    except (OSError, ValueError, IndexError):
        return None


def cpu_info(cgroup_root: str = "/sys/fs/cgroup") -> dict:
    """The three counts, in an OrderedDict (keys in a fixed order for printing)."""
    info = OrderedDict()
    info["logical"] = os.cpu_count() or 1
    info["physical"] = psutil.cpu_count(logical=False)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else info["logical"]
    quota = _quota(cgroup_root)
    if quota is not None:
        usable = min(usable, max(1, math.ceil(quota)))
    info["usable"] = usable
    return info
''',
        "process_cpu_count, pathlib, quota as a Fraction": '''
import math, os
from fractions import Fraction
from pathlib import Path
import psutil

def quota_cpus(root):
    root = Path(root)
    if (root / "cpu.max").exists():
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else Fraction(int(quota), int(period))
    v1 = root / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        quota = int((v1 / "cpu.cfs_quota_us").read_text())
        return None if quota < 0 else Fraction(quota, int((v1 / "cpu.cfs_period_us").read_text()))
    return None

def cpu_info(cgroup_root="/sys/fs/cgroup"):
    usable = os.process_cpu_count() if hasattr(os, "process_cpu_count") else len(os.sched_getaffinity(0))
    cpus = quota_cpus(cgroup_root)
    if cpus is not None:
        usable = min(usable, max(1, math.ceil(cpus)))
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": usable}
''',
        "the affinity read from /proc/self/status (Cpus_allowed_list)": '''
import math
import os

import psutil


def _allowed_cpus():
    """Count the CPUs in Cpus_allowed_list of /proc/self/status ("0-3,6")."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                count = 0
                for part in line.split(":", 1)[1].strip().split(","):
                    lo, _, hi = part.partition("-")
                    count += int(hi or lo) - int(lo) + 1
                return count
    return os.cpu_count()


def _quota(root):
    v2 = os.path.join(root, "cpu.max")
    if os.path.exists(v2):
        quota, period = open(v2).read().split()[:2]
        return None if quota == "max" else (int(quota), int(period))
    q = os.path.join(root, "cpu", "cpu.cfs_quota_us")
    p = os.path.join(root, "cpu", "cpu.cfs_period_us")
    if os.path.exists(q) and os.path.exists(p):
        quota = int(open(q).read())
        return None if quota < 0 else (quota, int(open(p).read()))
    return None


def cpu_info(cgroup_root="/sys/fs/cgroup"):
    usable = _allowed_cpus()
    limit = _quota(cgroup_root)
    if limit:
        usable = min(usable, max(1, math.ceil(limit[0] / limit[1])))
    return {"logical": os.cpu_count(), "physical": psutil.cpu_count(logical=False), "usable": usable}
''',
    },
    "run_in_child": {
        "multiprocessing.Pool with traced": '''
from helpers.workers import mp_context, traced
def run_in_child(fn, *args):
    with mp_context().Pool(1) as pool:
        record = pool.apply(traced, (fn, *args))
    return record["pid"], record["result"]
''',
        "os.fork and a pipe": '''
import os
import pickle


def run_in_child(fn, *args):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            data = pickle.dumps((True, fn(*args)))
        except BaseException as err:
            data = pickle.dumps((False, err))
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        ok, value = pickle.loads(f.read())
    os.waitpid(pid, 0)
    if not ok:
        raise value
    return pid, value
''',
        "a Pool of one, closed and joined by hand": '''
import multiprocessing
import os


def run_in_child(fn, *args):
    pool = multiprocessing.Pool(1)
    try:
        pid = pool.apply(os.getpid)
        value = pool.apply(fn, args)
    finally:
        pool.close()
        pool.join()
    return pid, value
''',
        # From the twentieth review: failed until the checks read a tuple subclass item by item.
        "a named tuple (child_pid, result)": '''
from collections import namedtuple

from helpers import workers
from helpers.workers import mp_context

Ran = namedtuple("Ran", "child_pid result")


def run_in_child(fn, *args):
    with mp_context().Pool(1) as pool:
        out = pool.apply(workers.traced, (fn, *args))
    return Ran(out["pid"], out["result"])
''',
    },
    "visible_appends": {
        'each worker joined in short steps while is_alive() (a worker that ended before the first look is never joined)': _APPENDS_STARTED + '''
    for worker in started:
        while worker.is_alive():   # join in short steps (Ctrl-C stays responsive)
            worker.join(0.1)
    return len(APPENDED)
''',
        "Process and Thread subclasses chosen by a dict": '''
import threading
import helpers.workers as w
BOX = []
def visible_appends(kind, n_workers):
    kinds = {"thread": threading.Thread, "process": w.mp_context().Process}
    if kind not in kinds:
        raise ValueError(f"unknown kind {kind}")
    if n_workers < 0:
        raise ValueError("negative")
    del BOX[:]
    started = []
    for i in range(n_workers):
        worker = kinds[kind](target=BOX.append, args=(i,))
        worker.start()
        started.append(worker)
    for worker in started:
        worker.join()
    return len(BOX)
''',
        "executors with max_workers=n_workers": '''
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

from helpers.workers import mp_context

APPENDED = []


def visible_appends(kind: str, n_workers: int) -> int:
    if kind not in ("thread", "process") or n_workers < 0:
        raise ValueError("bad kind or n_workers")
    APPENDED.clear()
    if n_workers == 0:
        return 0
    if kind == "thread":
        pool = ThreadPoolExecutor(max_workers=n_workers)
    else:
        pool = ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context())
    with pool:
        for f in [pool.submit(APPENDED.append, i) for i in range(n_workers)]:
            f.result()
    return len(APPENDED)
''',
        "processes by os.fork, reaped with os.waitpid": _VA_FORKED,
        "processes by os.fork, reaped with a waitid imported by name": variant(
            _VA_FORKED, ("import os\n", "import os\nfrom os import P_PID, WEXITED, waitid\n"),
            ("os.waitpid(pid, 0)    # join the child", "waitid(P_PID, pid, WEXITED)    # join the child")),
    },
    "creation_cost": {
        'each worker joined in short steps while is_alive() (a worker that ended before the first look is never joined)': '''
import multiprocessing
import threading
import time


def _nothing():
    pass


def creation_cost(kind, n):
    if kind not in {"thread", "process"}:
        raise ValueError(kind)
    if n < 1:
        raise ValueError(n)
    ctx = multiprocessing.get_context()
    t0 = time.monotonic()
    for _ in range(n):
        if kind == "thread":
            w = threading.Thread(target=_nothing, daemon=True)
        else:
            w = ctx.Process(target=_nothing, daemon=True)
        w.start()
        while w.is_alive():
            w.join(0.01)
    return (time.monotonic() - t0) / n
''',
        "timing each trial separately": '''
import threading, time, statistics
from helpers.workers import mp_context, noop
def creation_cost(kind, n):
    if kind not in {"thread", "process"}:
        raise ValueError("kind")
    if n < 1:
        raise ValueError("n")
    durations = []
    for _ in range(n):
        t0 = time.perf_counter()
        worker = threading.Thread(target=noop) if kind == "thread" else mp_context().Process(target=noop)
        worker.start()
        worker.join()
        durations.append(time.perf_counter() - t0)
    return statistics.fmean(durations)
''',
        "the best of the trials, start and join timed": _BEST_OF_TRIALS,
        # From the twenty-second review: failed under spawn on a bound that only a mean or a best meets.
        "the median of the trials, start and join timed": variant(_BEST_OF_TRIALS,
            ("import threading, time", "import statistics, threading, time"),
            ('    best = float("inf")\n', "    times = []\n"),
            ("        best = min(best, time.monotonic() - t0)\n    return best", "        times.append(time.monotonic() - t0)\n    return statistics.median(times)")),
        # A review's answer (2026-11-29): three untimed warm-ups failed a check that allowed one.
        "three untimed warm-ups before the timed trials": '''
import threading, time
from helpers.workers import mp_context, noop
WARMUP = 3  # untimed starts first: imports, caches, the allocator
def creation_cost(kind, n):
    if kind not in ("thread", "process"):
        raise ValueError(f"kind must be 'thread' or 'process', not {kind!r}")
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    make = threading.Thread if kind == "thread" else mp_context().Process
    for _ in range(WARMUP):
        worker = make(target=noop)
        worker.start()
        worker.join()
    start = time.perf_counter()
    for _ in range(n):
        worker = make(target=noop)
        worker.start()
        worker.join()
    return (time.perf_counter() - start) / n
''',
    },
}

# The "partly wrong" sample student: these answers wrong (or left blank), the rest right.
PARTIAL = {
    "run_in_child": "runs fn in a thread",
    "creation_cost": None,
}
