"""Timing that survives a busy laptop: compare candidates within one run.

Absolute seconds change from run to run; the ratio between two candidates
measured side by side, in interleaved rounds, is far steadier. Every speed
claim in the course is such a ratio.
"""
import time
from contextlib import contextmanager


class Stopwatch:
    seconds = float("nan")


@contextmanager
def stopwatch():
    """with stopwatch() as sw: ...   then sw.seconds."""
    sw = Stopwatch()
    start = time.perf_counter()
    try:
        yield sw
    finally:
        sw.seconds = time.perf_counter() - start


def measure(fn, *args, repeat=3, **kwargs):
    """Best (minimum) wall time of fn(*args, **kwargs) over `repeat` runs."""
    best = float("inf")
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best


class Comparison(dict):
    """{name: best seconds}, plus ratios against a baseline."""

    def speedups(self, baseline):
        return {name: self[baseline] / max(seconds, 1e-12) for name, seconds in self.items()}

    def table(self, baseline=None):
        baseline = next(iter(self)) if baseline is None else baseline  # a key may be 0 (workers)
        unit, scale = time_unit(min(self.values(), default=1.0))
        rows = [f"{'candidate':<28}{unit:>10}{'speedup':>10}"]
        for name, seconds in self.items():
            value = seconds * scale
            digits = 2 if value < 10 else 1 if value < 100 else 0
            rows.append(f"{name:<28}{value:>10.{digits}f}{self[baseline] / max(seconds, 1e-12):>9.2f}x")
        return "\n".join(rows)


def time_unit(seconds):
    """(column heading, factor) that shows `seconds` with a few digits before the point:
    a table of times in microseconds printed in seconds reads 0.0000 everywhere."""
    for unit, scale in (("seconds", 1), ("ms", 1e3), ("µs", 1e6)):
        if seconds * scale >= 1:
            return unit, scale
    return "ns", 1e9


def compare(candidates, repeat=3, before=None):
    """Time several zero-argument callables in interleaved rounds; best time of each.

    Interleaving (A, B, C, A, B, C, ...) means a burst of background load hits
    every candidate alike instead of spoiling one of them. `before(name)`, when
    given, runs untimed right before each timed call: a setting to apply (a
    thread count) or a warm-up that must not count (workers to restart).
    """
    samples = {name: [] for name in candidates}
    for _ in range(max(1, repeat)):
        for name, fn in candidates.items():
            if before is not None:
                before(name)
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return Comparison({name: min(values) for name, values in samples.items()})
