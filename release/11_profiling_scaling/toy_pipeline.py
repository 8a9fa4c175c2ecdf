"""A small data pipeline with one slow step, for profiling practice (11_profiling_scaling).

It reads sensor lines, parses them, smooths the values with a moving average,
standardises them and counts outliers. One step does far more work than it
needs to; the profilers in the notebook find which one, and which line.
"""
import math
import random

import numpy as np


def make_lines(n, seed=0):
    """n text lines "index,reading" with noisy temperature readings."""
    rng = random.Random(seed)
    return [f"{i},{rng.gauss(20.0, 5.0):.3f}" for i in range(n)]


def parse(lines):
    """The readings of the lines, as floats."""
    return [float(line.split(",")[1]) for line in lines]


def moving_average(values, window):
    """Mean of every run of `window` consecutive values (adds `window` numbers per output)."""
    out = []
    for start in range(len(values) - window + 1):
        total = 0.0
        for k in range(start, start + window):
            total += values[k]
        out.append(total / window)
    return out


def moving_average_fast(values, window):
    """The same means from a running sum: one subtraction per output instead of `window` additions."""
    sums = np.cumsum(np.concatenate(([0.0], np.asarray(values, dtype=float))))
    return ((sums[window:] - sums[:-window]) / window).tolist()


def standardise(values):
    """(v - mean) / standard deviation for every value."""
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / sd for v in values]


def count_outliers(scores, limit=2.5):
    """How many standardised values lie further than `limit` from 0."""
    return sum(1 for s in scores if abs(s) > limit)


def run_pipeline(n=20_000, window=100, seed=0, smooth=moving_average):
    """The whole job: lines -> readings -> smoothed -> standardised -> outlier count."""
    values = parse(make_lines(n, seed))
    return count_outliers(standardise(smooth(values, window)))
