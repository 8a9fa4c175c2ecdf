"""Tasks for the pool lessons (assignment 05): importable under every start method.

NumPy is imported inside the functions that use it, not here: a spawned worker
imports this module, and one that only runs `spin` should not pay for NumPy.
"""
import os
import time


def slow_pid_square(x, delay=0.02):
    """(pid, x * x) after sleeping `delay` s, so that every worker of a pool gets tasks."""
    time.sleep(delay)
    return os.getpid(), x * x


def slow_pid_add(a, b, delay=0.02):
    """(pid, a + b) after sleeping `delay` s: a two-argument task for starmap."""
    time.sleep(delay)
    return os.getpid(), a + b


def task(spec):
    """spec = (value, delay, fail): sleep `delay`, then raise if fail, else (pid, value * 10)."""
    value, delay, fail = spec
    time.sleep(delay)
    if fail:
        raise ValueError(f"task {value} failed on purpose")
    return os.getpid(), value * 10


def spin(n):
    """CPU-bound pure-Python work: n loop iterations (holds the GIL)."""
    total = 0
    for i in range(n):
        total += i % 7
    return total


def count_inside(n, seed):
    """How many of n uniform points in the square [-1, 1]^2 fall inside the unit circle.

    The points come from np.random.default_rng(seed): pass a SeedSequence
    child (or anything default_rng accepts) per task.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    inside = 0
    left = n
    while left > 0:  # in blocks, to keep memory small
        m = min(left, 1_000_000)
        xy = rng.uniform(-1.0, 1.0, size=(m, 2))
        inside += int(np.count_nonzero((xy * xy).sum(axis=1) < 1.0))
        left -= m
    return inside


def count_inside_global(n):
    """Like count_inside, from NumPy's legacy global generator (the version many tutorials use)."""
    import numpy as np

    xy = np.random.uniform(-1.0, 1.0, size=(n, 2))
    return int(np.count_nonzero((xy * xy).sum(axis=1) < 1.0))
