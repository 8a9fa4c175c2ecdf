"""Start a small gloo process group on this machine, run a function on every rank, count its messages.

    from helpers import ranks

    def hello():                                   # may be defined in a notebook
        import torch, torch.distributed as dist
        t = torch.ones(3) * dist.get_rank()
        dist.all_reduce(t)
        return t

    run = ranks.launch(hello, 3)                   # 3 ranks, gloo, fresh processes
    run.results        # [tensor([3., 3., 3.]), ...]  what hello returned on each rank
    run.counts[0]      # {"all_reduce": {"calls": 1, "bytes": 12, "largest": 12}}
    run.seconds        # wall time of the whole launch, start-up included

What it does for you, and why:
- **Fresh processes, started fast.** A process forked from a parent that has
  already run torch can deadlock, so no rank is forked from your process.
  Where the platform has it (Linux, macOS), ranks come from a *forkserver*: a
  clean interpreter that imports torch once and then forks one rank per
  request, about 20 ms each; a spawned rank starts a new interpreter and
  imports torch itself, about 1.3 s each, every launch. Elsewhere (Windows),
  spawn.
- **By value.** A fresh process can only import functions by name, and a
  function defined in a notebook has none. `launch` pickles the function's
  code with cloudpickle (the trick joblib uses), so notebook functions work.
- **A free port.** Chosen in the parent by asking the operating system (bind
  to port 0); a fixed port (29500) fails as soon as two runs overlap.
- **A time limit.** If a rank hangs (a collective waiting for a rank that
  died), every rank is killed and `TimeoutError` says so. No orphan process is
  left behind: the parent kills what is left, and each rank also watches its
  parent and its own deadline.
- **Errors come back.** An exception raised on a rank is raised again in the
  parent, with the rank's traceback added as a note.
- **A safe ending.** The standard ending of a rank is `dist.barrier();
  dist.destroy_process_group()`. With gloo, returning normally after that
  sometimes aborts the process at interpreter exit ("terminate called without
  an active exception"). The launcher ends each rank with barrier, destroy,
  flush, then `os._exit`, which skips that faulty teardown.
- **Counts, not clocks.** Before your function runs, the launcher wraps every
  `torch.distributed` point-to-point and collective function in the rank, so
  `run.counts[r][name]` tells how many calls rank r made, how many bytes it
  handed to them ("bytes"; for recv/irecv the bytes received are in
  "received") and the largest tensor one call touched ("largest", outputs
  included). Calls made inside other calls (the `send` inside
  `send_object_list`) are counted too. DistributedDataParallel's gradient
  all-reduces happen in C++, so the launcher routes them through a counted
  Python hook (the standard `allreduce_hook`): they appear as `all_reduce`
  calls, and once per synchronising backward pass as "ddp_gradient_sync";
  "ddp_forward" counts the forward passes of DDP models with gradients enabled,
  "ddp_trained_passes" those a backward pass then went through (the training
  passes), "ddp_backward" the backward passes that went through them
  (synchronising or inside `no_sync()`), and "ddp_forwards_ahead" how many of
  them were alive at once, run forward and not yet backward ("largest": 1
  when each forward pass is followed by its backward pass).
  "ddp_forward_rows" counts the rows the model trained on: those of each call
  of its first `Linear` layer that a backward pass went through ("bytes" the
  total, "largest" the most in one call; "ddp_rows_unseen" where none was
  seen, as in a forward written with `F.linear`).
  A collective asked of the process group itself (`group.allreduce(...)`)
  rather than through those functions counts as "process_group.allreduce".

`ranks.local_counts()` returns the counts so far from inside a rank (to count
one call), and `with ranks.recording() as runs:` collects every launch made in
the block (what a function that launches ranks itself did).

`ranks.torchrun(*args)` runs the real launcher, `python -m torch.distributed.run
*args`, from a notebook: on every system, with a time limit, and returns its
output without torchrun's banner about OMP_NUM_THREADS.
"""
import contextlib
import importlib.machinery
import importlib.util
import inspect
import math
import multiprocessing
import multiprocessing.connection
import operator
import os
import pickle
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field

from helpers.system import process_alive

MAX_RANKS = 8

POINT_TO_POINT = ("send", "recv", "isend", "irecv", "send_object_list", "recv_object_list",
                  "batch_isend_irecv")
COLLECTIVES = ("broadcast", "reduce", "all_reduce", "all_gather", "all_gather_into_tensor",
               "all_gather_single", "reduce_scatter", "reduce_scatter_tensor",
               "reduce_scatter_single", "gather", "scatter", "all_to_all", "all_to_all_single",
               "barrier", "monitored_barrier", "all_reduce_coalesced", "all_gather_coalesced",
               "broadcast_object_list", "all_gather_object", "gather_object",
               "scatter_object_list", "_all_gather_base", "_reduce_scatter_base")
# A collective asked of the process group itself (its C++ methods, which every function above
# ends in), not through those functions: counted as "process_group.<method>".
PROCESS_GROUP_COLLECTIVES = ("allreduce", "allreduce_coalesced", "broadcast", "reduce", "allgather",
                             "allgather_coalesced", "allgather_into_tensor_coalesced", "_allgather_base",
                             "reduce_scatter", "reduce_scatter_tensor_coalesced", "_reduce_scatter_base",
                             "alltoall", "alltoall_base", "gather", "scatter", "barrier", "monitored_barrier")
DIRECT_COLLECTIVES = tuple(f"process_group.{method}" for method in PROCESS_GROUP_COLLECTIVES)
RECEIVING = ("recv", "irecv")
# Point-to-point sends, whose destination ranks are recorded in call order (_sent_to): a ring
# sends to one neighbour, where an exchange with every rank sends as many messages and bytes.
SENDING = ("send", "isend")
# The argument that holds what a rank hands to each call (its payload; scatter's source hands
# out its scatter_list, its tensor is where each rank receives).
_PAYLOAD_ARGUMENTS = ("scatter_list", "tensor", "input_tensor", "input", "input_list", "input_tensor_list")
_DDP_SYNC = "ddp_gradient_sync"
_DDP_FORWARD = "ddp_forward"
_DDP_FORWARD_ROWS = "ddp_forward_rows"
_DDP_BACKWARD = "ddp_backward"
_DDP_AHEAD = "ddp_forwards_ahead"
_DDP_ROWS_UNSEEN = "ddp_rows_unseen"
_DDP_TRAINED = "ddp_trained_passes"
# Recorded for the course's checks only (recording(ddp_weights=True)): the rows of each pass of the
# FSDP model that a backward pass went through, the most parameter groups it held gathered at once
# in a training forward pass, and the gradients each optimiser step applied.
_FSDP_TRAINED_ROWS = "fsdp_trained_rows"
_FSDP_ROWS_UNSEEN = "fsdp_rows_unseen"
_FSDP_GATHERED = "fsdp_groups_gathered"
_FSDP_GATHERING = "fsdp_groups_gathering"
_FSDP_GATHERED_UNSEEN = "fsdp_groups_unseen"
_FSDP_GATHERED_BACKWARD = "fsdp_groups_gathered_backward"
_FSDP_GATHERING_BACKWARD = "fsdp_groups_gathering_backward"
# The collectives FSDP2 makes for a layer in a backward pass (an all-gather, a reduce-scatter).
_FSDP_COLLECTIVES = ("all_gather_into_tensor", "all_gather_single", "_all_gather_base", "all_gather",
                     "reduce_scatter_tensor", "reduce_scatter_single", "_reduce_scatter_base", "reduce_scatter")
_OPTIMIZER_STEPS = "optimizer_steps"


@dataclass
class Launch:
    """What one launch gave back: per-rank results and counts, its wall time, and per rank
    (pid, the kernel id of a witness thread the rank started: see helpers.workers.witness_thread)."""
    world_size: int
    results: list
    counts: list
    seconds: float = 0.0
    witnesses: list = field(default_factory=list)
    proofs: list = field(default_factory=list)  # per rank: its answer to recording()'s puzzle, or None
    # per rank, under recording(ddp_weights=True): the state dict of the DistributedDataParallel
    # model that rank trained last (its module's), as the rank ended; None where it trained none
    ddp_weights: list = field(default_factory=list)
    # per rank, under recording(ddp_weights=True) too: what that rank held of the FSDP model it trained
    # last (the outermost module fully_shard wrapped, of its last training forward pass), as the rank
    # ended: {name: ("piece", mesh shape, coordinate, sharded mesh dimension, tensor dimension,
    # local piece), ("full", tensor) or ("placements", ...)} (_fsdp_shards); None where it trained none
    fsdp_shards: list = field(default_factory=list)
    # per rank, under recording(ddp_weights=True) too: per optimiser step, a copy of what the rank
    # handed to each reduce-scatter of the FSDP model's backward passes (float64, flattened)
    fsdp_reduce_scatter_inputs: list = field(default_factory=list)

    def total(self, rank, names):
        """Calls rank `rank` made to any of `names` (e.g. ranks.COLLECTIVES)."""
        return sum(self.counts[rank].get(name, {}).get("calls", 0) for name in names)

    def sent(self, rank, names=("send", "isend")):
        """Bytes rank `rank` handed to the calls in `names` (by default: point-to-point sends)."""
        return sum(self.counts[rank].get(name, {}).get("bytes", 0) for name in names)


_history = []
_history_lock = threading.Lock()


_puzzles = []
_ddp_weights = []


@contextlib.contextmanager
def recording(puzzles=(), ddp_weights=False):
    """with recording() as runs: ...  -> runs lists every Launch made inside the block.

    For the course's checks: with `puzzles` (helpers.workers.solve_puzzle's), rank r of each
    launch made inside the block solves puzzles[r] before its function runs (Launch.proofs);
    with ddp_weights=True, each rank sends back the weights of the DDP model it trained
    (Launch.ddp_weights) and its part of the FSDP model it trained (Launch.fsdp_shards), what its
    function returns aside."""
    runs = []
    with _history_lock:
        _history.append(runs)
        _puzzles.append(list(puzzles))
        _ddp_weights.append(bool(ddp_weights))
    try:
        yield runs
    finally:
        with _history_lock:
            _history.remove(runs)
            _puzzles.pop()
            _ddp_weights.pop()


def free_port():
    """A TCP port nobody uses right now: bind to port 0 and read back what the system chose."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- shipping functions by value ------------------------------------------------------
def _importable(module_name):
    """Can a fresh interpreter import this module by name (so pickling by reference works)?

    A module loaded from a file under another name (importlib's spec_from_file_location)
    sits in sys.modules but cannot be imported by that name elsewhere: look on disk.
    """
    if module_name in (None, "__main__", "__mp_main__"):
        return False
    module = sys.modules.get(module_name)
    if module is not None:
        spec = getattr(module, "__spec__", None)
        if spec is None:
            return False
        if spec.origin in ("built-in", "frozen"):
            return True
    parent, _, _ = module_name.rpartition(".")
    try:
        search = importlib.import_module(parent).__path__ if parent else None
        return importlib.machinery.PathFinder.find_spec(module_name, search) is not None
    except (ImportError, AttributeError, ValueError):
        return False


def by_value(obj):
    """cloudpickle obj; functions from modules a fresh process cannot import travel as code."""
    try:
        import cloudpickle
    except ImportError:  # older joblib versions carry their own copy
        from joblib.externals import cloudpickle

    registered = []
    items = obj if isinstance(obj, (tuple, list)) else (obj,)
    for item in _walk(items):
        name = getattr(item, "__module__", None)
        if callable(item) and name in sys.modules and not _importable(name) and name != "__main__":
            try:
                cloudpickle.register_pickle_by_value(sys.modules[name])
                registered.append(sys.modules[name])
            except ValueError:  # already registered
                pass
    try:
        return cloudpickle.dumps(obj)
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


def _walk(items):
    for item in items:
        if isinstance(item, (tuple, list)):
            yield from _walk(item)
        elif isinstance(item, dict):
            yield from _walk(list(item.values()))
        else:
            yield item


# --- counting, inside a rank ----------------------------------------------------------
_counts = {}
_sent_to = []  # the destination of each point-to-point send of this rank, in call order


def local_counts():
    """A copy of this rank's counts so far (call it inside a rank)."""
    counts = {name: dict(entry) for name, entry in _counts.items()}
    counts.update(_pass_counts())
    return counts


def local_destinations():
    """The destination rank of each `send`/`isend` this rank made so far, in call order (None
    where it could not be told); call it inside a rank."""
    return list(_sent_to)


def _nbytes(value):
    import torch
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def _largest(values):
    import torch
    best = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            best = max(best, value.numel() * value.element_size())
        elif isinstance(value, (list, tuple)):
            best = max(best, _largest(value))
    return best


def _note(name, nbytes=0, received=0, largest=0, peer=None):
    entry = _counts.setdefault(name, {"calls": 0, "bytes": 0, "largest": 0})
    entry["calls"] += 1
    if name in SENDING:
        _sent_to.append(peer)
    entry["bytes"] += nbytes
    entry["largest"] = max(entry["largest"], largest)
    if received:
        entry["received"] = entry.get("received", 0) + received


# Calls whose inner calls are counted (they say what really travelled); inside any
# other call, inner calls are torch's own plumbing (send is isend + wait) and are not.
_TRANSPARENT = ("send_object_list", "recv_object_list", "batch_isend_irecv",
                "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list")
_inside = threading.local()


def _global_rank(group, group_rank):
    """`group_rank` of `group` as a rank of the default group (None where it cannot be told)."""
    import torch.distributed as dist
    try:
        return dist.get_global_rank(group, group_rank) if group is not None else group_rank
    except Exception:  # a group torch cannot map: the peer is not recorded
        return None


def _as_rank(value):
    """A rank given as any integer (NumPy's, a 0-d tensor's) as an int; None where it is not one."""
    try:
        return operator.index(value)
    except TypeError:
        return None


def _counted(name, original):
    signature = inspect.signature(original)

    def wrapper(*args, **kwargs):
        outer = getattr(_inside, "name", None)
        if outer is not None and outer not in _TRANSPARENT:
            return original(*args, **kwargs)
        try:
            bound = signature.bind_partial(*args, **kwargs).arguments
        except TypeError:  # let the original report the bad call
            return original(*args, **kwargs)
        payload = next((bound[a] for a in _PAYLOAD_ARGUMENTS if a in bound), None)
        size = _nbytes(payload)
        largest = _largest(bound.values())
        if name in RECEIVING:
            _note(name, 0, received=size, largest=largest)
        else:
            # the destination as a rank of the default group (`group_dst`: a rank of `group`)
            peer = bound.get("dst")
            if peer is None and bound.get("group_dst") is not None:
                peer = _global_rank(bound.get("group"), bound["group_dst"])
            _note(name, size, largest=largest, peer=_as_rank(peer))
        for observe in _collective_observers:
            observe(name, bound)
        _inside.name = name
        try:
            return original(*args, **kwargs)
        finally:
            _inside.name = outer

    wrapper.__name__ = name
    wrapper.__qualname__ = name
    wrapper.__doc__ = original.__doc__
    wrapper.__wrapped__ = original
    wrapper._course_counted = True
    return wrapper


def _install_counters():
    """Replace the torch.distributed functions by counting wrappers (in this rank only)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    for name in POINT_TO_POINT + COLLECTIVES:
        original = getattr(c10d, name, None) or getattr(dist, name, None)
        if original is None or getattr(original, "_course_counted", False):
            continue
        wrapper = _counted(name, original)
        for namespace in (dist, c10d):
            if hasattr(namespace, name):
                setattr(namespace, name, wrapper)
    _count_process_group_collectives()
    _count_ddp_gradient_syncs()
    import torch
    torch.nn.modules.module.register_module_forward_pre_hook(_linear_input)
    torch.nn.modules.module.register_module_forward_hook(_linear_output)


def _count_process_group_collectives():
    """Count the process group's own collective methods when called outside the counted
    functions (a ring that reduces through `group.allreduce(...)`, or through the original of a
    wrapper, would otherwise count nothing); inside them, they are the call already counted."""
    from torch._C._distributed_c10d import ProcessGroup

    for method in PROCESS_GROUP_COLLECTIVES:
        original = getattr(ProcessGroup, method, None)
        if original is None or getattr(original, "_course_counted", False):
            continue

        def wrapper(self, *args, _original=original, _name=f"process_group.{method}", **kwargs):
            if getattr(_inside, "name", None) is None:
                payload = args[0] if args else None
                _note(_name, _nbytes(payload), largest=_largest(args))
            return _original(self, *args, **kwargs)
        wrapper._course_counted = True
        setattr(ProcessGroup, method, wrapper)


def _count_ddp_gradient_syncs():
    """Send DDP's gradient all-reduce through a counted Python hook (numerically the default one)."""
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    def counting(hook):
        def counted_hook(state, bucket):
            if _checking[0]:  # each parameter's gradient as this rank hands it over, before the all-reduce
                _bucketed.extend(float(g.detach().double().pow(2).sum()) for g in bucket.gradients())
            if bucket.is_last():
                _note(_DDP_SYNC, 0)
                if _checking[0]:
                    _counts[_DDP_SYNC].setdefault("local_gradient_squares", []).append(list(_bucketed))
                    _bucketed.clear()
            return hook(state, bucket)
        return counted_hook

    original_register = DDP.register_comm_hook
    original_forward = DDP.forward

    def register_comm_hook(self, state, hook):
        self._course_hooked = True
        return original_register(self, state, counting(hook))

    def forward(self, *args, **kwargs):
        if not getattr(self, "_course_hooked", False):
            self._course_hooked = True
            original_register(self, self.process_group, counting(default_hooks.allreduce_hook))
        # Evaluation runs under no_grad, and activation checkpointing recomputes inside a backward
        # pass a forward pass already seen: neither is a training pass.
        if not torch.is_grad_enabled() or _in_backward():
            return original_forward(self, *args, **kwargs)
        _note(_DDP_FORWARD, 0)
        _trained[:] = [self]
        run = _pass_begins("ddp")
        try:
            output = original_forward(self, *args, **kwargs)
        finally:
            _pass_ends(run)
        _watch_backward(run, output)
        return output

    DDP.register_comm_hook = register_comm_hook
    DDP.forward = forward


def _first_tensor(value):
    """The first tensor in a forward pass's arguments, looked for inside tuples, lists and dicts too
    (a batch handed over as (inputs, targets))."""
    import torch
    if isinstance(value, torch.Tensor):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
    for item in items:
        found = _first_tensor(item)
        if found is not None:
            return found
    return None


_trained = []  # in a rank: the DDP model that made the last training forward pass
_checking = [False]  # in a rank: whether the course's checks record (recording(ddp_weights=True))
_bucketed = []  # in a rank, while checking: the sums of squares of the gradients bucketed so far in a sync


# --- training passes: forward, then (or never) backward ----------------------------------------
class _Pass:
    """One forward pass with gradients on of a DDP model, or of the outermost FSDP module: when it
    began, and when and by which backward passes it was gone through (none: a pass for a look).
    Seen on the pass's own outputs, so a backward pass made only to be seen (a zero loss of one
    parameter) goes through no pass, and one made through an output before the real one (a zero
    loss of the output, the graph retained) leaves the pass alive until the real one."""
    __slots__ = ("kind", "began", "arrivals")

    def __init__(self, kind, began):
        self.kind, self.began = kind, began
        self.arrivals = []  # (tick, autograd graph task) of each backward pass that reached its outputs


_passes = []  # in a rank: every training pass, in order
_clock = [0]  # in a rank: forward passes begun and backward passes arrived, one tick each
_running = threading.local()  # the pass whose forward runs in this thread (.current)


def _in_backward():
    import torch
    return torch._C._current_graph_task_id() != -1


def _tick():
    _clock[0] += 1
    return _clock[0]


def _pass_begins(kind):
    run = _Pass(kind, _tick())
    _running.current = run
    return run


def _pass_ends(run):
    if getattr(_running, "current", None) is run:
        _running.current = None
    _passes.append(run)


_linear_calls = []  # in a rank: [id of the Linear layer, rows, arrivals, began] of each call with gradients on


def _linear_input(module, args):
    """(global forward pre-hook, and _linear_output after it) Each call of a Linear layer with
    gradients on, outside a backward pass, and the backward passes that reach its output: the
    rows a model trained on are those of the trained calls of its first Linear layer, wherever
    they were made (in a DDP or FSDP pass, or through the model's inner module)."""
    import torch
    if not isinstance(module, torch.nn.Linear) or not torch.is_grad_enabled() or _in_backward():
        return
    from helpers.workers import plain_shape  # the rows as torch keeps them: no subclass or mode asked
    shape = plain_shape(args[0]) if args and isinstance(args[0], torch.Tensor) else None
    rows = math.prod(shape) // max(module.in_features, 1) if shape is not None else None
    call = [id(module), rows, [], _tick()]
    _linear_calls.append(call)
    _running.linear_call = call


def _linear_output(module, args, output):
    import torch
    call = getattr(_running, "linear_call", None)
    if call is None or call[0] != id(module) or not isinstance(module, torch.nn.Linear):
        return
    _running.linear_call = None
    _watch_arrivals(call[2], output)


def _modules(module):
    """module.modules() as nn.Module defines it: an instance cannot override it to hide layers."""
    import torch
    return torch.nn.Module.modules(module)


def _parameters(module):
    import torch
    return torch.nn.Module.parameters(module)


def _state_dict(module):
    import torch
    return torch.nn.Module.state_dict(module)


def _first_linear(module):
    import torch
    return next((m for m in _modules(module) if isinstance(m, torch.nn.Linear)), None)


def _fsdp_met():
    """The FSDP modules of the trained model, and those its passes ran (a layer kept out of the
    model's registered modules still runs in its forward pass)."""
    met = {id(m): m for m in _modules(_trained_fsdp[-1])} if _trained_fsdp else {}
    met.update((id(m), m) for m in list(_fsdp_ran))
    return list(met.values())


def _tensors_needing_grad(value):
    import torch
    if isinstance(value, torch.Tensor):
        return [value] if value.requires_grad else []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
    return [t for item in items for t in _tensors_needing_grad(item)]


def _watch_backward(run, output):
    """Note each backward pass that goes through any of the pass's outputs."""
    _watch_arrivals(run.arrivals, output)


def _watch_arrivals(arrivals, output):
    """Append (tick, autograd graph task) to `arrivals` for each backward pass through `output`."""
    import torch
    from torch.autograd.graph import register_multi_grad_hook

    def arrived(grads):
        arrivals.append((_tick(), torch._C._current_graph_task_id()))

    tensors = _tensors_needing_grad(output)
    if tensors:
        register_multi_grad_hook(tensors, arrived, mode="any")


def _pass_counts():
    """The counts derived from the training passes (those a backward pass went through), and from
    the trained calls of the trained model's first Linear layer (its rows)."""
    counts = {}
    for kind, rows_name, unseen_name, model in (
            ("ddp", _DDP_FORWARD_ROWS, _DDP_ROWS_UNSEEN, _trained[-1].module if _trained else None),
            ("fsdp", _FSDP_TRAINED_ROWS, _FSDP_ROWS_UNSEEN, _trained_fsdp[-1] if _trained_fsdp else None)):
        trained = [run for run in _passes if run.kind == kind and run.arrivals]
        if not trained:
            continue
        layer = _first_linear(model) if model is not None else None
        calls = [call for call in _linear_calls if call[0] == id(layer) and call[2]]
        known = [call[1] for call in calls if call[1] is not None]
        if layer is None or not calls or len(known) < len(calls):  # none seen (F.linear, reentrant checkpoints)
            counts[unseen_name] = {"calls": max(len(calls) - len(known), 1), "bytes": 0, "largest": 0}
        counts[rows_name] = {"calls": len(known), "bytes": sum(known), "largest": max(known, default=0)}
        if kind == "ddp":
            # Seen on the passes' outputs and, where it has one, on the model's first Linear layer's
            # (an output handed back detached, its graph kept aside, is still seen there): each
            # backward pass through them counts, and a pass is alive until its last one.
            lives = [(run.began, run.arrivals) for run in trained]
            inner = [(call[3], call[2]) for call in calls] or lives
            tasks = {task for _, arrivals in inner for _, task in arrivals}
            counts[_DDP_TRAINED] = {"calls": len(trained), "bytes": 0, "largest": 0}
            counts[_DDP_BACKWARD] = {"calls": len(tasks), "bytes": 0, "largest": 0}
            counts[_DDP_AHEAD] = {"calls": len(trained), "bytes": 0,
                                  "largest": max(_most_alive(lives), _most_alive(inner))}
    return counts


def _most_alive(lives):
    """[(when it began, [(when a backward pass reached it, graph task), ...]), ...]: the most of them
    alive at once when one's last backward pass arrived (begun, not yet reached for the last time)."""
    ends = [(began, arrivals[-1][0]) for began, arrivals in lives if arrivals]
    return max((sum(1 for b, e in ends if b < end <= e) for _, end in ends), default=0)


_trained_fsdp = []  # in a rank: the outermost FSDP module of the last training forward pass
_fsdp_ran = weakref.WeakSet()  # in a rank: the FSDP modules that ran in its training passes
_collective_observers = []  # in a rank: called with each counted collective's name and arguments, before it runs
_reduce_scatter_inputs = {}  # in a rank, while checking: optimiser step -> what each reduce-scatter was handed


def _note_fsdp_training():
    """(in a rank) Remember the outermost module that fully_shard wrapped, of the training forward
    passes (grad enabled), wherever the answer keeps it: global module hooks, as FSDP2 has no class
    of its own forward to wrap (fully_shard gives each module a class made for it). A pass of a
    part of the model kept so far keeps it; a pass of another model replaces it.

    And count the rows of each pass of that whole model that a backward pass then went through
    (_FSDP_TRAINED_ROWS: a hook on the pass's output; a pass for a look, never backpropagated,
    counts nothing), or that it went through without a tensor among its positional arguments to
    read the rows from (_FSDP_ROWS_UNSEEN)."""
    import torch
    from torch.distributed.fsdp import FSDPModule

    depth = threading.local()

    def before(module, args):
        if isinstance(module, FSDPModule):
            level = getattr(depth, "level", 0)
            # A forward pass run inside a backward pass is activation checkpointing's recomputation
            # of one already seen, not a training pass of its own.
            training = torch.is_grad_enabled() and not _in_backward()
            if level == 0 and training and not _inside_trained(module):
                _trained_fsdp[:] = [module]
            if level == 0 and training and _trained_fsdp and module is _trained_fsdp[-1]:
                depth.run = _pass_begins("fsdp")
            if getattr(depth, "run", None) is not None:
                _fsdp_ran.add(module)
            depth.level = level + 1

    def after(module, args, output):
        if isinstance(module, FSDPModule):
            depth.level = max(getattr(depth, "level", 1) - 1, 0)
            run = getattr(depth, "run", None)
            if run is not None:
                _note_groups_gathered()  # this module's group is still gathered: FSDP frees it after us
            if depth.level == 0 and run is not None and _trained_fsdp and module is _trained_fsdp[-1]:
                depth.run = None
                _pass_ends(run)
                _watch_backward(run, output)

    torch.nn.modules.module.register_module_forward_pre_hook(before)
    torch.nn.modules.module.register_module_forward_hook(after, always_call=True)
    # In a backward pass, FSDP gathers each layer again and reduce-scatters its gradients: what it
    # holds is read at each of those collectives.
    _collective_observers.append(_note_groups_gathered_in_backward)
    _collective_observers.append(_note_reduce_scatter_input)


def _note_groups_gathered_in_backward(name, bound):
    if _trained_fsdp and _in_backward() and name in _FSDP_COLLECTIVES:
        _note_groups_gathered(_FSDP_GATHERED_BACKWARD, _FSDP_GATHERING_BACKWARD)


def _note_reduce_scatter_input(name, bound):
    """(in a backward pass of the trained FSDP model) A copy of what this rank hands to each
    reduce-scatter, by optimiser step: a layer's gradients as this rank computed them (FSDP lays
    them out padded and divides them by a constant first), its own share's where it trains on it."""
    import torch
    if not (_trained_fsdp and _in_backward() and name.startswith("reduce_scatter")):
        return
    data = bound.get("input")
    if isinstance(data, torch.Tensor):
        step = _counts.get(_OPTIMIZER_STEPS, {}).get("calls", 0)
        _reduce_scatter_inputs.setdefault(step, []).append(data.detach().double().flatten().clone())


def _note_groups_gathered(gathered=None, gathering=None):
    """The parameter groups of the trained FSDP model held gathered now (_FSDP_GATHERED's "largest"),
    and those plus the groups whose all-gather is under way, prefetched (_FSDP_GATHERING's); FSDP2's
    own state, read where this torch has it (_FSDP_GATHERED_UNSEEN where it has not)."""
    gathered, gathering = gathered or _FSDP_GATHERED, gathering or _FSDP_GATHERING
    from torch.distributed.fsdp import FSDPModule

    try:
        held = pending = 0
        groups = {}  # each group once: a wrapper (activation checkpointing's) answers for the layer inside
        for module in _fsdp_met():
            group = module._get_fsdp_state()._fsdp_param_group if isinstance(module, FSDPModule) else None
            if group is not None:
                groups[id(group)] = group
        for group in groups.values():
            if not group.is_sharded:
                held += 1
            elif group._all_gather_result is not None:
                pending += 1
    except Exception:  # noqa: BLE001 (another torch: left to a person)
        _note(_FSDP_GATHERED_UNSEEN, 0)
        return
    _note(gathered, 0, largest=held)
    _note(gathering, 0, largest=held + pending)


def _note_optimizer_steps():
    """(in a rank) Note, as each step of an optimiser of the DDP or FSDP model trained last ends,
    the gradients it applied (those of its groups' parameters; a step given a closure computes
    them inside): in _OPTIMIZER_STEPS' "gradient_squares", the sum of each one's squares (a list,
    in the optimiser's order), in "sharded" whether they were DTensors, whose sums are of this
    rank's pieces only (the ranks' sums add up to the whole gradient's, without a collective here,
    which a rank would wait in for ranks that may never come), and in "learning_rates" its groups'
    learning rates as the step ended (after the optimiser's own step hooks)."""
    from torch.distributed.tensor import DTensor
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    depth = threading.local()  # steps under way: an optimiser that steps another inside (ZeRO's) is one step

    def before_step(optimizer, args, kwargs):
        depth.level = getattr(depth, "level", 0) + 1

    def after_step(optimizer, args, kwargs):
        depth.level = max(getattr(depth, "level", 1) - 1, 0)
        if depth.level:
            return
        # Only the steps of the DDP or FSDP model trained last: a plain model trained beside it
        # (the answer that trains elsewhere and copies the weights in) is not noted.
        trained = {id(p) for p in _parameters(_trained[-1].module)} if _trained else set()
        if _trained_fsdp:
            trained.update(id(p) for p in _parameters(_trained_fsdp[-1]))
        params = [param for group in optimizer.param_groups for param in group["params"]]
        if not any(id(param) in trained for param in params):
            return
        squares, sharded = [], False
        for param in params:
            grad = param.grad
            if grad is None:
                continue
            if isinstance(grad, DTensor):
                sharded, grad = True, grad.to_local()
            squares.append(float(grad.detach().double().pow(2).sum()))
        _note(_OPTIMIZER_STEPS, 0)
        _counts[_OPTIMIZER_STEPS].setdefault("gradient_squares", []).append(squares)
        _counts[_OPTIMIZER_STEPS].setdefault("sharded", []).append(sharded)
        _counts[_OPTIMIZER_STEPS].setdefault("learning_rates", []).append(
            sorted({float(group["lr"]) for group in optimizer.param_groups if "lr" in group}))

    register_optimizer_step_pre_hook(before_step)
    register_optimizer_step_post_hook(after_step)


def _inside_trained(module):
    """Whether `module` is part of the FSDP model kept so far (a forward pass of one of its layers
    alone, a probe between two steps, keeps the whole model as the one trained)."""
    return bool(_trained_fsdp) and any(m is module for m in _modules(_trained_fsdp[-1]))


def _fsdp_shards(module):
    """{name: ("full", tensor), ("piece", mesh shape, this rank's coordinate, the mesh dimension it is
    sharded over or None, the tensor dimension, its local piece) or ("placements", what they are)}
    of an FSDP module's state dict, without any collective (a rank that gathered here would wait
    for ranks that may never come). Pieces sharded over at most one dimension of the mesh (FSDP's
    1-D mesh, or HSDP's replicated shards) can be put together by whoever gets every rank's;
    others are only named."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    shards = {}
    for name, value in _state_dict(module).items():
        if not isinstance(value, DTensor):
            shards[name] = ("full", value.detach().clone())
            continue
        placements = tuple(value.placements)
        sharded = [i for i, p in enumerate(placements) if isinstance(p, Shard)]
        if len(sharded) > 1 or not all(isinstance(p, (Shard, Replicate)) for p in placements):
            shards[name] = ("placements", str(placements))
            continue
        mesh = value.device_mesh
        shards[name] = ("piece", tuple(mesh.shape), tuple(mesh.get_coordinate()),
                        sharded[0] if sharded else None, placements[sharded[0]].dim if sharded else None,
                        value.to_local().detach().clone())
    return shards


# --- the rank's side ------------------------------------------------------------------
def _watch(launcher_pid, seconds):
    """Leave if the launching process or this rank's parent (the launcher, or the
    forkserver) disappears, or the time is up, so no rank outlives its launch."""
    end, parent = time.monotonic() + seconds, os.getppid()

    def watch():
        while time.monotonic() < end:
            if os.getppid() != parent or not process_alive(launcher_pid):
                os._exit(3)
            time.sleep(0.2)
        os._exit(4)

    threading.Thread(target=watch, daemon=True).start()


def _rank_main(rank, world_size, port, payload, result_path, options):
    """Target of each rank: join the group, count, run fn, save its result, exit cleanly."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # Ranks are CPU processes talking gloo. Hidden GPUs keep them so on a machine that has one:
    # there, FSDP's default device mesh would put rank r on cuda:r (measured on one H100:
    # rank 1 failed with "invalid device ordinal"), and every rank would open a CUDA context.
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    _watch(options["parent"], options["seconds"] + 10)
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(options["threads"])
    from .workers import solve_puzzle, witness_thread
    record = {"rank": rank, "ok": False, "pid": os.getpid(), "witness": witness_thread()}
    puzzles = options.get("puzzles") or ()
    record["proof"] = solve_puzzle(puzzles[rank]) if rank < len(puzzles) else None
    try:
        if options["init_group"]:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=world_size,
                                    timeout=datetime.timedelta(seconds=options["seconds"] + 5))
        _install_counters()
        if options.get("ddp_weights"):
            _checking[0] = True
            _note_fsdp_training()
            _note_optimizer_steps()
        fn, args, kwargs = pickle.loads(payload)
        value = fn(*args, **kwargs)
        record.update(ok=True, value=value)
        if options.get("ddp_weights") and _trained:
            record["ddp_weights"] = {name: tensor.detach().clone()
                                     for name, tensor in _state_dict(_trained[-1].module).items()}
        if options.get("ddp_weights") and _trained_fsdp:
            record["fsdp_shards"] = _fsdp_shards(_trained_fsdp[-1])
            record["fsdp_reduce_scatter_inputs"] = [_reduce_scatter_inputs.get(step, [])
                                                    for step in range(max(_reduce_scatter_inputs, default=-1) + 1)]
    except BaseException as err:  # noqa: BLE001 (sent back to the parent and raised there)
        record.update(error=_portable(err), kind=type(err).__name__, message=str(err),
                      traceback=traceback.format_exc(), when=time.time())
    record["counts"] = local_counts()
    try:
        torch.save(record, result_path)
    except Exception as err:  # noqa: BLE001 (a result that cannot be saved is an error too)
        torch.save({"rank": rank, "ok": False, "error": None, "kind": type(err).__name__,
                    "message": f"the result of rank {rank} could not be sent back: {err}",
                    "traceback": traceback.format_exc(), "counts": record["counts"]}, result_path)
        record["ok"] = False
    _end(record["ok"])


def _end(ok):
    """The standard ending (barrier, destroy_process_group), then os._exit: the gloo workaround."""
    import torch.distributed as dist

    status = 0 if ok else 1
    try:
        if dist.is_initialized():
            if ok:
                dist.barrier()
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 (another rank failed first: the parent reports that one)
        status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _portable(err):
    """The exception itself if it survives a pickle round trip, else None."""
    try:
        return pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001
        return None


# --- the parent's side ----------------------------------------------------------------
def launch(fn, world_size, *args, timeout=60.0, init_group=True, threads_per_rank=1, start_method=None,
           **kwargs):
    """Run fn(*args, **kwargs) on each of `world_size` gloo ranks; a Launch with results and counts.

    The ranks run on the CPU: they see no GPU, even where the machine has one.

    start_method: "forkserver" (the default where the platform has one) or "spawn".

    init_group=False leaves init_process_group to fn (RANK, WORLD_SIZE,
    MASTER_ADDR and MASTER_PORT are set, so init_process_group("gloo") works).
    """
    __tracebackhide__ = True  # a rank's error shows the student's code and the rank's traceback, not this
    if isinstance(world_size, bool) or not isinstance(world_size, int) or not 1 <= world_size <= MAX_RANKS:
        raise ValueError(f"world_size must be an int from 1 to {MAX_RANKS}, got {world_size!r}")
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    payload = by_value((fn, args, kwargs))
    with _history_lock:
        puzzles = next((p for p in reversed(_puzzles) if p), [])
        ddp_weights = any(_ddp_weights)
    options = {"parent": os.getpid(), "seconds": float(timeout), "init_group": init_group,
               "threads": int(threads_per_rank), "puzzles": puzzles, "ddp_weights": ddp_weights}
    context = _context(start_method)
    folder = tempfile.mkdtemp(prefix="course-ranks-")
    paths = [os.path.join(folder, f"rank{r}.pt") for r in range(world_size)]
    port = free_port()
    processes = [context.Process(target=_rank_main, name=f"rank{r}",
                                 args=(r, world_size, port, payload, paths[r], options))
                 for r in range(world_size)]
    start = time.perf_counter()
    try:
        for process in processes:
            process.start()
        _wait(processes, start + timeout, timeout)
        records = [_load(path) for path in paths]
    finally:
        _stop(processes)
        shutil.rmtree(folder, ignore_errors=True)
    _raise_first_error(records, processes)
    run = Launch(world_size, [r["value"] for r in records], [r["counts"] for r in records],
                 time.perf_counter() - start, [(r.get("pid"), r.get("witness")) for r in records],
                 [r.get("proof") for r in records], [r.get("ddp_weights") for r in records],
                 [r.get("fsdp_shards") for r in records], [r.get("fsdp_reduce_scatter_inputs") for r in records])
    with _history_lock:
        for runs in _history:
            runs.append(run)
    return run


def _wait(processes, deadline, timeout, grace=3.0):
    """Until every rank has exited; after one fails, the others get `grace` seconds.

    It sleeps in the kernel until a rank ends (each rank's sentinel) or a limit is due, rather than
    polling: a forkserver rank's exit code is read through a pipe, and polling three ranks every
    10 ms cost the parent 33 ms of CPU per second of the ranks' run (measured), so a launch the
    machine slowed looked, to a check that weighs the parent's CPU, like work done in the parent."""
    failed_at = None
    while True:
        alive = [p for p in processes if p.exitcode is None]
        if not alive:
            return
        now = time.perf_counter()
        if failed_at is None and any(p.exitcode not in (None, 0) for p in processes):
            failed_at = now
        if failed_at is not None and now > failed_at + grace:
            return  # the failed rank's error is raised; the others were waiting for it
        if now > deadline:
            _stop(processes)
            raise TimeoutError(f"the ranks did not finish within {timeout:g} s ({', '.join(p.name for p in alive)} "
                               "still running: a hang, e.g. a recv or a collective some rank never joined?)")
        due = deadline if failed_at is None else min(deadline, failed_at + grace)
        ready = multiprocessing.connection.wait([p.sentinel for p in alive], timeout=max(0.0, due - now) + 0.01)
        # A sentinel ready before its rank has ended (a spawned rank that closed its end of the
        # pipe early) would otherwise have this loop spin.
        if ready and all(p.exitcode is None for p in alive if p.sentinel in ready):
            time.sleep(0.01)


def _context(start_method=None):
    """forkserver with torch preloaded where there is one, else spawn (see the module's notes)."""
    if start_method is None:
        start_method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    if start_method not in ("forkserver", "spawn"):
        raise ValueError(f"start_method must be 'forkserver' or 'spawn', got {start_method!r} "
                         "(a rank forked from a process that ran torch can deadlock)")
    context = multiprocessing.get_context(start_method)
    if start_method == "spawn":
        return context
    # Read when the forkserver starts (the first launch); a forkserver already running
    # without them still works, only each rank then imports torch itself. torch._dynamo is
    # what DistributedDataParallel and FSDP import when they are built: about a second a rank.
    context.set_forkserver_preload(["torch", "torch.distributed", "torch._dynamo", __name__])
    return context


def _stop(processes):
    """Kill every rank still running and reap them all (safe to call twice)."""
    for process in processes:
        if process.pid is not None and process.is_alive():
            process.kill()
    for process in processes:
        if process.pid is not None:
            process.join(5)


def _load(path):
    if not os.path.exists(path):
        return None
    import torch
    try:
        return torch.load(path, weights_only=False)
    except Exception as err:  # noqa: BLE001
        return {"ok": False, "error": None, "kind": type(err).__name__,
                "message": f"could not read a rank's result: {err}", "traceback": "", "counts": {}}


def _raise_first_error(records, processes):
    """Raise the error that happened first: the others are usually its echo (a peer closed)."""
    __tracebackhide__ = True
    failed = [(record.get("when", float("inf")), rank, record)
              for rank, record in enumerate(records) if record is not None and not record["ok"]]
    for _, rank, record in sorted(failed, key=lambda f: f[:2]):
        error = record.get("error")
        note = f"raised on rank {rank} of {len(records)}:\n{record['traceback']}"
        if isinstance(error, BaseException):
            error.add_note(note)
            raise error
        raise RuntimeError(f"rank {rank}: {record['kind']}: {record['message']}\n{note}")
    for rank, record in enumerate(records):
        if record is None:
            raise RuntimeError(f"rank {rank} ended without a result (it crashed or was killed); "
                               "look above for its output")


# --- torchrun from a notebook --------------------------------------------------------
# A line of torch's log format ("W1127 16:25:41.122000 22489 .../run.py:874] "), which torchrun
# puts before each line of its messages when torch's logging is set up.
_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+\] ?")


def _banner_line(line):
    """Whether `line` is part of torchrun's notice that it set OMP_NUM_THREADS=1 (or blank)."""
    text = _LOG_PREFIX.sub("", line).strip()
    return not text or set(text) == {"*"} or "OMP_NUM_THREADS" in text


def torchrun(*args, timeout=180, env=None, cwd=None):
    """Run `python -m torch.distributed.run *args` (torchrun, with this Python) and wait for it.

    Returns a subprocess.CompletedProcess: returncode, and stdout, the output
    and errors together in the order they came, without torchrun's banner
    about OMP_NUM_THREADS. `env`: variables added to this process's. After
    `timeout` seconds torchrun and its ranks are killed and TimeoutError is raised.

    Done in Python, not with `!torchrun ... | grep`: a shell pipe needs grep
    (Windows has none) and quotes around a Python path with spaces.
    """
    command = [sys.executable, "-m", "torch.distributed.run", *map(str, args)]
    env = {**os.environ, **(env or {})}
    if sys.platform == "win32":
        # torchrun's own TCPStore uses libuv by default, which PyTorch's Windows wheels are
        # built without ("use_libuv was requested but PyTorch was built without libuv
        # support", pytorch/pytorch#139990); the older TCP store works.
        env.setdefault("USE_LIBUV", "0")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(process)
        last = _without_banner(process.communicate()[0]).splitlines()[-10:]
        raise TimeoutError(f"torchrun did not finish within {timeout} s; its last lines:\n"
                           + "\n".join(last)) from None
    except BaseException:  # an interrupted cell (KeyboardInterrupt): torchrun and its ranks go too
        _kill_tree(process)
        process.wait()
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout=_without_banner(output))


def _without_banner(output):
    return "".join(line for line in output.splitlines(keepends=True) if not _banner_line(line))


def _kill_tree(process):
    """Kill a process started by torchrun() and every process it started.

    Found through psutil, not by process group: torchrun starts each rank in a session of its
    own, so killing torchrun's group (or torchrun alone) leaves the ranks running."""
    import psutil

    try:
        family = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    process.kill()
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(family, timeout=5)
