"""Tools the hidden checks share: time limits and strict comparisons.

Strict means an answer cannot pass by returning an object that merely claims
to be equal (an `__eq__` that is always true) or the wrong type.
"""
import gc
import math
import os
import sys
import multiprocessing.process
import threading
import time
from contextlib import contextmanager

import numpy as np

from helpers.system import busy_cpu_seconds


# --- the student's process -----------------------------------------------------------------------
# While grading, the checks run in the judge and the student's code in another
# process (autograder/pipeline/judge.py). What must happen beside the student's
# code (a spy, a fork, a file the answer reads) goes there with `there()`; what
# the judge can see from outside (time, CPU, processes) it measures itself.

def _student():
    from autograder import hidden
    return hidden.STUDENT


def there(fn, *args, **kwargs):
    """fn(*args, **kwargs) in the student's process (fn travels by value); its result, as a value.

    Without a judge (the course's tests run the checks beside the answers) it is a plain call.
    Evidence gathered there is only as trustworthy as that process: use it to
    explain a failure or to test behaviour; a claim about speed or parallelism
    also needs what the judge measures itself (`observe`, the judge's clock).
    """
    session = _student()
    return fn(*args, **kwargs) if session is None else session.run(fn, *args, **kwargs)


def student_pid():
    """The pid of the process that runs the student's code."""
    session = _student()
    return os.getpid() if session is None else session.pid


def observe(interval=0.005):
    """with observe() as seen: <calls> -> seen.wall, seen.cpu (CPU seconds of the student's
    process tree, reaped children included), seen.busy_cores, seen.pids (descendants seen),
    seen.max_processes, seen.max_threads. Read by the judge from /proc, not reported by the
    student's process."""
    from autograder.pipeline.judge import ProcessTree, _Observer
    session = _student()
    return _Observer(ProcessTree(student_pid() if session else os.getpid()), interval)


class MachineUse:
    others = 0.0


@contextmanager
def machine_use():
    """(the judge) with machine_use() as use: <a timed try> -> use.others, the CPU seconds that
    processes other than the student's and the judge's spent meanwhile on the CPUs the judge may
    use (the kernel's counts, in ticks of 10 ms): a try timed while others ran is no evidence
    against an answer. Where the CPUs are shared with another machine's load (a container on a
    busy host) it is never small, and such tries count for nothing."""
    from autograder.pipeline.judge import ProcessTree
    cpus, pid = os.sched_getaffinity(0), student_pid()
    tree = ProcessTree(pid)
    use = MachineUse()
    start = (busy_cpu_seconds(cpus), time.process_time(), tree.cpu_seconds())
    yield use
    end = (busy_cpu_seconds(cpus), time.process_time(), tree.cpu_seconds())
    busy, judge, student = (b - a for a, b in zip(start, end))
    use.others = max(0.0, busy - judge - (student if pid != os.getpid() else 0.0))


class Spent:
    seconds = 0.0
    user = None  # of which user time, the process's own code (None where not told apart)
    wall = 0.0  # the block's wall-clock seconds, as the judge timed them
    detail = ""  # how the student's process spent it (user, system, page faults), for the message


@contextmanager
def caller_cpu():
    """(the judge) with caller_cpu() as spent: <there() calls> -> spent.seconds, the CPU time the
    student's process itself used meanwhile (all its threads, those that ended included; not its
    children), read from /proc. Without a judge (the checks run beside the answers, in this
    process, beside the judge's own threads) it is the calling thread's CPU time."""
    spent = Spent()
    pid = student_pid()
    alone = pid == os.getpid()
    with _heap_frozen():
        start, began = time.thread_time() if alone else _process_counts(pid), time.perf_counter()
        yield spent
        if alone:
            spent.seconds = time.thread_time() - start
        else:
            # The split says, when a caller spends more than expected, whether its own code ran
            # (user) or the kernel worked for it (system: forks, page faults).
            user, system, minor, major = (b - a for a, b in zip(start, _process_counts(pid)))
            spent.seconds, spent.user = user + system, user
            spent.detail = (f"user {user:.2f} s, system {system:.2f} s, "
                            f"{minor:.0f} minor and {major:.0f} major page faults")
        spent.wall = time.perf_counter() - began


@contextmanager
def _heap_frozen():
    """The student's process's objects of before the block out of the garbage collector's sight
    meanwhile (gc.freeze there): a full collection, which the interpreter starts whenever enough
    objects were allocated, scans every object alive, and with torch loaded that costs 0.12 s of
    CPU (measured idle; 0.2 s on a busy machine): charged to the calling process while the judge
    reads its CPU, it would look like work done there. Objects made during the block are
    collected as usual. Nested blocks freeze and unfreeze once, at the outermost."""
    _frozen[0] += 1
    try:
        if _frozen[0] == 1:
            there(gc.freeze)
        yield
    finally:
        _frozen[0] -= 1
        if _frozen[0] == 0:
            there(gc.unfreeze)


_frozen = [0]  # how many _heap_frozen() blocks the judge is in


class ThreadsSpent:
    seconds = 0.0
    user = None  # the kernel's per-thread runtime does not tell user time apart
    wall = 0.0
    ended = ()  # threads alive before the block that ended during it: their CPU cannot be attributed


@contextmanager
def caller_threads_cpu():
    """(the judge) with caller_threads_cpu() as spent: <there() calls> -> spent.seconds, the CPU
    time that the threads the student's process had before the block (the calling thread among
    them) used meanwhile, from the kernel's per-thread accounting (/proc/<pid>/task/<tid>/schedstat);
    threads started during the block are not counted. spent.ended lists the threads of before
    that ended during the block, whose time then cannot be told apart from the rest of the process's."""
    from autograder.pipeline.judge import ProcessTree
    spent = ThreadsSpent()
    tree = ProcessTree(student_pid())
    _threads_settled(tree)
    with _heap_frozen():
        before, began = tree.thread_runtimes() or {}, time.perf_counter()
        yield spent
        after = tree.thread_runtimes() or {}
        spent.wall = time.perf_counter() - began
    spent.ended = sorted(set(before) - set(after))
    spent.seconds = sum(after[tid] - before[tid] for tid in before if tid in after) / 1e9


def _threads_settled(tree, quiet=0.1, limit=2.0):
    """Wait until the student's process has kept the same threads for `quiet` seconds (at most
    `limit`): a thread in the midst of ending (one an earlier call or answer let go) would
    otherwise end inside the block, and the block could not be decided (a catalogue run saw a
    native thread of the reference process end inside a threads answer's call)."""
    deadline = time.monotonic() + limit
    threads, since = set(tree.thread_runtimes() or ()), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < quiet:
        time.sleep(0.02)
        now = set(tree.thread_runtimes() or ())
        if now != threads:
            threads, since = now, time.monotonic()


def _process_counts(pid):
    """(user CPU seconds, system CPU seconds, minor page faults, major page faults) of the process
    so far, all its threads, ended ones included (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:  # bytes: the process names itself, in any bytes
        text = stat.read()
    fields = text[text.rindex(b")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks, int(fields[7]), int(fields[9])


def _process_cpu(pid):
    user, system, _, _ = _process_counts(pid)
    return user + system


def work_for_workers(tasks, processes):
    """(puzzles, allowance) for `tasks` calls that must run in `processes` worker processes.

    The student's process may spend `allowance` CPU seconds, 0.15 s + 0.02 s per process, while
    the calls run. Measured with torch loaded, under fork, spawn and forkserver, and with six
    processes spinning on the two cores: a pool, a process per call, an executor or loky spend at
    most 0.03 s (0.008 s per fork), the ranks of 12 0.07 s; joblib's multiprocessing backend 0.12 s,
    nearly all of it the gc.collect() it runs before starting its pool, and 0.03 s once the objects
    alive before the call are frozen out of the collector's sight (gc.freeze, as caller_cpu does:
    a full collection the interpreter started by itself during the call once charged a correct
    pool 0.20 s under spawn on a busy machine). The puzzles (autograder/checks/_puzzles.py),
    one per call, take twice the allowance in all, so an answer that solved them in its own
    process spent at least that there."""
    from autograder.checks import _puzzles
    allowance = caller_allowance(processes)
    return [_puzzles.make(2 * allowance / tasks) for _ in range(tasks)], allowance


def caller_allowance(processes):
    """CPU seconds a correct answer's calling process may spend while `processes` workers run: the
    fixed cost of starting them and handing them work (measured: see work_for_workers)."""
    return 0.15 + 0.02 * processes


# CPU seconds per second of waiting that a caller may spend while its workers run, beyond its fixed
# cost: code that waits by polling pays for every look. Measured: joblib's Parallel (its retrieval
# loop looks every 10 ms), with loky, multiprocessing or threads, 5-12 ms per second; three
# forkserver processes polled every 10 ms, 33 ms per second; blocking waits (join, a pool's map,
# a sentinel) about none.
WAITING_CPU = 0.05


def _told(spent):
    detail = getattr(spent, "detail", "")
    return f" ({detail})" if detail else ""


def assert_worked_outside(puzzles, answers, spent, allowance, what):
    """The calls solved their puzzles (answers in the calls' order), and the student's process
    spent less than `allowance` CPU seconds meanwhile (caller_cpu): the work was done elsewhere.

    False failure of a correct answer: 0 while it waits for its workers at less than WAITING_CPU
    of a core: the puzzles' answers are exact (see _puzzles for the chance, about 1e-24, that the
    judge's own primes are not); a correct answer's process spends a fixed cost per worker, which
    a busy machine does not stretch, and a caller that polls its workers spends more the longer
    the machine makes them take. So a caller that spent more than the allowance, but no more than
    such waiting could explain over the call's wall time, leaves the check undecided (graded
    again alone, where the call is short; never passed): an answer that solved the puzzles itself
    spent all their CPU time, twice the allowance, and fails unless it stretched the call to
    several seconds, which only makes it undecided.

    Only user time, the process's own code, can fail it: solving a puzzle is arithmetic in user
    mode. What the kernel did for the process (system time: starting processes, page faults) a
    loaded machine can stretch: a correct pool's caller under `spawn`, in CI, spent 0.02 s of user
    and 0.58 s of system time, over an allowance of 0.19 s. System time that takes the process
    over the allowance leaves the check undecided, never passed."""
    assert len(answers) == len(puzzles) and all(p.solved_by(a) for p, a in zip(puzzles, answers)), (
        f"{what}: the results that came back do not match the work each task was given (a task "
        "lost, repeated, changed or out of order?): results must be what the workers computed, "
        "one for each task, in order")
    import pytest
    own = spent.seconds if spent.user is None else spent.user
    if allowance <= own < allowance + WAITING_CPU * spent.wall:
        pytest.skip(f"{what}: the calling process spent {own:.2f} s of CPU during a call that "
                    f"took {spent.wall:.1f} s on this machine: as much as waiting for the workers may cost "
                    f"there, so the grader cannot tell whether the work ran in the calling process{_told(spent)}")
    assert own < allowance, (
        f"{what}: the work ran in the calling process (in threads, or as direct calls), not in worker "
        f"processes: start the calls in processes (the calling process spent {own:.2f} s of CPU while "
        f"they ran; their own work takes {sum(p.seconds for p in puzzles):.2f} s){_told(spent)}")
    if spent.seconds >= allowance:
        pytest.skip(f"{what}: the calling process's own code spent {own:.2f} s of CPU, but the operating system "
                    f"worked {spent.seconds - own:.2f} s for it during a call of {spent.wall:.1f} s, "
                    f"{spent.seconds:.2f} s in all where {allowance:.2f} s is allowed: the grader cannot tell "
                    f"what that work was{_told(spent)}")


# --- meetings at a barrier ------------------------------------------------------------------
# The checks that show calls running at the same time make them meet at a barrier, where the first
# waits up to a long limit for the others (a worker may be slow to start on a busy machine). An
# answer that runs the calls one after the other waited that limit out in every grading, holding
# the machine shared, so that no other job's timing check could take it meanwhile (part of the
# test run stood 20-30 s with the cores nearly idle). The watch below ends such a wait early.
STALL_GRACE, STALL_EVERY, STALL_SECONDS = 1.0, 0.1, 2.0


@contextmanager
def broken_when_stalled(barrier):
    """(in the student's process) with broken_when_stalled(barrier) as watch: <the meeting>. A
    thread of its own (`watch`) breaks `barrier` (its waiters get BrokenBarrierError: they did not
    meet) once the meeting has stalled. Start it outside a spy's block (the spy would count its
    thread), and leave its thread out of what the judge counts of the answer's."""
    done = threading.Event()
    watch = threading.Thread(target=_watch_for_stall, args=(barrier, done), name="course-stall-watch", daemon=True)
    watch.start()
    try:
        yield watch
    finally:
        done.set()
        watch.join(5)  # one stuck asking an unresponsive manager is left behind (a daemon)


def _watch_for_stall(barrier, done):
    """Break `barrier` once the meeting has stalled.

    Nothing is read for the first STALL_GRACE seconds, in which a correct answer's meeting ends
    (about 0.1 s on 2 idle cores under fork), so a correct caller spends nothing on the watch
    there, and 0.2 ms of CPU a reading after it. Then every STALL_EVERY seconds the watch reads
    the state and CPU ticks of every thread of the student's process tree (the barrier's manager
    included, the watch left out); the meeting has stalled when STALL_SECONDS / STALL_EVERY
    readings in a row found the same threads, all asleep ("S") or ended ("Z"), with the same ticks, and then some
    but not all parties wait at the barrier. The others had then not arrived, and nothing in the
    tree was working towards them: no worker starting (an interpreter starting, spawned or
    forked, runs, waits for a core or waits for the disk), no call being handed out (handing out
    runs), no process or thread being created. Only a timer could still bring them, and no answer
    to these exercises waits on a timer before a call starts. A correct answer is therefore never
    cut short (false failure 0 on that assumption; a machine too busy to run the tree shows its
    threads waiting for a core, "R", which is no stall: 40 correct meetings under spawn and
    forkserver beside 8 spinning processes on 2 cores took 3.9 to 5.7 s, all met; a review tried
    80 gradings of correct answers, pools, executors, joblib, lazily started workers and polling
    loops among them, most beside 8 spinning processes: none was cut short). A tree or a barrier
    that cannot be read leaves the wait to its limit. (Reading the barrier and breaking it are two
    requests: a party arriving between them would be broken too, but after 2 s in which nothing
    worked towards it only a timer could bring it there.) The watch's thread lives until the
    meeting ends, whatever it found, so that the judge can leave exactly one thread out of its
    counts."""
    me = threading.get_native_id()
    if done.wait(STALL_GRACE):
        return
    needed = round(STALL_SECONDS / STALL_EVERY)
    last, quiet = None, 0
    while not done.wait(STALL_EVERY):
        now = _tree_threads(os.getpid(), me)
        if now is None:
            break
        # Asleep ("S"), or a process that has ended and waits to be joined ("Z"): neither works.
        quiet = quiet + 1 if now == last and all(state in (b"S", b"Z") for state, _ in now.values()) else 0
        last = now
        if quiet >= needed:
            try:
                if 0 < barrier.n_waiting < barrier.parties:
                    barrier.abort()
                    break
            except Exception:  # noqa: BLE001 - the barrier's manager gone: the wait ends by its limit
                break
            last, quiet = None, 0
    done.wait()


def _tree_threads(root, skip):
    """{(pid, tid): (state, CPU ticks)} of every thread of `root` and its descendants but thread
    `skip`, from /proc; None where `root`'s own cannot be read. (Not the judge's ProcessTree: this
    runs in the student's process, whose sandbox holds no autograder/pipeline.)"""
    found, todo, seen = {}, [root], set()
    try:
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except (FileNotFoundError, ProcessLookupError):
                continue  # ended meanwhile: the next reading differs
            for task in tasks:
                try:
                    with open(f"/proc/{pid}/task/{task}/stat", "rb") as stat:  # bytes: a name may be any bytes
                        text = stat.read()
                    with open(f"/proc/{pid}/task/{task}/children", "rb") as children:
                        todo.extend(int(child) for child in children.read().split())
                except (FileNotFoundError, ProcessLookupError):
                    continue  # ended meanwhile: the next reading differs
                fields = text[text.rindex(b")") + 2:].split()
                if int(task) != skip:
                    found[(pid, int(task))] = (fields[0], int(fields[11]) + int(fields[12]))
    except (OSError, ValueError, IndexError):
        return None  # what cannot be read may be working: no reading, no stall
    return found if any(pid == root for pid, _ in found) else None


def timeout(seconds):
    """Give a check its own time limit (default: autograder.hidden.DEFAULT_TIMEOUT)."""
    def mark(fn):
        fn.timeout = seconds
        return fn
    return mark


@contextmanager
def tasks_wrapped(wrap, chosen, by_value=False):
    """(in the student's process) with tasks_wrapped(wrap, chosen): every pickling, for a worker, of
    an object for which chosen(obj) is true (a function or method the answer sends as its task, or
    inside one) sends wrap(obj) in its place, pickled by cloudpickle; with `by_value`, so is every
    function cloudpickle sends by value (the notebook's own, by joblib). The picklers are those that
    carry tasks: multiprocessing's ForkingPickler (Pool, ProcessPoolExecutor, Process under spawn and
    forkserver), cloudpickle's (joblib's loky) and joblib's own (its multiprocessing backend); they
    are put back afterwards. (reducer_override is asked about functions too, before they are
    pickled by name.) Evidence that travels with the task reaches a worker however it was started."""
    import pickle
    import types
    import cloudpickle
    from multiprocessing.reduction import ForkingPickler
    busy = threading.local()

    def override(original):
        def reducer_override(self, obj):
            if not getattr(busy, "on", False) and (chosen(obj) or (
                    by_value and original is not None and type(obj) is types.FunctionType
                    and not cloudpickle.cloudpickle._should_pickle_by_reference(obj))):
                busy.on = True  # the wrapper's own pickling: the object inside it as it would go
                try:
                    return pickle.loads, (cloudpickle.dumps(wrap(obj)),)
                finally:
                    busy.on = False
            return NotImplemented if original is None else original(self, obj)
        return reducer_override

    picklers = [ForkingPickler, cloudpickle.Pickler]
    if "joblib" in sys.modules:  # its multiprocessing backend pickles with a pickler of its own
        from joblib.pool import CustomizablePickler
        picklers.append(CustomizablePickler)
    saved = {cls: cls.__dict__.get("reducer_override") for cls in picklers}
    for cls, original in saved.items():
        cls.reducer_override = override(original)
    try:
        yield
    finally:
        for cls, original in saved.items():
            if original is None:
                del cls.reducer_override
            else:
                cls.reducer_override = original


def counting(fn, *args, spy=None):
    """(in the student's process, through there()) fn(*args) and the Thread/Process starts and
    joins it made; `spy`: count_starts_and_joins's options."""
    with count_starts_and_joins(**(spy or {})) as counts:
        result = fn(*args)
    return result, counts


_told_unavailable = []


@contextmanager
def created():
    """(the judge) with created() as made: <there() calls>: the processes and threads the
    student's process tree created meanwhile, as the kernel reports them
    (autograder/pipeline/creations.py); pass them to capped() with the spy's counts."""
    from autograder.pipeline.creations import watch_creations
    from autograder.pipeline.judge import ProcessTree
    pid = student_pid()
    with watch_creations(pid, ProcessTree(pid).members()) as made:
        yield made
    if not made.available and not _told_unavailable:
        _told_unavailable.append(True)
        print("[judge] the kernel's process events are not available here (the grader is not root?): "
              "thread and process starts are counted by the spy in the student's process alone, bounded by the "
              "ids the kernel hands out", flush=True)


def kernel_decides(made):
    """Whether the kernel's record `made` (created()) can back a check: False where the grader
    gets no process events (not root: the evidence from the student's process stands alone).
    Events lost to an overflowing socket leave the check undecided (never passed)."""
    if not made.available:
        return False
    if made.lost:
        import pytest
        pytest.skip("the kernel's process events overflowed while the answer ran")
    return True


def witnessed_in(made, pid, witness):
    """Whether the kernel saw the witness thread `witness` (helpers.workers.witness_thread, its
    kernel id as the answer reported it) created in process `pid` during created()'s block:
    then the code that started it ran in `pid`, whatever the answer says of itself."""
    return type(pid) is int and type(witness) is int and pid in made.thread_owners.get(witness, ())


def notes_folder():
    """(in the student's process, through there()) a fresh folder for helpers.workers.note_where."""
    import tempfile
    return tempfile.mkdtemp(prefix="course-notes-")


def read_answers(folder):
    """(in the student's process, through there()) {key: answer} noted in `folder` by
    helpers.workers.note_answer (read before read_notes, which removes the folder)."""
    from pathlib import Path
    answers = {}
    for path in Path(folder).glob("answer-*"):
        try:
            answers[int(path.name[len("answer-"):])] = int(path.read_text())
        except ValueError:
            continue
    return answers


def read_notes(folder):
    """(in the student's process, through there()) [(pid, thread id, witness thread id or None)]
    noted in `folder` by helpers.workers.note_where; the folder is then removed."""
    import shutil
    from pathlib import Path
    notes = []
    for path in Path(folder).iterdir():
        if path.name.startswith("answer-"):
            continue
        try:
            pid, tid = (int(part) for part in path.name.split("-"))
            text = path.read_text().strip()
            notes.append((pid, tid, int(text) if text else None))
        except ValueError:
            continue
    shutil.rmtree(folder, ignore_errors=True)
    return notes


def witnessed_processes(made, notes):
    """The pids, other than the student's process, whose note (read_notes) names a witness thread
    that the kernel saw created in them during created()'s block."""
    caller = student_pid()
    return {pid for pid, _, witness in notes if pid != caller and witnessed_in(made, pid, witness)}


def capped(counts, made):
    """The spy's counts (made in the student's process, where its code can edit them) with the
    starts capped by what the kernel saw created: a count the kernel cannot back is not evidence.
    Where the kernel does not report (the grader is not root) the counts stand, unless they claim
    more starts than the ids the kernel handed out meanwhile to the whole machine: each real start
    takes one (creations.ids_between), so such counts were edited. False failure: 0."""
    if not kernel_decides(made):
        claimed = counts["thread start"] + counts["process start"]
        if made.ids_handed_out is not None and claimed > made.ids_handed_out:
            raise AssertionError(
                f"the record of your code's starts says {counts['thread start']} threads and "
                f"{counts['process start']} processes, but the kernel handed out only {made.ids_handed_out} "
                "thread or process ids on the whole machine meanwhile: the record was edited")
        return dict(counts)
    return {**counts, "thread start": min(counts["thread start"], made.threads),
            "process start": min(counts["process start"], made.processes)}


# Helper processes of multiprocessing (and of joblib's loky), which run for the library, not for
# the answer's tasks: named in their command lines. A worker that a forkserver forks keeps the
# forkserver's command line: only a process whose parent is not such a helper is one.
_LIBRARY_HELPERS = ("resource_tracker", "forkserver")


def _run_times(root):
    """{pid: nanoseconds its threads have run on a CPU} for the live processes of root's tree, root
    and multiprocessing's own helpers left out (/proc/<pid>/task/*/schedstat, read by the judge)."""
    from autograder.pipeline.judge import ProcessTree, _read_proc, _tasks
    members = ProcessTree(root).members()
    commands = {}
    for pid in members:
        try:
            commands[pid] = _read_proc(f"/proc/{pid}/cmdline")
        except OSError:
            commands[pid] = None

    def helper(pid):
        command = commands.get(pid)
        return command is not None and any(name in command for name in _LIBRARY_HELPERS)

    times = {}
    for pid, stat in members.items():
        if pid == root or commands[pid] is None or (helper(pid) and not helper(stat["ppid"])):
            continue
        total = 0
        for task in _tasks(pid):
            try:
                total += int(_read_proc(f"/proc/{pid}/task/{task}/schedstat").split()[0])
            except (OSError, ValueError, IndexError):
                pass
        times[pid] = total
    return times


class Woken:
    """What reused_workers() saw: `pids`, the processes that were idle before the block and ran in it."""

    def __init__(self):
        self.pids = set()


@contextmanager
def reused_workers(quiet=0.05):
    """(the judge) with reused_workers() as woken: <there() calls>: woken.pids, the processes of the
    student's tree (its own process and multiprocessing's helpers left out) that were alive and idle
    before the block and ran on a CPU during it, or ended during it: the workers of a pool that the
    answer started in an earlier call and keeps (starting none now) given this call's tasks (a
    worker of a pool with maxtasksperchild ends after its task). An idle pool worker waits on a pipe
    and does not run at all; a process that ran in the `quiet` seconds before the block was busy
    anyway and is left out. Read by the judge from /proc, not reported by the student's code; like a
    count of starts, it shows that processes took part, not what they computed."""
    root = student_pid()
    first = _run_times(root)
    time.sleep(quiet)
    before = _run_times(root)
    idle = {pid: ran for pid, ran in before.items() if first.get(pid) == ran}
    woken = Woken()
    yield woken
    after = _run_times(root)
    woken.pids = {pid for pid, ran in idle.items() if pid not in after or after[pid] > ran}


def _under_spawn(fn, *args, limit=45.0):
    """(in the student's process) fn(*args) with the spawn start method chosen everywhere an answer
    may ask for one (workers.mp_context(), multiprocessing's default, and the fork and forkserver
    contexts, those made before the call included), as on macOS and Windows:
    (how, what, exit codes > 0 of the child processes that ended meanwhile), how being "returned"
    (what: the value), "raised" (the error's text), "died" (a child ended with an error of its own
    while the call still waits: a Pool or a Process waiting for a child that died would wait for
    ever) or "waiting" (no return after `limit` seconds). Both choices are put back afterwards."""
    import multiprocessing.popen_fork

    from helpers import workers
    variable = workers.START_METHOD_VARIABLE
    saved_variable, saved_default = os.environ.get(variable), multiprocessing.get_start_method(allow_none=True)
    popen = multiprocessing.popen_fork.Popen
    real_poll, died, box = popen.poll, [], {}

    def poll(self, *a, **k):  # every exit code a parent reads passes here (spawn's Popen inherits it)
        code = real_poll(self, *a, **k)
        if code is not None and code > 0 and self not in seen:  # an error; a signal (a pool's terminate) is < 0
            seen.add(self)
            died.append(code)
        return code

    def call():
        try:
            box["returned"] = fn(*args)
        except Exception as err:  # noqa: BLE001 (reported by the check, with the hint)
            box["raised"] = f"{type(err).__name__}: {err}"

    # A context the answer made before the call (ctx = mp_context() at the top of its cell), or asked
    # for by name (get_context("fork")), starts spawned processes too while the call runs: its class
    # says "spawn" (the locks it makes are then spawn's) and makes spawned processes.
    from multiprocessing import context
    contexts = (context.ForkContext, context.ForkServerContext) if hasattr(context, "ForkContext") else ()
    saved_contexts = [(kind, kind._name, kind.Process) for kind in contexts]
    seen = set()
    os.environ[variable] = "spawn"
    multiprocessing.set_start_method("spawn", force=True)
    for kind in contexts:
        kind._name, kind.Process = "spawn", context.SpawnProcess
    popen.poll = poll
    try:
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        deadline = time.monotonic() + limit
        while caller.is_alive() and time.monotonic() < deadline:
            caller.join(0.1)
            if caller.is_alive():
                multiprocessing.active_children()  # reads the exit code of each child that has ended
            if died and caller.is_alive():
                caller.join(1.0)  # an error the call itself may still report
                if caller.is_alive():
                    return "died", died[0], list(died)
        multiprocessing.active_children()
        if caller.is_alive():
            return "waiting", limit, list(died)
        how, what = next(iter(box.items()))
        return how, what, list(died)
    finally:
        popen.poll = real_poll
        for kind, name, process in saved_contexts:
            kind._name, kind.Process = name, process
        if saved_variable is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = saved_variable
        multiprocessing.set_start_method(saved_default, force=True)


def works_under_spawn(fn, *args):
    """(the judge) fn(*args), called in the student's process with the spawn start method chosen (as
    on macOS and Windows, where a child receives what it runs by name and must import it): its
    value, once it returned and no child process it started ended with an error; else the check
    fails (an error raised, a child that died of one), or is undecided (no return within 45 s).

    Grading runs under this platform's default, fork, where a child is a copy of the notebook and
    finds every function; a function defined in the notebook fails under spawn and forkserver, which
    the course asks every worker to survive. False failure of a correct answer: 0 (no clock decides
    against it: a call that has not returned after 45 s, with no child failed, is undecided; a
    spawned process starts in about 0.1 s when idle, 1.3 s with torch imported; a correct answer's
    children end with exit code 0, or by a signal when a pool is terminated)."""
    import pytest
    how, what, died = there(_under_spawn, fn, *args)
    hint = ("do the processes run a function defined in the notebook? A spawned process can only run "
            "what it can import")
    assert how != "raised", (
        f"under the spawn start method (macOS, Windows) your code raised {what.rstrip('.')}; {hint}")
    assert not died, (
        f"under the spawn start method (macOS, Windows) a process your code started ended with exit code "
        f"{died[0]}{' and the call kept waiting for it' if how == 'died' else ''}; {hint}")
    if how == "waiting":
        pytest.skip(f"under the spawn start method the call had not returned after {what:g} s, and no process "
                    "of it had failed: too slow to tell on this machine now")
    return what


def stop_idle_joblib_workers():
    """(in the student's process) shut joblib's reusable loky executor down, if one runs, and wait
    for its workers to end: the next Parallel call starts its workers afresh, while the judge
    watches (a worker that an earlier call started, and joblib reuses, was started out of sight)."""
    import sys
    if "joblib" not in sys.modules:
        return
    from joblib.externals.loky import reusable_executor
    executor = reusable_executor._executor
    if executor is not None:
        executor.shutdown(wait=True)


def counted(fn, *args, spy=None):
    """(the judge) fn(*args) in the student's process: (its result, its Thread/Process starts
    and joins), the starts backed by the kernel (capped); `spy`: count_starts_and_joins's options."""
    with created() as made:
        result, counts = there(counting, fn, *args, spy=spy)
    return result, capped(counts, made)


class Helpers:
    """What the kernel saw start while an answer ran (see helped())."""

    def __init__(self):
        self.decided = False  # False: no kernel events here (not root); the spy decides alone
        self.made = None      # the kernel's record (created()) once decided


@contextmanager
def helped():
    """(the judge) with helped() as work: <there() calls>: the kernel's record of the threads and
    processes the student's tree started meanwhile (`work.made`, see created()), for a check that
    must see work leave the calling thread without asking the student's code. The check makes
    sure that workers start during the block (joblib's reusable executor shut down first, see 06):
    a worker that only reads its task leaves no trace the judge could tell from a worker still
    booting from an earlier call (measured: such workers read and write while they import).
    Where the kernel's events are not available (the grader is not root) `decided` is False and
    the spy's record stands alone, as in capped().
    """
    work = Helpers()
    with created() as made:
        yield work
    if not kernel_decides(made):
        return
    work.decided, work.made = True, made


def exclusive(fn):
    """Mark a check that judges a speed-up: while grading in parallel, its measurement runs
    inside `alone()`, so that the other jobs do not take the cores it measures."""
    fn.exclusive = True
    return fn


def alone():
    """The machine alone for the block, while grading in parallel (autograder/pipeline/lease.py:
    the other jobs' cells and checks in progress end first, new ones wait). Enter it after a
    first untimed call to the answer, for the measurement only: an answer that raises at once
    (a blank one) then never stops the other jobs. The wait does not count in the check's time."""
    from autograder.pipeline import lease
    return lease.alone()


def how_many(n, noun, plural=None):
    """'1 thread', '3 threads': a count for a student's message."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _is_handle(value):
    return type(value).__name__ == "Remote" and type(value).__module__ == "autograder.pipeline.judge"


# Where a check runs in the student's process (through there()), what it asks of a value after the
# answer's call may run the student's code where the check no longer watches (a number whose
# __int__ works the answer out only then). So the number helpers below ask a value's class by
# identity and subclass alone, and read a value with the methods of builtin or numpy types only.


def _numpy_scalar(kind, abstract):
    from autograder.sandbox import wire
    return issubclass(kind, abstract) and wire.one_of(kind, wire.numpy_scalar_classes(np))


def type_name(value):
    """The name of a value's class as the student knows it: for a handle on an object that stayed
    in the student's process (a Fraction, a class of their own), that object's class, not Remote."""
    if _is_handle(value):
        return object.__getattribute__(value, "_mro")[0].rpartition(".")[2]
    # type's own descriptor, looked up here: a module-level copy travels to the student's process by
    # value (cloudpickle), where it arrives as getattr(type, "__name__"), the string "type".
    return type.__dict__["__name__"].__get__(type(value), type)


def got_type(value, wanted):
    """'got ndarray' for a refused value, with a hint where a one-element array stood for a number."""
    hint = ""  # a handle is not asked anything: its answer could take forever
    if type(value) is np.ndarray and value.size == 1:
        hint = f" (a one-element array: return {wanted}(x) instead)"
    return f"got {type_name(value)}{hint}"


def exact_int(value, what):
    kind = type(value)
    if kind is not bool and issubclass(kind, int):  # an IntEnum member: the int it holds
        return int.__int__(value)
    assert _numpy_scalar(kind, np.integer), f"{what} must be an int, {got_type(value, 'int')}"
    return int(value)


def exact_float(value, what):
    kind = type(value)
    if kind is not bool and issubclass(kind, int):
        value = float(int.__int__(value))
    elif issubclass(kind, float):  # np.float64 too
        value = float.__float__(value)
    else:
        assert _numpy_scalar(kind, (np.floating, np.integer)), (
            f"{what} must be a float (or an int), {got_type(value, 'float')}")
        value = float(value)
    assert math.isfinite(value), f"{what} must be finite, got {value}"
    return value


def _values_of_a_student_sequence(value):
    """A handle on a list or tuple of the student's (a NamedTuple, a list subclass): its items as
    values, read one by one (no more than its length says); anything else as it is."""
    if not _is_handle(value):
        return value
    mro = object.__getattribute__(value, "_mro")
    if "builtins.tuple" not in mro and "builtins.list" not in mro:
        return value
    import itertools
    return list(itertools.islice(iter(value), len(value) + 1))


def as_tuple(value):
    """A tuple as a plain tuple: a tuple subclass of the student's (a NamedTuple) too, read item by
    item as values from the judge (as exact_list reads a list subclass), or taken apart where the
    check runs in the student's own process; anything else as it is."""
    if _is_handle(value):
        if "builtins.tuple" in object.__getattribute__(value, "_mro"):
            return tuple(_values_of_a_student_sequence(value))
        return value
    return tuple(value) if isinstance(value, tuple) else value


def exact_tuple(value, what, length=None):
    """as_tuple(value), which must be a tuple (of `length` items)."""
    value = as_tuple(value)
    assert type(value) is tuple, f"{what} must be a tuple, got {type_name(value)}"
    if length is not None:
        assert len(value) == length, f"{what} must have {length} elements, got {len(value)}"
    return value


def exact_list(value, what, length=None):
    value = _values_of_a_student_sequence(value)
    assert type(value) in (list, tuple), f"{what} must be a list or a tuple, got {type_name(value)}"
    if length is not None:
        assert len(value) == length, f"{what} must have {length} elements, got {len(value)}"
    return list(value)


def plain_array(value, what):
    """A real numpy array, not a look-alike. A subclass's (an np.memmap the answer wrote into, which
    the judge receives as the array it holds) is read as a plain array, by ndarray's own view, so
    none of its methods runs here; a masked array is refused, as its data alone is not its value."""
    assert not _is_handle(value), f"{what} must be a numpy.ndarray of numbers, got {type_name(value)}"
    if isinstance(value, np.ndarray) and not isinstance(value, np.ma.MaskedArray):
        return np.ndarray.view(value, np.ndarray)
    assert type(value) is np.ndarray, f"{what} must be a numpy.ndarray, got {type_name(value)}"
    return value


def arrays_close(actual, expected, what, rtol=1e-7, atol=1e-9):
    actual = plain_array(actual, what)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what} has shape {actual.shape}, expected {expected.shape}"
    bad = ~(np.abs(actual.astype(float) - expected.astype(float))
            <= atol + rtol * np.abs(expected.astype(float)))
    assert not bad.any(), f"{what} differs from the expected values at {int(bad.sum())} position(s)"


class raises_value_error:
    """with raises_value_error("creation_cost('fiber', 3)"): ...  (a plain-words pytest.raises)."""

    def __init__(self, what):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if kind is None:
            raise AssertionError(f"{self.what} should raise ValueError, but returned normally")
        if issubclass(kind, ValueError):
            return True
        if issubclass(kind, AssertionError):
            return False
        raise AssertionError(f"{self.what} should raise ValueError, but raised {kind.__name__}: {error}")


class _NoneIdle:
    """Stands in for an executor's idle-worker semaphore while the executor decides whether to
    start a worker: none is idle, so it starts one (up to max_workers); a worker that becomes idle
    meanwhile still counts on the real semaphore."""

    def __init__(self, real):
        self.real = real

    def acquire(self, *args, **kwargs):
        return False

    def release(self, *args, **kwargs):
        return self.real.release(*args, **kwargs)


def _workers_not_reused(adjust, attribute):
    """An executor's `adjust` (which starts a worker per task submitted unless one is idle) that
    starts one whether or not another is idle, up to max_workers."""
    def adjust_without_reuse(self):
        real = getattr(self, attribute, None)
        if real is None:
            return adjust(self)
        setattr(self, attribute, _NoneIdle(real))
        try:
            return adjust(self)
        finally:
            setattr(self, attribute, real)
    return adjust_without_reuse


@contextmanager
def count_starts_and_joins(join_delay=0.0, run_delay=0.0):
    """Spy on Thread and Process start/join calls made while the block runs.

    concurrent.futures' executors start their workers as tasks come, and give a task to an idle
    worker rather than start one: a ThreadPoolExecutor(4) given 4 short tasks starts fewer than 4
    threads whenever the calling thread is held up between two submits for longer than a task
    takes, as on a busy machine (the one cause found for a single false failure of a correct
    answer of 03, whose message was lost). For the block they start a worker per task, up to max_workers, as
    Python did before 3.8, so that the counts depend on the answer and not on the machine.

    Children of a bare os.fork count as joined when none that started in the block is left in
    the process, running or unreaped (read from /proc as the block ends: however the answer
    waited for them). "process objects": the Process starts among the process starts; "processes at once":
    the most Process objects started and not yet joined at one time (1 for workers started and
    joined one after another); "shortest process" ("shortest thread"): the fewest seconds
    (time.perf_counter) from a Process's (Thread's) start() being called to the return of the
    join() that saw it end (0.0 if none).
    A worker that is_alive() saw end before any join() did counts as joined once (a loop
    `while w.is_alive(): w.join(0.1)` never joins a worker that ended before its first look);
    the first look at each worker says it runs, so that a single look that does not wait
    (`w.start(); w.is_alive()`, or after a sleep) is no join.

    Two options make a wrong way of waiting show, and cost a correct answer only time:
    `join_delay` seconds are added to the call (join() or is_alive()) that sees a worker (a
    Thread or a Process) end, so that a time that leaves out the join misses them; each Thread started waits `run_delay`
    seconds before it runs, so that whatever it does is not yet done where nobody waited for it."""
    from concurrent.futures import process as process_pool
    from concurrent.futures import thread as thread_pool
    counts = {"thread start": 0, "thread join": 0, "process start": 0, "process join": 0,
              "process objects": 0, "processes at once": 0}
    alive = set()  # the Process objects started in the block and not yet joined
    started_at = {}  # a worker's start() called at (time.perf_counter)
    spans = {"thread join": [], "process join": []}  # a worker's start() to its ending join()
    unseen_end = set()  # the workers started in the block that no join() nor is_alive() saw end
    looked_at = set()  # the workers a join() or an is_alive() of the answer's has looked at
    originals = {
        (threading.Thread, "start"): threading.Thread.start,
        (threading.Thread, "join"): threading.Thread.join,
        (multiprocessing.process.BaseProcess, "start"): multiprocessing.process.BaseProcess.start,
        (multiprocessing.process.BaseProcess, "join"): multiprocessing.process.BaseProcess.join,
        (threading.Thread, "is_alive"): threading.Thread.is_alive,
        (multiprocessing.process.BaseProcess, "is_alive"): multiprocessing.process.BaseProcess.is_alive,
        (thread_pool.ThreadPoolExecutor, "_adjust_thread_count"):
            thread_pool.ThreadPoolExecutor._adjust_thread_count,
        (process_pool.ProcessPoolExecutor, "_adjust_process_count"):
            process_pool.ProcessPoolExecutor._adjust_process_count,
    }
    children_before = _own_children()  # before anything is patched: nothing here may be left patched
    thread_pool.ThreadPoolExecutor._adjust_thread_count = _workers_not_reused(
        originals[(thread_pool.ThreadPoolExecutor, "_adjust_thread_count")], "_idle_semaphore")
    process_pool.ProcessPoolExecutor._adjust_process_count = _workers_not_reused(
        originals[(process_pool.ProcessPoolExecutor, "_adjust_process_count")], "_idle_worker_semaphore")

    forks = _fork_counter()

    def spy(cls, name, key):
        original = originals[(cls, name)]

        def wrapper(self, *args, **kwargs):
            if key.endswith("join"):
                counts[key] += 1
                looked_at.add(self)
                joined = original(self, *args, **kwargs)
                if not originals[(cls, "is_alive")](self):
                    _seen_ending(self, key)
                return joined
            if key.endswith("alive"):
                running = original(self, *args, **kwargs)
                if self not in unseen_end:
                    return running
                if self not in looked_at:
                    # The first look at a worker started here says it runs, even if it has ended:
                    # an answer that waits for it then looks again (or joins), and one that looks
                    # once and goes on shows that it does not wait.
                    looked_at.add(self)
                    return True
                if not running:
                    # `while w.is_alive(): w.join(0.1)` looked, and sees it end: joined (is_alive()
                    # reaps a process as join() does).
                    counts[key.replace("alive", "join")] += 1
                    _seen_ending(self, key.replace("alive", "join"))
                return running
            if key == "thread start" and run_delay:
                run = self.run

                def run_later():
                    time.sleep(run_delay)
                    run()
                self.run = run_later
            inside = getattr(forks["inside"], "start", False)
            forks["inside"].start = True      # its own fork, if it forks, is this start
            started_at[self] = time.perf_counter()
            try:
                started = original(self, *args, **kwargs)
            finally:
                forks["inside"].start = inside
            counts[key] += 1  # a start that raised created nothing: the count stays a lower bound
            unseen_end.add(self)
            if key == "process start":
                counts["process objects"] += 1
                alive.add(self)
                counts["processes at once"] = max(counts["processes at once"], len(alive))
            return started
        return wrapper

    def _seen_ending(worker, key):
        unseen_end.discard(worker)
        if worker in started_at:  # its first join
            if join_delay:
                time.sleep(join_delay)
            spans[key].append(time.perf_counter() - started_at.pop(worker))
        if key == "process join":
            alive.discard(worker)

    threading.Thread.start = spy(threading.Thread, "start", "thread start")
    threading.Thread.join = spy(threading.Thread, "join", "thread join")
    multiprocessing.process.BaseProcess.start = spy(multiprocessing.process.BaseProcess, "start", "process start")
    multiprocessing.process.BaseProcess.join = spy(multiprocessing.process.BaseProcess, "join", "process join")
    threading.Thread.is_alive = spy(threading.Thread, "is_alive", "thread alive")
    multiprocessing.process.BaseProcess.is_alive = spy(multiprocessing.process.BaseProcess, "is_alive", "process alive")
    outer, forks["active"] = forks["active"], counts
    try:
        yield counts
    finally:
        counts["shortest process"] = min(spans["process join"], default=0.0)
        counts["shortest thread"] = min(spans["thread join"], default=0.0)
        forks["active"] = outer
        for (cls, name), original in originals.items():
            setattr(cls, name, original)
        # Children of a bare os.fork are joined when the answer reaps them, with whichever wait
        # function, under whichever name it imported it: none started in the block is left then.
        bare = counts["process start"] - counts["process objects"]
        if bare > 0 and children_before is not None:
            children_after = _own_children()
            if children_after is not None and not children_after - children_before:
                counts["process join"] += bare


def _own_children():
    """The pids of this process's children, running or ended and not yet reaped (each thread's
    /proc/self/task/<tid>/children); None where the kernel does not list them."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    if not tasks or not os.path.exists(f"/proc/self/task/{tasks[0]}/children"):
        return None
    children = set()
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as listed:
                children.update(int(pid) for pid in listed.read().split())
        except FileNotFoundError:
            continue  # the thread ended meanwhile; its children went to another thread of the process
        except (OSError, ValueError):
            return None
    return children


def _fork_counter():
    """(in the student's process) the process's one os.register_at_fork hook: it counts, as a
    process start of the spy's active counts, every fork made outside a Process.start (a child of
    os.fork, which a correct answer may use where the exercise asks for forked children). Kept
    on the os module: this module arrives anew with every request, a fork hook cannot be
    removed, and a hook registered per spy would count each fork once per spy so far."""
    forks = getattr(os, "_course_fork_counter", None)
    if forks is None:
        forks = {"active": None, "inside": threading.local()}

        def after_in_parent():
            counts = forks["active"]
            if counts is not None and not getattr(forks["inside"], "start", False):
                counts["process start"] += 1
        os.register_at_fork(after_in_parent=after_in_parent)
        os._course_fork_counter = forks
    return forks
