"""The machine, lent whole to one timing check at a time while grading in parallel.

A check that judges a speed-up (processes against threads, two NumPy threads
against one) needs cores that the other grading jobs are using: with jobs =
cores, each job has about one, and such a check could not decide (it was then
graded again alone, after the batch, which for a class of hundreds is a long
queue). So every kernel cell and every hidden check holds the machine *shared*,
and a check marked exclusive (`autograder.checks._support.exclusive`) holds it
*alone*: it waits for the cells and checks in progress to end, new ones wait
behind it, it measures on a quiet machine and gives the machine back.

Two lock files (flock) in a folder of the grading run, named by COURSE_LEASE:
a turnstile that an exclusive holder keeps while it waits, so that new shared
holders queue behind it rather than starve it, and the lease itself. The folder
is the grader's alone (mode 0700), and the variable never reaches student
code. Without it (plain nbgrader, a single job) holding costs nothing. No
holder waits longer than MAX_WAIT: it then goes on without the lease (a timing
check can at worst be undecided, as without leases).
"""
import contextlib
import fcntl
import os
import tempfile
import time

ENV = "COURSE_LEASE"
MAX_WAIT = 300.0


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


@contextlib.contextmanager
def hold(exclusive=False, folder=None, on_wait=None):
    """Hold the machine (alone if `exclusive`) for the block; yields the seconds spent waiting.
    `on_wait()` is called once, if the machine is not free at once."""
    folder = folder or os.environ.get(ENV)
    if not folder:
        yield 0.0
        return
    started = time.monotonic()
    deadline = started + MAX_WAIT
    told = []

    def waiting():
        if not told:
            told.append(True)
            if on_wait is not None:
                on_wait()
    turnstile = os.open(os.path.join(folder, "turnstile"), os.O_RDWR | os.O_CREAT, 0o600)
    lease = os.open(os.path.join(folder, "lease"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        through = _lock(turnstile, fcntl.LOCK_EX, deadline, waiting)
        if exclusive:
            _lock(lease, fcntl.LOCK_EX, deadline, waiting)  # keeping the turnstile: newcomers queue behind
            if through:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        else:
            if through:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
            _lock(lease, fcntl.LOCK_SH, deadline, waiting)
        yield time.monotonic() - started
    finally:
        os.close(lease)  # closing drops the locks
        os.close(turnstile)


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
