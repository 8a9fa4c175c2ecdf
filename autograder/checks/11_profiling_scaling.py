"""Hidden checks of 11_profiling_scaling (profilers, scaling laws, roofline, torch.profiler)."""
import cProfile
import functools
import hashlib
import math
import random
import threading
import time

# torch.profiler imports torch._dynamo on first use, which re-wraps torch.manual_seed. Loaded
# here, with the checks, that happens before grading records the functions it relies on, so
# the re-wrapping is not mistaken for a submission replacing them.
import torch._dynamo  # noqa: F401

from autograder.checks._support import exact_float, exact_list, raises_value_error, there, timeout, got_type
from helpers import profiling


# --- hotspots ------------------------------------------------------------------------
# A workload built afresh for every check: three functions whose own times are about 2.4 s,
# 0.3 s and 0.1 s of CPU, a wrapper around the biggest, a driver that calls everything (so by
# cumulative time the driver and the wrapper rank first), and a tiny function called 30 times.
# Everything else takes about 1 ms (cProfile's hooks included), most of it the driver's own
# time (cProfile counts a median 0.35 ms of own time outside the three; 0.49 ms with the 61
# reads of the CPU clock that measure each of the three; medians of 8 calls): a stall of the
# machine (tens of ms when it is busy) that lands there cannot lift it above 0.1 s. The three
# are called in 20 interleaved rounds, so the stalls land on them in proportion to their work.
# The second is the built-in sum (the notebook: built-ins are listed, with their own time): an
# answer that drops built-ins, or a sampler that sees only Python frames, loses it.
# Per round the biggest runs in one call of 120 ms, the built-in in 6 calls of 2.5 ms and the
# smallest in one of 5 ms: ranked by own time per call, or by call count, the order differs.
# The call does about 2.8 s of work, not 1 s: then a share of the total (0..1) cannot pass for
# seconds (the top function has 0.86 of the work; the check wants at least 0.65 of the CPU time).
# The biggest's code says it comes from another file, as library code would.
# The two Python functions do not exist before the call: the driver makes them when it runs, from one
# template, under names with 64 random bits drawn from os.urandom (secrets), in an order drawn
# the same way, and drops them when it returns. Nothing the student's process can read before
# the call, or after it, names them: their names are only in the profile of the call (a
# profiler keeps their code objects), and the driver leaves behind no more than SHA-256
# digests of them, which the judge compares with the digests of the names the answer gives.
# The driver also notes whether a deterministic profiler (cProfile, or profile) hooks its calls.
# (An answer that rewrites the workload, as one that forges its call counter, is not in scope.)
_BUILTIN = "<built-in method builtins.sum>"            # cProfile's name of sum (profile's: "sum")
_WORKLOAD = '''
import functools
import hashlib
import secrets
import sys
import time
import types

def _leaf_template(n):
    total = 0
    for i in range(n):
        total += i % 7
    return total

def {wrapper}(leaf, n):
    return leaf(n)

def {tiny}(x):
    return x

def {driver}(rounds, unit, sum_unit):
    started = time.thread_time()                       # the CPU the work takes (what the answer adds aside)
    monitoring = getattr(sys, "monitoring", None)      # cProfile's hook from Python 3.12
    HOOKED.append(sys.getprofile() is not None
                  or monitoring is not None and monitoring.get_tool(monitoring.PROFILER_ID) is not None)
    pick = secrets.SystemRandom()                      # os.urandom: no state to read
    names = [f"{{stem}}_{{secrets.token_hex(8)}}" for stem in pick.sample(STEMS, 2)]
    # The biggest's code names another file: an answer that keeps only fn's own file loses it.
    files = ["<another module>", _leaf_template.__code__.co_filename]
    leaves = [types.FunctionType(_leaf_template.__code__.replace(co_name=name, co_qualname=name, co_filename=file),
                                 _leaf_template.__globals__, name) for name, file in zip(names, files)]
    CALLS.append([hashlib.sha256(name.encode()).hexdigest() for name in (names[0], BUILTIN, names[1])])
    del names
    order = [(leaves[0], 24), (None, 3), (leaves[1], 1)]  # units of work per round
    pick.shuffle(order)
    if order[0][1] == 24:                              # the biggest is never met first
        order.append(order.pop(0))
    # The CPU each of the three took (by weight), read once at each end of a piece of work: what
    # lies between two pieces (the loop, tiny's call) goes to the next, some microseconds a round.
    # Read through a partial, which a profiler does not hook (only calls of built-in functions
    # themselves are): the reads add about 1 us each to the driver's own time, and no entry.
    clock = functools.partial(time.thread_time)
    spent = {{24: 0.0, 3: 0.0, 1: 0.0}}
    total = 0
    mark = clock()
    for _ in range(rounds):
        for leaf, weight in order:
            if weight == 24:
                total += {wrapper}(leaf, 24 * unit)
            elif weight == 3:                          # 6 short calls: second by total, last per call
                for _ in range(6):
                    total += sum(range(sum_unit // 2))
            else:
                total += leaf(unit)
            now = clock()
            spent[weight] += now - mark
            mark = now
        total += {tiny}(1)
    for k in range(10):
        total += {tiny}(k)
    WORK.append(time.thread_time() - started)
    SPENT.append(sorted(spent.values(), reverse=True))
    return total
'''
_STEMS = ("parse", "scan", "merge", "index", "render", "encode", "filter", "reduce", "blend", "score")


def _digest(name):
    return hashlib.sha256(name.encode()).hexdigest()


def _workload():
    """(driver, call record) of a freshly generated workload: each call of the driver appends to
    the record the SHA-256 digests of the names of its three biggest functions by own time,
    largest first, to HOOKED whether a deterministic profiler hooked its calls, to WORK the CPU
    seconds the call took (its thread's, profiler's hooks included), and to SPENT the CPU seconds
    each of the three took, largest first."""
    stems = random.sample(_STEMS, 3)
    tag = random.randrange(100, 1000)
    wrapper, tiny, driver = (f"{stem}_{tag}" for stem in stems)
    namespace = {"CALLS": [], "HOOKED": [], "WORK": [], "SPENT": [], "BUILTIN": _BUILTIN,
                 "STEMS": [s for s in _STEMS if s not in stems]}
    source = _WORKLOAD.format(wrapper=wrapper, tiny=tiny, driver=driver)
    exec(compile(source, f"<workload {tag}>", "exec"), namespace)
    return namespace[driver], namespace["CALLS"]


def _calibrated_units():
    """(loop steps, sum's range length) per unit of 5 ms of CPU time: the smallest ranked
    function gets about 0.1 s in all (20 rounds), the call about 2.8 s. CPU time, and the
    fastest of five timings: on a busy machine a wall clock, or a slow timing, would shrink the
    work (and the seconds a share of the total must differ from). Takes about 0.1 s."""
    def per_item(work, n):
        times = []
        for _ in range(5):
            start = time.thread_time()
            cProfile.Profile().runcall(work, n)        # a profiler slows Python loops (3.11), not sum
            times.append(time.thread_time() - start)
        return min(times) / n

    def loop(steps):
        total = 0
        for i in range(steps):
            total += i % 7
    # sum's cost per item is measured at about the size it runs at (it varies with the size).
    return tuple(max(2_000, int(0.005 / per_item(work, n)))
                 for work, n in ((loop, 100_000), (lambda n: sum(range(n)), 500_000)))


def _one_ranking(hotspots, top):
    """(what hotspots found, SHA-256 digests of the expected names, how often fn ran, whether a
    profiler hooked its calls, the judge's wall time of the call, the CPU seconds fn's work took,
    the CPU seconds each of the expected functions took)."""
    driver, _ = _workload()
    units = _calibrated_units()
    start = time.perf_counter()
    found, calls, hooked, work, spent = there(_profiled, hotspots, driver, units, top)
    wall = time.perf_counter() - start
    expected = calls[0][:top or 3] if calls else [None] * (top or 3)
    spent = spent[0][:top or 3] if spent else [0.0] * (top or 3)
    return found, expected, len(calls), all(hooked), wall, max(work, default=0.0), spent


def _profiled(hotspots, driver, units, top):
    """(in the student's process) hotspots(driver, 20, *units[, top]), the driver's call record
    (one list of digests of names per call), whether a profiler hooked each call, the CPU
    seconds each call took and those each of its three functions took."""
    args = (driver, 20, *units)
    found = hotspots(*args, top=top) if top is not None else hotspots(*args)
    record = driver.__globals__
    return (found, list(record["CALLS"]), list(record["HOOKED"]), list(record["WORK"]),
            [list(s) for s in record["SPENT"]])


def _ranking_problem(found, expected, runs, hooked, wall, cpu, spent):
    """None when `found` is right, else the reason it is not (`expected`: digests of the names,
    `spent`: the CPU seconds those functions took). Raises where no stall of the machine can
    explain what is wrong: a wrong answer is then failed at its first try."""
    want = len(expected)
    found = exact_list(found, "hotspots(...)")
    # How many entries come back does not depend on the machine's stalls: no retry.
    assert len(found) == want, f"asked for top={want}, got {len(found)} entries"
    assert runs == 1, f"fn ran {runs} times; it must run exactly once"
    assert hooked, "fn did not run under cProfile (no profiler saw its calls)"
    pairs = []
    for item in found:
        item = exact_list(item, "each entry", 2)
        assert isinstance(item[0], str), "each entry must be (function name as a str, seconds)"
        pairs.append((item[0], exact_float(item[1], "the seconds")))
    names = [name for name, _ in pairs]
    assert all(":" not in n and "/" not in n and "(" not in n for n in names), (
        "give the function's own name as cProfile records it, not file:line(name)")
    seconds = [s for _, s in pairs]
    assert seconds == sorted(seconds, reverse=True), (
        "the entries are not sorted by their seconds, largest first: are they ranked by own time (tottime), "
        "not by call count?")
    assert seconds[0] <= wall and sum(seconds) <= 1.05 * wall + 0.005, (
        "the seconds add up to more than the call took: are they cumulative times or whole-call times, "
        "or shares of the total?")
    # A function's own time is at least the CPU time its work took (a wait for a core adds to it,
    # never takes away), so in a right ranking the k-th entry has at least the k-th largest CPU
    # time of the workload's three functions. An entry under half of that is no stall's doing
    # (the workload's own bookkeeping and a profiler's hooks are microseconds a call): no retry.
    for k, (got, floor) in enumerate(zip(seconds, spent), start=1):
        assert got >= 0.5 * floor, (
            f"entry {k} has {got:.3g} s, but the function ranked {k} by own time took at least {floor:.2f} s "
            f"of CPU: is a function missing (a built-in? one from another file?), or are the seconds "
            f"not its own time, in seconds (per call? a share of the total?)")
    # The pure-Python profile module names a built-in by its bare name; pstats prints cProfile's
    # name in braces.
    names = [_BUILTIN if name in ("sum", "{built-in method builtins.sum}") else name for name in names]
    if [_digest(name) for name in names] != expected:
        return ("the functions are not those with the largest own time (built-ins included), "
                "in order of their total own time")
    # Against CPU time, not the judge's wall clock: on a busy machine the call can wait seconds for
    # a core outside the profiled code (a correct answer once failed here at load 7 on 2 cores).
    # The CPU time is fn's own, taken by fn (thread_time), not the process's: an answer may spend
    # seconds of its own around the call (profile's calibrate() takes about 1 s). The top
    # function does about 86 % of that work (its own time, a wall time, is no less); a share of
    # the total is 0.86 however much CPU the call took (about 2.8 s: below 1.32 s the share would
    # pass). Retried as a wrong ranking is.
    if seconds[0] < 0.65 * cpu:
        return "the seconds of the top function are far below its own time (units? a share of the total?)"
    return None


def _check_hotspots(hotspots, top):
    """Up to five tries: each try has a fresh workload; a wrong ranking must repeat to fail,
    unless what is wrong cannot come from the machine's stalls (then it fails at once; see
    _ranking_problem: the wrong sizes, runs, profiler, order or sums of seconds, and entries under
    half the CPU time of the function that belongs there: a function left out, or seconds that are
    not own time, as the spec's and catalogue's wrong answers mostly are).

    A correct answer fails one try only if the machine's stalls swap two ranked functions
    (2.4 s, 0.3 s, 0.1 s of CPU, interleaved) or one stall longer than 0.1 s lands in the
    1 ms of unranked code. Earlier designs whose unranked code took 1-2 ms next to a 0.015 s
    or 0.04 s leaf failed 2 of 60 and 2 of 20 top-3 tries at load average 7 to 29 on 2 cores
    (a single stall landing in the unranked code was enough). The design before this one (0.72 s,
    0.24 s, 0.08 s, unranked code 0.1 ms): 0 failures in 140 top-3 tries at load average 3 to 13.
    This one has wider gaps (a failing try needs a stall to land in the 1/2,500 of the run that
    is unranked and outlast 0.1 s, or 0.2 s more of stalls on the smallest function than on
    sum): 0 failures in 93 tries (45 of them judged) at load average 1.0 to 2.0 on 2 cores, the
    closest two ranked functions 2.96 times apart at worst, the top function's seconds at least
    0.80 of the CPU time (then the process's; now fn's own, which the top function's share of
    the work, 0.86, bounds from below, whatever the answer spends around the call); at load
    average 7 on 2 cores (six busy loops beside it) 16 of 16 checks judged passed; well under 1% of
    tries expected even at load 29 (argued from the margins). Five tries, each with a fresh
    workload, all failing: below 0.01**5 = 1e-10. The work is calibrated in CPU time, under
    cProfile for the Python loop (which a profiler slows) and without it for sum, so the three
    keep their 24 : 3 : 1 proportions. Making, naming and
    hashing the two functions inside the call adds some microseconds to the unranked code, as
    reading the CPU clock at each end of a piece of work does (0.14 ms more in all, measured: the
    unranked share of the run from about 1/2,500 to 1/2,200, well inside the margin the bound
    was argued with), and a match is decided on SHA-256 digests of the names (a collision: below
    2**-200); none of these changes the bound. The failure at once (an entry under half the CPU
    time of the function ranked there) cannot befall a correct answer: own times measured by
    cProfile were at least 0.998 of those CPU times (8 calls), and a wait for a core only adds
    to them. An answer that does not profile the call cannot know the two names
    (64 random bits each, drawn in the call): it passes a try with a chance below 2**-60. The call runs in the
    student's process; its wall time is taken by the judge's clock around it, its CPU time by
    fn itself (thread_time: a wait for a core adds none, nor does the answer's own work). The
    spec's wrong answers (cumulative time, whole-call time, unsorted, top ignored, file
    paths) fail every try, and so do a share of the total (0.86 against a bound of 0.65 x about
    2.8 s), a ranking per call or by call count,
    built-ins left out, and no profiler hooking the calls (a sampler). Sound where no other
    thread of the process runs Python while the call is profiled, as in the judge's student
    process: from Python 3.12, cProfile records every thread (sys.monitoring), and a Jupyter
    kernel's own threads then enter the profile.
    """
    reasons = []
    for _ in range(5):
        problem = _ranking_problem(*_one_ranking(hotspots, top))
        if problem is None:
            return
        reasons.append(problem)
    raise AssertionError(reasons[0])


@timeout(120)
def test_hotspots_own_time_ranking(hotspots):
    """the default top=3 functions by own time, largest first, with their seconds

    False failure of a correct answer: < 1e-10 (five tries with fresh workloads; see _check_hotspots).
    """
    _check_hotspots(hotspots, None)


@timeout(150)
def test_hotspots_top(hotspots):
    """top=1 and top=2 return that many functions

    False failure of a correct answer: < 2e-10 (two rankings, each < 1e-10; see _check_hotspots).
    """
    for top in random.sample((1, 2), 2):
        _check_hotspots(hotspots, top)


# --- speedup_efficiency ----------------------------------------------------------------------
def _random_times():
    """Wall times keyed by worker count; 1 is never first, and another count is fastest."""
    counts = random.sample((2, 3, 4, 6, 8, 12, 16, 32), random.randint(2, 5)) + [1]
    random.shuffle(counts)
    if counts[0] == 1:
        counts.append(counts.pop(0))
    base = random.uniform(0.5, 20.0)
    return {n: base / random.uniform(0.6, 1.1 * n) for n in counts} | {1: base}


def test_speedup_efficiency_values(speedup_efficiency):
    """each count maps to (T1/Tn, T1/(n*Tn)) against the one-worker time

    False failure of a correct answer: 0 (random times; any order of the same operations
    rounds within 1e-15 relative, against rel_tol=1e-9).
    """
    for _ in range(30):
        times = _random_times()
        got = speedup_efficiency(dict(times))
        assert isinstance(got, dict), f"return a dict, got {type(got).__name__}"
        assert set(got) == set(times), "the result must have one entry per worker count"
        for n, pair in got.items():
            pair = exact_list(pair, f"the entry for {n} workers", 2)
            speedup, efficiency = (exact_float(v, "speedup and efficiency") for v in pair)
            want = times[1] / times[n]
            assert math.isclose(speedup, want, rel_tol=1e-9), (
                "a speedup is not T1 / Tn with T1 the one-worker time")
            assert math.isclose(efficiency, want / n, rel_tol=1e-9), "an efficiency is not speedup / n"
    only = speedup_efficiency({1: 3.5})
    assert set(only) == {1} and tuple(only[1]) == (1.0, 1.0), "one worker alone: (1.0, 1.0)"


def test_speedup_efficiency_errors(speedup_efficiency):
    """a missing one-worker time, or a count or time that is not positive, raises ValueError"""
    for bad in ({2: 1.0, 4: 0.6}, {1: 2.0, 2: 0.0}, {1: 2.0, 4: -0.5}, {1: 0.0, 2: 1.0},
                {1: 2.0, 0: 1.0}, {1: 2.0, -2: 1.0}):
        with raises_value_error(f"speedup_efficiency({bad})"):
            speedup_efficiency(bad)


# --- karp_flatt ------------------------------------------------------------------------------
def test_karp_flatt_values(karp_flatt):
    """e = (1/S - 1/n) / (1 - 1/n) for random speedups and worker counts

    False failure of a correct answer: 0 (rearranged forms round within ~1e-15, inside
    rel_tol=1e-9 or abs_tol=1e-12 near e = 0).
    """
    for _ in range(50):
        n = random.randint(2, 128)
        s = random.uniform(1.0, n)
        got = exact_float(karp_flatt(s, n), "the serial fraction")
        want = (1 / s - 1 / n) / (1 - 1 / n)
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (
            "the serial fraction is not (1/S - 1/n) / (1 - 1/n)")
    n = random.randint(2, 64)
    assert abs(karp_flatt(float(n), n)) < 1e-12, "a perfect speedup has serial fraction 0"
    assert math.isclose(karp_flatt(1.0, n), 1.0), "no speedup means serial fraction 1"
    # Outside [1, n] too, as measured speedups can be (the notebook explains both): not clipped, not refused.
    assert math.isclose(karp_flatt(5.0, 4), -1 / 15, rel_tol=1e-9), "a super-linear speedup gives a negative e"
    assert math.isclose(karp_flatt(0.8, 4), 4 / 3, rel_tol=1e-9), "a slowdown gives an e above 1"


def test_karp_flatt_errors(karp_flatt):
    """n_workers < 2 or a speedup that is not positive raises ValueError"""
    for bad in ((1.5, 1), (1.5, 0), (1.5, -4), (0.0, 4), (-2.0, 4)):
        with raises_value_error(f"karp_flatt{bad}"):
            karp_flatt(*bad)


# --- gustafson_speedup ----------------------------------------------------------------------
def test_gustafson_speedup_values(gustafson_speedup):
    """s + (1 - s) * n for random fractions and worker counts (not Amdahl's law)

    False failure of a correct answer: 0 (random inputs; rounding ~1e-16 against rel_tol=1e-9).
    """
    for _ in range(50):
        s, n = random.random(), random.randint(1, 1024)
        got = exact_float(gustafson_speedup(s, n), "the scaled speedup")
        assert math.isclose(got, s + (1 - s) * n, rel_tol=1e-9), (
            "the scaled speedup is not s + (1 - s) * n")
    n = random.randint(2, 64)
    assert math.isclose(gustafson_speedup(0.0, n), n) and math.isclose(gustafson_speedup(1.0, n), 1.0)
    assert math.isclose(gustafson_speedup(random.random(), 1), 1.0), "one worker: speedup 1"


def test_gustafson_speedup_errors(gustafson_speedup):
    """a fraction outside [0, 1] or n_workers < 1 raises ValueError"""
    for bad in ((-0.01, 4), (1.01, 4), (0.5, 0), (0.5, -2)):
        with raises_value_error(f"gustafson_speedup{bad}"):
            gustafson_speedup(*bad)


# --- arithmetic_intensity ----------------------------------------------------------------------
def _intensity(kind, n, itemsize):
    flops, items = {"axpy": (2 * n, 3 * n), "dot": (2 * n, 2 * n), "matmul": (2 * n**3, 3 * n**2)}[kind]
    return flops / (items * itemsize)


def test_arithmetic_intensity_values(arithmetic_intensity):
    """FLOPs per byte of axpy, dot and matmul for random sizes and item sizes

    False failure of a correct answer: 0 (exact formulas; rounding against rel_tol=1e-9).
    """
    for _ in range(40):
        kind = random.choice(("axpy", "dot", "matmul"))
        n, itemsize = random.randint(1, 5000), random.choice((1, 2, 4, 8, 16))
        got = exact_float(arithmetic_intensity(kind, n, itemsize), "the intensity")
        assert math.isclose(got, _intensity(kind, n, itemsize), rel_tol=1e-9), (
            f"the intensity of {kind} is wrong (a multiply-add is 2 FLOPs; bytes = items x itemsize)")
    n = random.randint(2, 3000)
    for kind in ("axpy", "dot", "matmul"):
        assert math.isclose(arithmetic_intensity(kind, n), _intensity(kind, n, 8), rel_tol=1e-9), (
            "itemsize defaults to 8 (float64)")


def test_arithmetic_intensity_errors(arithmetic_intensity):
    """an unknown kind or n < 1 raises ValueError"""
    for bad in (("conv", 10), ("matvec", 10), ("", 10), ("dot", 0), ("axpy", -3), ("matmul", 0)):
        with raises_value_error(f"arithmetic_intensity{bad}"):
            arithmetic_intensity(*bad)


# --- roofline ------------------------------------------------------------------------------------
def _roofline_result(roofline, *args):
    pair = exact_list(roofline(*args), f"roofline{args}", 2)
    assert isinstance(pair[1], str), f"the second element must be the string 'compute' or 'memory', {got_type(pair[1], 'str')}"
    return exact_float(pair[0], "the time bound"), pair[1]


def test_roofline_values(roofline):
    """the bound is the larger of the two times, named after it, for random kernels

    False failure of a correct answer: 0 (near-ties, where rounding could name the other
    bound, are skipped and checked exactly below).
    """
    for _ in range(50):
        peak, bandwidth = 10 ** random.uniform(9, 13), 10 ** random.uniform(9, 12)
        compute_time, memory_time = 10 ** random.uniform(-6, 1), 10 ** random.uniform(-6, 1)
        if abs(math.log(compute_time / memory_time)) < 1e-3:
            continue                                   # ties are checked exactly below
        flops, bytes_moved = compute_time * peak, memory_time * bandwidth
        seconds, bound = _roofline_result(roofline, flops, bytes_moved, peak, bandwidth)
        want = max(flops / peak, bytes_moved / bandwidth)
        assert math.isclose(seconds, want, rel_tol=1e-9), "the time is not max(flops/peak, bytes/bandwidth)"
        assert bound == ("compute" if compute_time > memory_time else "memory"), (
            "the bound is named wrongly: 'compute' when flops/peak is the larger time")
    assert _roofline_result(roofline, 2.0**30, 2.0**31, 2.0**29, 2.0**30) == (2.0, "compute"), (
        "a tie counts as compute-bound")
    assert _roofline_result(roofline, 0.0, 8e6, 1e10, 4e9) == (0.002, "memory"), "no FLOPs: memory-bound"
    assert _roofline_result(roofline, 1e9, 0.0, 1e10, 4e9) == (0.1, "compute"), "no bytes moved: compute-bound"


def test_roofline_errors(roofline):
    """a non-positive peak or bandwidth, or negative work, raises ValueError"""
    for bad in ((1e9, 1e9, 0.0, 1e9), (1e9, 1e9, -1e9, 1e9), (1e9, 1e9, 1e9, 0.0), (1e9, 1e9, 1e9, -5.0),
                (-1.0, 1e9, 1e9, 1e9), (1e9, -1.0, 1e9, 1e9)):
        with raises_value_error(f"roofline{bad}"):
            roofline(*bad)


# --- torch_top_ops --------------------------------------------------------------------------------
# The model's three biggest operators wait a set time: their self times are fixed by design,
# about 0.6 s, 0.25 s and 0.1 s, whatever the machine's speed or load. CPU-bound operators would
# not do: on a busy machine a 0.3 ms operator preempted once took 14 ms in one run and 0.3 ms in
# the next. Around them, ordinary operators of microseconds: a small nn.Linear, and aten::add
# called 30 times (first by call count). The biggest one is called through a wrapper operator
# registered with torch.library (first by total time), and runs last (first-seen order is
# wrong too), in three calls of 0.2 s under one name (a ranking of single events, not of
# operators, puts it below the 0.25 s one), each with inputs of a shape of its own (a ranking of
# the rows of key_averages(group_by_input_shape=True), not of operators, does too).
# The three are profiler ranges that forward opens as it runs, recorded as operators are
# (_operator_range: not user annotations, so an answer that leaves out the ranges users label
# with record_function keeps them), named as ATen's operators are ("aten::<stem>_<hex>", so that
# an answer keeping only real operators' names keeps them too), with 64 random bits drawn from
# os.urandom (secrets) in that call: no registry, attribute or closure
# holds them before or after it, only the profile of the call. An operator registered with
# torch.library stays in torch's registries once it has run, names and all, and with a
# handful of known names a ranking could be guessed. forward leaves behind only SHA-256
# digests of the names (model.calls, one list per call), which the judge compares with the
# digests of the names the answer gives. The ranges wait by a sleep called through a partial:
# a profiler's Python tracer (with_stack=True) records calls of built-ins made from Python
# themselves, and a sleep recorded as a function of its own would take the ranges' self time.
# (An answer that rewrites the model or the profiler's entry points is not in scope.)
_OP_SECONDS = (0.6, 0.25, 0.1)                          # heavy, mid, low


def _operator_range(name, inputs=()):
    """A profiler range that torch's profiler records as it records an operator: its events are
    not user annotations (`is_user_annotation` False), as torch.profiler.record_function's are
    (tests/test_checks_catalogue.py holds the pinned torch to it), with `inputs` as its inputs
    (their shapes recorded under record_shapes=True). Falls back to record_function, without
    inputs, where a torch lacks the private class."""
    import torch
    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    return fast(name, list(inputs)) if fast is not None else torch.profiler.record_function(name)


_registered = []


def _model_with_known_ops():
    """(model, input): each forward call appends to model.calls the SHA-256 digests of the names
    of its three biggest operators by self time, largest first."""
    import hashlib
    import secrets

    import torch
    from torch import nn

    # Unique in the process that registers it (this function may travel there as a copy, with an empty _registered).
    namespace = f"course{random.randrange(10**6)}_{len(_registered)}_{time.monotonic_ns()}"
    stems = random.sample(("gather", "pack", "route", "merge", "stage", "shard", "fetch", "bucket"), 4)

    pause = functools.partial(time.sleep)              # no Python tracer sees this call

    def waiting(x, seconds, name, shown=None):
        with _operator_range(name, [x if shown is None else shown]):
            pause(seconds)
            return x.clone()

    @torch.library.custom_op(f"{namespace}::{stems[0]}", mutates_args=())
    def wrapper(x: torch.Tensor, seconds: float, name: str) -> torch.Tensor:
        # Three calls of 0.2 s, each shown inputs of another shape: a ranking of single calls, or
        # of rows grouped by input shape, puts it below the 0.25 s one.
        for rows in range(3):
            out = waiting(x, seconds / 3, name, shown=x[:len(x) - rows])
        return out
    _registered.append(namespace)
    stems = stems[1:]

    class Known(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(16, 16)
            self.calls = []

        def forward(self, x):
            pick = secrets.SystemRandom()               # os.urandom: no state to read
            # Named as real operators are (aten::...), so that an answer keeping only those keeps them.
            names = [f"aten::{stem}_{secrets.token_hex(8)}" for stem in pick.sample(stems, 3)]
            self.calls.append([hashlib.sha256(name.encode()).hexdigest() for name in names])
            t, one = torch.zeros(4), torch.ones(4)
            for _ in range(30):
                t = torch.add(t, one)
            h = self.lin(x)
            order = [1, 2]
            pick.shuffle(order)
            outs = [waiting(x, _OP_SECONDS[rank], names[rank]) for rank in order]
            return h, t, outs, wrapper(x, _OP_SECONDS[0], names[0])

    return Known(), torch.randn(8, 16)


@timeout(120)
def test_torch_top_ops_self_time(torch_top_ops):
    """the top operators by self CPU time (not total time, not call count), largest first

    False failure of a correct answer: < 1e-11 (three tries of each of three rankings, each
    try failing with a rate of 1e-4 or less: 3 * 1e-12). The ranked operators wait 0.6 s,
    0.25 s and 0.1 s; every other operator runs for microseconds, about 1 ms in all (drawing
    and hashing the three names adds some microseconds of Python, in no operator). A correct
    answer can fail one try only if the machine stalls that millisecond of work for more than
    0.1 s, or a wait overruns by more than 0.15 s, during its profile: with waits of 0.4 s,
    0.15 s and 0.06 s, 0 failures in 200 tries of the reference on a 2-core machine at load
    average 7 to 29. Each of three tries has a fresh model; with a per-try rate of 1e-4 or less
    all three failing is 1e-12. A match is decided on SHA-256 digests of the names (a
    collision: below 2**-200). Total-time, call-count, first-seen and unsorted rankings fail
    every try, and so do rows grouped by input shape and not summed per name (the heaviest
    operator's three calls each show inputs of their own shape; a name given twice fails at
    once, as no right answer gives one); an answer that does not profile the call cannot know the names (64 random bits
    each, drawn in the call): it passes a try with a chance below 2**-60. Each call runs beside a
    thread waiting in Python, as in a notebook: an answer that profiles with with_stack=True and
    ranks every row (Python functions too) names that thread's wait first and fails, as it does
    in the student's notebook; with_stack and operator rows only passes.
    """
    for top in random.sample((1, 2, 3), 3):
        problem = None
        for _ in range(3):
            (got,), (records,) = there(_top_ops_tries, torch_top_ops, top, 1)
            got = exact_list(got, f"torch_top_ops(model, x, top={top})")
            assert all(isinstance(name, str) for name in got), "return operator names (str) such as 'aten::addmm'"
            assert len(got) == top, f"asked for top={top}, got {len(got)} names"  # stalls cannot change it
            _assert_distinct(got)
            if not _names_match(got, records, top):
                problem = _python_function_named(got) or (
                    f"with top={top} the names are not those of the operators with the largest "
                    "self CPU time, largest first")
            else:
                problem = None
                break
        assert problem is None, problem


@timeout(60)
def test_torch_top_ops_default_top(torch_top_ops):
    """top defaults to 3

    False failure of a correct answer: < 1e-11 (three tries, each failing with a rate of
    1e-4 or less: see test_torch_top_ops_self_time).
    """
    tries, records = there(_top_ops_tries, torch_top_ops, None, 3)
    for got, calls in zip(tries, records):
        got = exact_list(got, "torch_top_ops(model, x)")
        assert len(got) == 3, f"top defaults to 3, got {len(got)} names"
        _assert_distinct(got)
        if _names_match(got, calls, 3):
            return
    raise AssertionError(_python_function_named(got)
                         or "the names are not those of the three operators with the largest self CPU time")


def _assert_distinct(got):
    """An operator is one entry however often, and with whatever inputs, it was called: no stall
    can make a right answer name one twice."""
    twice = sorted({name for name in got if isinstance(name, str) and got.count(name) > 1})
    assert not twice, (
        f"{twice[0]!r} is named more than once: an operator called with inputs of several shapes is one "
        "operator (rows of key_averages(group_by_input_shape=True) must be summed per name)")


def _names_match(got, calls, top):
    """Whether the names `got` are, in order, the `top` biggest operators of one of the forward
    calls made while torch_top_ops ran (`calls`: the digests each call left)."""
    if not all(isinstance(name, str) for name in got):
        return False
    digests = [_digest(name) for name in got]
    return any(digests == list(record[:top]) for record in calls)


class _ThreadWaitingInPython:
    """A thread blocked in a Python function while the call runs, as a notebook kernel's own
    threads are (they wait for messages in selectors' select()). A profiler's Python tracer
    (with_stack=True) records the functions of every thread: the waiting one's self time is the
    whole profile. So in a notebook, ranking every row of such a profile names a Python function
    first, not an operator; here too, rather than only where students run it."""

    def __enter__(self):
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.stop.wait, name="waits as a kernel's threads do", daemon=True)
        self.thread.start()

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)


def _python_function_named(got):
    """A message if the answer named a Python function (with_stack=True rows: 'file.py(12): name')."""
    frames = [name for name in got if isinstance(name, str) and ".py(" in name and "): " in name]
    return frames and (
        f"{frames[0]!r} is a Python function, not an operator: with_stack=True records the Python functions of "
        "every thread, and a thread waiting (as a notebook kernel's threads do) has the whole profile as its self "
        "time; rank operators only, or profile without with_stack")


def _top_ops_tries(torch_top_ops, top, tries):
    """(in the student's process) a fresh model whose forward opens fresh operator names,
    torch_top_ops on it `tries` times (top left to its default when None), each beside a thread
    that waits in Python as a kernel's threads do: ([what each call returned], [for each call,
    the digests that the forward calls made meanwhile left])."""
    model, x = _model_with_known_ops()
    found, records = [], []
    for _ in range(tries):
        before = len(model.calls)
        with profiling.native_stderr_filtered(), _ThreadWaitingInPython():
            found.append(torch_top_ops(model, x) if top is None else torch_top_ops(model, x, top))
        records.append([list(record) for record in model.calls[before:]])
        if type(found[-1]) in (list, tuple) and _names_match(found[-1], records[-1], top or 3):
            break                                  # no need for more tries (the judge checks it again)
    return found, records
