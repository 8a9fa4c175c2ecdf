"""Building blocks for the DDP exercise of 09_data_parallel (importable by every worker).

A process started with `spawn` or `forkserver` is a fresh Python interpreter: it
can only run functions it can *import*. This module sits next to the notebook,
so every worker can import it. It holds the pieces all ranks share; the
training itself is yours to write in the notebook.

    make_model(seed)     the small network every rank builds (same seed, same weights)
    make_dataset(seed)   the regression data set (N_SAMPLES samples, read by index)
    GLOBAL_BATCH, LR     the recipe: one optimiser step per GLOBAL_BATCH samples, plain SGD
    free_port()          a TCP port nobody uses right now, for the rendezvous
    torch_start_method() forkserver (torch preloaded) or spawn: never fork once torch has run
    by_value(fn)         fn's code as bytes, so that a notebook function can travel
    run_by_value(...)    the target each worker process runs: unpacks fn, calls it,
                         then shuts the process group down; a rank's error reaches
                         the notebook with its traceback (see its docstring)

For the course's checks, a worker process (one that runs run_by_value or reads
the data set) notes each all-reduce it makes, DistributedDataParallel's
gradient all-reduce included (sent through the standard Python
`allreduce_hook`, numerically the default), when the checks ask for it
(_note_gradient_syncs). The notebook's own process is left as it is.
"""
import glob
import multiprocessing
import os
import socket
import sys
import tempfile

import torch
from torch import nn

N_SAMPLES = 96
GLOBAL_BATCH = 24
IN_FEATURES = 8
LR = 0.05


def make_model(seed):
    """A small MLP whose initial weights depend only on `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(IN_FEATURES, 16), nn.Tanh(), nn.Linear(16, 1))


class RegressionData(torch.utils.data.Dataset):
    """N_SAMPLES pairs (x, y) with y a noisy non-linear function of x; fixed by the seed.

    Read it by index (dataset[i], a DataLoader does this for you). When the
    course's checks ask for it, every read is noted down with the reading
    process's id, so they can see which process read which samples; a process's
    first read also notes the kernel id of a short thread it starts there
    (helpers.workers.witness_thread), which the grader's view of the kernel ties
    to that process, and a process's first read of a sample the checks handed a
    puzzle solves it and notes the answer (helpers.workers.solve_puzzle): CPU
    work the grader can see was not done by the process that started the ranks.
    """

    def __init__(self, seed):
        g = torch.Generator().manual_seed(seed)
        self.X = torch.randn(N_SAMPLES, IN_FEATURES, generator=g)
        w = torch.randn(IN_FEATURES, 1, generator=g)
        self.y = torch.sin(self.X @ w) + 0.1 * torch.randn(N_SAMPLES, 1, generator=g)
        self._trace = os.path.join(tempfile.gettempdir(), f"course-ddp-trace-{seed}")

    def __len__(self):
        return N_SAMPLES

    def __getitem__(self, index):
        index = int(index)
        if os.path.isdir(self._trace):
            with open(os.path.join(self._trace, f"{os.getpid()}.txt"), "a") as f:
                if os.getpid() not in _WITNESSED:
                    from helpers.workers import witness_thread
                    _WITNESSED.add(os.getpid())
                    _note_gradient_syncs()
                    f.write(f"witness {witness_thread()}\n")
                puzzle = _puzzles(self._trace).get(index)
                if puzzle is not None and (os.getpid(), index) not in _SOLVED:
                    from helpers.workers import solve_puzzle
                    _SOLVED.add((os.getpid(), index))
                    f.write(f"answer {index} {solve_puzzle(puzzle)}\n")
                f.write(f"{index}\n")
        return self.X[index], self.y[index]


_WITNESSED = set()  # the processes whose first traced read noted a witness thread
_SOLVED = set()     # (process, sample) pairs whose puzzle was solved


def _puzzles(trace):
    """{sample index: puzzle} the checks left in the trace folder (a file of lines "index base modulus squarings")."""
    try:
        with open(os.path.join(trace, "puzzles")) as f:
            rows = [line.split() for line in f if line.strip()]
    except OSError:
        return {}
    return {int(i): (int(base), int(modulus), int(squarings)) for i, base, modulus, squarings in rows}


def make_dataset(seed):
    return RegressionData(seed)


def _note_gradient_syncs():
    """In a worker process (a rank): note, in each trace folder the checks made (course-ddp-trace-*),
    one line per all-reduce this process makes, by hand or for a DistributedDataParallel model
    (whose all-reduce goes through the standard Python hook, numerically the default, unless the
    notebook registers its own): the grader then sees which processes trained together. Never in
    the notebook's process, whose torch the grader expects unchanged."""
    try:
        import torch.distributed as dist
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ImportError:  # a build without torch.distributed
        return
    if getattr(dist.all_reduce, "_course_noted", False):
        return
    original_all_reduce = dist.all_reduce

    def all_reduce(*args, **kwargs):
        for folder in glob.glob(os.path.join(tempfile.gettempdir(), "course-ddp-trace-*")):
            try:
                with open(os.path.join(folder, f"sync-{os.getpid()}"), "a") as note:
                    note.write("1\n")
            except OSError:
                pass
        return original_all_reduce(*args, **kwargs)

    all_reduce.__doc__, all_reduce._course_noted = original_all_reduce.__doc__, True
    # Both names: `from torch.distributed import all_reduce` in the notebook travels to the rank
    # as a reference to the module that defines it, which the rank looks up once it is here.
    dist.all_reduce = dist.distributed_c10d.all_reduce = all_reduce
    original_register, original_forward = DDP.register_comm_hook, DDP.forward

    def register_comm_hook(self, state, hook):
        self._course_hooked = True
        return original_register(self, state, hook)

    def forward(self, *args, **kwargs):
        if not getattr(self, "_course_hooked", False):
            self._course_hooked = True
            original_register(self, self.process_group, default_hooks.allreduce_hook)
        return original_forward(self, *args, **kwargs)

    DDP.register_comm_hook, DDP.forward = register_comm_hook, forward


def free_port():
    """Ask the operating system for a free TCP port (bind to port 0, read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_start_method():
    """forkserver where the platform has one, with torch preloaded; else spawn; never fork.

    A forked child of a process that has already run multi-threaded torch code
    can deadlock on its first torch operation. Both methods start ranks from a
    clean interpreter: a spawned rank is a new one that imports torch itself
    (about a second, every rank, every launch); a forkserver is one clean
    process, started at the first launch, that imports torch and this module
    once and then forks each rank from itself (a few milliseconds). Set
    COURSE_START_METHOD=spawn to get spawn (the only choice on Windows).
    """
    chosen = os.environ.get("COURSE_START_METHOD", "").strip()
    if chosen == "spawn" or "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    # Read when the forkserver starts (the first launch); a module it cannot import is skipped.
    # DistributedDataParallel imports torch._dynamo when it is built: about a second, paid once here.
    multiprocessing.get_context("forkserver").set_forkserver_preload(
        ["torch", "torch.distributed", "torch._dynamo", __name__])
    return "forkserver"


def by_value(fn):
    """Pickle fn with its code (cloudpickle), not by its importable name."""
    import cloudpickle

    module = sys.modules.get(fn.__module__)
    if module is not None and fn.__module__ != "__main__":
        cloudpickle.register_pickle_by_value(module)
        try:
            return cloudpickle.dumps(fn)
        finally:
            cloudpickle.unregister_pickle_by_value(module)
    return cloudpickle.dumps(fn)


def run_by_value(rank, payload, *args):
    """Worker target: fn = unpickle(payload); fn(rank, *args); then a clean exit.

    The standard ending of a rank is barrier, destroy_process_group, return.
    The os._exit after it is this course's workaround, not PyTorch practice:
    with this PyTorch on the CPU, gloo sometimes aborts during interpreter
    shutdown ("terminate called without an active exception"), so after
    flushing we leave without that shutdown.
    An error of fn is not caught: torch.multiprocessing hands its traceback to
    the notebook's process, which raises it there.
    """
    import pickle

    import torch.distributed as dist

    # No try/except around fn: torch's wrapper around this function writes the traceback of
    # an error to a file the parent reads, so the error the notebook sees carries it ("-- Process
    # 0 terminated with the following error: ... KeyError ..."). Caught here and printed, it
    # would go to the rank's stderr (the Jupyter server's console) and the notebook would see only
    # "process 0 terminated with exit code 1". Nor is the process group destroyed first on an
    # error: the rank ends right after, which closes it; destroyed before the traceback is
    # written, it wakes the other ranks with "Connection closed by peer", and half the time
    # that error reached the notebook instead of this one.
    _note_gradient_syncs()
    fn = pickle.loads(payload)
    fn(rank, *args)
    if dist.is_initialized():
        dist.barrier()
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
