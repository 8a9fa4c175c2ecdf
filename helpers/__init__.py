"""Helpers the course notebooks import: system facts, timing, plots, workers, and by topic
(gil, races, rng, pools, ode, distances, ...) the serial baselines and worker functions.

    from helpers import system, timing, plots, workers

Submodules load on first use, so `import helpers` stays fast and never imports
torch or matplotlib by itself. Worker functions live here (not in notebooks) so
that processes started with `spawn` or `forkserver` can import them.
"""
import importlib
import importlib.util

__all__ = ["system", "timing", "plots", "workers"]


def __getattr__(name):
    if name in __all__ or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")
