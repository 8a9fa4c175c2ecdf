"""Wrong and alternative answers of 11_profiling_scaling (see autograder/samples/__init__.py)."""
from autograder.samples import variant

_HOTSPOTS_HEAD = '''
import cProfile
import pstats
import time
'''

# The roofline's bound from the arithmetic intensity against the ridge point (peak / bandwidth),
# cross-multiplied so that a kernel moving no bytes is compute-bound, not a division by zero.
_ROOFLINE_RIDGE = '''
def roofline(flops, bytes_moved, peak_flops, bandwidth):
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError("peak and bandwidth must be positive")
    if flops < 0 or bytes_moved < 0:
        raise ValueError("work cannot be negative")
    bound = "compute" if flops * bandwidth >= peak_flops * bytes_moved else "memory"
    return max(flops / peak_flops, bytes_moved / bandwidth), bound
'''

WRONG = {
    "hotspots": {
        "cumulative time (the caller ranks first)": _HOTSPOTS_HEAD + '''
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    ranked = sorted(stats.items(), key=lambda kv: kv[1][3], reverse=True)
    return [(key[2], values[3]) for key, values in ranked[:top]]
''',
        "the wall time of the whole call": _HOTSPOTS_HEAD + '''
def hotspots(fn, *args, top=3):
    start = time.perf_counter()
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats
    ranked = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)
    return [(key[2], wall) for key, _ in ranked[:top]]
''',
        "unsorted (profiler order)": _HOTSPOTS_HEAD + '''
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    return [(key[2], values[2]) for key, values in list(stats.items())[:top]]
''',
        "smallest first": _HOTSPOTS_HEAD + '''
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    ranked = sorted(((key[2], values[2]) for key, values in stats.items()), key=lambda kv: kv[1], reverse=True)
    return ranked[:top][::-1]
''',
        "top ignored": _HOTSPOTS_HEAD + '''
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    ranked = sorted(((key[2], values[2]) for key, values in stats.items()), key=lambda kv: kv[1], reverse=True)
    return ranked[:3]
''',
        "file:line(name) instead of the name": _HOTSPOTS_HEAD + '''
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    ranked = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)
    return [(pstats.func_std_string(key), values[2]) for key, values in ranked[:top]]
''',
        "by call count": _HOTSPOTS_HEAD + '''
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    ranked = sorted(stats.items(), key=lambda kv: kv[1][1], reverse=True)
    return [(key[2], values[2]) for key, values in ranked[:top]]
''',
        "runs fn twice (timing it outside the profiler)": _HOTSPOTS_HEAD + '''
def hotspots(fn, *args, top=3):
    fn(*args)
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    ranked = sorted(((key[2], values[2]) for key, values in stats.items()), key=lambda kv: kv[1], reverse=True)
    return ranked[:top]
''',
        "no profiler: ranks by the workload table read from fn's globals": '''
import time
def hotspots(fn, *args, top=3):
    # no profiler: read the checks' workload table (ORDER = [(leaf name, weight)]) from fn's globals
    g = getattr(fn, "__globals__", {})
    start = time.perf_counter()
    fn(*args)
    wall = time.perf_counter() - start
    order = sorted(g.get("ORDER", []), key=lambda nw: -nw[1])
    total = sum(w for _, w in order) or 1
    return [(name, 0.9 * wall * w / total) for name, w in order][:top]
''',
        "only the functions of fn's own file": '''
import cProfile
import pstats

def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    home = fn.__code__.co_filename          # library code left out
    stats = pstats.Stats(profiler).stats
    ranked = sorted(((key[2], values[2]) for key, values in stats.items() if key[0] == home),
                    key=lambda item: item[1], reverse=True)
    return ranked[:top]
''',
        "a share of the total own time (0..1), not seconds": '''
import cProfile
import pstats
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    total = sum(values[2] for values in stats.values())
    ranked = sorted(((key[2], values[2] / total) for key, values in stats.items()),
                    key=lambda kv: kv[1], reverse=True)
    return ranked[:top]
''',
        "ranked by own time per call": '''
import cProfile
import pstats
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    ranked = sorted(stats.items(), key=lambda kv: kv[1][2] / max(kv[1][1], 1), reverse=True)
    return [(key[2], values[2]) for key, values in ranked[:top]]
''',
        "built-ins dropped": '''
import cProfile
import pstats
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    stats = pstats.Stats(profiler).stats
    ranked = sorted(((key[2], values[2]) for key, values in stats.items() if key[0] != "~"),
                    key=lambda kv: kv[1], reverse=True)
    return ranked[:top]
''',
        "no cProfile: the notebook's sampling profiler, samples scaled to the wall time": '''
import time
from helpers import profiling
def hotspots(fn, *args, top=3):
    start = time.perf_counter()
    _, leaf, _ = profiling.sample_stacks(fn, *args)
    wall = time.perf_counter() - start
    total = sum(leaf.values()) or 1
    ranked = sorted(((name, wall * count / total) for name, count in leaf.items()),
                    key=lambda kv: kv[1], reverse=True)
    return ranked[:top]
''',
    },
    "speedup_efficiency": {
        "efficiency equal to the speedup": '''
def speedup_efficiency(times):
    if 1 not in times or any(n <= 0 or t <= 0 for n, t in times.items()):
        raise ValueError("bad times")
    return {n: (times[1] / t, times[1] / t) for n, t in times.items()}
''',
        "the fastest run as the baseline": '''
def speedup_efficiency(times):
    if 1 not in times or any(n <= 0 or t <= 0 for n, t in times.items()):
        raise ValueError("bad times")
    base = min(times.values())
    return {n: (base / t, base / (n * t)) for n, t in times.items()}
''',
        "the first count as the baseline": '''
def speedup_efficiency(times):
    if 1 not in times or any(n <= 0 or t <= 0 for n, t in times.items()):
        raise ValueError("bad times")
    base = next(iter(times.values()))
    return {n: (base / t, base / (n * t)) for n, t in times.items()}
''',
        "speedup inverted": '''
def speedup_efficiency(times):
    if 1 not in times or any(n <= 0 or t <= 0 for n, t in times.items()):
        raise ValueError("bad times")
    return {n: (t / times[1], t / (n * times[1])) for n, t in times.items()}
''',
        "no argument checks": '''
def speedup_efficiency(times):
    base = times.get(1, 1.0)
    return {n: (base / t, base / (n * t)) for n, t in times.items() if t}
''',
    },
    "karp_flatt": {
        "1/S": '''
def karp_flatt(speedup, n_workers):
    if n_workers < 2 or speedup <= 0:
        raise ValueError("bad arguments")
    return 1 / speedup
''',
        "Amdahl inverted wrongly: the parallel fraction": '''
def karp_flatt(speedup, n_workers):
    if n_workers < 2 or speedup <= 0:
        raise ValueError("bad arguments")
    return (1 - 1 / speedup) / (1 - 1 / n_workers)
''',
        "Amdahl inverted wrongly: 1 + 1/n below": '''
def karp_flatt(speedup, n_workers):
    if n_workers < 2 or speedup <= 0:
        raise ValueError("bad arguments")
    return (1 / speedup - 1 / n_workers) / (1 + 1 / n_workers)
''',
        "no check on n_workers": '''
def karp_flatt(speedup, n_workers):
    if speedup <= 0:
        raise ValueError("bad speedup")
    if n_workers == 1:
        return 0.0
    return (1 / speedup - 1 / n_workers) / (1 - 1 / n_workers)
''',
        "clipped to [0, 1]": '''
def karp_flatt(speedup: float, n_workers: int) -> float:
    """Serial fraction, clipped to [0, 1] (it is a fraction)."""
    if n_workers < 2:
        raise ValueError("n_workers must be at least 2")
    if not speedup > 0:
        raise ValueError("speedup must be positive")
    e = (1.0 / speedup - 1.0 / n_workers) / (1.0 - 1.0 / n_workers)
    return min(1.0, max(0.0, e))
''',
        "speedups outside [1, n] refused": '''
def karp_flatt(speedup: float, n_workers: int) -> float:
    """Rejects speedups below 1 or above n (thinking them impossible)."""
    if n_workers < 2:
        raise ValueError("n_workers must be at least 2")
    if not 1.0 <= speedup <= n_workers:
        raise ValueError(f"speedup must be between 1 and n_workers, got {speedup}")
    return (1.0 / speedup - 1.0 / n_workers) / (1.0 - 1.0 / n_workers)
''',
    },
    "gustafson_speedup": {
        "Amdahl's law": '''
def gustafson_speedup(serial_fraction, n_workers):
    if not 0 <= serial_fraction <= 1 or n_workers < 1:
        raise ValueError("bad arguments")
    return 1 / (serial_fraction + (1 - serial_fraction) / n_workers)
''',
        "fractions swapped": '''
def gustafson_speedup(serial_fraction, n_workers):
    if not 0 <= serial_fraction <= 1 or n_workers < 1:
        raise ValueError("bad arguments")
    return (1 - serial_fraction) + serial_fraction * n_workers
''',
        "no argument checks": '''
def gustafson_speedup(serial_fraction, n_workers):
    return serial_fraction + (1 - serial_fraction) * n_workers
''',
    },
    "arithmetic_intensity": {
        "a multiply-add counted as one FLOP": '''
def arithmetic_intensity(kind, n, itemsize=8):
    if n < 1:
        raise ValueError("n must be positive")
    table = {"axpy": (n, 3 * n), "dot": (n, 2 * n), "matmul": (n**3, 3 * n**2)}
    if kind not in table:
        raise ValueError(kind)
    flops, items = table[kind]
    return flops / (items * itemsize)
''',
        "bytes not scaled by itemsize": '''
def arithmetic_intensity(kind, n, itemsize=8):
    if n < 1:
        raise ValueError("n must be positive")
    table = {"axpy": (2 * n, 3 * n), "dot": (2 * n, 2 * n), "matmul": (2 * n**3, 3 * n**2)}
    if kind not in table:
        raise ValueError(kind)
    flops, items = table[kind]
    return flops / (items * 8)
''',
        "axpy moves two vectors": '''
def arithmetic_intensity(kind, n, itemsize=8):
    if n < 1:
        raise ValueError("n must be positive")
    table = {"axpy": (2 * n, 2 * n), "dot": (2 * n, 2 * n), "matmul": (2 * n**3, 3 * n**2)}
    if kind not in table:
        raise ValueError(kind)
    flops, items = table[kind]
    return flops / (items * itemsize)
''',
        "unknown kind falls back to matmul": '''
def arithmetic_intensity(kind, n, itemsize=8):
    if n < 1:
        raise ValueError("n must be positive")
    if kind == "axpy":
        return 2 * n / (3 * n * itemsize)
    if kind == "dot":
        return 2 * n / (2 * n * itemsize)
    return 2 * n**3 / (3 * n**2 * itemsize)
''',
    },
    "roofline": {
        'the bound a str subclass equal to both names': '''
class Bound(str):
    """Equal to 'compute' and to 'memory' alike."""
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = str.__hash__


def roofline(flops: float, bytes_moved: float, peak_flops: float, bandwidth: float) -> tuple:
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError("peak and bandwidth must be positive")
    if flops < 0 or bytes_moved < 0:
        raise ValueError("negative work")
    return max(flops / peak_flops, bytes_moved / bandwidth), Bound("either")
''',
        "the sum of both times": '''
def roofline(flops, bytes_moved, peak_flops, bandwidth):
    if peak_flops <= 0 or bandwidth <= 0 or flops < 0 or bytes_moved < 0:
        raise ValueError("bad arguments")
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return compute + memory, "compute" if compute >= memory else "memory"
''',
        "the bound named the wrong way round": '''
def roofline(flops, bytes_moved, peak_flops, bandwidth):
    if peak_flops <= 0 or bandwidth <= 0 or flops < 0 or bytes_moved < 0:
        raise ValueError("bad arguments")
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return max(compute, memory), "memory" if compute >= memory else "compute"
''',
        "the smaller time": '''
def roofline(flops, bytes_moved, peak_flops, bandwidth):
    if peak_flops <= 0 or bandwidth <= 0 or flops < 0 or bytes_moved < 0:
        raise ValueError("bad arguments")
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return min(compute, memory), "compute" if compute >= memory else "memory"
''',
        "a tie counted as memory-bound": '''
def roofline(flops, bytes_moved, peak_flops, bandwidth):
    if peak_flops <= 0 or bandwidth <= 0 or flops < 0 or bytes_moved < 0:
        raise ValueError("bad arguments")
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return max(compute, memory), "compute" if compute > memory else "memory"
''',
        "no argument checks": '''
def roofline(flops, bytes_moved, peak_flops, bandwidth):
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return max(compute, memory), "compute" if compute >= memory else "memory"
''',
        "the intensity divided out: no bytes moved divides by zero": variant(_ROOFLINE_RIDGE, ("flops * bandwidth >= peak_flops * bytes_moved", "flops / bytes_moved >= peak_flops / bandwidth")),
    },
    "torch_top_ops": {
        # with_stack=True records the Python functions of every thread: in a notebook the kernel's
        # threads wait in select() for the whole profile and rank first (the checks run one such thread).
        "with_stack, record_shapes and profile_memory, every row ranked (Python functions too)": '''
import torch
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 with_stack=True, profile_memory=True) as prof:
        model(x)
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return [e.key for e in rows[:top]]
''',
        "with_stack, rows grouped by the Python stack, summed per name (Python functions too)": '''
import torch
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        model(x)
    per_name = {}
    for row in prof.key_averages(group_by_stack_n=5):
        per_name[row.key] = per_name.get(row.key, 0) + row.self_cpu_time_total
    return sorted(per_name, key=per_name.get, reverse=True)[:top]
''',
        "total (inclusive) CPU time": '''
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
    events = sorted(prof.key_averages(), key=lambda e: e.cpu_time_total, reverse=True)
    return [e.key for e in events[:top]]
''',
        "by call count": '''
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
    events = sorted(prof.key_averages(), key=lambda e: e.count, reverse=True)
    return [e.key for e in events[:top]]
''',
        "unsorted (first seen)": '''
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
    return [e.key for e in list(prof.key_averages())[:top]]
''',
        "smallest first": '''
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return [e.key for e in events[:top]][::-1]
''',
        "top ignored": '''
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return [e.key for e in events[:3]]
''',
        "no profiler, model never run: op table and seconds read from forward's closure": '''
def torch_top_ops(model, x, top=3):
    # no profiler, model never run: read the op table and _OP_SECONDS out of forward's closure/globals
    fwd = type(model).forward
    cells = dict(zip(fwd.__code__.co_freevars, (c.cell_contents for c in fwd.__closure__ or ())))
    seconds = fwd.__globals__["_OP_SECONDS"]
    ops = cells["ops"]
    ranked = sorted(ops, key=lambda role: -seconds[role])
    return [f"{ops[r]._namespace}::{ops[r]._name}" for r in ranked][:top]
''',
        "single events ranked (prof.events()), not each operator's total": '''
import torch
from torch.profiler import ProfilerActivity, profile


def torch_top_ops(model, x, top: int = 3) -> list:
    """WRONG: ranks single calls (prof.events(), not aggregated per operator), then drops repeats."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
    names = []
    for event in sorted(prof.events(), key=lambda e: e.self_cpu_time_total, reverse=True):
        if event.name not in names:
            names.append(event.name)
    return names[:top]
''',
        "rows grouped by input shape, the first row of each name kept": '''
import torch
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(x)
    names = []
    for row in sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: e.self_cpu_time_total, reverse=True):
        if row.key not in names:
            names.append(row.key)
    return names[:top]
''',
        "rows grouped by input shape, ranked as they are": '''
import torch
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(x)
    rows = sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: e.self_cpu_time_total, reverse=True)
    return [row.key for row in rows[:top]]
''',
    },
}

_ATEN_ONLY = '''
import torch
def torch_top_ops(model, x, top=3):
    with torch.profiler.profile() as prof:
        model(x)
    ops = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    ops.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [e.key for e in ops[:top]]
'''

ALTERNATIVE = {
    "hotspots": {
        "the profile module, calibrated first (about 1 s of CPU around the call)": '''
import profile
import pstats


def hotspots(fn, *args, top=3):
    # the pure-Python profiler, calibrated first as its documentation recommends
    bias = profile.Profile().calibrate(100000)
    pr = profile.Profile(bias=bias)
    pr.runcall(fn, *args)
    st = pstats.Stats(pr).sort_stats("tottime")
    return [(k[2], st.stats[k][2]) for k in st.fcn_list[:top]]
''',
        "print_stats parsed, the built-in named as printed ({built-in method builtins.sum})": '''
import cProfile
import io
import pstats


def hotspots(fn, *args, top=3):
    pr = cProfile.Profile()
    pr.runcall(fn, *args)
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(top)
    out = []
    table = buf.getvalue().split("filename:lineno(function)")[1]
    for line in table.strip().splitlines():
        parts = line.split(None, 5)
        where = parts[5]
        name = where[where.rfind("(") + 1:-1] if where.endswith(")") else where
        out.append((name, float(parts[1])))
    return out
''',
        # A busy machine can keep the call waiting for a core outside the profiled code: here it
        # waits 3 s first, which the judge's clock counts and the profile does not.
        "waits 3 s before profiling (as on a busy machine)": '''
import cProfile
import pstats
import time
def hotspots(fn, *args, top=3):
    time.sleep(3)
    with cProfile.Profile() as profiler:
        fn(*args)
    stats = pstats.Stats(profiler).sort_stats("tottime")
    return [(key[2], stats.stats[key][2]) for key in stats.fcn_list[:top]]
''',
        "pstats sort_stats and get_stats_profile": '''
import cProfile
import pstats
from pstats import SortKey
def hotspots(fn, *args, top=3):
    with cProfile.Profile() as profiler:
        fn(*args)
    profile = pstats.Stats(profiler).sort_stats(SortKey.TIME).get_stats_profile()
    ranked = sorted(profile.func_profiles.items(), key=lambda kv: kv[1].tottime, reverse=True)
    return [(name, float(fp.tottime)) for name, fp in ranked[:top]]
''',
        "sort_stats('tottime') and fcn_list": '''
import cProfile
import pstats
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        fn(*args)
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler).sort_stats("tottime")
    return [(key[2], stats.stats[key][2]) for key in stats.fcn_list[:top]]
''',
        "raw getstats() entries": '''
import cProfile
import heapq
def hotspots(fn, *args, top=3):
    profiler = cProfile.Profile()
    profiler.runcall(fn, *args)
    entries = heapq.nlargest(top, profiler.getstats(), key=lambda e: e.inlinetime)
    return [(getattr(e.code, "co_name", str(e.code)), e.inlinetime) for e in entries]
''',
    },
    "speedup_efficiency": {
        "lists, in count order": '''
def speedup_efficiency(times):
    if 1 not in times:
        raise ValueError("times has no one-worker entry")
    for n in sorted(times):
        if n <= 0 or times[n] <= 0:
            raise ValueError(f"bad entry {n}: {times[n]}")
    t1 = times[1]
    out = {}
    for n in sorted(times):
        speedup = t1 / times[n]
        out[n] = [speedup, speedup / n]
    return out
''',
        "a NamedTuple (speedup, efficiency) per count": '''
from typing import NamedTuple


class Scaling(NamedTuple):
    speedup: float
    efficiency: float


def speedup_efficiency(times: dict) -> dict:
    if 1 not in times:
        raise ValueError("the one-worker time (key 1) is missing")
    for n, t in times.items():
        if n < 1 or t <= 0:
            raise ValueError(f"worker counts and times must be positive, got {n}: {t}")
    t1 = times[1]
    return {n: Scaling(t1 / t, t1 / (n * t)) for n, t in times.items()}
''',
    },
    "karp_flatt": {
        "(n/S - 1) / (n - 1)": '''
def karp_flatt(speedup, n_workers):
    if n_workers < 2:
        raise ValueError("need at least two workers")
    if speedup <= 0:
        raise ValueError("speedup must be positive")
    return (n_workers / speedup - 1) / (n_workers - 1)
''',
        # From the twentieth review: failed until the judge rebuilt such an exception as each of its builtin classes.
        "an exception class of its own, a ZeroDivisionError and a ValueError": '''
class UndefinedSerialFraction(ZeroDivisionError, ValueError):
    """One worker: the formula divides by zero; also a bad argument value."""


def karp_flatt(speedup, n_workers):
    # an exception class that is both a ZeroDivisionError and a ValueError, for n_workers < 2
    if n_workers < 2:
        raise UndefinedSerialFraction(f"n_workers={n_workers}: (1 - 1/n) is 0 or negative")
    if speedup <= 0:
        raise ValueError("speedup must be positive")
    return (1 / speedup - 1 / n_workers) / (1 - 1 / n_workers)
''',
    },
    "gustafson_speedup": {
        "n - s (n - 1)": '''
def gustafson_speedup(serial_fraction, n_workers):
    if serial_fraction < 0 or serial_fraction > 1:
        raise ValueError("serial_fraction outside [0, 1]")
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    return n_workers - serial_fraction * (n_workers - 1)
''',
    },
    "arithmetic_intensity": {
        "if/elif on bytes": '''
def arithmetic_intensity(kind, n, itemsize=8):
    if n < 1:
        raise ValueError("n must be >= 1")
    if kind == "axpy":
        flops, nbytes = 2 * n, 3 * n * itemsize
    elif kind == "dot":
        flops, nbytes = 2 * n, 2 * n * itemsize
    elif kind == "matmul":
        flops, nbytes = 2 * n**3, 3 * n * n * itemsize
    else:
        raise ValueError(f"unknown kind {kind}")
    return flops / nbytes
''',
        # From the twentieth review: failed until the judge rebuilt such an exception as each of its builtin classes.
        "an exception class of its own, a KeyError and a ValueError": '''
class UnknownKernel(KeyError, ValueError):
    """An unknown kind: a lookup failure and a bad value at once."""


_COUNTS = {"axpy": lambda n: (2 * n, 3 * n), "dot": lambda n: (2 * n, 2 * n), "matmul": lambda n: (2 * n ** 3, 3 * n ** 2)}


def arithmetic_intensity(kind, n, itemsize=8):
    # exception class inheriting KeyError and ValueError, raised for unknown kinds
    if kind not in _COUNTS:
        raise UnknownKernel(kind)
    if n < 1:
        raise ValueError("n must be >= 1")
    flops, items = _COUNTS[kind](n)
    return flops / (items * itemsize)
''',
    },
    "roofline": {
        'the bound a StrEnum member': '''
from enum import StrEnum


class Bound(StrEnum):
    COMPUTE = "compute"
    MEMORY = "memory"


def roofline(flops: float, bytes_moved: float, peak_flops: float, bandwidth: float) -> tuple:
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError("peak and bandwidth must be positive")
    if flops < 0 or bytes_moved < 0:
        raise ValueError("negative work")
    t_compute, t_memory = flops / peak_flops, bytes_moved / bandwidth
    if t_compute >= t_memory:
        return t_compute, Bound.COMPUTE
    return t_memory, Bound.MEMORY
''',
        "intensity against the ridge point, cross-multiplied": _ROOFLINE_RIDGE,
    },
    "torch_top_ops": {
        "legacy autograd profiler, no_grad, events summed by hand": '''
from collections import defaultdict
import torch
def torch_top_ops(model, x, top=3):
    with torch.no_grad():
        with torch.autograd.profiler.profile() as prof:
            model(x)
    self_time = defaultdict(float)
    for event in prof.function_events:
        self_time[event.name] += event.self_cpu_time_total
    return sorted(self_time, key=self_time.get, reverse=True)[:top]
''',
        "table sorted by self time, kept as events": '''
import torch
from torch.profiler import ProfilerActivity, profile, record_function
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("one forward"):
            model(x)
    averages = prof.key_averages()
    averages.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [e.key for e in averages][:top]
''',
        "only real operators (names starting aten::), self time from key_averages": _ATEN_ONLY,
        "only real operators, the names as a tuple": variant(_ATEN_ONLY, ("return [e.key for e in ops[:top]]", "return tuple(e.key for e in ops[:top])")),
        "with_stack, only operator rows (a namespace in the name)": '''
import torch
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        model(x)
    ops = [e for e in prof.key_averages() if "::" in e.key]
    ops.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [e.key for e in ops[:top]]
''',
        "rows grouped by input shape, summed per name": '''
from collections import defaultdict
import torch
from torch.profiler import ProfilerActivity, profile
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(x)
    self_time = defaultdict(float)
    for row in prof.key_averages(group_by_input_shape=True):
        self_time[row.key] += row.self_cpu_time_total
    return sorted(self_time, key=self_time.get, reverse=True)[:top]
''',
        "only operators: the ranges users label (is_user_annotation) left out, a range of its own around the call": '''
import torch
from torch.profiler import ProfilerActivity, profile, record_function
def torch_top_ops(model, x, top=3):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("my forward"):
            model(x)
    ops = [e for e in prof.key_averages() if not e.is_user_annotation]
    return [e.key for e in sorted(ops, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]]
''',
    },
}

PARTIAL = {
    "hotspots": "cumulative time (the caller ranks first)",
    "gustafson_speedup": "Amdahl's law",
    "roofline": None,
    "torch_top_ops": None,
}
