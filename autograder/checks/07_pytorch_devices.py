"""Hidden checks of 07_pytorch_devices (devices, threads, data loading, FLOPs)."""
import collections
import importlib
import os
import random
import warnings
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

from autograder.checks._support import exact_int, exact_tuple, raises_value_error, there, timeout, type_name


_MISSING = object()


@contextmanager
def pretend(cuda=False, mps=False, count=1, built=()):
    """Make torch report CUDA and/or MPS as available while the block runs: the calls the exercise
    names (torch.cuda.is_available, torch.backends.mps.is_available), and those a correct answer
    may use instead or add from PyTorch's documentation: torch.mps.is_available, device_count, the
    backends' is_built (False on a CPU-only
    build, so `is_available() and is_built()` would never pick the pretended device),
    torch.cuda.current_device, torch.version.cuda and torch.accelerator. With MPS, the platform
    is Apple's too (sys.platform, platform.system and platform.machine), since MPS exists only
    there and an answer may look for it only on a Mac. A backend named in `built` is compiled in
    but not usable, as on a machine with a CUDA wheel and no GPU, or an Intel Mac (MPS built):
    its is_built is True, every other call says it is absent."""
    # torch.backends is named in a string: spelled out, it would make this function
    # unpicklable (cloudpickle takes the submodules it names along, and torch.backends
    # is not a plain module), and the function must travel to the student's process.
    backends = importlib.import_module("torch.backends")
    accelerator = "cuda" if cuda else "mps" if mps else None
    replaced = [(torch.cuda, "is_available", lambda: cuda),
                (torch.cuda, "device_count", lambda: count if cuda else 0),
                (torch.version, "cuda", "12.8" if cuda or "cuda" in built else None)]
    if cuda:
        replaced.append((torch.cuda, "current_device", lambda: 0))
        replaced += [(torch.cuda, name, value) for name, value in _pretended_gpus(count).items()]
    if mps or "mps" in built:
        import platform
        import sys
        replaced += [(sys, "platform", "darwin"), (platform, "system", lambda: "Darwin"),
                     (platform, "machine", lambda: "arm64" if mps else "x86_64")]
    for backend, present in (("mps", mps), ("cuda", cuda)):
        module = getattr(backends, backend, None)
        if module is not None:
            replaced.append((module, "is_built", lambda present=present or backend in built: present))
            if backend == "mps":
                replaced.append((module, "is_available", lambda: mps))
    mps_api = getattr(torch, "mps", None)  # torch.mps.is_available() asks the C++ side directly
    if mps_api is not None:
        replaced += [(mps_api, "is_available", lambda: mps), (mps_api, "device_count", lambda: 1 if mps else 0)]
    api = getattr(torch, "accelerator", None)
    if api is not None:
        replaced += [(api, "is_available", lambda: accelerator is not None),
                     (api, "current_accelerator",
                      lambda *_, **__: torch.device(accelerator) if accelerator else None),
                     (api, "device_count", lambda: (count if cuda else 1) if accelerator else 0)]
    saved = [(owner, name, getattr(owner, name, _MISSING)) for owner, name, _ in replaced]
    for owner, name, value in replaced:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            if value is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


def _pretended_gpus(count):
    """torch.cuda's calls that describe a GPU by its index, for `count` pretended GPUs: an answer may
    ask whether cuda:1 exists with get_device_properties(1) (a review: it failed, decided). As
    torch does, an index that is not there raises AssertionError("Invalid device id")."""
    import types

    def properties(device=None):
        index = 0 if device is None else device if isinstance(device, int) else torch.device(device).index
        index = 0 if index is None else index
        if not 0 <= index < count:
            raise AssertionError("Invalid device id")
        return types.SimpleNamespace(name=f"Pretended GPU {index}", total_memory=16 * 2**30, major=8, minor=0,
                                     multi_processor_count=80, is_integrated=False)

    return {"get_device_properties": properties,
            "get_device_name": lambda device=None: properties(device).name,
            "get_device_capability": lambda device=None: (properties(device).major, properties(device).minor)}


def _is(device, kind):
    assert isinstance(device, torch.device), (
        f"pick_device must return a torch.device, got {type(device).__name__}")
    return device.type == kind


# --- pick_device ---------------------------------------------------------------------
def _picks(pick_device, prefers, **pretending):
    """(in the student's process) pick_device() (for None) or pick_device(p), for each p, while torch pretends."""
    with pretend(**pretending):
        return [pick_device() if prefer is None else pick_device(prefer) for prefer in prefers]


def test_pick_device_cpu_only(pick_device):
    """on a machine without accelerators every request ends on the CPU"""
    default, *preferred = there(_picks, pick_device, [None, "cpu", "cuda", "cuda:0", "mps"], cuda=False, mps=False)
    assert _is(default, "cpu"), "without CUDA or MPS the default must be the CPU"
    for device in preferred:
        assert _is(device, "cpu"), "a preferred device that does not exist here must fall back to the CPU"


def test_pick_device_with_cuda(pick_device):
    """with CUDA present: CUDA by default, the CPU when it is preferred, a missing index falls back

    False failure of a correct answer: 0 (on a pretended machine of 2 GPUs, cuda:2, the first index
    past the last, and one drawn at random from 3 to 9: neither exists; exact comparison).
    """
    beyond = f"cuda:{random.randint(3, 9)}"
    device, cpu, chosen, mps, *absents = there(_picks, pick_device, [None, "cpu", "cuda:1", "mps", "cuda:2", beyond],
                                               cuda=True, mps=False, count=2)
    assert _is(device, "cuda") and device.index in (None, 0), "with CUDA the default must be CUDA"
    assert _is(cpu, "cpu"), "prefer='cpu' must give the CPU even when CUDA exists"
    assert _is(chosen, "cuda") and chosen.index == 1, "prefer='cuda:1' must give cuda:1 when it exists"
    assert _is(mps, "cuda"), "prefer='mps' without MPS falls back to CUDA"
    for missing, absent in zip(("cuda:2", beyond), absents):
        assert _is(absent, "cuda") and absent.index in (None, 0, 1), (
            f"prefer={missing!r} on a machine with 2 GPUs (cuda:0 and cuda:1) names a device that does not "
            "exist: fall back to CUDA's default device")


def test_pick_device_mps_order(pick_device):
    """CUDA comes before MPS, and MPS before the CPU"""
    default, cuda, cpu = there(_picks, pick_device, [None, "cuda", "cpu"], cuda=False, mps=True)
    assert _is(default, "mps"), "with MPS and no CUDA the default must be MPS"
    assert _is(cuda, "mps"), "prefer='cuda' without CUDA falls back to MPS"
    assert _is(cpu, "cpu"), "prefer='cpu' must give the CPU"
    both, asked = there(_picks, pick_device, [None, "mps"], cuda=True, mps=True)
    assert _is(both, "cuda"), "with both CUDA and MPS the default must be CUDA"
    assert _is(asked, "mps"), "prefer='mps' must give MPS where it exists, even when CUDA does too"


def test_pick_device_built_but_absent(pick_device):
    """a backend compiled into torch but not usable here (a CUDA wheel without a GPU, an MPS wheel on an
    Intel Mac) is not picked: is_available() says whether a device exists, is_built() only how torch was built

    False failure of a correct answer: 0 (pretended machines, exact comparison).
    """
    for backend, machine in (("cuda", "a machine with a CUDA build of torch and no GPU"),
                             ("mps", "an Intel Mac, where torch is built with MPS but MPS is absent")):
        for prefer, device in zip((None, backend), there(_picks, pick_device, [None, backend], built=(backend,))):
            assert _is(device, "cpu"), (
                f"pick_device({'' if prefer is None else repr(prefer)}) on {machine} must give the CPU: "
                f"{backend} is built but not available (ask is_available(), not is_built())")


def test_pick_device_unknown(pick_device):
    """a preference that names no device type raises ValueError"""
    for bad in ("tpu", "gpu", "banana"):
        with raises_value_error(f"pick_device({bad!r})"):
            pick_device(bad)


# --- to_device ------------------------------------------------------------------------
Pair = collections.namedtuple("Pair", "image label")


def _sample_batch():
    n = random.randint(2, 5)
    marker = object()
    batch = {
        "inputs": torch.randn(n, 3),  # random values, not zeros, that uninitialised memory could match
        "targets": [torch.randperm(n) + 10, (torch.rand(2, dtype=torch.float64) + 1, "name.png", 7)],
        "pair": Pair(torch.randn(n, dtype=torch.float16), None),
        "extra": marker,
        "score": 1.5,
    }
    return batch, marker


# Meta tensors do not travel back from the student's process, and neither would the
# identity of an object: the move happens there, and what it gave comes back described
# (`_describe`) and is rebuilt here (`_rebuild`) with the same container types.
def _describe(obj, marker):
    """(in the student's process) obj as plain data: tensors by device, shape and dtype, containers by exact type."""
    kind = type(obj)
    if obj is marker:
        return ("marker",)
    if isinstance(obj, torch.Tensor):
        from autograder.sandbox import wire  # its readers were taken before the answer's code ran
        device, shape, dtype = wire.tensor_attributes(obj, "device", "shape", "dtype")
        return ("tensor", device.type, [int(n) for n in shape], str(dtype))
    if kind is Pair:
        return ("Pair", [_describe(v, marker) for v in obj])
    if kind in (list, tuple):
        return (kind.__name__, [_describe(v, marker) for v in obj])
    if kind is dict:
        return ("dict", [(k, _describe(v, marker)) for k, v in obj.items()])
    if isinstance(obj, (list, tuple)):
        return ("sequence", kind.__qualname__, [_describe(v, marker) for v in obj])
    if isinstance(obj, dict):
        return ("mapping", kind.__qualname__, [(k, _describe(v, marker)) for k, v in obj.items()])
    if obj is None or kind in (str, int, float, bool):
        return ("value", obj)
    return ("other", kind.__qualname__)


class _Tensor:
    """A tensor as it was in the student's process: its device type, shape and dtype (a name)."""

    def __init__(self, device_type, shape, dtype):
        self.device_type, self.shape, self.dtype = device_type, torch.Size(shape), dtype


class _Sequence(list):
    """A list or tuple of another type (a subclass, another named tuple)."""


class _Mapping(dict):
    """A dict of another type."""


class _Other:
    def __init__(self, name):
        self.name = name


_MARKER = object()


def _rebuild(data):
    tag = data[0]
    if tag == "marker":
        return _MARKER
    if tag == "tensor":
        return _Tensor(*data[1:])
    if tag == "Pair":
        return Pair(*(_rebuild(v) for v in data[1]))
    if tag in ("list", "tuple"):
        return {"list": list, "tuple": tuple}[tag](_rebuild(v) for v in data[1])
    if tag == "dict":
        return {k: _rebuild(v) for k, v in data[1]}
    if tag == "sequence":
        return _Sequence(_rebuild(v) for v in data[2])
    if tag == "mapping":
        return _Mapping((k, _rebuild(v)) for k, v in data[2])
    if tag == "value":
        return data[1]
    return _Other(data[1])


def _moved_batch(to_device, device):
    """(in the student's process) a sample batch, before and after to_device(batch, device), described."""
    batch, marker = _sample_batch()
    moved = to_device(batch, device)
    return _describe(batch, marker), _describe(moved, marker)


def _moved_tensor(to_device, device):
    """(in the student's process) to_device(torch.ones(2), device), described."""
    return _describe(to_device(torch.ones(2), device), None)


def test_to_device_moves_every_tensor(to_device):
    """every tensor in nested lists, tuples, dicts and named tuples is moved

    False failure of a correct answer: 0 (a random batch size, exact
    comparison of devices and shapes).
    """
    batch, moved = map(_rebuild, there(_moved_batch, to_device, torch.device("meta")))
    assert isinstance(moved, dict) and list(moved) == list(batch), (
        "to_device(batch, device) must return a batch of the same kind: a dict with the same keys here")
    tensors = [moved["inputs"], moved["targets"][0], moved["targets"][1][0], moved["pair"][0]]
    assert all(isinstance(t, _Tensor) for t in tensors), "tensors must stay tensors"
    assert all(t.device_type == "meta" for t in tensors), "some tensors were not moved to the device"
    originals = [batch["inputs"], batch["targets"][0], batch["targets"][1][0], batch["pair"][0]]
    assert all(a.shape == b.shape for a, b in zip(tensors, originals)), "moved tensors must keep their shapes"
    assert all(a.dtype == b.dtype for a, b in zip(tensors, originals)), (
        "moved tensors must keep their dtypes (int64 labels stay int64): move them, do not cast them")
    # The batch may be moved in place (a dict updated, say) or copied: the notebook asks for either.
    bare = _rebuild(there(_moved_tensor, to_device, "meta"))
    assert isinstance(bare, _Tensor) and bare.device_type == "meta", "a bare tensor is moved too"


def test_to_device_keeps_structure(to_device):
    """container types and non-tensor objects are kept

    False failure of a correct answer: 0 (a random batch size, exact comparison).
    """
    batch, moved = map(_rebuild, there(_moved_batch, to_device, "meta"))
    assert type(moved) is dict and list(moved) == list(batch), "a dict must stay a dict with the same keys"
    assert type(moved["targets"]) is list, "a list must stay a list"
    assert type(moved["targets"][1]) is tuple, "a tuple must stay a tuple"
    assert type(moved["pair"]) is Pair, "a named tuple must stay the same named tuple"
    assert moved["extra"] is _MARKER and moved["score"] == 1.5, "non-tensor objects must be returned untouched"
    assert moved["targets"][1][1] == "name.png" and moved["targets"][1][2] == 7, "strings and numbers stay"
    assert moved["pair"].label is None


def _move_flags(to_device, batch, device, non_blocking):
    """(in the student's process) to_device(batch, device, non_blocking=...) and the non_blocking flag
    of every move it made: each Tensor.to call, and each Tensor.copy_ (a copy into a tensor made on
    the device moves too)."""
    seen = []
    originals = {name: getattr(torch.Tensor, name) for name in ("to", "copy_")}

    def spying(name):
        def spy(self, *args, **kwargs):
            # non_blocking comes before copy in every signature of both: the first bool given is it
            seen.append(bool(kwargs.get("non_blocking", next((a for a in args if isinstance(a, bool)), False))))
            return originals[name](self, *args, **kwargs)
        return spy

    for name in originals:
        setattr(torch.Tensor, name, spying(name))
    try:
        moved = to_device(batch, device, non_blocking=non_blocking)
    finally:
        for name, method in originals.items():
            setattr(torch.Tensor, name, method)
    return moved, seen


def _non_blocking_flags(to_device, non_blocking):
    """(in the student's process) the non_blocking flags of the moves to_device makes to 'meta'."""
    return _move_flags(to_device, [torch.ones(1), {"a": torch.zeros(2)}], "meta", non_blocking)[1]


def test_to_device_non_blocking(to_device):
    """non_blocking is passed on to every tensor move, True and False alike"""
    seen = there(_non_blocking_flags, to_device, True)
    assert len(seen) >= 2 and all(seen), "non_blocking=True was not passed on to tensor.to (or tensor.copy_)"
    seen = there(_non_blocking_flags, to_device, False)
    assert not any(seen), (
        "non_blocking=False must give blocking moves: a move to the CPU that does not wait can be read "
        "before its copy has finished (pass non_blocking on as the caller gave it)")


def _tensors(obj):
    """The tensors inside nested lists, tuples and dicts, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    return [t for item in items for t in _tensors(item)]


def _moved_to_cpu(to_device):
    """(in the student's process) the sample batch's tensors (copies, taken before the call: an answer may
    update the batch in place) and those of to_device(batch, 'cpu', non_blocking=False), with its flags."""
    batch, _ = _sample_batch()
    before = [t.clone() for t in _tensors(batch)]
    moved, seen = _move_flags(to_device, batch, "cpu", False)
    return before, _tensors(moved), seen


def test_to_device_keeps_values(to_device):
    """a move to a device that holds values (the CPU) gives the same values and dtypes, blocking

    False failure of a correct answer: 0 (random values, exact comparison: a tensor moved to
    the device it is on is itself, or an exact copy).
    """
    before, after, seen = there(_moved_to_cpu, to_device)
    assert len(after) == len(before), "every tensor of the batch must come back, moved"
    for old, new in zip(before, after):
        assert new.device.type == "cpu", "a tensor was not moved to the CPU"
        assert new.dtype == old.dtype, (
            f"a {old.dtype} tensor came back as {new.dtype}: move tensors, do not cast them")
        assert new.shape == old.shape and torch.equal(new, old), (
            "a moved tensor must hold the same values: copy them (tensor.to(device) does), not just make "
            "a tensor of the right shape")
    assert not any(seen), "non_blocking=False was not passed on: a move was asked not to wait"


# --- make_loader --------------------------------------------------------------------------
def _dataset():
    n = random.randint(13, 29)
    return TensorDataset(torch.arange(float(n)), torch.arange(n)), n


def _loader_settings(make_loader, data, calls):
    """(in the student's process) (is a DataLoader, pin_memory, persistent_workers, num_workers) of
    make_loader(data, *call) for each call, on a pretended machine with CUDA: an answer may pin only
    where CUDA is there (without it PyTorch warns and pins nothing), and so must see it."""
    with pretend(cuda=True):
        loaders = [make_loader(data, *call) for call in calls]
    return [(isinstance(loader, DataLoader), getattr(loader, "pin_memory", None),
             getattr(loader, "persistent_workers", None), getattr(loader, "num_workers", None))
            for loader in loaders]


def test_make_loader_settings(make_loader):
    """pinned memory only for CUDA, persistent workers only with workers (on a machine with CUDA)

    False failure of a correct answer: 0 (random sizes, exact settings).
    """
    data, _ = _dataset()
    workers = random.randint(1, 3)
    devices = ("cpu", torch.device("cpu"), "cuda", "cuda:0", torch.device("cuda"), "mps", torch.device("meta"))
    *made, (_, _, persistent, count) = there(_loader_settings, make_loader, data,
                                             [(4, 0, device) for device in devices] + [(5, workers, "cpu")])
    for device, (is_loader, pinned, persistent_without, _) in zip(devices, made):
        assert is_loader, "make_loader must return a DataLoader"
        if torch.device(device).type == "cpu":
            assert pinned is False, "pin_memory must be off for a CPU device"
            assert not persistent_without, "persistent workers make no sense with num_workers=0"
        elif torch.device(device).type == "cuda":
            assert pinned is True, "pin_memory must be on for a CUDA device"
        else:
            assert pinned is False, (
                f"pin_memory must be off for {device!r}: pinned memory speeds up copies to a CUDA device only")
    assert count == workers, "the loader must use num_workers worker processes"
    assert persistent is True, "with workers, persistent_workers must be on"


def test_make_loader_yields_everything(make_loader):
    """one epoch yields every item once, in batches of batch_size

    False failure of a correct answer: 0 (random sizes, exact comparison).
    """
    data, n = _dataset()
    batch = random.randint(2, 6)
    loader = make_loader(data, batch, 0, "cpu")
    xs = [b[0] for b in loader]
    # From the batches, not loader.batch_size: with a batch_sampler of its own, that is None.
    assert max(len(x) for x in xs) == batch, "the batches must be of batch_size (the last one may be smaller)"
    assert sorted(torch.cat(xs).tolist()) == list(range(n)), "an epoch must yield every item exactly once"


def _epochs_with_workers(make_loader, data, epochs):
    """(in the student's process) the sorted items of each epoch of make_loader(data, 4, 2, 'cpu')."""
    loader = make_loader(data, 4, 2, "cpu")
    try:
        return [sorted(torch.cat([b[0] for b in loader]).tolist()) for _ in range(epochs)]
    finally:
        del loader


@timeout(90)
def test_make_loader_runs_with_workers(make_loader):
    """a loader with worker processes delivers the whole dataset, twice

    False failure of a correct answer: 0 while the machine makes progress
    (a random size, exact comparison; 90 s for two epochs of at most 29 items).
    """
    data, n = _dataset()
    for got in there(_epochs_with_workers, make_loader, data, 2):
        assert got == list(range(n)), "an epoch with workers must yield every item exactly once"


def _epoch_orders(make_loader, n):
    """(in the student's process) the items of two epochs of make_loader over 0..n-1, batches of one, no workers."""
    loader = make_loader(TensorDataset(torch.arange(n)), 1, 0, "cpu")
    return [[int(batch[0]) for batch in loader] for _ in range(2)]


def test_make_loader_shuffles(make_loader):
    """the loader shuffles every epoch anew: not in the data set's order, nor twice in one order

    False failure of a correct answer: < 1e-17. A shuffling sampler gives any of the 20!
    orders of 20 items alike in each epoch: the data set's own order in either of two epochs, or
    the first epoch's order again, with probability 3/20! = 1.2e-18.
    """
    first, second = there(_epoch_orders, make_loader, 20)
    for order in (first, second):
        assert sorted(order) == list(range(20)), "an epoch must yield every item exactly once"
        assert order != list(range(20)), "the loader must shuffle (shuffle=True): an epoch came in the data set's order"
    assert first != second, "two epochs came in the same order: the loader must shuffle every epoch, not once"


def _start_method(make_loader, workers):
    """(in the student's process) how make_loader(..., workers, 'cpu')'s workers would start: the
    loader's multiprocessing context, else this process's default."""
    import multiprocessing
    import warnings
    with warnings.catch_warnings():  # more workers than cores: a warning, and no worker starts here
        warnings.simplefilter("ignore")
        loader = make_loader(TensorDataset(torch.arange(8)), 2, workers, "cpu")
    context = loader.multiprocessing_context
    if context is None:
        return multiprocessing.get_start_method()
    return context if isinstance(context, str) else context.get_start_method()


def test_make_loader_safe_start_method(make_loader):
    """with workers, they start by forkserver or spawn, not by fork

    False failure of a correct answer: 0 (the start method is read, not timed). A worker forked
    from a process that has run a multi-threaded torch operation can hang in its first torch
    operation (the notebook shows why); where the platform's default is already spawn or
    forkserver (macOS, Windows, Linux from Python 3.14), a loader that names no context passes.
    """
    method = there(_start_method, make_loader, random.randint(1, 3))
    assert method in ("forkserver", "spawn"), (
        f"the loader's workers would start by {method}: give it a start method that is safe with torch, "
        "multiprocessing_context='forkserver' (or 'spawn' where there is no forkserver)")


def test_make_loader_errors(make_loader):
    """a negative worker count or a batch size below 1 raises ValueError"""
    data, _ = _dataset()
    with raises_value_error("make_loader(data, 4, -1, 'cpu')"):
        make_loader(data, 4, -1, "cpu")
    with raises_value_error("make_loader(data, 0, 0, 'cpu')"):
        make_loader(data, 0, 0, "cpu")


# --- count_parameters ---------------------------------------------------------------------
def test_count_parameters_values(count_parameters):
    """total and trainable counts of random models with frozen layers

    False failure of a correct answer: 0 (random inputs, exact comparison).
    """
    for _ in range(3):
        sizes = [random.randint(2, 20) for _ in range(4)]
        layers = [nn.Linear(sizes[0], sizes[1]), nn.ReLU(), nn.Linear(sizes[1], sizes[2], bias=False),
                  nn.BatchNorm1d(sizes[2]), nn.Linear(sizes[2], sizes[3])]
        model = nn.Sequential(*layers)
        frozen = random.choice([0, 2, 4])
        for p in layers[frozen].parameters():
            p.requires_grad_(False)
        total = sum(p.numel() for p in model.parameters())
        trainable = total - sum(p.numel() for p in layers[frozen].parameters())
        got = exact_tuple(count_parameters(model), "count_parameters(model), the tuple (total, trainable),", 2)
        assert exact_int(got[0], "total") == total, (
            f"the total number of parameters is wrong: {got[0]}, expected {total} (every parameter "
            "of every layer, frozen ones too?)")
        assert exact_int(got[1], "trainable") == trainable, "the number of trainable parameters is wrong"


def test_count_parameters_shared(count_parameters):
    """a layer used twice counts once, and so does a weight tied between two layers

    False failure of a correct answer: 0 (random inputs, exact comparison).
    """
    n = random.randint(3, 9)
    shared = nn.Linear(n, n)
    model = nn.Sequential(shared, nn.Tanh(), shared)
    counts = exact_tuple(count_parameters(model), "count_parameters(model), the tuple (total, trainable),", 2)
    assert counts == (n * n + n, n * n + n), "a shared layer's parameters count once"
    first, second = nn.Linear(n, n), nn.Linear(n, n)
    second.weight = first.weight  # tied weights: one parameter in two layers, each with a bias of its own
    tied = nn.Sequential(first, nn.Tanh(), second)
    counts = exact_tuple(count_parameters(tied), "count_parameters(model), the tuple (total, trainable),", 2)
    assert counts == (n * n + 2 * n, n * n + 2 * n), (
        "a weight tied between two layers (one Parameter in both) counts once")


# --- layer_flops ----------------------------------------------------------------------------
def _counted(layer, shape):
    # padding='same' with an even kernel warns that it pads a copy of the input: nothing to a count.
    with FlopCounterMode(display=False) as counter, torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using padding='same'", category=UserWarning)
        layer(torch.zeros(shape))
    return counter.get_total_flops()


def _random_conv():
    groups = random.choice([1, 1, 2, 4])
    c_in = groups * random.randint(1, 4)
    c_out = groups * random.randint(1, 4)
    k = (random.randint(1, 4), random.randint(1, 4))
    stride = random.choice([1, 2, (1, 2), 3])
    dilation = random.choice([1, 1, 2])
    padding = random.choice([0, 1, (2, 1), "valid"])
    layer = nn.Conv2d(c_in, c_out, k, stride=stride, padding=padding, dilation=dilation,
                      groups=groups, bias=random.random() < 0.5)
    shape = (random.randint(1, 3), c_in, random.randint(9, 16), random.randint(9, 16))
    return layer, shape


def test_layer_flops_linear(layer_flops):
    """Linear layers of random sizes and input ranks match FlopCounterMode

    False failure of a correct answer: 0 (random layers, exact integer
    counts).
    """
    for _ in range(6):
        i, o = random.randint(1, 40), random.randint(1, 40)
        layer = nn.Linear(i, o, bias=random.random() < 0.5)
        shape = tuple(random.randint(1, 5) for _ in range(random.randint(0, 2))) + (i,)
        expected = _counted(layer, shape)
        assert exact_int(layer_flops(layer, shape), "layer_flops") == expected, (
            "Linear FLOPs differ from FlopCounterMode (2 x multiply-adds, bias ignored)")


def test_layer_flops_conv(layer_flops):
    """Conv2d with random stride, padding, dilation, groups and bias matches FlopCounterMode

    False failure of a correct answer: 0 (random
    layers, exact integer counts).
    """
    for _ in range(10):
        layer, shape = _random_conv()
        assert exact_int(layer_flops(layer, shape), "layer_flops") == _counted(layer, shape), (
            "Conv2d FLOPs differ from FlopCounterMode")


def test_layer_flops_same_and_unbatched(layer_flops):
    """padding='same' and unbatched (C, H, W) inputs

    False failure of a correct answer: 0 (random sizes, exact integer counts).
    """
    c = random.randint(1, 4)
    # An even kernel, or a dilation, is where kernel // 2 on each side is not 'same' any more.
    for kernel, dilation in (((3, 5), 1), (random.choice([(2, 4), (4, 3)]), 1), ((3, 3), 2)):
        layer = nn.Conv2d(c, 6, kernel, padding="same", dilation=dilation)
        shape = (c, random.randint(6, 12), random.randint(6, 12))
        assert layer_flops(layer, shape) == _counted(layer, shape), (
            f"padding='same' or an unbatched input is miscounted (kernel {kernel}, dilation {dilation})")


def test_layer_flops_by_hand(layer_flops):
    """the count comes from the sizes, without running the layer or PyTorch's FLOP counter

    False failure of a correct answer: 0 (a random layer, exact integer count; a count by hand
    neither runs the layer nor enters a FlopCounterMode).
    """
    layer, shape = _random_conv()
    expected = _counted(layer, shape)

    def refuse(*args, **kwargs):
        raise AssertionError("layer_flops should count by hand, not run the layer")

    layer.forward = refuse
    assert there(_without_flop_counter, layer_flops, layer, shape) == expected, (
        "Conv2d FLOPs differ from FlopCounterMode")


def _without_flop_counter(layer_flops, layer, shape):
    """(in the student's process) layer_flops(layer, shape) with PyTorch's FLOP counters refusing to
    start and its formulas refusing to count: counted under FlopCounterMode or the profiler (its
    with_flops estimates, around the functional op on meta tensors, say) or with the formulas
    (conv_flop_count, mm_flop), a count is not by hand. The classes themselves are patched, and
    the formulas' code, so that a name the answer imported earlier refuses too. Every FLOP counter,
    a fresh copy of the module's (importlib.reload) too, is a TorchDispatchMode: entering any one,
    or pushing a mode on the dispatch stack, refuses, and so does a reload. A count by hand from
    the sizes, or from shapes on meta tensors, enters no mode; a refusal the answer swallowed
    still fails."""
    import importlib

    from torch.utils import _python_dispatch, flop_counter

    refused = []

    def refuse(*args, **kwargs):
        refused.append(True)
        raise AssertionError("layer_flops should count by hand from the sizes, not with PyTorch's FLOP counter "
                             "or profiler")

    profilers = importlib.import_module("torch.profiler.profiler")  # by name: see pretend
    legacy = importlib.import_module("torch.autograd.profiler")
    methods = [(c, name) for c, name in ((getattr(flop_counter, "FlopCounterMode", None), "__enter__"),
                                         (getattr(flop_counter, "_FlopCounterMode", None), "__enter__"),
                                         (getattr(profilers, "_KinetoProfile", None), "start"),
                                         (getattr(profilers, "profile", None), "__enter__"),
                                         (getattr(legacy, "profile", None), "__enter__"),
                                         (getattr(_python_dispatch, "TorchDispatchMode", None), "__enter__"))
               if isinstance(c, type)]
    # Functions in modules: a reloaded module takes the C function from torch._C anew, and runs in
    # the same namespace as before (so its old functions see the refusal too).
    functions = [(m, name) for m, name in ((torch._C, "_push_on_torch_dispatch_stack"),
                                           (_python_dispatch, "_push_on_torch_dispatch_stack"),
                                           (importlib, "reload")) if hasattr(m, name)]
    saved = [(c, name, c.__dict__.get(name)) for c, name in methods]
    saved_functions = [(m, name, getattr(m, name)) for m, name in functions]
    codes = _refuse_formulas(flop_counter)
    for c, name in methods + functions:
        setattr(c, name, refuse)
    try:
        # Read as a number while the counters still refuse: a lazy number of the answer's would
        # otherwise count under them once this check stops watching.
        flops = exact_int(layer_flops(layer, shape), "layer_flops")
    finally:
        for c, name, method in saved:
            if method is None:
                delattr(c, name)
            else:
                setattr(c, name, method)
        for m, name, fn in saved_functions:
            setattr(m, name, fn)
        for fn, code in codes:
            fn.__code__ = code
    assert not refused, ("layer_flops should count by hand from the sizes, not with PyTorch's FLOP counter "
                         "or profiler (it tried one)")
    return flops


def _refuse_formulas(module):
    """(in the student's process) give every function of the module, and the function each wraps,
    code that raises; [(function, its own code)] to put back. A function's code can only be
    swapped for code with the same free variables: the raising code closes over the same names."""
    import types
    functions = [f for f in vars(module).values() if isinstance(f, types.FunctionType) and f.__module__ == module.__name__]
    functions += [f.__wrapped__ for f in functions if isinstance(getattr(f, "__wrapped__", None), types.FunctionType)]
    saved = []
    for fn in functions:
        names = fn.__code__.co_freevars
        source = "def outer():\n" + "".join(f"    {n} = None\n" for n in names) + (
            "    def refuse(*args, **kwargs):\n" + (f"        {', '.join(names)}\n" if names else "")
            + "        raise AssertionError('layer_flops should count by hand from the sizes, "
              "not with the FLOP counter\\'s formulas')\n    return refuse\n")
        scope = {}
        exec(source, scope)
        try:
            code, fn.__code__ = fn.__code__, scope["outer"]().__code__
        except ValueError:  # free variables in another order: left as it is
            continue
        saved.append((fn, code))
    return saved


def test_layer_flops_errors(layer_flops):
    """another layer type, or a shape that does not fit, raises ValueError"""
    with raises_value_error("layer_flops(nn.ReLU(), ...)"):
        layer_flops(nn.ReLU(), (2, 3))
    with raises_value_error("layer_flops on a Linear with the wrong feature size"):
        layer_flops(nn.Linear(4, 3), (2, 5))
    with raises_value_error("layer_flops on a Conv2d with the wrong channel count"):
        layer_flops(nn.Conv2d(3, 8, 3), (1, 4, 10, 10))
    with raises_value_error("layer_flops on a Conv2d with a 5 x 5 kernel and a 2 x 2 input"):
        layer_flops(nn.Conv2d(3, 8, 5), (1, 3, 2, 2))
    with raises_value_error("layer_flops on a Conv2d with a 5 x 5 kernel and a 10 x 2 input (too small in one dimension)"):
        layer_flops(nn.Conv2d(3, 8, 5), (1, 3, 10, 2))
    with raises_value_error("layer_flops on a Conv2d whose dilated 3 x 3 kernel spans 9 x 9, on a 6 x 6 input"):
        layer_flops(nn.Conv2d(3, 8, 3, dilation=4), (1, 3, 6, 6))
    # Padding makes room: a 5 x 5 kernel with padding 2 fits a 2 x 2 input (a 2 x 2 output).
    padded = nn.Conv2d(3, 8, 5, padding=2)
    assert exact_int(layer_flops(padded, (1, 3, 2, 2)), "layer_flops") == _counted(padded, (1, 3, 2, 2)), (
        "a 5 x 5 kernel with padding=2 fits a 2 x 2 input: count it (the padding is part of the input the kernel sees)")


# --- gpu_env -------------------------------------------------------------------------------------
def test_gpu_env_values(gpu_env):
    """the visible ids in the order given, and PCI bus ordering

    False failure of a correct answer: 0 (random inputs, exact comparison). One list of one id
    and two of two to four, so that every grading sees a separator (a wrong one, ", " say,
    would pass 1 in 64 gradings if every length were drawn at random from 1 to 4).
    """
    sizes = [1, random.randint(2, 4), random.randint(2, 4)]
    random.shuffle(sizes)
    for size in sizes:
        ids = random.sample(range(8), size)
        env = gpu_env(ids)
        # Any dict (an OrderedDict, a defaultdict): every dict reaches the judge by value, its items
        # read by dict's own method.
        assert isinstance(env, dict), f"gpu_env must return a dict, got {type_name(env)}"
        env = dict(env)
        assert all(type(k) is str and type(v) is str for k, v in env.items()), "keys and values must be str"
        assert env.get("CUDA_VISIBLE_DEVICES") == ",".join(map(str, ids)), (
            "CUDA_VISIBLE_DEVICES must list the ids, in order, separated by commas")
        assert env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID", "CUDA_DEVICE_ORDER must be PCI_BUS_ID"
    # "-1" hides every GPU too: CUDA stops reading the list at its first id that is not a device.
    hidden = gpu_env([])
    assert isinstance(hidden, dict), f"gpu_env must return a dict, got {type_name(hidden)}"
    assert dict(hidden).get("CUDA_VISIBLE_DEVICES") in ("", "-1"), "an empty list must hide every GPU"


def _environment_changes(gpu_env, ids):
    """(in the student's process) the names of the environment variables gpu_env(ids) set, changed or removed."""
    before = dict(os.environ)
    gpu_env(ids)
    after = dict(os.environ)
    return sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))


def test_gpu_env_leaves_environment(gpu_env):
    """this process's own environment is not changed

    False failure of a correct answer: 0 (random inputs, exact comparison).
    """
    changed = there(_environment_changes, gpu_env, [random.randint(0, 7)])
    assert changed == [], (
        f"gpu_env should return the settings, not change os.environ (it changed {', '.join(map(str, changed))})")


def test_gpu_env_errors(gpu_env):
    """negative, repeated or non-integer ids raise ValueError"""
    for bad in ([-1], [0, 0], [1, 2, 1], ["a"], [1.5]):
        with raises_value_error(f"gpu_env({bad})"):
            gpu_env(bad)


# --- to_channels_last -------------------------------------------------------------------------------
def _channels_last(to_channels_last, x):
    """(in the student's process) y = to_channels_last(x) and, for a tensor, its layout: the wire keeps values, not strides."""
    from autograder.sandbox import wire  # its readers were taken before the answer's code ran
    y = to_channels_last(x)
    layout = wire.tensor_layout(y) if isinstance(y, torch.Tensor) else None
    return y, layout and {"strides": layout[0], "channels_last": layout[1]}


def test_to_channels_last_layout(to_channels_last):
    """same shape, dtype and values, channels-last strides

    False failure of a correct answer: 0 (random shapes; the values are copied
    exactly, torch.equal).
    """
    for dtype in (torch.float32, torch.float64, torch.int64):
        shape = (random.randint(1, 3), random.randint(2, 6), random.randint(2, 7), random.randint(2, 7))
        x = torch.randn(shape, dtype=dtype) if dtype.is_floating_point else torch.randint(-99, 99, shape)
        y, layout = there(_channels_last, to_channels_last, x)
        assert isinstance(y, torch.Tensor) and layout is not None, "to_channels_last must return a tensor"
        assert tuple(y.shape) == shape, "the shape must stay (N, C, H, W)"
        assert y.dtype == x.dtype, f"the dtype must stay {x.dtype}, not become {y.dtype}"
        assert torch.equal(x, y), "the values must not change"
        assert layout["channels_last"], "the result is not stored channels last"
        assert layout["strides"][1] == 1, "channels must be adjacent in memory"


def test_to_channels_last_errors(to_channels_last):
    """anything but a 4-D tensor raises ValueError (a 3-D or 5-D one, a 4-D NumPy array, nested lists)"""
    for bad in (torch.randn(3, 4, 5), torch.randn(1, 2, 3, 4, 5)):
        with raises_value_error(f"to_channels_last on a {bad.dim()}-D tensor"):
            to_channels_last(bad)
    four_d = torch.randn(1, 2, 3, 4)
    for bad, what in ((four_d.numpy(), "a 4-D NumPy array"), (four_d.tolist(), "4-D nested lists")):
        with raises_value_error(f"to_channels_last on {what}"):
            to_channels_last(bad)
