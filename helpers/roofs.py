"""The two roofs of a roofline, measured (11_profiling_scaling).

STREAM-like memory bandwidth with NumPy, matrix-product FLOP/s, timed BLAS
kernels (axpy, dot, matmul), and a throughput worker that several processes
run at once to show which work scales with cores. The worker is importable,
so pools can run it under fork, spawn and forkserver.

The byte counts are those of the passes NumPy really makes: `np.copyto(b, a)`
reads a and writes b (2 arrays); a triad `a = b + s*c` done with `out=` takes
two passes, `a = s*c` then `a = a + b` (2 + 3 = 5 arrays). Like STREAM we do
not count the extra read a CPU may do before it writes a cache line.
"""
import time

import numpy as np
from scipy.linalg import blas   # loaded now, so that threadpool_limits() also reaches SciPy's BLAS


def _best(fn, repeat):
    best = float("inf")
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def copy_bandwidth(n=20_000_000, repeat=5):
    """Bytes per second of np.copyto between two n-element float64 arrays (best of `repeat`)."""
    a = np.ones(n)
    b = np.zeros(n)
    seconds = _best(lambda: np.copyto(b, a), repeat)
    return 2 * n * 8 / seconds


def triad(a, b, c, scalar):
    """a = b + scalar * c in place, in two NumPy passes (5 arrays' worth of traffic)."""
    np.multiply(c, scalar, out=a)
    np.add(a, b, out=a)


def triad_bandwidth(n=20_000_000, repeat=5):
    """Bytes per second of the NumPy triad on n-element float64 arrays (best of `repeat`)."""
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    seconds = _best(lambda: triad(a, b, c, 3.0), repeat)
    return 5 * n * 8 / seconds


def matmul_flops(n=1500, repeat=3):
    """FLOP/s of one n x n float64 matrix product with BLAS (2 n^3 FLOPs, best of `repeat`)."""
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n)), rng.random((n, n))
    seconds = _best(lambda: a @ b, repeat)
    return 2 * n**3 / seconds


def kernel_seconds(kind, n, min_time=0.05):
    """Best time of one BLAS call of `kind` ("axpy", "dot", "matmul") on size n.

    Small calls are repeated until about `min_time` seconds have passed, so
    that even a microsecond kernel is timed over many calls.
    """
    rng = np.random.default_rng(1)
    if kind == "axpy":
        x, y = rng.random(n), rng.random(n)
        call = lambda: blas.daxpy(x, y, a=1e-9)   # updates y in place: one pass over x and y
    elif kind == "dot":
        x, y = rng.random(n), rng.random(n)
        call = lambda: blas.ddot(x, y)
    elif kind == "matmul":
        a, b = rng.random((n, n)), rng.random((n, n))
        call = lambda: a @ b
    else:
        raise ValueError(f"unknown kind {kind!r}")
    call()                                           # warm up: first touch, thread start
    single = _best(call, 1)
    inner = max(1, int(min_time / max(single, 1e-7) / 3))
    return _best(lambda: [call() for _ in range(inner)], 3) / inner


def throughput(spec):
    """Run the triad for about `duration` seconds from an agreed moment; (bytes, started, seconds).

    spec = (n, start_at, duration): each call works on its own three n-element
    arrays. All workers of a pool get the same `start_at` (a time.time()
    value), so they run their loops at the same moment. Returned: the bytes its
    passes touched, when its first pass started (time.time(), comparable
    between processes) and how long its passes took. That is more than
    `duration`: the last pass starts before the time is up and ends after it,
    and a pass over large arrays takes tens of milliseconds (more on a busy
    machine). Divide by the time really taken, not by `duration`, or the rate
    comes out too high; `combined_rate` does it for several workers.
    """
    n, start_at, duration = spec
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    triad(a, b, c, 3.0)                              # touch the pages before the clock starts
    while time.time() < start_at:
        time.sleep(0.001)
    passes = 0
    started = time.time()
    start = time.perf_counter()
    stop = start + duration
    while time.perf_counter() < stop:
        triad(a, b, c, 3.0)
        passes += 1
    return passes * 5 * n * 8, started, time.perf_counter() - start


def combined_rate(runs):
    """Bytes per second of throughput() calls that ran together: all their bytes, divided by
    the time from the first one's start to the last one's end."""
    first = min(started for _, started, _ in runs)
    last = max(started + seconds for _, started, seconds in runs)
    return sum(moved for moved, _, _ in runs) / (last - first)


def roofline_plot(intensities, attainable, points, *, peak, bandwidth, ax=None):
    """Log-log roofline: the roof (attainable FLOP/s against intensity) and measured kernels.

    points: (kind, n, intensity, measured FLOP/s) tuples; one colour per kind,
    the marker size grows with n.
    """
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(7.5, 5))[1]
    ax.loglog(intensities, np.asarray(attainable) / 1e9, color="black", lw=2, label="roofline")
    ax.axvline(peak / bandwidth, color="grey", ls=":", label=f"ridge point {peak / bandwidth:.1f} FLOP/B")
    markers = {"axpy": "o", "dot": "s", "matmul": "^"}
    kinds = sorted({kind for kind, *_ in points}, key=list(markers).index)
    for kind in kinds:
        mine = [(n, i, r) for k, n, i, r in points if k == kind]
        sizes = 20 + 25 * np.arange(len(mine))
        ax.scatter([i for _, i, _ in mine], [r / 1e9 for *_, r in mine], s=sizes,
                   marker=markers.get(kind, "o"), alpha=0.8, label=f"{kind} (bigger marker: larger n)")
    # Below the slanted roof, clear of the axis (above it, the roof crossed the label out)
    x = intensities[0] * 8
    ax.text(x, bandwidth * x / 1e9 * 0.4, f"{bandwidth / 1e9:.1f} GB/s", fontsize=8, va="top")
    ax.text(intensities[-1], peak / 1e9 * 1.15, f"{peak / 1e9:.1f} GFLOP/s  ", fontsize=8, ha="right")
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Your roofline (one core), with measured kernels")
    ax.legend(fontsize=8, loc="lower right")
    return ax
