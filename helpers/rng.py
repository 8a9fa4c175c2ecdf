"""Random-number building blocks for worker processes (NumPy only, no torch).

Each function here runs inside a worker and is importable, so it works under
fork, spawn and forkserver. None of them decides *how* workers are seeded:
that is the lesson of assignment 04.
"""
import os

import numpy as np


def legacy_draws(size):
    """`size` uniform draws from NumPy's legacy global generator (np.random.random)."""
    return np.random.random(size)


def uniform_draws(seed, size):
    """`size` uniform draws from np.random.default_rng(seed).

    `seed` may be anything default_rng accepts: an int, a list of ints, a
    SeedSequence, a BitGenerator or a Generator (then that generator is used).
    """
    return np.random.default_rng(seed).random(size)


def draws_with_pid(seed, size):
    """(pid of the worker, uniform_draws(seed, size)): to see who drew what."""
    return os.getpid(), uniform_draws(seed, size)


def pid_seeded_draws(size):
    """A bad habit, for the demo: seed from the worker's PID (not reproducible)."""
    return np.random.default_rng(os.getpid()).random(size)
