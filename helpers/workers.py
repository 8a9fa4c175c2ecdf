"""Worker functions for threads and processes, importable under every start method.

A function defined in a notebook lives in the kernel's __main__, which a
process started with `spawn` or `forkserver` cannot import: the pool then hangs
or breaks. Functions here are importable, so they work under all three.

The start method the course uses comes from the COURSE_START_METHOD
environment variable (fork, spawn or forkserver), else the platform default.
"""
import multiprocessing
import os
import sys
import threading
import time

from helpers.system import default_start_method

START_METHOD_VARIABLE = "COURSE_START_METHOD"


def start_method():
    chosen = os.environ.get(START_METHOD_VARIABLE, "").strip()
    if chosen:
        if chosen not in multiprocessing.get_all_start_methods():
            raise ValueError(f"{START_METHOD_VARIABLE}={chosen!r} is not available here; "
                             f"choose one of {multiprocessing.get_all_start_methods()}")
        return chosen
    return default_start_method()


def mp_context(method=None):
    """The multiprocessing context to create processes, pools and queues from."""
    return multiprocessing.get_context(method or start_method())


def call_with_deadlock_hint(fn, *args, hint_after=20.0, **kwargs):
    """fn(*args, **kwargs), for a visible test whose call could deadlock.

    A deadlock freezes the cell without a word, so a hint is printed if the call still runs after
    `hint_after` seconds (it is not stopped: a slow machine is not a wrong answer). If the call is
    interrupted (Kernel > Interrupt), the processes it started and left running are stopped, so
    that a deadlocked worker does not outlive the cell.
    """
    before = {p.pid for p in multiprocessing.active_children()}
    done = threading.Event()

    def hint():
        if not done.wait(hint_after):
            print(f"... still running after {hint_after:.0f} s. If its workers wait for one another (a deadlock: "
                  "a lock taken twice, or locks taken in different orders), it never ends: interrupt the kernel "
                  "(the ■ button, or I, I) and read your locking again.", flush=True)

    threading.Thread(target=hint, name="deadlock hint", daemon=True).start()
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt:
        stuck = [p for p in multiprocessing.active_children() if p.pid not in before]
        for p in stuck:
            p.terminate()
        for p in stuck:
            p.join(5)
        if stuck:
            print(f"stopped the {len(stuck)} process(es) the call had left running", flush=True)
        raise
    finally:
        done.set()


# --- tiny tasks --------------------------------------------------------------------
def square(x):
    return x * x


def add(a, b):
    return a + b


def identity(x):
    return x


def slow_square(x, delay=0.02):
    """square(x) after a short sleep, so that every worker of a pool gets a task."""
    time.sleep(delay)
    return x * x


def square_and_token(x, delay=0.0):
    """(x * x, a random token of this call), after `delay` seconds: two calls with the same
    arguments give two tokens, so a caller that ran one call for both shows."""
    time.sleep(delay)
    return x * x, os.urandom(8).hex()


def sleep_for(seconds):
    """An I/O-bound stand-in: waits, uses no CPU, returns what it waited."""
    time.sleep(seconds)
    return seconds


def fail_on(x, bad=3):
    """Returns x, but raises ValueError for x == bad (for error-handling demos)."""
    if x == bad:
        raise ValueError(f"cannot process {x}")
    return x


def noop():
    """Does nothing: the cost of a worker is then all overhead."""


def spin(cpu_seconds):
    """Burn `cpu_seconds` of this thread's CPU time (a CPU-bound task of a known size)."""
    start = time.thread_time()
    while time.thread_time() - start < cpu_seconds:
        pass
    return cpu_seconds


def start_all(pool, n, wait=0.1):
    """Return once `n` different workers of `pool` (a ProcessPoolExecutor or a multiprocessing
    Pool) have run a task, so that a timing that follows measures work, not start-up.

    Under spawn and forkserver a ProcessPoolExecutor starts its workers one at a time, only when a
    task finds none idle: one quick warm-up task starts one worker, and the next tasks all run on
    it while the others are still starting. Tasks that wait `wait` seconds keep the started
    workers busy, so a task is left for each one still starting; repeat until n have answered.
    """
    seen = set()
    for _ in range(100):  # bounded: a pool of fewer than n workers would never get there
        seen |= {pid for pid, _, _ in pool.map(_whoami_after, [wait] * n)}
        if len(seen) >= n:
            return
    raise RuntimeError(f"only {len(seen)} of the {n} workers asked for ever ran a task: "
                       "does the pool have that many?")


def _whoami_after(seconds):
    time.sleep(seconds)
    return whoami()


# --- who ran it --------------------------------------------------------------------
def whoami(_=None):
    """(pid, parent pid, thread ident) of whoever runs this."""
    return os.getpid(), os.getppid(), threading.get_ident()


def whoami_solving(puzzle):
    """whoami(), a witness thread's kernel id (witness_thread()) and the puzzle's answer
    (solve_puzzle()): the thread shows, from outside, which process ran this, and the puzzle's CPU
    was spent wherever the answer was computed. (pid, ppid, ident, witness, answer)."""
    answer = solve_puzzle(puzzle)
    return (*whoami(), witness_thread(), answer)


def solve_puzzle(puzzle):
    """For the course's checks: base ** (2 ** squarings) % modulus, one squaring after another.

    `puzzle` is (base, modulus, squarings), or None (then None). Without the modulus's factors
    there is no shortcut (a time-lock puzzle), so the answer costs a known amount of CPU time
    wherever it is computed; the grader, who knows the factors, checks it at once."""
    if puzzle is None:
        return None
    value, modulus, squarings = puzzle
    for _ in range(squarings):
        value = value * value % modulus
    return value


def witness_thread():
    """Start a thread that only learns its kernel id, and return that id. A grader that listens to
    the kernel's process events sees in which process the thread was created, whatever this
    process reports about itself."""
    seen = []
    thread = threading.Thread(target=lambda: seen.append(threading.get_native_id()), name="witness")
    thread.start()
    thread.join()
    return seen[0]


def note_where(folder, caller=None):
    """For the course's checks: note once per thread, in `folder`, where this code runs. The note
    <pid>-<thread id> holds the kernel id of a witness thread started here (witness_thread), or
    nothing in the process whose pid is `caller`: a grader that listens to the kernel's events
    then sees whether that thread, or that process's witness, was created while it watched."""
    pid, tid = os.getpid(), threading.get_native_id()
    path = os.path.join(folder, f"{pid}-{tid}")
    if os.path.exists(path) or not os.path.isdir(folder):
        return
    witness = "" if pid == caller else str(witness_thread())
    try:
        with open(path, "x") as note:
            note.write(witness)
    except OSError:
        pass


def note_answer(folder, key, puzzle):
    """For the course's checks: solve_puzzle(puzzle) here and note the answer in `folder`, in a
    file answer-<key>."""
    answer = solve_puzzle(puzzle)
    try:
        with open(os.path.join(folder, f"answer-{key}"), "w") as note:
            note.write(str(answer))
    except OSError:
        pass


def noted_call(folder, caller, fn, *args, **kwargs):
    """fn(*args, **kwargs) after note_where(folder, caller): a module function, so that any joblib
    backend can send it to its workers (the course's checks of joblib answers run each task so)."""
    note_where(folder, caller)
    return fn(*args, **kwargs)


def noted_solving_call(folder, caller, key, puzzle, fn, *args, **kwargs):
    """noted_call(folder, caller, fn, *args, **kwargs) after note_answer(folder, key, puzzle)."""
    note_where(folder, caller)
    note_answer(folder, key, puzzle)
    return fn(*args, **kwargs)


def plain_shape(x):
    """For the course's hooks: a tensor's shape as torch keeps it, read through TensorBase's own C
    descriptor with torch functions off (neither a subclass's __torch_function__ nor a torch mode
    nor a patch of torch.Tensor is asked). None for a tensor of a class of its own (a wrapper
    subclass can claim any shape), which the checks count as a size they could not read."""
    torch = sys.modules["torch"]
    if type(x) is not torch.Tensor and type(x) is not torch.nn.Parameter:
        return None
    with torch._C.DisableTorchFunction():
        return tuple(torch._C.TensorBase.__dict__["shape"].__get__(x))


def plain_size(x):
    """len(x) for the course's hooks: a tensor's first size by plain_shape (None where that cannot
    be read), len() of anything else."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch._C.TensorBase):
        return len(x)
    shape = plain_shape(x)
    if shape == ():
        raise TypeError("len() of a 0-d tensor")
    return None if shape is None else shape[0]


class BatchSizeNotes:
    """For the course's checks: a forward pre-hook noting the batch size of every forward pass in
    the file `path`, in whichever process or thread the model runs. It travels with the model
    (forked, spawned or pickled to a worker), where a hook of a closure's would stay behind or
    make the model unpicklable."""

    def __init__(self, path):
        self.path = path

    def __call__(self, module, args):
        size = plain_size(args[0]) if args else 0
        size = -1 if size is None else size  # a size that could not be read: no check accepts it
        note = os.open(self.path, os.O_WRONLY | os.O_APPEND)   # one small write: never interleaved
        try:
            os.write(note, f"{size}\n".encode())
        finally:
            os.close(note)

    def sizes(self):
        with open(self.path) as notes:
            return [int(line) for line in notes if line.strip()]


def traced(fn, *args):
    """Run fn(*args) and record where and when: for timeline plots.

    Returns a dict with lane (pid:thread), pid, thread, start, end (wall-clock
    seconds, comparable across processes) and result.
    """
    start = time.time()
    result = fn(*args)
    end = time.time()
    pid, thread = os.getpid(), threading.current_thread().name
    return {"lane": f"pid {pid} / {thread}", "pid": pid, "thread": thread,
            "start": start, "end": end, "result": result}


# --- for 02_gil's checks
def meet_and_hold(barrier, value, timeout, hold, puzzle=None):
    """helpers.gil.rendezvous(barrier, value, timeout, puzzle), then stay alive `hold` more seconds.

    Every caller is still running for `hold` seconds after the barrier opens,
    so whoever watches from outside can see them all alive at once.
    """
    from helpers.gil import rendezvous
    met = rendezvous(barrier, value, timeout, puzzle)
    time.sleep(hold)
    return met


# --- for 05_multiprocessing_pools's checks
def meet_solving(barrier, item, timeout=20.0):
    """helpers.gil.rendezvous(barrier, value, timeout, puzzle) for item = (value, puzzle): a
    function of one item, as a pool's map hands it out."""
    from helpers.gil import rendezvous
    value, puzzle = item
    return rendezvous(barrier, value, timeout, puzzle)
