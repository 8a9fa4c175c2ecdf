"""Timing that survives a busy laptop: compare candidates within one run.

Absolute seconds change from run to run; the ratio between two candidates
measured side by side, in interleaved rounds, is far steadier. Every speed
claim in the course is such a ratio.
"""
import os
import sys
import time
from contextlib import contextmanager

from helpers import system


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
    """Best (minimum) wall time of fn(*args, **kwargs) over `repeat` runs, with compare's note
    where other programs kept the machine busy meanwhile (runs of half a second or more)."""
    best = float("inf")
    with others_load() as others:
        for _ in range(max(1, repeat)):
            start = time.perf_counter()
            fn(*args, **kwargs)
            best = min(best, time.perf_counter() - start)
    _note_busy(others.share)
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


def compare(candidates, repeat=3, before=None, progress=None):
    """Time several zero-argument callables in interleaved rounds; best time of each.

    Interleaving (A, B, C, A, B, C, ...) means a burst of background load hits
    every candidate alike instead of spoiling one of them. `before(name)`, when
    given, runs untimed right before each timed call: a setting to apply (a
    thread count) or a warm-up that must not count (workers to restart).
    `progress`, a short description, shows a progress bar of the timed calls
    (for comparisons that take ten seconds or more).
    Where other programs kept the machine busy meanwhile, a note says so
    (others_load): no interleaving helps a parallel run whose cores are taken.
    """
    samples = {name: [] for name in candidates}
    bar = _progress_bar(progress, max(1, repeat) * len(candidates))
    with others_load() as others:
        for _ in range(max(1, repeat)):
            for name, fn in candidates.items():
                if before is not None:
                    before(name)
                start = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - start)
                if bar is not None:
                    bar.update()
    if bar is not None:
        bar.close()
    _note_busy(others.share)
    return Comparison({name: min(values) for name, values in samples.items()})


def _progress_bar(description, total):
    """A text progress bar on stdout (under the cell, as print writes), or None when not asked for."""
    if description is None:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=description, file=sys.stdout)


# --- how busy other programs kept the machine ------------------------------------------------
BUSY_SHARE = 0.25  # of the machine's CPU time: half a core of 2, two cores of 8
_last_note = [float("-inf")]


class OthersLoad:
    share = None  # the fraction of the machine's CPU time others used, 0 to 1; None: not read


def _own_cpu(psutil):
    """CPU seconds of this process and its descendants so far, the reaped ones included (their
    time is added to their parent's children_* when it waits for them)."""
    total = 0.0
    processes = [psutil.Process()]
    try:
        processes += processes[0].children(recursive=True)
    except psutil.Error:
        pass
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended meanwhile: its time is its parent's now, or lost (a zombie)
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def _machine_busy(psutil):
    """(CPU seconds the cores this process may use spent on anything but idling so far, how many
    cores), from Linux's /proc/stat (system.busy_cpu_seconds)."""
    busy = system.busy_cpu_seconds()
    if busy is None:
        raise OSError("no /proc/stat here")
    return busy, len(os.sched_getaffinity(0))


@contextmanager
def others_load():
    """with others_load() as others: ...   then others.share: the fraction of the machine's CPU
    time that programs other than this one and the processes it started used while the block
    ran (None for a block under half a second, whose clock ticks say too little, and off Linux:
    macOS and Windows do not report the CPU time of a process's ended children, so the work of
    a pool that ended within the block would count as others'). A busy browser tab, a video call
    or another notebook all count: they take cores a parallel run was counting on."""
    others = OthersLoad()
    if not sys.platform.startswith("linux"):
        yield others
        return
    try:
        import psutil
        start, (busy, cores), own = time.perf_counter(), _machine_busy(psutil), _own_cpu(psutil)
    except Exception:  # noqa: BLE001 (no psutil, or a sandbox that hides the counters)
        yield others
        return
    yield others
    wall = time.perf_counter() - start
    try:
        if wall >= 0.5:
            used = (_machine_busy(psutil)[0] - busy) - (_own_cpu(psutil) - own)
            others.share = min(1.0, max(0.0, used / (wall * cores)))
    except Exception:  # noqa: BLE001 (the counters went away meanwhile, a sandbox's /proc): not read
        pass


def _note_busy(share):
    """Print a note where others used more than BUSY_SHARE (at most one every 10 s)."""
    if share is not None and share > BUSY_SHARE and time.monotonic() - _last_note[0] > 10:
        _last_note[0] = time.monotonic()
        _say(f"note: other programs used {share:.0%} of this machine's CPU while this was timed, so the "
             "times and ratios may be off (parallel runs most). Close what you can and run the cell again.")


def _say(text):
    """print(text), above any progress bar tqdm is showing (written into the bar's line, the note
    would be overwritten by its next update, or garble it)."""
    tqdm_module = sys.modules.get("tqdm")
    if tqdm_module is not None and getattr(tqdm_module.tqdm, "_instances", None):
        tqdm_module.tqdm.write(text, file=sys.stdout)
    else:
        print(text)
