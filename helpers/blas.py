"""Small BLAS-bound tasks and thread-pool reports for 06_joblib_vectorization.

Importable, so joblib and multiprocessing workers can run them under every
start method.
"""
import os
import threading

import numpy as np


def blas_threads():
    """{"user_api:prefix" (e.g. "blas:libopenblas"): number of threads} of the BLAS/OpenMP pools
    loaded in this process (two libraries of the same name and API count once)."""
    from threadpoolctl import threadpool_info

    return {f"{info['user_api']}:{info['prefix']}": info["num_threads"] for info in threadpool_info()}


def worker_report(_=None):
    """(pid, thread ident, BLAS/OpenMP thread counts) of whoever runs this."""
    return os.getpid(), threading.get_ident(), blas_threads()


def matmul_task(n, seed=0, repeat=1):
    """Multiply two random n x n matrices `repeat` times (BLAS-bound); returns a checksum."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal((n, n))
    total = 0.0
    for _ in range(repeat):
        total += float((a @ b)[0, 0])
    return total


def array_kind(array):
    """How an array reached this worker: 'memmap' (joblib's automatic memmapping) or 'ndarray'."""
    base = array
    while base is not None:
        if isinstance(base, np.memmap):
            return "memmap"
        base = getattr(base, "base", None)
    return type(array).__name__


def row_sums(array):
    """The row sums of a 2-D array, and how the array arrived (see array_kind)."""
    return array_kind(array), np.asarray(array).sum(axis=1)
