"""The machine, lent whole to one timing check at a time while grading in parallel.

A check that judges a speed-up (processes against threads, two NumPy threads
against one) needs cores that the other grading jobs are using: with jobs =
cores, each job has about one, and such a check could not decide (it was then
graded again alone, after the batch, which for a class of hundreds is a long
queue). So every kernel cell and every hidden check holds the machine *shared*,
and a check that judges a speed-up takes it *alone* for its timed part only
(`alone()`, through `autograder.checks._support.alone`): it waits for the cells
and checks in progress to end, new ones wait behind it, it measures on a quiet
machine and gives the machine back. Only the timed part: an answer that fails
before it (a blank one raises at once) never stops the other jobs.

Two lock files (flock) in a folder of the grading run, named by COURSE_LEASE:
a turnstile that an exclusive holder keeps while it waits, so that new shared
holders queue behind it rather than starve it, and the lease itself. The folder
is the grader's alone (mode 0700), and the variable never reaches student
code. Without it (plain nbgrader, a single job) holding costs nothing. No
holder waits longer than MAX_WAIT: it then goes on without the lease (a timing
check can at worst be undecided, as without leases).

A shared holder can sit idle for long while holding: a student's cell that hung
or sleeps until its time limit (180 s while grading). An exclusive taker
waiting for it would keep every other job queued behind it, with the cores
idle, for all that time. So while it waits, it reads the cores' load
(/proc/stat): once the machine has been quiet for QUIET_FOR seconds, it opens
the turnstile for OPEN_FOR seconds, so that the other jobs work meanwhile, then
closes it again and waits for those newcomers too. It still measures only once
it holds the lease alone: no one else's cell or check is then in progress.
"""
import contextlib
import fcntl
import os
import tempfile
import threading
import time

ENV = "COURSE_LEASE"
MAX_WAIT = 300.0
# The idle machine that lets an exclusive taker open the turnstile: for QUIET_FOR seconds, the
# cores together busy less than QUIET_CORES of one core on average; it stays open OPEN_FOR seconds.
QUIET_FOR, QUIET_CORES, OPEN_FOR = 2.0, 0.25, 5.0


def _lock(fd, mode, deadline, on_wait):
    """flock(fd, mode), waiting until `deadline` (on_wait() first); whether it was taken."""
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            on_wait()
            time.sleep(0.005)


# This process's holds in progress (innermost last): what alone() upgrades, the latest of the
# calling thread's own, else the latest of the process (a check runs in a thread of its own,
# inside the hold its runner took: autograder/hidden.py).
_held = []
# Seconds this process has spent waiting inside alone(), and since when it waits now (or None):
# a check's own time limit does not run meanwhile (autograder/hidden.py).
_waits = {"total": 0.0, "since": None}


class _Held:
    def __init__(self, turnstile, lease, exclusive, on_wait, on_waited):
        self.turnstile, self.lease, self.exclusive = turnstile, lease, exclusive
        self.on_wait, self.on_waited = on_wait, on_waited
        self.thread = threading.get_ident()
        self.open = True  # a check thread left behind by its time limit may come back after the hold ended


def _take(held, mode, deadline):
    """Take the lease in `mode` through the turnstile, as a newcomer; the seconds waited.
    An exclusive taker keeps the turnstile while it waits, so that newcomers queue behind it."""
    started, told = time.monotonic(), []

    def waiting():
        if not told:
            told.append(True)
            if held.on_wait is not None:
                held.on_wait()
    through = _lock(held.turnstile, fcntl.LOCK_EX, deadline, waiting)
    if mode == fcntl.LOCK_SH:
        if through:
            fcntl.flock(held.turnstile, fcntl.LOCK_UN)
        _lock(held.lease, mode, deadline, waiting)
    else:
        _lock_alone(held, deadline, waiting, through)
        fcntl.flock(held.turnstile, fcntl.LOCK_UN)
    waited = time.monotonic() - started
    if held.on_waited is not None:
        held.on_waited(waited)
    return waited


def busy_cpu_seconds():
    """CPU seconds the machine's cores have been busy since boot (/proc/stat), or None where
    it cannot be read (macOS, Windows: the turnstile then never opens early)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = [int(x) for x in fields[1:9]]
    except (OSError, ValueError, IndexError):
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def _lock_alone(held, deadline, waiting, gate_closed):
    """flock(lease, LOCK_EX), waiting until `deadline`, keeping the turnstile closed (held)
    meanwhile, except while the machine is idle: then open it for OPEN_FOR seconds (the module's
    docstring). Whether the lease was taken; on return the turnstile is held where it can be."""
    quiet_since, reading = time.monotonic(), (time.monotonic(), busy_cpu_seconds())
    open_until = None
    while True:
        try:
            fcntl.flock(held.lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        now = time.monotonic()
        if now > deadline:
            return False
        waiting()
        if open_until is not None:
            if now >= open_until:  # close it again, behind the newcomers (unless another alone took it)
                try:
                    fcntl.flock(held.turnstile, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    gate_closed, open_until = True, None
                    quiet_since, reading = now, (now, busy_cpu_seconds())
                except BlockingIOError:
                    open_until = now + OPEN_FOR
        elif gate_closed and now - reading[0] >= 0.25 and reading[1] is not None:
            busy = busy_cpu_seconds()
            if busy is None or busy - reading[1] > QUIET_CORES * (now - reading[0]):
                quiet_since = now
            reading = (now, busy)
            if now - quiet_since >= QUIET_FOR:  # holders asleep: let the other jobs work meanwhile
                fcntl.flock(held.turnstile, fcntl.LOCK_UN)
                gate_closed, open_until = False, now + OPEN_FOR
        time.sleep(0.005)


@contextlib.contextmanager
def hold(exclusive=False, folder=None, on_wait=None, on_waited=None):
    """Hold the machine (alone if `exclusive`) for the block; yields the seconds spent waiting.
    `on_wait()` is called once, if the machine is not free at once; `on_waited(seconds)` once it
    is taken (each time alone() takes or gives it back too)."""
    folder = folder or os.environ.get(ENV)
    files = _opened(folder) if folder else None
    if files is None:
        yield 0.0
        return
    turnstile, lease = files
    held = _Held(turnstile, lease, exclusive, on_wait, on_waited)
    try:
        waited = _take(held, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, time.monotonic() + MAX_WAIT)
        _held.append(held)
        try:
            yield waited
        finally:
            _held.remove(held)
    finally:
        held.open = False
        os.close(lease)  # closing drops the locks
        os.close(turnstile)


def _opened(folder):
    """(turnstile, lease) descriptors of the lease in `folder`; None where the folder is gone (a
    cluster's run ended on a host whose other worker did not answer its stop): the holder then
    goes on as without a lease, as plain nbgrader does, rather than fail the cell it holds for."""
    opened = []
    try:
        for name in ("turnstile", "lease"):
            opened.append(os.open(os.path.join(folder, name), os.O_RDWR | os.O_CREAT, 0o600))
    except FileNotFoundError:
        for fd in opened:
            os.close(fd)
        return None
    return opened


@contextlib.contextmanager
def alone():
    """Inside a shared hold(): the machine alone for the block (a timing check's measurement),
    then shared again; yields the seconds spent waiting. Each change waits its turn like a
    newcomer, at most MAX_WAIT. Outside any hold (no lease: plain nbgrader, one job) it costs
    nothing."""
    mine = [h for h in _held if h.thread == threading.get_ident()]
    held = (mine or _held or [None])[-1]
    if held is None or held.exclusive:
        yield 0.0
        return

    def change(mode):
        if not held.open:  # its descriptors are closed, and their numbers may be another's now
            return 0.0
        _waits["since"] = time.monotonic()
        try:
            fcntl.flock(held.lease, fcntl.LOCK_UN)  # a newcomer again, so that nobody deadlocks on us
            return _take(held, mode, time.monotonic() + MAX_WAIT)
        finally:
            _waits["total"] += time.monotonic() - _waits["since"]
            _waits["since"] = None
    waited = change(fcntl.LOCK_EX)
    try:
        yield waited
    finally:
        change(fcntl.LOCK_SH)


def seconds_waited():
    """Seconds this process has spent waiting inside alone(), the wait in progress included."""
    since = _waits["since"]
    return _waits["total"] + (time.monotonic() - since if since is not None else 0.0)


@contextlib.contextmanager
def folder_for_run(env):
    """A lease folder for one grading run: `env` with COURSE_LEASE set, for the block (the
    folder `env` names already, when an enclosing run, such as the course's tests, shares one)."""
    import shutil
    if env.get(ENV):
        yield env
        return
    folder = tempfile.mkdtemp(prefix="course-lease-")
    try:
        yield {**env, ENV: folder}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
