"""Profiling plumbing for 11_profiling_scaling: quiet torch.profiler, steady torch threads, a toy
sampling profiler.

Nothing here ranks functions or operators: that is what the notebook's
exercises do.
"""
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import contextmanager


@contextmanager
def native_stderr_filtered(drop=("USDT:", "ERROR: External init callback must run in same thread")):
    """Hold back lines that C++ code writes to file descriptor 2 and start with `drop`.

    Some torch builds print `USDT: ... profiler_start` / `profiler_stop` notes on
    the process's stderr every time torch.profiler starts and stops, and a note
    when the profiler is first started outside the main thread. They are noise,
    and in a notebook they show up as red stderr output. Python's own warnings
    (sys.stderr) are not touched; other native lines are passed on.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [line for line in caught.read().decode(errors="replace").splitlines(keepends=True)
                    if not line.startswith(drop)]
            if kept:
                sys.stderr.write("".join(kept))


@contextmanager
def torch_threads(n):
    """torch's intra-op thread count set to `n` inside the block, and back to what it was after it,
    even when the block raises. (A with block rather than try/finally in a cell: a Jupyter kernel's
    traceback of an error raised inside try/finally points at the finally line.)"""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def sample_stacks(fn, *args, interval=0.001):
    """Run fn(*args) while a second thread looks at its call stack every `interval` seconds.

    A toy version of what sampling profilers (py-spy, Scalene, perf) do: no
    hook on every call, just a look now and then. Returns (result, leaf, inclusive):
    `leaf` counts the function that was running at each sample (own time),
    `inclusive` counts every function on the stack (cumulative time).
    """
    target = threading.get_ident()
    leaf, inclusive = Counter(), Counter()
    running, done = threading.Event(), threading.Event()

    def sampler():
        running.wait()
        while not done.is_set():
            frame = sys._current_frames().get(target)
            names = set()
            if frame is not None:
                leaf[frame.f_code.co_name] += 1
                while frame is not None:
                    names.add(frame.f_code.co_name)
                    frame = frame.f_back
            inclusive.update(names)
            time.sleep(interval)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(interval / 4)      # let the sampler get the GIL about when it asks
    try:
        running.set()
        result = fn(*args)
    finally:
        done.set()
        sys.setswitchinterval(switch)
        thread.join()
    return result, leaf, inclusive
