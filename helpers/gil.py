"""Workers for assignment 02 (the GIL): importable, so they run under every start method.

Nothing here imports numpy at module level: `import helpers.gil` stays cheap in
every worker process.
"""
import os
import random
import threading
import time


def draw_randoms(n):
    """CPU-bound pure Python: call random.random() n times (holds the GIL throughout)."""
    rand = random.random
    total = 0.0
    for _ in range(n):
        total += rand()
    return total


def wait(seconds):
    """I/O-bound stand-in: sleep (the GIL is released while sleeping), return the time waited."""
    time.sleep(seconds)
    return seconds


def rendezvous(barrier, value, timeout=20.0):
    """Wait at `barrier`, then report who ran this and whether everyone met there.

    A barrier for n parties only opens when n callers wait on it at the same
    time, so `met` is True only when the calls really ran concurrently.
    Returns {"value", "met", "pid", "thread"}.
    """
    try:
        barrier.wait(timeout)
        met = True
    except threading.BrokenBarrierError:
        met = False
    return {"value": value, "met": met, "pid": os.getpid(), "thread": threading.get_ident()}


def traced_chunks(n_chunks, chunk):
    """Run draw_randoms(chunk) n_chunks times; one timeline event per chunk.

    Events carry lane ("pid / thread"), start and end (wall-clock seconds,
    comparable across processes): what helpers.plots.timeline_plot draws.
    """
    lane = f"pid {os.getpid()} / {threading.current_thread().name}"
    events = []
    for _ in range(n_chunks):
        start = time.time()
        draw_randoms(chunk)
        events.append({"lane": lane, "start": start, "end": time.time()})
    return events


# --- NumPy work that releases the GIL -------------------------------------------------
def numpy_work(n, seed=0):
    """An element-wise NumPy job on n numbers: sin, exp and a sum (runs without the GIL)."""
    import numpy as np
    x = np.random.default_rng(seed).random(n)
    return float(np.exp(np.sin(x)).sum())


def numpy_chunk(x):
    """The NumPy job on an array already made: returns a float."""
    import numpy as np
    return float(np.exp(np.sin(x)).sum())


def numpy_in_threads(n, n_parts, n_threads, seed=0):
    """Split an n-element NumPy job into n_parts pieces, run them on n_threads threads.

    Used by the process x thread grid: each process calls this with its share.
    Returns (seconds spent computing, total).
    """
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor
    parts = np.array_split(np.random.default_rng(seed).random(n), n_parts)
    start = time.perf_counter()
    if n_threads == 1:
        total = sum(numpy_chunk(p) for p in parts)
    else:
        with ThreadPoolExecutor(n_threads) as pool:
            total = sum(pool.map(numpy_chunk, parts))
    return time.perf_counter() - start, total
