"""Wrong and alternative answers of 06_joblib_vectorization (see autograder/samples/__init__.py)."""
from autograder.samples import variant

# Code a student who has read the checks could add to a serial answer: find the spy's list of
# Parallel calls in the callers' frames and append a call that never ran. The judge's own
# evidence (autograder/checks/_support.py: helped) must still fail these answers.
_FORGE_PARALLEL_RECORD = """
import sys
def _forge_parallel_record(n_jobs, tasks, backend):
    frame = sys._getframe(1)
    while frame is not None:
        calls = frame.f_locals.get("calls")
        if type(calls) is list:
            calls.append({"n_jobs": n_jobs, "tasks": tasks, "backend": backend})
        frame = frame.f_back
"""

# And the tasks' notes: a thread (or process) started for the call notes itself in the spy's notes
# folder, found in the callers' frames, as a worker that ran a task would, and the puzzles the spy
# hands the first tasks are solved here. What remains is their CPU, spent by a thread the calling
# process had before the call, which the judge reads.
_FORGE_NOTES = _FORGE_PARALLEL_RECORD + """
import multiprocessing, os, sys, threading
from helpers.workers import note_where
def _forge_task_notes(in_a_process):
    frame = sys._getframe(1)
    while frame is not None and type(frame.f_locals.get("notes")) is not str:
        frame = frame.f_back
    if frame is None:
        return
    notes, puzzles = frame.f_locals["notes"], frame.f_locals.get("puzzles", ())
    if in_a_process:
        noter = multiprocessing.get_context("fork").Process(target=note_where, args=(notes,))
    else:
        noter = threading.Thread(target=note_where, args=(notes, os.getpid()))
    noter.start()
    noter.join()
    if puzzles:
        _solve_puzzles(notes, puzzles)
"""
_FORGE_TASK_NOTES = _FORGE_NOTES + """
def _solve_puzzles(notes, puzzles):
    from helpers.workers import note_answer
    for j, puzzle in enumerate(puzzles):
        note_answer(notes, j, puzzle)
"""
# The same, with the puzzles solved after the call returns, by a thread started at import, and the
# judge's next request (which reads the answers through pathlib, a module grading does not watch)
# made to wait for it: work done after the call, by a thread of the calling process. The judge
# reads the answers inside the window in which it measures the caller's CPU, so this must fail.
_FORGE_TASK_NOTES_SOLVED_LATER = _FORGE_NOTES + """
import pathlib, queue
_LATER = queue.Queue()
def _solve_later():
    from helpers.workers import note_answer
    while True:
        notes, j, puzzle = _LATER.get()
        note_answer(notes, j, puzzle)
        _LATER.task_done()
threading.Thread(target=_solve_later, daemon=True).start()
_glob = pathlib.Path.glob
def _glob_when_solved(self, pattern, *args, **kwargs):
    _LATER.join()
    return _glob(self, pattern, *args, **kwargs)
pathlib.Path.glob = _glob_when_solved
def _solve_puzzles(notes, puzzles):
    for j, puzzle in enumerate(puzzles):
        _LATER.put((notes, j, puzzle))
"""

# Distances computed here, the notes and the spy's record forged.
_CDIST_NOTES_FORGED = '''
import numpy as np
from helpers.distances import cdist_naive
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    _forge_task_notes(prefer != "threads")
    X = np.asarray(X, float)
    tasks = [(None, (chunk, Y), {}) for chunk in np.array_split(X, n_jobs)]
    _forge_parallel_record(n_jobs, tasks, "ThreadingBackend" if prefer == "threads" else "LokyBackend")
    return cdist_naive(X, Y)
'''

# Blocks multiplied one after another in the calling process, a Parallel call written into the spy's record.
_BLOCKS_RECORD_FORGED = '''
import numpy as np
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1 or np.shape(A)[1] != np.shape(B)[0]:
        raise ValueError("bad arguments")
    rows = np.array_split(np.asarray(A), n_blocks, axis=0)
    cols = np.array_split(np.asarray(B), n_blocks, axis=1)
    _forge_parallel_record(n_jobs, [(None, (r, c), {}) for r in rows for c in cols], "ThreadingBackend")
    return np.block([[r @ c for c in cols] for r in rows])
'''

_BOOTSTRAP_SERIAL = '''
import numpy as np
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("bad arguments")
    rng = np.random.default_rng(seed)
    means = [data[rng.integers(0, data.size, data.size)].mean() for _ in range(n_boot)]
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 - 100 * alpha / 2])
    return float(lo), float(hi)
'''

# A bootstrap done as the notebook asks (batches of resamples, one child seed each), for wrong
# answers that differ from it by a line or two.
_BOOTSTRAP = '''
import numpy as np
from joblib import Parallel, delayed


def bootstrap_ci(data, n_boot: int, n_jobs: int, seed: int, alpha: float = 0.05) -> tuple:
    data = np.asarray(data, dtype=float).ravel()
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("empty data, n_boot or n_jobs below 1, or alpha outside (0, 1)")

    def batch_means(stream, size):
        rng = np.random.default_rng(stream)
        picks = rng.integers(0, data.size, size=(size, data.size))
        return data[picks].mean(axis=1)

    batch = 200
    sizes = [min(batch, n_boot - start) for start in range(0, n_boot, batch)]
    streams = np.random.SeedSequence(seed).spawn(len(sizes))
    means = Parallel(n_jobs=n_jobs)(delayed(batch_means)(s, k) for s, k in zip(streams, sizes))
    low, high = np.percentile(np.concatenate(means), [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(low), float(high)
'''

_CDIST_INTO_MEMMAP = '''
import os
import tempfile

import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist


def _rows(out, X, Y, start, stop):
    out[start:stop] = cdist(X[start:stop], Y)


def cdist_joblib(X, Y, n_jobs: int, prefer: str = "processes") -> np.ndarray:
    """Row chunks written by the workers into a shared np.memmap output, returned as is."""
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be at least 1, got {n_jobs}")
    if prefer not in ("processes", "threads"):
        raise ValueError(f"unknown prefer {prefer!r}")
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    bounds = np.linspace(0, len(X), min(len(X), 4 * n_jobs) + 1).astype(int)
    with tempfile.TemporaryDirectory() as folder:
        out = np.memmap(os.path.join(folder, "D.mmap"), dtype=float, shape=(len(X), len(Y)), mode="w+")
        Parallel(n_jobs=n_jobs, prefer=prefer)(
            delayed(_rows)(out, X, Y, a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a)
    return out
'''

WRONG = {
    "cdist_joblib": {
        "an np.memmap whose file is cut short before it is returned (reading it kills the process)": variant(
            _CDIST_INTO_MEMMAP, ("    return out", '        os.truncate(os.path.join(folder, "D.mmap"), 0)\n    return out')),
        "serial: the naive loop, no joblib": '''
import numpy as np
from helpers.distances import cdist_naive
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    return cdist_naive(X, Y)
''',
        "serial, the spy's record of a Parallel call forged": _FORGE_PARALLEL_RECORD + '''
import numpy as np
from helpers.distances import cdist_naive
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    X = np.asarray(X, float)
    tasks = [(None, (chunk, Y), {}) for chunk in np.array_split(X, n_jobs)]
    _forge_parallel_record(n_jobs, tasks, "ThreadingBackend" if prefer == "threads" else "LokyBackend")
    return cdist_naive(X, Y)
''',
        "serial, the spy's record forged, an idle thread and process started meanwhile": _FORGE_PARALLEL_RECORD + '''
import multiprocessing, threading, time
import numpy as np
from helpers.distances import cdist_naive
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    idle = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,), daemon=True)
    idle.start()
    idle_thread = threading.Thread(target=time.sleep, args=(0.05,), daemon=True)
    idle_thread.start()
    X = np.asarray(X, float)
    tasks = [(None, (chunk, Y), {}) for chunk in np.array_split(X, n_jobs)]
    _forge_parallel_record(n_jobs, tasks, "ThreadingBackend" if prefer == "threads" else "LokyBackend")
    result = cdist_naive(X, Y)
    idle.kill()
    idle_thread.join(5)  # gone before the next answer, which shares this process in the catalogue
    return result
''',
        "serial, the spy's record and the tasks' notes forged by a process or thread started meanwhile": (
            _FORGE_TASK_NOTES + _CDIST_NOTES_FORGED),
        "serial, the spy's record and the tasks' notes forged, the puzzles solved after the call": (
            _FORGE_TASK_NOTES_SOLVED_LATER + _CDIST_NOTES_FORGED),
        "joblib with n_jobs=1 whatever is asked": '''
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    chunks = np.array_split(np.asarray(X, float), max(1, min(len(X), n_jobs)))
    return np.vstack(Parallel(n_jobs=1)(delayed(cdist)(c, Y) for c in chunks))
''',
        "one task for the whole matrix": '''
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    return Parallel(n_jobs=n_jobs, prefer=prefer)([delayed(cdist)(X, Y)])[0]
''',
        # Right with threads and with one job; with worker processes each chunk is written into
        # the worker's copy of the output, and the caller's stays zero.
        "chunks written into the caller's output array": '''
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    X = np.asarray(X, float)
    out = np.zeros((len(X), len(Y)))
    bounds = np.array_split(np.arange(len(X)), n_jobs)
    def fill(rows):
        if len(rows):
            out[rows[0]:rows[-1] + 1] = cdist(X[rows[0]:rows[-1] + 1], Y)
    Parallel(n_jobs=n_jobs, prefer=prefer)(delayed(fill)(rows) for rows in bounds)
    return out
''',
        "prefer ignored: always threads": '''
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    chunks = np.array_split(np.asarray(X, float), max(1, min(len(X), n_jobs)))
    return np.vstack(Parallel(n_jobs=n_jobs, prefer="threads")(delayed(cdist)(c, Y) for c in chunks))
''',
        # n_jobs honoured for threads only; two worker processes whatever is asked.
        "n_jobs fixed at 2 for processes": '''
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    jobs = n_jobs if prefer == "threads" else 2
    chunks = np.array_split(np.asarray(X, float), max(jobs, n_jobs))
    return np.vstack(Parallel(n_jobs=jobs, prefer=prefer)(delayed(cdist)(c, Y) for c in chunks))
''',
        "squared distances": '''
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    chunks = np.array_split(np.asarray(X, float), max(1, min(len(X), n_jobs)))
    return np.vstack(Parallel(n_jobs=n_jobs, prefer=prefer)(
        delayed(cdist)(c, Y, "sqeuclidean") for c in chunks))
''',
        "prefer left to joblib, which accepts None": '''
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist


def cdist_joblib(X, Y, n_jobs: int, prefer: str = "processes") -> np.ndarray:
    """Row chunks by joblib; joblib itself rejects an unknown prefer."""
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be at least 1, got {n_jobs}")
    X = np.asarray(X, dtype=float)
    chunks = np.array_split(X, max(1, min(len(X), 4 * n_jobs)))
    return np.vstack(Parallel(n_jobs=n_jobs, prefer=prefer)(delayed(cdist)(chunk, Y) for chunk in chunks))
''',
        "chunks of ceil(m / n_jobs) rows: fewer than n_jobs chunks on a few rows": '''
import math
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist

def cdist_joblib(X, Y, n_jobs: int, prefer: str = "processes") -> np.ndarray:
    if n_jobs < 1:
        raise ValueError("n_jobs must be at least 1")
    if prefer not in ("processes", "threads"):
        raise ValueError("prefer must be 'processes' or 'threads'")
    X = np.asarray(X, dtype=float)
    size = max(1, math.ceil(len(X) / n_jobs))
    chunks = [X[start:start + size] for start in range(0, len(X), size)]
    pieces = Parallel(n_jobs=n_jobs, prefer=prefer)(delayed(cdist)(chunk, Y) for chunk in chunks)
    return np.vstack(pieces)
''',
        "decoy tasks that return each chunk's shape, the distances computed by the caller": '''
import numpy as np
from joblib import Parallel, delayed
from scipy.spatial.distance import cdist
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError("rows of different lengths")
    chunks = np.array_split(X, min(len(X), n_jobs))
    Parallel(n_jobs=n_jobs, prefer=prefer)(delayed(np.shape)(c) for c in chunks)  # results unused
    return cdist(X, Y)
''',
    },
    "cdist_vectorized": {
        "a Python loop over the rows of X": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if X.shape[1] != Y.shape[1]:
        raise ValueError("rows of different lengths")
    out = np.empty((len(X), len(Y)))
    for i in range(len(X)):
        out[i] = np.sqrt(((Y - X[i]) ** 2).sum(axis=1))
    return out
''',
        "a comprehension over the rows of X": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if X.shape[1] != Y.shape[1]:
        raise ValueError("rows of different lengths")
    return np.array([np.linalg.norm(Y - x, axis=1) for x in X]).reshape(len(X), len(Y))
''',
        "a loop over the rows of Y": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if X.shape[1] != Y.shape[1]:
        raise ValueError("rows of different lengths")
    out = np.empty((len(X), len(Y)))
    for j, y in enumerate(Y):
        out[:, j] = np.sqrt(((X - y) ** 2).sum(axis=1))
    return out
''',
        "the double loop": '''
from helpers.distances import cdist_naive
def cdist_vectorized(X, Y):
    if len(X[0]) != len(Y[0]):
        raise ValueError("rows of different lengths")
    return cdist_naive(X, Y)
''',
        "expansion without clipping": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    sq = (X ** 2).sum(1)[:, None] - 2 * X @ Y.T + (Y ** 2).sum(1)[None, :]
    with np.errstate(invalid="ignore"):
        return np.sqrt(sq)
''',
        "squared distances": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    return ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
''',
        "Manhattan distances": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    return np.abs(X[:, None, :] - Y[None, :, :]).sum(-1)
''',
        "integer input truncated": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X); Y = np.asarray(Y)
    d = X[:, None, :] - Y[None, :, :]
    return np.sqrt((d * d).sum(-1)).astype(X.dtype)
''',
        "no shape check: broadcasting refuses most mismatched rows, not a row of length 1": '''
import numpy as np


def cdist_vectorized(X, Y) -> np.ndarray:
    """Pairwise Euclidean distances by broadcasting; numpy itself rejects mismatched rows."""
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    diff = X[:, None, :] - Y[None, :, :]   # raises ValueError when the row lengths differ
    return np.sqrt((diff ** 2).sum(axis=-1))
''',
        "a Python loop over the rows of X, the tracer switched off meanwhile": '''
import sys
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if X.shape[1] != Y.shape[1]:
        raise ValueError("rows of different lengths")
    tracer = sys.gettrace()
    sys.settrace(None)
    try:
        out = np.empty((len(X), len(Y)))
        for i in range(len(X)):
            out[i] = np.sqrt(((Y - X[i]) ** 2).sum(axis=1))
    finally:
        sys.settrace(tracer)
    return out
''',
        "a Python loop over the rows of X, in a thread": '''
import threading
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if X.shape[1] != Y.shape[1]:
        raise ValueError("rows of different lengths")
    out = np.empty((len(X), len(Y)))
    def rows():
        for i in range(len(X)):
            out[i] = np.sqrt(((Y - X[i]) ** 2).sum(axis=1))
    worker = threading.Thread(target=rows)
    worker.start()
    worker.join()
    return out
''',
        "a loop over every pair run by C iterators (itertools.starmap of math.dist)": '''
import itertools, math
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError("rows of different lengths")
    pairs = itertools.starmap(math.dist, itertools.product(X.tolist(), Y.tolist()))
    return np.fromiter(pairs, float, len(X) * len(Y)).reshape(len(X), len(Y))
''',
        "integer arrays broadcast in their own type (uint8 wraps around)": '''
import numpy as np


def cdist_vectorized(X, Y) -> np.ndarray:
    X = np.asarray(X)
    Y = np.asarray(Y)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must be 2-D with rows of the same length, got {X.shape} and {Y.shape}")
    diff = X[:, None, :] - Y[None, :, :]  # in the input's own dtype
    return np.sqrt((diff * diff).sum(axis=-1))
''',
    },
    "block_matmul": {
        "A @ B with no blocks": '''
import numpy as np
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1 or np.shape(A)[1] != np.shape(B)[0]:
        raise ValueError("bad arguments")
    return np.asarray(A) @ np.asarray(B)
''',
        "blocks computed serially": '''
import numpy as np
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1 or np.shape(A)[1] != np.shape(B)[0]:
        raise ValueError("bad arguments")
    rows = np.array_split(np.asarray(A), n_blocks, axis=0)
    cols = np.array_split(np.asarray(B), n_blocks, axis=1)
    return np.block([[r @ c for c in cols] for r in rows])
''',
        "blocks computed serially, the spy's record forged": _FORGE_PARALLEL_RECORD + _BLOCKS_RECORD_FORGED,
        "blocks computed serially, the spy's record and the tasks' notes forged by a thread started meanwhile": (
            _FORGE_TASK_NOTES + _BLOCKS_RECORD_FORGED.replace(
                "    _forge_parallel_record(", "    _forge_task_notes(False)\n    _forge_parallel_record(")),
        "only row strips in parallel": '''
import numpy as np
from joblib import Parallel, delayed
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1 or np.shape(A)[1] != np.shape(B)[0]:
        raise ValueError("bad arguments")
    strips = np.array_split(np.asarray(A), n_blocks, axis=0)
    return np.vstack(Parallel(n_jobs=n_jobs, prefer="threads")(delayed(np.dot)(s, B) for s in strips))
''',
        "every task gets the whole matrices": '''
import numpy as np
from joblib import Parallel, delayed
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1 or np.shape(A)[1] != np.shape(B)[0]:
        raise ValueError("bad arguments")
    A = np.asarray(A); B = np.asarray(B)
    r = np.array_split(np.arange(A.shape[0]), n_blocks)
    c = np.array_split(np.arange(B.shape[1]), n_blocks)
    pieces = Parallel(n_jobs=n_jobs, prefer="threads")(
        delayed(np.dot)(A, B) for i in range(n_blocks) for j in range(n_blocks))
    return np.block([[pieces[i * n_blocks + j][np.ix_(r[i], c[j])] for j in range(n_blocks)]
                     for i in range(n_blocks)])
''',
        "only square, evenly divisible blocks": '''
import numpy as np
from joblib import Parallel, delayed
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1 or np.shape(A)[1] != np.shape(B)[0]:
        raise ValueError("bad arguments")
    A = np.asarray(A); B = np.asarray(B)
    s = A.shape[0] // n_blocks
    blk = lambda M, i, j: M[i * s:(i + 1) * s, j * s:(j + 1) * s]
    C = np.zeros((A.shape[0], B.shape[1]))
    jobs = [(i, j, k) for i in range(n_blocks) for j in range(n_blocks) for k in range(n_blocks)]
    out = Parallel(n_jobs=n_jobs, prefer="threads")(delayed(np.dot)(blk(A, i, k), blk(B, k, j)) for i, j, k in jobs)
    for (i, j, k), p in zip(jobs, out):
        C[i * s:i * s + p.shape[0], j * s:j * s + p.shape[1]] += p
    return C
''',
        "sum over k forgotten": '''
import numpy as np
from joblib import Parallel, delayed
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1 or np.shape(A)[1] != np.shape(B)[0]:
        raise ValueError("bad arguments")
    Ab = [np.array_split(r, n_blocks, axis=1) for r in np.array_split(np.asarray(A), n_blocks, axis=0)]
    Bb = [np.array_split(r, n_blocks, axis=1) for r in np.array_split(np.asarray(B), n_blocks, axis=0)]
    out = Parallel(n_jobs=n_jobs, prefer="threads")(
        delayed(np.dot)(Ab[i][i], Bb[i][j]) for i in range(n_blocks) for j in range(n_blocks))
    return np.block([[out[i * n_blocks + j] for j in range(n_blocks)] for i in range(n_blocks)])
''',
        "n_jobs never checked (joblib itself refuses only 0)": '''
import numpy as np
from joblib import Parallel, delayed


def block_matmul(A, B, n_blocks: int, n_jobs: int) -> np.ndarray:
    """A @ B from an n_blocks x n_blocks block decomposition, the block products run in parallel."""
    A = np.asarray(A)
    B = np.asarray(B)
    if n_blocks < 1:
        raise ValueError("n_blocks must be at least 1")
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"cannot multiply shapes {A.shape} and {B.shape}")
    A_blocks = [np.array_split(rows, n_blocks, axis=1) for rows in np.array_split(A, n_blocks, axis=0)]
    B_blocks = [np.array_split(rows, n_blocks, axis=1) for rows in np.array_split(B, n_blocks, axis=0)]
    keys = [(i, j, k) for i in range(n_blocks) for j in range(n_blocks) for k in range(n_blocks)]
    products = Parallel(n_jobs=n_jobs, prefer="threads")(delayed(np.dot)(A_blocks[i][k], B_blocks[k][j]) for i, j, k in keys)
    C = [[0] * n_blocks for _ in range(n_blocks)]
    for (i, j, k), product in zip(keys, products):
        C[i][j] = C[i][j] + product
    return np.block(C)
''',
        "decoy tasks that return each block's shape, A @ B computed by the caller": '''
import numpy as np
from joblib import Parallel, delayed
def block_matmul(A, B, n_blocks, n_jobs):
    A = np.asarray(A, float); B = np.asarray(B, float)
    if n_blocks < 1 or n_jobs < 1 or A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError("bad arguments")
    rows = np.array_split(np.arange(A.shape[0]), n_blocks)
    inner = np.array_split(np.arange(A.shape[1]), n_blocks)
    Parallel(n_jobs=n_jobs, prefer="threads")(  # results unused
        delayed(np.shape)(A[np.ix_(r, k)]) for r in rows for k in inner)
    return A @ B
''',
    },
    "bootstrap_ci": {
        "one seed per worker: depends on n_jobs": '''
import numpy as np
from joblib import Parallel, delayed
def _means(data, seed, size):
    rng = np.random.default_rng(seed)
    return data[rng.integers(0, len(data), (size, len(data)))].mean(1)
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("bad arguments")
    sizes = [len(c) for c in np.array_split(np.arange(n_boot), n_jobs)]
    means = np.concatenate(Parallel(n_jobs=n_jobs)(delayed(_means)(data, seed + w, s) for w, s in enumerate(sizes)))
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 - 100 * alpha / 2])
    return float(lo), float(hi)
''',
        "global NumPy RNG, never seeded in the workers": '''
import numpy as np
from joblib import Parallel, delayed
def _means(data, size):
    return data[np.random.randint(0, len(data), (size, len(data)))].mean(1)
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("bad arguments")
    np.random.seed(seed)
    means = np.concatenate(Parallel(n_jobs=n_jobs)(delayed(_means)(data, 100) for _ in range(-(-n_boot // 100))))
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 - 100 * alpha / 2])
    return float(lo), float(hi)
''',
        "the same seed in every batch": '''
import numpy as np
from joblib import Parallel, delayed
def _means(data, seed, size):
    rng = np.random.default_rng(seed)
    return data[rng.integers(0, len(data), (size, len(data)))].mean(1)
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("bad arguments")
    sizes = [min(250, n_boot - s) for s in range(0, n_boot, 250)]
    means = np.concatenate(Parallel(n_jobs=n_jobs)(delayed(_means)(data, seed, s) for s in sizes))
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 - 100 * alpha / 2])
    return float(lo), float(hi)
''',
        "percentiles of the data, not of the means": '''
import numpy as np
from joblib import Parallel, delayed
def _resample(data, seed, size):
    rng = np.random.default_rng(seed)
    return data[rng.integers(0, len(data), (size, len(data)))].ravel()
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("bad arguments")
    seeds = np.random.SeedSequence(seed).spawn(-(-n_boot // 100))
    values = np.concatenate(Parallel(n_jobs=n_jobs)(delayed(_resample)(data, s, 100) for s in seeds))
    lo, hi = np.percentile(values, [100 * alpha / 2, 100 - 100 * alpha / 2])
    return float(lo), float(hi)
''',
        "normal approximation, no resampling": '''
import numpy as np
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("bad arguments")
    half = 1.96 * data.std(ddof=1) / np.sqrt(data.size)
    return float(data.mean() - half), float(data.mean() + half)
''',
        "serial loop": _BOOTSTRAP_SERIAL,
        "serial loop, the spy's record forged": _FORGE_PARALLEL_RECORD + _BOOTSTRAP_SERIAL.replace(
            "    lo, hi =", "    _forge_parallel_record(n_jobs, [(None, (data,), {})] * n_jobs, \"LokyBackend\")\n    lo, hi ="),
        "serial loop, the spy's record and the tasks' notes forged by a thread started meanwhile": _FORGE_TASK_NOTES + _BOOTSTRAP_SERIAL.replace(
            "    lo, hi =", "    _forge_task_notes(False)\n    _forge_parallel_record(n_jobs, [(None, (data,), {})] * n_jobs, \"ThreadingBackend\")\n    lo, hi ="),
        "alpha ignored": '''
import numpy as np
from joblib import Parallel, delayed
def _means(data, seed, size):
    rng = np.random.default_rng(seed)
    return data[rng.integers(0, len(data), (size, len(data)))].mean(1)
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("bad arguments")
    sizes = [min(100, n_boot - s) for s in range(0, n_boot, 100)]
    seeds = np.random.SeedSequence(seed).spawn(len(sizes))
    means = np.concatenate(Parallel(n_jobs=n_jobs)(delayed(_means)(data, q, s) for q, s in zip(seeds, sizes)))
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)
''',
        "alpha not halved: the percentiles 100 * alpha and 100 * (1 - alpha)": variant(
            _BOOTSTRAP, ("[100 * alpha / 2, 100 * (1 - alpha / 2)]", "[100 * alpha, 100 * (1 - alpha)]")),
        "the median of each resample, not the mean": variant(
            _BOOTSTRAP, ("return data[picks].mean(axis=1)", "return np.median(data[picks], axis=1)")),
        "every batch seeded alike, a fixed number of batches": variant(
            _BOOTSTRAP, ("rng = np.random.default_rng(stream)", "rng = np.random.default_rng(seed)"),
            ("""    batch = 200
    sizes = [min(batch, n_boot - start) for start in range(0, n_boot, batch)]
    streams = np.random.SeedSequence(seed).spawn(len(sizes))
""", """    sizes = [len(part) for part in np.array_split(np.arange(n_boot), min(10, n_boot))]
    streams = [None] * len(sizes)                  # unused: every batch is seeded with `seed`
""")),
        "n_jobs never checked (joblib itself refuses only 0)": variant(_BOOTSTRAP, ("or n_boot < 1 or n_jobs < 1 or", "or n_boot < 1 or")),
        "alpha = 1 accepted": variant(_BOOTSTRAP, ("not 0 < alpha < 1:", "not 0 < alpha <= 1:")),
        "decoy tasks that return len(data), every resample drawn by the caller": '''
import numpy as np
from joblib import Parallel, delayed
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("bad arguments")
    Parallel(n_jobs=n_jobs, prefer="threads")(delayed(len)(data) for _ in range(max(2, n_jobs)))  # unused
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(n_boot, data.size))].mean(axis=1)
    low, high = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(low), float(high)
''',
        "whole batches only: the n_boot remainder never drawn": '''
import numpy as np
from joblib import Parallel, delayed


def bootstrap_ci(data, n_boot: int, n_jobs: int, seed: int, alpha: float = 0.05) -> tuple:
    data = np.asarray(data, dtype=float).ravel()
    if data.size == 0:
        raise ValueError("data is empty")
    if n_boot < 1 or n_jobs < 1:
        raise ValueError(f"n_boot and n_jobs must be at least 1, got {n_boot} and {n_jobs}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    def batch_means(stream, size):
        rng = np.random.default_rng(stream)
        return data[rng.integers(0, data.size, size=(size, data.size))].mean(axis=1)
    n_batches = min(n_boot, 10)
    size = n_boot // n_batches  # the remainder n_boot % n_batches is never drawn
    streams = np.random.SeedSequence(seed).spawn(n_batches)
    means = Parallel(n_jobs=n_jobs)(delayed(batch_means)(s, size) for s in streams)
    low, high = np.percentile(np.concatenate(means), [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(low), float(high)
''',
    },
    "run_with_blas_threads": {
        "sets OMP_NUM_THREADS after the libraries loaded": '''
import os
def run_with_blas_threads(fn, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    old = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(n_threads)
    try:
        return fn()
    finally:
        if old is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = old
''',
        "limits but never restores": '''
from threadpoolctl import threadpool_limits
def run_with_blas_threads(fn, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    threadpool_limits(limits=n_threads)
    return fn()
''',
        "restores only when fn returns": '''
from threadpoolctl import threadpool_limits
def run_with_blas_threads(fn, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    limiter = threadpool_limits(limits=n_threads)
    result = fn()
    limiter.restore_original_limits()
    return result
''',
        "always one thread": '''
from threadpoolctl import threadpool_limits
def run_with_blas_threads(fn, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    with threadpool_limits(limits=1):
        return fn()
''',
        "swallows fn's exception": '''
from threadpoolctl import threadpool_limits
def run_with_blas_threads(fn, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    with threadpool_limits(limits=n_threads):
        try:
            return fn()
        except Exception as err:
            return err
''',
        "no check of n_threads": '''
from threadpoolctl import threadpool_limits
def run_with_blas_threads(fn, n_threads):
    with threadpool_limits(limits=max(1, n_threads)):
        return fn()
''',
        # Out of the tampering snapshot's sight: an attribute of the library handle that
        # threadpoolctl caches, not a function of a module.
        "no limit at all; the BLAS libraries' own thread counts forged while fn runs": '''
from threadpoolctl import ThreadpoolController
_shown = []
def _forged(real):
    return lambda: _shown[-1] if _shown else real()
for _lib in ThreadpoolController().select(user_api="blas").lib_controllers:
    _name = f"{_lib._symbol_prefix}openblas_get_num_threads{_lib._symbol_suffix}"
    setattr(_lib.dynlib, _name, _forged(getattr(_lib.dynlib, _name)))
def run_with_blas_threads(fn, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    _shown.append(n_threads)
    try:
        return fn()
    finally:
        _shown.pop()
''',
        "limits and never restores; threadpoolctl's report forged afterwards": '''
import threadpoolctl
from threadpoolctl import threadpool_limits
_real_info, _claimed, _inside = threadpoolctl.threadpool_info, {}, []
def _forged_info():
    info = _real_info()
    for pool in info:
        if not _inside and pool["filepath"] in _claimed:
            pool["num_threads"] = _claimed[pool["filepath"]]
    return info
threadpoolctl.threadpool_info = _forged_info
def run_with_blas_threads(fn, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    if not _claimed:
        _claimed.update({p["filepath"]: p["num_threads"] for p in _real_info() if p["user_api"] == "blas"})
    threadpool_limits(limits=n_threads, user_api="blas")
    _inside.append(n_threads)
    try:
        return fn()
    finally:
        _inside.pop()
''',
        "every pool restored to the first pool's count (threadpool_info()[0])": '''
from threadpoolctl import threadpool_info, threadpool_limits

def run_with_blas_threads(fn, n_threads: int):
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    before = threadpool_info()[0]["num_threads"]   # how many threads the pools run now
    threadpool_limits(limits=n_threads)
    try:
        return fn()
    finally:
        threadpool_limits(limits=before)
''',
        "the limits to restore read from a ThreadpoolController made first (it reads the counts live)": '''
from threadpoolctl import ThreadpoolController, threadpool_limits


def run_with_blas_threads(fn, n_threads: int):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    original = ThreadpoolController()      # a snapshot of the current counts
    threadpool_limits(n_threads, user_api="blas")
    try:
        value = fn()
    finally:
        threadpool_limits(limits=original)
    return value
''',
    },
}

_SPAWNED_GENERATORS_THREADS = '''
import numpy as np
from joblib import Parallel, delayed
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float)
    if data.size == 0 or n_boot < 1 or n_jobs < 1 or not 0 < alpha < 1:
        raise ValueError("invalid argument")
    n_batches = (n_boot + 99) // 100
    gens = np.random.default_rng(seed).spawn(n_batches)
    sizes = [100] * (n_batches - 1) + [n_boot - 100 * (n_batches - 1)]
    draw = lambda g, k: g.choice(data, size=(k, data.size), replace=True).mean(axis=1)
    means = np.concatenate(Parallel(n_jobs=n_jobs, prefer="threads")(delayed(draw)(g, k) for g, k in zip(gens, sizes)))
    return float(np.percentile(means, 50 * alpha)), float(np.percentile(means, 100 - 50 * alpha))
'''

ALTERNATIVE = {
    "cdist_joblib": {
        'the workers write into an np.memmap, returned as it is': _CDIST_INTO_MEMMAP,
        "joblib's multiprocessing and threading backends (tasks sent with plain pickle)": '''
import numpy as np
from joblib import Parallel, delayed, parallel_config
from helpers.distances import cdist_naive
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad arguments")
    chunks = np.array_split(np.asarray(X, float), n_jobs)
    backend = "multiprocessing" if prefer == "processes" else "threading"
    with parallel_config(backend=backend, n_jobs=n_jobs):
        return np.vstack(Parallel()(delayed(cdist_naive)(chunk, Y) for chunk in chunks))
''',
        "a notebook function per chunk, parallel_config for the backend": '''
import numpy as np
from joblib import Parallel, delayed, parallel_config
def chunk_distances(chunk, Y):
    d = chunk[:, None, :] - Y[None, :, :]
    return np.sqrt((d ** 2).sum(-1))
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1:
        raise ValueError("n_jobs must be at least 1")
    backends = {"processes": "loky", "threads": "threading"}
    if prefer not in backends:
        raise ValueError(f"unknown prefer {prefer!r}")
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    bounds = np.linspace(0, len(X), min(len(X), n_jobs) + 1).astype(int)
    with parallel_config(backend=backends[prefer], n_jobs=n_jobs):
        pieces = Parallel()(delayed(chunk_distances)(X[a:b], Y) for a, b in zip(bounds[:-1], bounds[1:]))
    return np.concatenate(pieces, axis=0)
''',
        "the naive helper per chunk, results as a generator": '''
import numpy as np
from joblib import Parallel, delayed
from helpers.distances import cdist_naive
def cdist_joblib(X, Y, n_jobs, prefer="processes"):
    if n_jobs < 1 or prefer not in ("processes", "threads"):
        raise ValueError("bad n_jobs or prefer")
    chunks = np.array_split(np.asarray(X, float), max(1, min(len(X), 2 * n_jobs)))
    out = Parallel(n_jobs=n_jobs, prefer=prefer, return_as="generator")(delayed(cdist_naive)(c, Y) for c in chunks)
    return np.vstack(list(out))
''',
    },
    "cdist_vectorized": {
        "expansion with clipping": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if X.shape[1] != Y.shape[1]:
        raise ValueError("X and Y rows differ in length")
    sq = (X * X).sum(1)[:, None] - 2.0 * (X @ Y.T) + (Y * Y).sum(1)[None, :]
    return np.sqrt(np.clip(sq, 0.0, None))
''',
        "a loop over the few coordinates": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, float); Y = np.asarray(Y, float)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError("shapes do not match")
    total = np.zeros((X.shape[0], Y.shape[0]))
    for k in range(X.shape[1]):
        total += np.subtract.outer(X[:, k], Y[:, k]) ** 2
    return np.sqrt(total)
''',
        "scipy's cdist": '''
import numpy as np
from scipy.spatial import distance
def cdist_vectorized(X, Y):
    return distance.cdist(np.asarray(X, float), np.asarray(Y, float))
''',
        "np.linalg.norm over a broadcast difference": '''
import numpy as np
def cdist_vectorized(X, Y):
    X = np.asarray(X, dtype=np.float64); Y = np.asarray(Y, dtype=np.float64)
    if X.shape[1] != Y.shape[1]:
        raise ValueError("rows of different lengths")
    return np.linalg.norm(X[:, np.newaxis] - Y[np.newaxis], axis=2)
''',
        "torch.cdist on float64 tensors": '''
import numpy as np
import torch


def cdist_vectorized(X, Y) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError("rows of X and Y must have the same length")
    d = torch.cdist(torch.from_numpy(X), torch.from_numpy(Y), compute_mode="donot_use_mm_for_euclid_dist")
    return d.numpy()
''',
    },
    "block_matmul": {
        'the workers write into an np.memmap, returned as it is': '''
import os
import tempfile

import numpy as np
from joblib import Parallel, delayed


def _fill_block(C, A_blk, B_blk, r0, r1, c0, c1):
    C[r0:r1, c0:c1] = A_blk @ B_blk


def block_matmul(A, B, n_blocks: int, n_jobs: int) -> np.ndarray:
    """The workers write their blocks into one np.memmap, which is returned as it is."""
    if n_blocks < 1 or n_jobs < 1:
        raise ValueError(f"n_blocks and n_jobs must be at least 1, got {n_blocks} and {n_jobs}")
    A = np.asarray(A, dtype=float)
    B = np.asarray(B, dtype=float)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"cannot multiply shapes {A.shape} and {B.shape}")
    rows = np.array_split(np.arange(A.shape[0]), n_blocks)
    cols = np.array_split(np.arange(B.shape[1]), n_blocks)
    with tempfile.TemporaryDirectory() as folder:   # the mapping outlives the file's name
        C = np.memmap(os.path.join(folder, "C.mmap"), dtype=float, shape=(A.shape[0], B.shape[1]), mode="w+")
        tasks = []
        for r in rows:
            for c in cols:
                if len(r) and len(c):
                    r0, r1, c0, c1 = r[0], r[-1] + 1, c[0], c[-1] + 1
                    tasks.append(delayed(_fill_block)(C, A[r0:r1], B[:, c0:c1], r0, r1, c0, c1))
        Parallel(n_jobs=n_jobs)(tasks)
        C.flush()
    return C
''',
        "one task per output block, processes": '''
import numpy as np
from joblib import Parallel, delayed
def output_block(row_blocks, col_blocks):
    return sum(a @ b for a, b in zip(row_blocks, col_blocks))
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1:
        raise ValueError("n_blocks and n_jobs must be positive")
    A = np.asarray(A, float); B = np.asarray(B, float)
    if A.shape[1] != B.shape[0]:
        raise ValueError("inner dimensions differ")
    Ab = [np.array_split(r, n_blocks, axis=1) for r in np.array_split(A, n_blocks, axis=0)]
    Bb = [np.array_split(c, n_blocks, axis=0) for c in np.array_split(B, n_blocks, axis=1)]
    flat = Parallel(n_jobs=n_jobs)(delayed(output_block)(Ab[i], Bb[j])
                                   for i in range(n_blocks) for j in range(n_blocks))
    return np.vstack([np.hstack(flat[i * n_blocks:(i + 1) * n_blocks]) for i in range(n_blocks)])
''',
        "row strip times column strip, index arithmetic": '''
import numpy as np
from joblib import Parallel, delayed
def block_matmul(A, B, n_blocks, n_jobs):
    if n_blocks < 1 or n_jobs < 1 or A.shape[1] != B.shape[0]:
        raise ValueError("bad arguments")
    r = np.linspace(0, A.shape[0], n_blocks + 1).astype(int)
    c = np.linspace(0, B.shape[1], n_blocks + 1).astype(int)
    C = np.empty((A.shape[0], B.shape[1]))
    jobs = [(i, j) for i in range(n_blocks) for j in range(n_blocks)]
    out = Parallel(n_jobs=n_jobs, prefer="threads")(
        delayed(np.matmul)(A[r[i]:r[i + 1]], B[:, c[j]:c[j + 1]]) for i, j in jobs)
    for (i, j), block in zip(jobs, out):
        C[r[i]:r[i + 1], c[j]:c[j + 1]] = block
    return C
''',
    },
    "bootstrap_ci": {
        "tasks fill slices of an np.empty array they share (require='sharedmem')": '''
import numpy as np
from joblib import Parallel, delayed


def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, dtype=float).ravel()
    if data.size == 0:
        raise ValueError("data must not be empty")
    if n_boot < 1 or n_jobs < 1:
        raise ValueError("n_boot and n_jobs must be >= 1")
    if not (0 < alpha < 1):
        raise ValueError("alpha must lie in (0, 1)")
    means = np.empty(n_boot)
    edges = list(range(0, n_boot, 100)) + [n_boot]
    seqs = np.random.SeedSequence(seed).spawn(len(edges) - 1)

    def fill(lo, hi, ss):
        rng = np.random.default_rng(ss)
        idx = rng.integers(0, data.size, size=(hi - lo, data.size))
        means[lo:hi] = data[idx].mean(axis=1)

    Parallel(n_jobs=n_jobs, require="sharedmem")(
        delayed(fill)(lo, hi, ss) for lo, hi, ss in zip(edges[:-1], edges[1:], seqs))
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)
''',
        "one child seed per resample, a module-level worker": '''
import numpy as np
from joblib import Parallel, delayed
def resample_means(data, seeds):
    return [data[np.random.default_rng(s).integers(0, data.size, data.size)].mean() for s in seeds]
def bootstrap_ci(data, n_boot, n_jobs, seed, alpha=0.05):
    data = np.asarray(data, float).ravel()
    if data.size == 0:
        raise ValueError("empty data")
    if n_boot < 1 or n_jobs < 1 or not (0 < alpha < 1):
        raise ValueError("bad n_boot, n_jobs or alpha")
    seeds = np.random.SeedSequence(seed).spawn(n_boot)
    batches = [seeds[i:i + 64] for i in range(0, n_boot, 64)]
    means = [m for part in Parallel(n_jobs=n_jobs)(delayed(resample_means)(data, b) for b in batches) for m in part]
    return tuple(float(q) for q in np.quantile(means, [alpha / 2, 1 - alpha / 2]))
''',
        "Generator.spawn and threads": _SPAWNED_GENERATORS_THREADS,
        "resamples in float32, the bounds NumPy float32 as np.percentile gives them": variant(
            _SPAWNED_GENERATORS_THREADS, ("data = np.asarray(data, float)", "data = np.asarray(data, np.float32)"),
            ("return float(np.percentile(means, 50 * alpha)), float(np.percentile(means, 100 - 50 * alpha))",
             "return np.percentile(means, 50 * alpha), np.percentile(means, 100 - 50 * alpha)")),
    },
    "run_with_blas_threads": {
        "ThreadpoolController, BLAS only": '''
from threadpoolctl import ThreadpoolController
def run_with_blas_threads(fn, n_threads):
    if not isinstance(n_threads, int) or n_threads < 1:
        raise ValueError(f"n_threads must be a positive int, got {n_threads!r}")
    with ThreadpoolController().limit(limits=n_threads, user_api="blas"):
        return fn()
''',
        "try/finally with restore_original_limits": '''
from threadpoolctl import threadpool_limits
def run_with_blas_threads(fn, n_threads):
    if n_threads < 1:
        raise ValueError("n_threads < 1")
    limiter = threadpool_limits(limits=n_threads)
    try:
        return fn()
    finally:
        limiter.restore_original_limits()
''',
        "threadpool_info() saved first, handed back to threadpool_limits in finally": '''
from threadpoolctl import threadpool_info, threadpool_limits


def run_with_blas_threads(fn, n_threads: int):
    if n_threads < 1:
        raise ValueError("n_threads must be at least 1")
    saved = threadpool_info()          # every pool's count before
    threadpool_limits(limits=n_threads)
    try:
        return fn()
    finally:
        threadpool_limits(limits=saved)   # put every pool back as it was
''',
    },
}

# The "partly wrong" sample student: these answers wrong (or left blank), the rest right.
PARTIAL = {
    "cdist_vectorized": "a Python loop over the rows of X",
    "bootstrap_ci": None,
    "cdist_joblib": None,
    "run_with_blas_threads": None,
}
