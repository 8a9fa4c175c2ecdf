"""Serial references for pairwise distances (06_joblib_vectorization).

These are the baselines: slow on purpose, and importable, so that process
pools can run them under every start method.
"""
import numpy as np


def cdist_naive(xs, ys):
    """Euclidean distances between the rows of xs (m, p) and ys (n, p): two Python loops.

    One tiny NumPy computation per pair of rows: the pure-Python baseline.
    """
    xs = np.asarray(xs, dtype=float)
    ys = np.asarray(ys, dtype=float)
    out = np.empty((xs.shape[0], ys.shape[0]))
    for i in range(xs.shape[0]):
        for j in range(ys.shape[0]):
            diff = xs[i] - ys[j]
            out[i, j] = np.sqrt(np.dot(diff, diff))
    return out
