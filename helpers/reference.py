"""Serial reference implementations: the baselines that parallel versions must match.

Each assignment compares its parallel answers with these (same seed, same
inputs, same result) and measures speedups against them.
"""


def serial_map(fn, items):
    """What every parallel map must equal: [fn(x) for x in items]."""
    return [fn(x) for x in items]
