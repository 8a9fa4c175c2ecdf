"""helpers/: fast to import, no torch, no solutions, workers usable under every start method."""
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest

from autograder import course, notebooks
from helpers import plots, system, timing, workers


def test_import_is_fast_and_light():
    code = ("import time, sys; t = time.perf_counter(); import helpers; "
            "print(time.perf_counter() - t, 'torch' in sys.modules, 'matplotlib' in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           cwd=course.ROOT).stdout.split() for _ in range(3)]
    seconds = min(float(r[0]) for r in runs)
    assert seconds < 0.3, f"import helpers took {seconds:.3f} s"
    assert runs[0][1] == "False", "import helpers imports torch"
    assert runs[0][2] == "False", "import helpers imports matplotlib"


def test_helpers_define_no_exercise():
    """helpers/ is shipped to students: no function may carry an exercise's name."""
    exercises = {e for names in course.contract().values() for e in names}
    for path in (course.ROOT / "helpers").glob("*.py"):
        text = path.read_text()
        for name in exercises:
            assert f"def {name}(" not in text, f"{path.name} defines {name}, an exercise"
        assert "autograder" not in text, f"{path.name} mentions the autograder"


@pytest.mark.parametrize("method", multiprocessing.get_all_start_methods())
def test_workers_run_under_every_start_method(method):
    with workers.mp_context(method).Pool(2) as pool:
        assert pool.map(workers.square, range(6)) == [x * x for x in range(6)]
        records = pool.starmap(workers.traced, [(workers.add, i, 1) for i in range(3)])
    assert [r["result"] for r in records] == [1, 2, 3]


def test_start_method_from_environment(monkeypatch):
    monkeypatch.setenv(workers.START_METHOD_VARIABLE, "spawn")
    assert workers.mp_context().get_start_method() == "spawn"
    monkeypatch.setenv(workers.START_METHOD_VARIABLE, "teleport")
    with pytest.raises(ValueError, match="teleport"):
        workers.start_method()


def test_system_summary_is_consistent():
    info = system.summary()
    assert 1 <= info["usable cores"] <= info["logical cores"]


def test_busy_cpu_seconds_counts_work_on_the_cores():
    """Work done meanwhile shows in the cores' count (whoever else runs only adds to it)."""
    import os
    cpus = os.sched_getaffinity(0)
    before, spent = system.busy_cpu_seconds(cpus), time.process_time()
    while time.process_time() - spent < 0.3:
        pass
    assert system.busy_cpu_seconds(cpus) - before >= 0.25  # ticks of 10 ms
    assert system.busy_cpu_seconds(set()) == 0


def test_compare_interleaves_and_reports_ratios():
    result = timing.compare({"fast": lambda: None, "slow": lambda: time.sleep(0.01)}, repeat=2)
    assert result["slow"] > result["fast"]
    assert result.speedups("slow")["fast"] > 1
    assert "speedup" in result.table()


def test_compare_runs_before_untimed_and_in_rounds():
    calls = []
    result = timing.compare({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeat=2,
                            before=lambda name: (calls.append(f"before {name}"), time.sleep(0.2)))
    assert calls == ["before a", "a", "before b", "b"] * 2
    # A timed `before` would add its 0.2 s sleep (which never returns early) to every round.
    assert max(result.values()) < 0.2, "what `before` does is not timed"


def _spin_cpu(seconds):
    spent = time.process_time()
    while time.process_time() - spent < seconds:
        pass
    return time.process_time()


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_the_work_of_our_own_workers_is_not_counted_as_others_load(method):
    """others_load subtracts what this process and every process it started spent (those already
    joined too): a pool's workers are the timed work, not other programs."""
    import psutil

    before = timing._own_cpu(psutil)
    with multiprocessing.get_context(method).Pool(2) as pool:
        spent = sum(pool.map(_spin_cpu, [0.3, 0.3]))
    assert timing._own_cpu(psutil) - before >= spent - 0.05  # ticks of 10 ms


def test_a_program_we_did_not_start_counts_as_others_load(monkeypatch, capsys):
    """A busy process outside this process's tree (started by a shell that exits at once) makes
    compare() say that other programs were busy while it timed (the course says so above a
    quarter of the machine: here, above one busy core's share), and so does measure()."""
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setattr(timing, "_last_note", [float("-inf")])
    monkeypatch.setattr(timing, "BUSY_SHARE", 0.6 / cores)  # one busy core of this machine's
    spinner = subprocess.run(
        ["sh", "-c", f"{sys.executable} -c 'import time\nt = time.time()\nwhile time.time() - t < 20: pass' "
                     ">/dev/null 2>&1 & echo $!"], capture_output=True, text=True, check=True)
    pid = int(spinner.stdout.split()[0])
    try:
        time.sleep(0.2)  # started
        with timing.others_load() as others:
            timing.compare({"a": lambda: time.sleep(0.3)}, repeat=3)
        noted_by_compare = capsys.readouterr().out
        timing._last_note[0] = float("-inf")  # a note at most every 10 s: this one is measure's
        timing.measure(time.sleep, 0.3, repeat=3)
        noted_by_measure = capsys.readouterr().out
    finally:
        os.kill(pid, signal.SIGKILL)
    # one core busy: 1 / cores alone, more with other load (scheduling noise: at most a few ticks)
    assert others.share is not None and others.share >= 0.6 / cores
    assert "note: other programs used" in noted_by_compare
    assert "note: other programs used" in noted_by_measure


def _as_shown(text):
    """The lines a terminal or a notebook shows for `text`: each line as its last carriage return
    left it (a progress bar redraws its line after one)."""
    return [line.rsplit("\r", 1)[-1] for line in text.split("\n")]


def test_the_busy_note_is_not_written_into_a_progress_bar(monkeypatch, capsys):
    """A note printed while a progress bar shows (05's timed runs, compare's own bar) gets a line
    of its own, above the bar, which then redraws below it."""
    monkeypatch.setattr(timing, "_last_note", [float("-inf")])
    rounds = {"a": lambda: timing._note_busy(0.9) if calls.append(1) or len(calls) == 2 else None}
    calls = []
    timing.compare(rounds, repeat=3, progress="timed runs")
    shown = _as_shown(capsys.readouterr().out)
    assert any(line.startswith("note: other programs used 90%") for line in shown), shown
    assert any(line.startswith("timed runs: 100%") for line in shown), shown


def test_no_note_where_ended_workers_go_uncounted(monkeypatch):
    """macOS and Windows report no CPU time of a process's ended children: a pool that ended
    within the block would count as other programs' load, so no share is read there."""
    monkeypatch.setattr(timing.sys, "platform", "darwin")
    with timing.others_load() as others:
        time.sleep(0.6)
    assert others.share is None


def test_compare_times_where_the_load_cannot_be_read(monkeypatch):
    """A machine whose counters cannot be read (no psutil, a sandbox's /proc) still gets its
    comparison, without a note: at the start of the block or at its end."""
    for failing_call in (0, 1):
        calls = []

        def busy(psutil, calls=calls, failing_call=failing_call):
            calls.append(1)
            if len(calls) - 1 == failing_call:
                raise OSError("no counters here")
            return 0.0, 1

        monkeypatch.setattr(timing, "_machine_busy", busy)
        with timing.others_load() as others:
            time.sleep(0.6)
        assert others.share is None and len(calls) == 1 + failing_call
        assert set(timing.compare({"a": lambda: None}, repeat=1)) == {"a"}


def test_plots_draw(tmp_path):
    import matplotlib.pyplot as plt

    plots.speedup_plot([1, 2, 4], [1, 1.8, 3.0], usable=2)
    plots.timeline_plot([{"lane": "a", "start": 0, "end": 1, "label": 1},
                         {"lane": "b", "start": 0.5, "end": 2}])
    plots.bar_chart({"x": 1.0, "y": 2.0}, log=True)
    plots.times_plot([1, 2], [2.0, 1.1])
    plt.savefig(tmp_path / "p.png")
    plt.close("all")
    assert (tmp_path / "p.png").stat().st_size > 1000



def test_reading_the_default_start_method_leaves_it_open():
    """system.show(), the first cell of every notebook, and workers.start_method() read the start
    method without fixing it: a student's set_start_method() afterwards works (through
    multiprocessing.get_context() they fixed it, and it raised "context has already been set")."""
    code = ("import multiprocessing\nfrom helpers import system, workers\n"
            "system.summary(); workers.start_method()\n"
            "multiprocessing.set_start_method('spawn')\nprint(multiprocessing.get_start_method())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=course.ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "spawn", done.stderr[-1500:]


def test_a_script_stopped_at_its_time_limit_takes_its_children_with_it(course_tools):
    """cores.run_script at its time limit kills the script's whole session: a child the script
    forked (a hung worker) does not go on running (it did, with subprocess.run's timeout)."""
    from helpers import cores

    code = ("import multiprocessing, time\n"
            "child = multiprocessing.get_context('fork').Process(target=time.sleep, args=(120,))\n"
            "child.start()\nprint(child.pid, flush=True)\ntime.sleep(120)\n")
    run = cores.run_script(code, timeout=3)
    assert run["timed_out"] and run["returncode"] is None
    child = int(run["stdout"].split()[0])
    assert not course_tools.running(child, within=10), f"the script's child {child} still runs"


def test_a_comparison_takes_any_key_as_baseline():
    """Comparison.table(0) compares with the candidate named 0 (zero workers, say); a falsy key
    was taken for "no baseline" and the first candidate used instead."""
    result = timing.Comparison({4: 0.5, 0: 2.0, 1: 1.0})
    assert "4.00x" in result.table(0).splitlines()[1]
    assert result.speedups(0) == {4: 4.0, 0: 1.0, 1: 2.0}


def test_a_comparison_of_microseconds_shows_them():
    """09's DataParallel table printed 0.0000 seconds for both rows: times print in a unit that
    shows their digits."""
    lines = timing.Comparison({"plain": 3.2e-5, "wrapped": 4.9e-5}).table().splitlines()
    assert lines[0].split()[1] == "µs" and lines[1].split()[1:] == ["32.0", "1.00x"], lines
    lines = timing.Comparison({"serial": 2.5, "pool": 1.25}).table().splitlines()
    assert lines[0].split()[1] == "seconds" and lines[2].split()[1:] == ["1.25", "2.00x"], lines


def test_busy_cpu_seconds_is_none_where_there_is_no_affinity(monkeypatch):
    """macOS and Windows have neither sched_getaffinity nor /proc/stat: None, as documented (it
    raised AttributeError there)."""
    import os

    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert system.busy_cpu_seconds() is None


@pytest.mark.parametrize("to", ["process", "another thread"])
def test_an_interrupted_script_takes_its_children_with_it(course_tools, tmp_path, to):
    """A cell interrupted while run_script waits (Jupyter's interrupt: SIGINT to the kernel) stops
    the script and what it started, as the time limit does. The operating system may hand a
    signal sent to the process to any of its threads (the kernel has several): the wait saw it
    only at the time limit then (once in a CI run)."""
    import os
    import signal
    import threading

    from helpers import cores

    code = ("import multiprocessing, os, time\n"
            "child = multiprocessing.get_context('fork').Process(target=time.sleep, args=(120,))\n"
            "child.start()\n"
            "open('pids.tmp', 'w').write(f'{os.getpid()} {child.pid}'); os.replace('pids.tmp', 'pids')\n"
            "time.sleep(120)\n")
    pids = tmp_path / "pids"

    def interrupt_once_the_child_runs():
        deadline = time.monotonic() + 60
        while not pids.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if to == "process":
            os.kill(os.getpid(), signal.SIGINT)
        else:  # this thread takes it; Python's handler runs on the main thread when it next runs code
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    # The handler a Jupyter kernel runs cells with (ipykernel sets it before each request). A test
    # command started in the background by a script starts with SIGINT ignored (the shell does that
    # to background commands, and Python and the pytest workers keep it): the interrupt was lost.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_once_the_child_runs, daemon=True).start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            cores.run_script(code, timeout=100, folder=tmp_path)
    finally:
        signal.signal(signal.SIGINT, before)
    assert time.monotonic() - started < 90, "the interrupt did not reach run_script"
    script, child = map(int, pids.read_text().split())
    assert not course_tools.running(script, within=10) and not course_tools.running(child, within=10), (
        "the script or its child still runs")


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_start_all_leaves_every_worker_of_a_pool_running(method):
    """workers.start_all(pool, n) returns only once n workers run (under spawn, one quick warm-up
    task started one worker, and the timed work then ran on it while the others were still
    starting: 02's two-process timeline showed one row). No clock: the pool's own processes."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from helpers import workers

    with ProcessPoolExecutor(3, mp_context=multiprocessing.get_context(method)) as pool:
        workers.start_all(pool, 3)
        running = [p for p in pool._processes.values() if p.is_alive()]
        assert len(running) == 3, f"{len(running)} of 3 workers running"


def test_start_all_says_so_when_the_pool_has_fewer_workers():
    """Asked for more workers than the pool has, start_all stops with an error (it waited forever)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from helpers import workers

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        with pytest.raises(RuntimeError, match="only 1 of the 2 workers"):
            workers.start_all(pool, 2, wait=0.0)


def test_speedup_plots_count_workers_in_whole_numbers():
    """A plot of 1 and 2 threads had ticks at 1.2, 1.4, ... on an axis of workers."""
    import matplotlib
    matplotlib.use("Agg")
    ax = plots.speedup_plot([1, 2], [1.0, 1.9], xlabel="threads")
    ax.figure.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert ax.get_xlabel() == "threads"


def test_torch_threads_sets_the_count_inside_and_restores_it_even_on_error():
    import torch

    from helpers import profiling

    before = torch.get_num_threads()
    with profiling.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    try:
        with profiling.torch_threads(1):
            raise KeyError("inside")
    except KeyError:
        pass
    assert torch.get_num_threads() == before


def test_both_numpy_jobs_compute_what_they_say_over_every_block():
    """gil.numpy_chunk and gil.numpy_memory_chunk walk the array in blocks: a length that is not a
    whole number of blocks still has every number counted once."""
    import numpy as np
    from helpers import gil
    x = np.random.default_rng(3).random(3 * gil.BLOCK + 17)
    assert gil.numpy_chunk(x) == pytest.approx(float(np.exp(np.sin(x)).sum()), rel=1e-12)
    assert gil.numpy_memory_chunk(x) == pytest.approx(float((x * 2.0 + 1.0).sum()), rel=1e-12)


def test_a_call_still_running_gets_a_deadlock_hint_and_its_result(monkeypatch):
    """The hint comes while the call runs, the call is not stopped, and a quick call prints nothing."""
    import io
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stdout", printed)
    assert workers.call_with_deadlock_hint(sum, [1, 2]) == 3
    time.sleep(0.1)

    def until_hinted():
        deadline = time.monotonic() + 60
        while "still running" not in printed.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
        return "finished"

    assert workers.call_with_deadlock_hint(until_hinted, hint_after=0.1) == "finished"
    assert printed.getvalue().startswith("... still running after 0 s") and "interrupt the kernel" in printed.getvalue()


def _deadlocked_counter(ctx, children):
    """A process that holds a Value's own lock (a plain Lock, not the default RLock) while it reads
    the Value, which takes that lock again: it waits forever, and so does the join."""
    from helpers import races
    lock = ctx.Lock()
    total = ctx.Value("i", 0, lock=lock)
    child = ctx.Process(target=races.add_ones, args=(total, 3, lock))
    child.start()
    children.append(child)
    child.join()
    return total.value


@pytest.mark.parametrize("method", multiprocessing.get_all_start_methods())
def test_an_interrupted_deadlock_leaves_no_process_running(method, capsys):
    """Jupyter's interrupt (SIGINT to the kernel) ends the call with KeyboardInterrupt and stops the
    deadlocked process it started; a process started before the call is left alone."""
    import signal
    import threading
    ctx = workers.mp_context(method)
    bystander = ctx.Process(target=time.sleep, args=(60,))
    bystander.start()
    children, main = [], threading.get_ident()

    def interrupt_once_it_waits():
        deadline = time.monotonic() + 60
        while not children and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        signal.pthread_kill(main, signal.SIGINT)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # a kernel's, and a background shell's
    try:
        threading.Thread(target=interrupt_once_it_waits, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            workers.call_with_deadlock_hint(_deadlocked_counter, ctx, children, hint_after=600)
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        assert children and not children[0].is_alive(), "the deadlocked process still runs"
        assert "stopped the 1 process(es)" in capsys.readouterr().out
        assert bystander.is_alive(), "a process started before the call was stopped"
    finally:
        bystander.terminate()
        bystander.join()
