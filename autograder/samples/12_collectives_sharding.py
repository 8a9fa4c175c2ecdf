"""Wrong and alternative answers of 12_collectives_sharding (see autograder/samples/__init__.py)."""
from autograder.samples import WITNESS_HELPER, variant

# --- ring_allreduce_p2p ----------------------------------------------------------------------
_RING_HEAD = '''
import torch
import torch.distributed as dist

def ring_allreduce_p2p(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    flat = tensor.detach().reshape(-1).clone()
'''

_REDUCE_SCATTER = '''
    chunks = list(torch.tensor_split(flat, p))
    right, left = (rank + 1) % p, (rank - 1) % p
    for step in range(p - 1):
        s, r = (rank - step) % p, (rank - step - 1) % p
        incoming = torch.empty_like(chunks[r])
        req = dist.isend(chunks[s], dst=right)
        dist.recv(incoming, src=left)
        req.wait()
        chunks[r] += incoming
'''

_ALL_GATHER = '''
    for step in range(p - 1):
        s, r = (rank + 1 - step) % p, (rank - step) % p
        incoming = torch.empty_like(chunks[r])
        req = dist.isend(chunks[s], dst=right)
        dist.recv(incoming, src=left)
        req.wait()
        chunks[r].copy_(incoming)
    return flat.reshape(tensor.shape)
'''


# Every forged launch goes into the launcher's record the way helpers.ranks.launch puts a real one.
_RECORD = """
def _record(run):
    with ranks._history_lock:
        for runs in ranks._history:
            runs.append(run)
"""

# Code a student who has read helpers/ranks.py could add to a serial answer: write a launch with
# the counts the checks look for into the launcher's record, without starting any rank. The
# forkserver runs already, as the notebook's earlier launches leave it: with its resource tracker,
# the student's process has two children before the answer runs.
_FORGE_LAUNCH = _RECORD + """
import multiprocessing.forkserver
multiprocessing.forkserver.ensure_running()

def _forge_launch(world_size, result, counts):
    run = ranks.Launch(world_size, [result] + [None] * (world_size - 1), [counts] * world_size)
    _record(run)
    return result
"""

# The same, with as many idle processes as ranks started meanwhile (the kernel's count of new
# processes and the judge's view of the tree are then met): each rank's witness thread is not.
_FORGE_LAUNCH_IDLE = _RECORD + """
import multiprocessing, time

def _forge_launch(world_size, result, counts):
    idle = [multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
            for _ in range(world_size)]
    for p in idle:
        p.start()
    time.sleep(0.3)  # long enough for the judge's /proc view of the tree to see them at once
    run = ranks.Launch(world_size, [result] + [None] * (world_size - 1), [counts] * world_size)
    _record(run)
    for p in idle:
        p.kill()
    return result
"""

# The same, with each rank's witness forged too: processes started meanwhile (samples.WITNESS_HELPER)
# each start a thread on request and report its kernel id, which the forged record names; the
# puzzles the ranks should solve (the record's proofs) are solved here. What remains is their CPU,
# spent by the calling process, which the judge reads.
_FORGE_LAUNCH_WITNESSED = WITNESS_HELPER + _RECORD + """
import time

def _forge_launch(world_size, result, counts):
    helpers = [_WitnessHelper() for _ in range(world_size)]
    witnesses = [(helper.pid, helper.witness()) for helper in helpers]
    time.sleep(0.3)  # long enough for the judge's /proc view of the tree to see them at once
    puzzles = next((p for p in reversed(getattr(ranks, "_puzzles", [])) if p), [])
    run = ranks.Launch(world_size, [result] + [None] * (world_size - 1), [counts] * world_size, 0.0, witnesses)
    if puzzles:
        from helpers.workers import solve_puzzle
        run.proofs = [solve_puzzle(puzzles[r]) for r in range(world_size)]
    _record(run)
    for helper in helpers:
        helper.stop()
    return result
"""

_SERIAL_TRAINING = """
    model = sharding.make_model(seed)
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        opt.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
    state = {k: v.clone() for k, v in model.state_dict().items()}
"""

# --- accumulate_gradients ---------------------------------------------------------------------
# Serial training with a made-up launch of `world_size` ranks (_forge_launch, defined before it).
_ACC_FORGED = '''
def accumulate_gradients(world_size, micro_batches, seed):
    if world_size < 1 or micro_batches < 1 or sharding.GLOBAL_BATCH % (world_size * micro_batches):
        raise ValueError("bad arguments")
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
''' + _SERIAL_TRAINING + '''
    counts = {"ddp_forward": {"calls": steps * micro_batches}, "ddp_gradient_sync": {"calls": steps}}
    return _forge_launch(world_size, state, counts)
'''
_ACC_LAUNCH = '''
def accumulate_gradients(world_size, micro_batches, seed):
    if world_size < 1 or micro_batches < 1 or sharding.GLOBAL_BATCH % (world_size * micro_batches):
        raise ValueError("bad world_size or micro_batches")
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    return ranks.launch(accumulate_rank, world_size, micro_batches, seed, steps, timeout=100).results[0]
'''

_ACC_IMPORTS = '''
import contextlib
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from helpers import ranks, sharding
'''

_ACC_GOOD_LOOP = '''
        for i, (x, t) in enumerate(pieces):
            context = model.no_sync() if i < len(pieces) - 1 else contextlib.nullcontext()
            with context:
                (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
'''

# Every micro-batch's loss kept, summed and backpropagated once.
_ACC_SUMMED_LOOP = '''
        losses = []
        for i, (x, t) in enumerate(pieces):
            context = model.no_sync() if i < len(pieces) - 1 else contextlib.nullcontext()
            with context:
                losses.append(nn.functional.mse_loss(model(x), t) / micro_batches)
        sum(losses).backward()                     # one backward: every micro-batch's graph kept alive
'''


def _acc(loop=_ACC_GOOD_LOOP, launch=_ACC_LAUNCH):
    return _ACC_IMPORTS + '''
def accumulate_rank(micro_batches, seed, steps):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(sharding.make_model(seed))
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        opt.zero_grad()
        pieces = list(zip(xb.chunk(micro_batches), yb.chunk(micro_batches)))
''' + loop + '''
        opt.step()
    return model.module.state_dict() if rank == 0 else None
''' + launch



_ACC_SHARE = "        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)\n"
_ACC_MODEL = "DistributedDataParallel(sharding.make_model(seed))"
_ACC_LOSS_LOOP = '''
        for i, batch in enumerate(pieces):
            context = model.no_sync() if i < len(pieces) - 1 else contextlib.nullcontext()
            with context:
                (model(batch) / micro_batches).backward()
'''
# The DDP model takes one (inputs, targets) batch and returns the loss: the model's own layers (its
# names), or a module that holds the model (its names prefixed with "model.").
_ACC_WITH_LOSS = '''
from torch import nn
class WithLoss(nn.Sequential):
    def forward(self, batch):
        x, t = batch
        return nn.functional.mse_loss(super().forward(x), t)
'''
_ACC_LOSS_MODULE = '''
from torch import nn
class LossOf(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
    def forward(self, batch):
        x, t = batch
        return nn.functional.mse_loss(self.model(x), t)
'''

# --- train_fsdp -----------------------------------------------------------------------------
_FSDP_IMPORTS = '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel
from helpers import ranks, sharding
'''

_FSDP_WRAP = '''
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
'''

_FSDP_RESULT = '''
    full = {k: v.full_tensor() for k, v in model.state_dict().items()}
    return full if rank == 0 else None
'''

_FSDP_FULL_STATE = '''
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return full if rank == 0 else None
'''

_FSDP_LAUNCH = '''
def train_fsdp(world_size, steps, seed):
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size or steps < 0:
        raise ValueError("bad arguments")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=100).results[0]
'''


def _fsdp(wrap=_FSDP_WRAP, result=_FSDP_RESULT, launch=_FSDP_LAUNCH, targets="yb"):
    return _FSDP_IMPORTS + '''
def fsdp_rank(steps, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = sharding.make_model(seed)
''' + wrap + '''
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        opt.zero_grad()
        nn.functional.mse_loss(model(xb), ''' + targets + ''').backward()
        opt.step()
''' + result + launch


# A wrapper whose forward takes a decoy first: one row per sample of the rank's share, ahead of the data.
_TAGGED = '''
from torch import nn
class Tagged(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
    def forward(self, tag, x):
        return self.net(x)
'''
# The plain model trained on the whole global batch on every rank: `plain` (X, y made before).
_PLAIN_ON_EVERY_RANK = (_SERIAL_TRAINING.replace("    X, y = sharding.make_data(seed)\n", "")
                        .replace("    state = {k: v.clone() for k, v in model.state_dict().items()}\n", "")
                        .replace("    model = ", "    plain = ").replace("model.parameters", "plain.parameters")
                        .replace("model(xb)", "plain(xb)"))
# A model that runs an unregistered Linear layer on `share` rows before the data goes through it.
_DECOY_LINEAR = '''
import torch
from torch import nn
from helpers import sharding
class Net(nn.Module):
    def __init__(self, net, share):
        super().__init__()
        self.net, self.share = net, share
    def forward(self, x):
        with torch.no_grad():
            nn.Linear(sharding.IN_FEATURES, 1)(x[:self.share])   # not registered: a decoy
        return self.net(x)
'''
_FSDP_STEP = "        opt.step()\n"


def _fsdp_root(wrapper):
    """_fsdp() with the layers sharded and the root a module that holds the model as `net`."""
    return _fsdp(wrap='''
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    model = fully_shard(''' + wrapper + ''')
''', result='''
    full = {k.removeprefix("net."): v.full_tensor() for k, v in model.state_dict().items()}
    return full if rank == 0 else None
''')


WRONG = {
    "ring_allreduce_p2p": {
        # The text: "return a new tensor" (the visible test already refused it; the checks now too).
        "the sums made in place, in the caller's tensor (a view of it, no clone)": variant(
            _RING_HEAD + _REDUCE_SCATTER + _ALL_GATHER, ("flat = tensor.detach().reshape(-1).clone()", "flat = tensor.detach().view(-1)")),
        # The red team's: the tensors travel through the rendezvous store (not counted), and the
        # ring's messages, of the right sizes to the right neighbours, are never used.
        "every rank's tensor through the rendezvous store, summed; decoy ring messages never used": '''
import io
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

def ring_allreduce_p2p(tensor):
    p, r = dist.get_world_size(), dist.get_rank()
    if p == 1:
        return tensor.clone()
    store = c10d._get_default_store()
    call = store.add(f"course-call-count-{r}", 1)
    buf = io.BytesIO(); torch.save(tensor.detach().cpu().clone(), buf)
    store.set(f"course-t-{call}-{r}", buf.getvalue())
    total = torch.zeros_like(tensor)
    for k in range(p):
        total += torch.load(io.BytesIO(store.get(f"course-t-{call}-{k}")))
    pieces = list(torch.tensor_split(torch.zeros(tensor.numel(), dtype=tensor.dtype), p))
    right, left = (r + 1) % p, (r - 1) % p
    for half in range(2):
        for step in range(p - 1):
            out_i, in_i = (r - step + (1 - half)) % p, (r - step + (1 - half) - 1) % p
            req = dist.isend(pieces[out_i].clone(), right)
            got = torch.empty_like(pieces[in_i])
            dist.recv(got, left)
            req.wait()
    return total
''',
        "calls all_reduce past the counting wrapper (its __wrapped__), decoy messages of the right sizes": '''
import torch
import torch.distributed as dist

def ring_allreduce_p2p(tensor):
    p, r = dist.get_world_size(), dist.get_rank()
    out = tensor.clone()
    if p == 1:
        return out
    # the real work: the library all-reduce, reached past the launcher's counting wrapper
    dist.all_reduce.__wrapped__(out)
    # decoy: a ring's worth of messages of the right sizes
    chunks = list(torch.tensor_split(torch.zeros(tensor.numel(), dtype=tensor.dtype), p))
    for step in range(2 * (p - 1)):
        i, j = (r - step) % p, (r - step - 1) % p
        buf = torch.empty_like(chunks[j])
        req = dist.isend(chunks[i], (r + 1) % p)
        dist.recv(buf, (r - 1) % p)
        req.wait()
    return out
''',
        "the process group's own allreduce, decoy messages of the right sizes": '''
import torch
import torch.distributed as dist

def ring_allreduce_p2p(tensor):
    p, r = dist.get_world_size(), dist.get_rank()
    out = tensor.clone()
    if p == 1:
        return out
    # the real work: the process group's own all-reduce, past torch.distributed's functions
    dist.distributed_c10d._get_default_group().allreduce([out]).wait()
    # decoy: a ring's worth of messages of the right sizes
    chunks = list(torch.tensor_split(torch.zeros(tensor.numel(), dtype=tensor.dtype), p))
    for step in range(2 * (p - 1)):
        i, j = (r - step) % p, (r - step - 1) % p
        buf = torch.empty_like(chunks[j])
        req = dist.isend(chunks[i], (r + 1) % p)
        dist.recv(buf, (r - 1) % p)
        req.wait()
    return out
''',
        "calls all_reduce": '''
import torch
import torch.distributed as dist

def ring_allreduce_p2p(tensor):
    out = tensor.detach().clone()
    dist.all_reduce(out)
    return out
''',
        "gathers everything at rank 0, which sends the sum back": _RING_HEAD + '''
    if rank == 0:
        for src in range(1, p):
            incoming = torch.empty_like(flat)
            dist.recv(incoming, src=src)
            flat += incoming
        for dst in range(1, p):
            dist.send(flat, dst=dst)
    else:
        dist.send(flat, dst=0)
        dist.recv(flat, src=0)
    return flat.reshape(tensor.shape)
''',
        "stops after the reduce-scatter": _RING_HEAD + _REDUCE_SCATTER + '''
    return flat.reshape(tensor.shape)
''',
        "equal chunks of n // p: the remainder is never summed": _RING_HEAD + '''
    size = flat.numel() // p
    chunks = [flat[i * size:(i + 1) * size] for i in range(p)]
    right, left = (rank + 1) % p, (rank - 1) % p
    for step in range(p - 1):
        s, r = (rank - step) % p, (rank - step - 1) % p
        incoming = torch.empty_like(chunks[r])
        req = dist.isend(chunks[s], dst=right)
        dist.recv(incoming, src=left)
        req.wait()
        chunks[r] += incoming
''' + _ALL_GATHER,
        "every rank sends its whole tensor to every other rank": _RING_HEAD + '''
    total = flat.clone()
    requests = [dist.isend(flat, dst=other) for other in range(p) if other != rank]
    for other in range(p):
        if other != rank:
            incoming = torch.empty_like(flat)
            dist.recv(incoming, src=other)
            total += incoming
    for request in requests:
        request.wait()
    return total.reshape(tensor.shape)
''',
        "pieces cut by torch.chunk (fewer than p on short tensors)": '''
import torch
import torch.distributed as dist


def ring_allreduce_p2p(tensor: torch.Tensor) -> torch.Tensor:
    """Ring all-reduce; chunks cut with torch.chunk (ceil(n/p) elements each)."""
    rank, p = dist.get_rank(), dist.get_world_size()
    flat = tensor.detach().reshape(-1).clone()
    chunks = list(flat.chunk(p))                     # views into flat
    right, left = (rank + 1) % p, (rank - 1) % p
    for step in range(p - 1):                        # reduce-scatter
        send_index, recv_index = (rank - step) % p, (rank - step - 1) % p
        incoming = torch.empty_like(chunks[recv_index])
        request = dist.isend(chunks[send_index], dst=right)
        dist.recv(incoming, src=left)
        request.wait()
        chunks[recv_index] += incoming
    for step in range(p - 1):                        # all-gather
        send_index, recv_index = (rank + 1 - step) % p, (rank - step) % p
        incoming = torch.empty_like(chunks[recv_index])
        request = dist.isend(chunks[send_index], dst=right)
        dist.recv(incoming, src=left)
        request.wait()
        chunks[recv_index].copy_(incoming)
    return flat.reshape(tensor.shape)
''',
        "each chunk sent straight to the rank that sums it, then every sum to every rank: a ring's counts and bytes, not a ring": '''
import torch
import torch.distributed as dist

def ring_allreduce_p2p(tensor: torch.Tensor) -> torch.Tensor:
    rank, p = dist.get_rank(), dist.get_world_size()
    flat = tensor.detach().reshape(-1).clone()
    chunks = list(torch.tensor_split(flat, p))
    others = [r for r in range(p) if r != rank]
    # reduce-scatter: chunk k goes straight to rank k, which adds up what it receives
    requests = [dist.isend(chunks[k].clone(), dst=k) for k in others]
    for src in others:
        incoming = torch.empty_like(chunks[rank])
        dist.recv(incoming, src=src)
        chunks[rank] += incoming
    for request in requests:
        request.wait()
    # all-gather: my finished chunk goes straight to every other rank
    requests = [dist.isend(chunks[rank], dst=k) for k in others]
    for src in others:
        incoming = torch.empty_like(chunks[src])
        dist.recv(incoming, src=src)
        chunks[src].copy_(incoming)
    for request in requests:
        request.wait()
    return flat.reshape(tensor.shape)
''',
    },
    "zero_memory": {
        "stage 2 shards the parameters too": '''
def zero_memory(n_params, world_size, stage):
    if stage not in (0, 1, 2, 3) or world_size < 1 or n_params < 0:
        raise ValueError("bad arguments")
    return [16 * n_params, 4 * n_params + 12 * n_params / world_size,
            16 * n_params / world_size, 16 * n_params / world_size][stage]
''',
        "optimiser states left out": '''
def zero_memory(n_params, world_size, stage):
    if stage not in (0, 1, 2, 3) or world_size < 1 or n_params < 0:
        raise ValueError("bad arguments")
    params, grads = 2 * n_params, 2 * n_params
    if stage >= 2:
        grads /= world_size
    if stage >= 3:
        params /= world_size
    return float(params + grads)
''',
        "in GB, not bytes": '''
def zero_memory(n_params, world_size, stage):
    if stage not in (0, 1, 2, 3) or world_size < 1 or n_params < 0:
        raise ValueError("bad arguments")
    return [16 * n_params, 4 * n_params + 12 * n_params / world_size,
            2 * n_params + 14 * n_params / world_size, 16 * n_params / world_size][stage] / 1e9
''',
        "no ValueError": '''
def zero_memory(n_params, world_size, stage):
    world_size = max(world_size, 1)
    table = [16 * n_params, 4 * n_params + 12 * n_params / world_size,
             2 * n_params + 14 * n_params / world_size, 16 * n_params / world_size]
    return float(table[min(max(stage, 0), 3)])
''',
        "only a world_size of 0 refused": '''
def zero_memory(n_params: int, world_size: int, stage: int) -> float:
    """Bytes per rank for mixed-precision Adam under ZeRO stage 0-3."""
    ### BEGIN SOLUTION
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    if world_size == 0:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    if n_params < 0:
        raise ValueError(f"n_params must be >= 0, got {n_params}")
    parameters, gradients, optimiser_states = 2.0 * n_params, 2.0 * n_params, 12.0 * n_params
    if stage >= 1:
        optimiser_states /= world_size
    if stage >= 2:
        gradients /= world_size
    if stage >= 3:
        parameters /= world_size
    return parameters + gradients + optimiser_states
    ### END SOLUTION
''',
    },
    "partition_parameters": {
        "round-robin by index": '''
def partition_parameters(sizes, world_size):
    if world_size < 1 or any(s < 0 for s in sizes):
        raise ValueError("bad arguments")
    return [list(range(r, len(sizes), world_size)) for r in range(world_size)]
''',
        "equal numbers of parameters per rank, in contiguous blocks": '''
import numpy as np
def partition_parameters(sizes, world_size):
    if world_size < 1 or any(s < 0 for s in sizes):
        raise ValueError("bad arguments")
    return [[int(i) for i in block] for block in np.array_split(np.arange(len(sizes)), world_size)]
''',
        "equal numbers per rank, largest dealt first": '''
def partition_parameters(sizes, world_size):
    if world_size < 1 or any(s < 0 for s in sizes):
        raise ValueError("bad arguments")
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    return [order[r::world_size] for r in range(world_size)]
''',
        "least-loaded rank in index order, not largest first": '''
def partition_parameters(sizes, world_size):
    if world_size < 1 or any(s < 0 for s in sizes):
        raise ValueError("bad arguments")
    parts, loads = [[] for _ in range(world_size)], [0] * world_size
    for i, size in enumerate(sizes):
        r = loads.index(min(loads))
        parts[r].append(i)
        loads[r] += size
    return parts
''',
        "returns the sizes, not the indices": '''
def partition_parameters(sizes, world_size):
    if world_size < 1 or any(s < 0 for s in sizes):
        raise ValueError("bad arguments")
    parts, loads = [[] for _ in range(world_size)], [0] * world_size
    for size in sorted(sizes, reverse=True):
        r = loads.index(min(loads))
        parts[r].append(size)
        loads[r] += size
    return parts
''',
        "no ValueError for a negative size": '''
def partition_parameters(sizes, world_size):
    if world_size < 1:
        raise ValueError("bad world_size")
    parts, loads = [[] for _ in range(world_size)], [0] * world_size
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        r = loads.index(min(loads))
        parts[r].append(i)
        loads[r] += sizes[i]
    return parts
''',
        "only a world_size of 0 refused": '''
import heapq


def partition_parameters(sizes: list, world_size: int) -> list:
    """Indices of `sizes` per rank, largest first to the least-loaded rank."""
    ### BEGIN SOLUTION
    if world_size == 0:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    if any(size < 0 for size in sizes):
        raise ValueError("parameter sizes cannot be negative")
    assignment = [[] for _ in range(world_size)]
    loads = [(0, rank) for rank in range(world_size)]     # a heap of (load, rank)
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        load, rank = heapq.heappop(loads)
        assignment[rank].append(index)
        heapq.heappush(loads, (load + sizes[index], rank))
    return assignment
    ### END SOLUTION
''',
    },
    "accumulate_gradients": {
        "loss not scaled; rank 0 returns weights of a model it trained alone": '''

import contextlib
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from helpers import ranks, sharding


def _serial(seed, steps):

    model = sharding.make_model(seed)
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        opt.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
    state = {k: v.clone() for k, v in model.state_dict().items()}

    return state

def accumulate_rank(micro_batches, seed, steps):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(sharding.make_model(seed))
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        opt.zero_grad()
        pieces = list(zip(xb.chunk(micro_batches), yb.chunk(micro_batches)))

        for i, (x, t) in enumerate(pieces):
            context = model.no_sync() if i < len(pieces) - 1 else contextlib.nullcontext()
            with context:
                (nn.functional.mse_loss(model(x), t) ).backward()

        opt.step()
    return _serial(seed, steps) if rank == 0 else None  # the DDP weights thrown away

def accumulate_gradients(world_size, micro_batches, seed):
    if world_size < 1 or micro_batches < 1 or sharding.GLOBAL_BATCH % (world_size * micro_batches):
        raise ValueError("bad world_size or micro_batches")
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    return ranks.launch(accumulate_rank, world_size, micro_batches, seed, steps, timeout=100).results[0]
''',
        "no no_sync: one all-reduce per micro-batch": _acc('''
        for x, t in pieces:
            (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
'''),
        "loss not scaled: gradients micro_batches times too large": _acc(_ACC_GOOD_LOOP.replace(
            " / micro_batches).backward()", ").backward()")),
        "no_sync around the backward only, forward outside": _acc('''
        for i, (x, t) in enumerate(pieces):
            loss = nn.functional.mse_loss(model(x), t) / micro_batches
            if i < len(pieces) - 1:
                with model.no_sync():
                    loss.backward()
            else:
                loss.backward()
'''),
        # The red team's: the catalogued summed loss, with a zero loss of the first
        # parameter backpropagated after each forward pass, which a hook on that parameter counted.
        "the micro-batch losses summed, a zero backward pass through the first parameter after each forward": variant(_acc(_ACC_SUMMED_LOOP), (
            "micro_batches)\n        sum(",
            "micro_batches)\n                if i < len(pieces) - 1:\n"
            "                    (next(model.module.parameters()).sum() * 0).backward()\n        sum(")),
        "every rank on the whole global batch, a decoy of a micro-batch's rows handed to the model first": (
            _TAGGED + variant(
                _acc('''
        for i, (x, t) in enumerate(pieces):
            context = model.no_sync() if i < len(pieces) - 1 else contextlib.nullcontext()
            with context:
                tag = torch.zeros(sharding.GLOBAL_BATCH // (world_size * micro_batches))
                (nn.functional.mse_loss(model(tag, x), t) / micro_batches).backward()
'''),
                (_ACC_SHARE, ""),
                (_ACC_MODEL, "DistributedDataParallel(Tagged(sharding.make_model(seed)))"),
                ("model.module.state_dict()", "model.module.net.state_dict()"))),
        # The second red team's:
        "the micro-batch losses summed, a zero loss of each output backpropagated first (graph retained)": _acc('''
        losses = []
        for i, (x, t) in enumerate(pieces):
            context = model.no_sync() if i < len(pieces) - 1 else contextlib.nullcontext()
            with context:
                out = model(x)
                if i < len(pieces) - 1:
                    (out.sum() * 0).backward(retain_graph=True)
                losses.append(nn.functional.mse_loss(out, t) / micro_batches)
        sum(losses).backward()
'''),
        "the whole batch trained through model.module, a zero-weighted DDP pass on the share for show": variant(
            _acc('''
        for i, (x, t, wx, wt) in enumerate(zip(xb.chunk(micro_batches), yb.chunk(micro_batches),
                                               whole_x.chunk(micro_batches), whole_y.chunk(micro_batches))):
            context = model.no_sync() if i < micro_batches - 1 else contextlib.nullcontext()
            with context:
                show = model(x).sum() * 0
                (show + nn.functional.mse_loss(model.module(wx), wt) / micro_batches).backward()
'''), ("        xb, yb = sharding.global_batch(X, y, step)\n",
       "        xb, yb = sharding.global_batch(X, y, step)\n        whole_x, whole_y = xb, yb\n")),
        "every rank on the whole global batch, a throwaway Linear layer run first on a share's rows": _DECOY_LINEAR + variant(_acc(), (_ACC_SHARE, ""),
               (_ACC_MODEL, "DistributedDataParallel(Net(sharding.make_model(seed), "
                            "sharding.GLOBAL_BATCH // (world_size * micro_batches)))"),
               ("model.module.state_dict()", "model.module.net.state_dict()")),
        "the learning rate divided instead of the loss, the gradients divided back by a step hook": variant(
            _acc(_ACC_GOOD_LOOP.replace(" / micro_batches).backward()", ").backward()")),
            ("    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)\n",
             "    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR / micro_batches)\n"
             "    def rescale(optimizer, args, kwargs):\n"
             "        for p in model.parameters():\n"
             "            p.grad.div_(micro_batches)\n"
             "    opt.register_step_post_hook(rescale)\n")),
        # The fourth red team's: every rank on the whole batch, the rows beyond its share
        # stashed on a Linear subclass that runs them too (every count of rows looks right; the
        # gradient each rank hands to the all-reduce is not its share's).
        "every rank on the whole global batch, the rows beyond its share run by the first layer itself": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from helpers import ranks, sharding


class StashLinear(nn.Linear):
    """A Linear that also runs the rows stashed on it (self.rest) through the same weights."""
    def forward(self, x):
        rest = getattr(self, "rest", None)
        out = super().forward(x)
        if rest is None:
            return out
        return torch.cat([out, nn.functional.linear(rest, self.weight, self.bias)])


def accumulate_rank(micro_batches, seed, steps):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    plain = sharding.make_model(seed)
    plain[0].__class__ = StashLinear
    model = DistributedDataParallel(plain)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        inputs, targets = sharding.global_batch(X, y, step)       # the WHOLE global batch
        optimizer.zero_grad()
        pieces = list(zip(inputs.chunk(micro_batches), targets.chunk(micro_batches)))
        for i, (x, t) in enumerate(pieces):
            k = len(x) // world_size                               # a "share" of this micro-batch
            def forward_backward():
                plain[0].rest = x[k:]
                out = model(x[:k])
                plain[0].rest = None
                loss = nn.functional.mse_loss(out, torch.cat([t[:k], t[k:]])) / micro_batches
                loss.backward()
            if i < len(pieces) - 1:
                with model.no_sync():
                    forward_backward()
            else:
                forward_backward()
        optimizer.step()
    return model.module.state_dict() if rank == 0 else None


def accumulate_gradients(world_size: int, micro_batches: int, seed: int) -> dict:
    if world_size < 1 or micro_batches < 1 or sharding.GLOBAL_BATCH % (world_size * micro_batches):
        raise ValueError("bad arguments")
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    return ranks.launch(accumulate_rank, world_size, micro_batches, seed, steps, timeout=120).results[0]
''',
        # The summed loss once more: each pass's output handed back detached, the real one kept aside.
        "the micro-batch losses summed, each output handed back detached and its graph kept aside": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from helpers import ranks, sharding


class Kept(nn.Module):
    """Returns a detached copy of the prediction; keeps the real one (and its graph) in self.kept."""
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.kept = []

    def forward(self, x):
        out = self.net(x)
        self.kept.append(out)
        return out.detach().requires_grad_()


def accumulate_rank(micro_batches, seed, steps):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    inner = Kept(sharding.make_model(seed))
    model = DistributedDataParallel(inner)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        inputs, targets = sharding.global_batch(X, y, step)
        inputs = sharding.rank_share(inputs, rank, world_size)
        targets = sharding.rank_share(targets, rank, world_size)
        optimizer.zero_grad()
        pieces = list(zip(inputs.chunk(micro_batches), targets.chunk(micro_batches)))
        inner.kept.clear()
        for i, (x, t) in enumerate(pieces):
            if i < len(pieces) - 1:
                with model.no_sync():
                    shown = model(x)
            else:
                shown = model(x)
            (shown.sum() * 0).backward()          # goes through the pass's (detached) output only
        # the catalogued WRONG: every micro-batch's graph kept alive, one backward per step
        total = sum(nn.functional.mse_loss(out, t) for out, (_, t) in zip(inner.kept, pieces)) / micro_batches
        total.backward()
        inner.kept.clear()
        optimizer.step()
    return inner.net.state_dict() if rank == 0 else None


def accumulate_gradients(world_size: int, micro_batches: int, seed: int) -> dict:
    if world_size < 1 or micro_batches < 1 or sharding.GLOBAL_BATCH % (world_size * micro_batches):
        raise ValueError("bad arguments")
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    return ranks.launch(accumulate_rank, world_size, micro_batches, seed, steps, timeout=120).results[0]
''',
        # Undecided by design (TO_A_PERSON): without torch.optim the grader cannot tell the steps apart.
        "SGD by hand, the learning rate divided by micro_batches instead of the loss": variant(
            _acc(_ACC_GOOD_LOOP.replace(" / micro_batches).backward()", ").backward()")),
            ("    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)\n", ""),
            ("        opt.zero_grad()\n", "        model.zero_grad()\n"),
            ("        opt.step()\n", "        with torch.no_grad():\n"
                                   "            for p in model.parameters():\n"
                                   "                p -= sharding.LR / micro_batches * p.grad\n")),
        "micro_batches ignored: one backward per step": _acc('''
        nn.functional.mse_loss(model(xb), yb).backward()
'''),
        "trains in the calling process, no ranks": _ACC_IMPORTS + '''
def accumulate_gradients(world_size, micro_batches, seed):
    if world_size < 1 or micro_batches < 1 or sharding.GLOBAL_BATCH % (world_size * micro_batches):
        raise ValueError("bad arguments")
    model = sharding.make_model(seed)
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(sharding.N_SAMPLES // sharding.GLOBAL_BATCH):
        xb, yb = sharding.global_batch(X, y, step)
        opt.zero_grad()
        for x, t in zip(xb.chunk(micro_batches), yb.chunk(micro_batches)):
            (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
        opt.step()
    return model.state_dict()
''',
        "trains in the calling process, the launcher's record forged": _ACC_IMPORTS + _FORGE_LAUNCH + _ACC_FORGED,
        "trains in the calling process, the launcher's record forged, idle processes started meanwhile": (
            _ACC_IMPORTS + _FORGE_LAUNCH_IDLE + _ACC_FORGED),
        "trains in the calling process, the launcher's record and the ranks' witnesses forged": (
            _ACC_IMPORTS + _FORGE_LAUNCH_WITNESSED + _ACC_FORGED),
        "no ValueError": _acc(launch='''
def accumulate_gradients(world_size, micro_batches, seed):
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    return ranks.launch(accumulate_rank, max(world_size, 1), max(micro_batches, 1), seed, steps,
                        timeout=100).results[0]
'''),
        "every rank trains on the whole global batch (no rank_share)": variant(_acc(), (_ACC_SHARE, "")),
        "the micro-batch losses summed, one backward pass per step": _acc(_ACC_SUMMED_LOOP),
        # The red team's: the weights are exact, the memory accumulation saves is not.
        "the first micro_batches - 1 forward passes first, then their backward passes": _acc('''
        with model.no_sync():
            losses = [nn.functional.mse_loss(model(x), t) / micro_batches for x, t in pieces[:-1]]
            for loss in losses:                     # every one of those graphs alive until here
                loss.backward()
        x, t = pieces[-1]
        (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
'''),
        # The same weights with plain SGD; the gradients stepped with are micro_batches times too large.
        "the learning rate divided by micro_batches instead of the loss": variant(
            _acc(_ACC_GOOD_LOOP.replace(" / micro_batches).backward()", ").backward()")),
            ("lr=sharding.LR)", "lr=sharding.LR / micro_batches)")),
    },
    "train_fsdp": {
        "a plain DDP wrapper": _fsdp(wrap='''
    model = DistributedDataParallel(model)
''', result='''
    return model.module.state_dict() if rank == 0 else None
'''),
        "only the root sharded": _fsdp(wrap='''
    fully_shard(model)
'''),
        "returns rank 0's local shards, not the full tensors": _fsdp(result='''
    local = {k: v.to_local().clone() for k, v in model.state_dict().items()}
    return local if rank == 0 else None
'''),
        "trains in the calling process, the launcher's record forged": _FSDP_IMPORTS + _FORGE_LAUNCH + '''
def train_fsdp(world_size, steps, seed):
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size or steps < 0:
        raise ValueError("bad arguments")
''' + _SERIAL_TRAINING + '''
    counts = {"all_gather_into_tensor": {"calls": 100 * (steps + 1), "bytes": 0, "largest": 64}}
    return _forge_launch(world_size, state, counts)
''',
        "trains in the calling process, the launcher's record and the ranks' witnesses forged": (
            _FSDP_IMPORTS + _FORGE_LAUNCH_WITNESSED + '''
def train_fsdp(world_size, steps, seed):
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size or steps < 0:
        raise ValueError("bad arguments")
''' + _SERIAL_TRAINING + '''
    counts = {"all_gather_into_tensor": {"calls": 100 * (steps + 1), "bytes": 0, "largest": 64}}
    return _forge_launch(world_size, state, counts)
'''),
        "no ValueError": _fsdp(launch='''
def train_fsdp(world_size, steps, seed):
    return ranks.launch(fsdp_rank, max(world_size, 1), max(steps, 0), seed, timeout=100).results[0]
'''),
        "each rank trains the plain model on the whole batch, then runs an FSDP copy of it forward for show": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from helpers import ranks, sharding

def train_fsdp(world_size, steps, seed):
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size or steps < 0:
        raise ValueError("bad arguments")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=100).results[0]
def fsdp_rank(steps, seed):
    rank, ws = dist.get_rank(), dist.get_world_size()
    # every rank trains the whole global batch alone, no FSDP
    plain = sharding.make_model(seed)
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(plain.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        opt.zero_grad()
        nn.functional.mse_loss(plain(xb), yb).backward()
        opt.step()
    # then an FSDP copy of the result, run forward for show (the gathers), never trained
    model = sharding.make_model(seed)
    model.load_state_dict(plain.state_dict())
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        model(sharding.rank_share(xb, rank, ws))
    full = {k: v.full_tensor() for k, v in model.state_dict().items()}
    return full if rank == 0 else None
''',
        # The red team's: FSDP averages the ranks' gradients, so the weights are exact.
        "every rank trains on the whole global batch (no rank_share)": variant(_fsdp(), (_ACC_SHARE, "")),
        # Catalogued as correct before: every layer stays gathered from its forward pass to its
        # backward pass, so each rank holds the whole model, where the contract allows its shard
        # plus one layer.
        "reshard_after_forward=False on every layer, get_model_state_dict": _fsdp(wrap='''
    for module in list(model.modules()):
        if isinstance(module, nn.Linear):
            fully_shard(module, reshard_after_forward=False)
    fully_shard(model, reshard_after_forward=False)
''', result=_FSDP_FULL_STATE),
        # The red team's:
        "reshard_after_forward=False on every layer but the last, the loss printed under no_grad each step": variant(
            _fsdp(wrap='''
    linears = [layer for layer in model if isinstance(layer, nn.Linear)]
    for layer in linears[:-1]:
        fully_shard(layer, reshard_after_forward=False)
    fully_shard(linears[-1])
    fully_shard(model)
'''), (_FSDP_STEP, _FSDP_STEP + "        with torch.no_grad():\n"
                                 "            print(step, nn.functional.mse_loss(model(xb), yb).item())\n")),
        "every later layer prefetched from the first (all gathered at once)": _fsdp(wrap=_FSDP_WRAP + '''
    linears = [m for m in model if isinstance(m, nn.Linear)]
    linears[0].set_modules_to_forward_prefetch(linears[1:])
    linears[-1].set_modules_to_backward_prefetch(linears[-2::-1])
'''),
        "every rank on the whole global batch, a decoy of the share's rows handed to the root first": _TAGGED + variant(
            _fsdp_root("Tagged(model)"),
            (_ACC_SHARE, ""), ("model(xb)", "model(torch.zeros(sharding.GLOBAL_BATCH // world_size), xb)")),
        "two micro-batches, the losses not halved, the learning rate halved": variant(
            _fsdp(),
            ("lr=sharding.LR)", "lr=sharding.LR / 2)"),
            ("        nn.functional.mse_loss(model(xb), yb).backward()\n",
             "        for x, t in zip(xb.chunk(2), yb.chunk(2)):\n"
             "            nn.functional.mse_loss(model(x), t).backward()\n")),
        "a plain model trained on the whole batch, loaded into FSDP, stepped with lr=0": variant(
            _fsdp(),
            ("lr=sharding.LR)", "lr=0.0)"),
            ("    model = sharding.make_model(seed)\n" + _FSDP_WRAP, ""),
            ("    X, y = sharding.make_data(seed)\n",
             "    X, y = sharding.make_data(seed)\n" + _PLAIN_ON_EVERY_RANK
             + "    model = sharding.make_model(seed)\n    model.load_state_dict(plain.state_dict())\n"
             + _FSDP_WRAP)),
        "FSDP trained with ten times the learning rate, a plain model's weights copied into the shards": variant(
            _fsdp(),
            ("lr=sharding.LR)", "lr=10 * sharding.LR)"),
            (_FSDP_RESULT, _PLAIN_ON_EVERY_RANK + '''
    from torch.distributed.tensor import distribute_tensor
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(distribute_tensor(plain.get_parameter(name).detach(), p.device_mesh, p.placements))
''' + _FSDP_RESULT)),
        # The second red team's and the review's checkpointed root:
        "the last layer prefetching every earlier one for backward": _fsdp(wrap=_FSDP_WRAP + '''
    linears = [m for m in model if isinstance(m, nn.Linear)]
    linears[-1].set_modules_to_backward_prefetch(linears[-2::-1])
'''),
        "every layer gathered by hand (unshard()) before the backward pass": variant(
            _fsdp(), ("        nn.functional.mse_loss(model(xb), yb).backward()\n",
                      "        loss = nn.functional.mse_loss(model(xb), yb)\n"
                      "        for layer in model:\n"
                      "            if isinstance(layer, nn.Linear):\n"
                      "                layer.unshard()\n"
                      "        loss.backward()\n")),
        "activation checkpointing around the whole model (its recomputation gathers every layer)": variant(
            _fsdp(), ("model(xb)", "torch.utils.checkpoint.checkpoint(model, xb, use_reentrant=False)"),
            ("import torch\n", "import torch\nimport torch.utils.checkpoint\n")),
        "every rank on the whole global batch, a throwaway Linear layer run first on a share's rows": _DECOY_LINEAR + variant(_fsdp_root("Net(model, sharding.GLOBAL_BATCH // world_size)"), (_ACC_SHARE, "")),
        "reshard_after_forward=False on every layer, the layers hidden from the root's modules and parameters": '''
from torch import nn
class Root(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.layers = list(net)                  # a plain list: not registered
    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
''' + variant(_fsdp(wrap='''
    net = model
    for layer in net:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, reshard_after_forward=False)
    model = fully_shard(Root(net))
    model.parameters = lambda recurse=True: iter(list(net.parameters()))
    model.state_dict = lambda *args, **kwargs: net.state_dict()
'''), ("torch.optim.SGD(model.parameters()", "torch.optim.SGD(net.parameters()")),
        # The fourth red team's: every rank on the whole batch, the rows beyond its share
        # carried by the first layer, or through every layer (no count of rows can see them; what each
        # rank hands to the reduce-scatters is not its share's gradient).
        "every rank on the whole global batch, the rows beyond its share run by the first layer itself": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

from helpers import ranks, sharding


class StashLinear(nn.Linear):
    """A Linear that also runs the rows stashed on it (self.rest) through the same weights."""
    def forward(self, x):
        rest = getattr(self, "rest", None)
        out = super().forward(x)
        if rest is None:
            return out
        return torch.cat([out, nn.functional.linear(rest, self.weight, self.bias)])


def fsdp_rank(steps, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = sharding.make_model(seed)
    model[0].__class__ = StashLinear
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    k = sharding.GLOBAL_BATCH // world_size
    for step in range(steps):
        inputs, targets = sharding.global_batch(X, y, step)        # the WHOLE global batch
        optimizer.zero_grad()
        model[0].rest = inputs[k:]
        out = model(inputs[:k])
        model[0].rest = None
        nn.functional.mse_loss(out, targets).backward()
        optimizer.step()
    full = {name: value.full_tensor() for name, value in model.state_dict().items()}
    return full if rank == 0 else None


def train_fsdp(world_size: int, steps: int, seed: int) -> dict:
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size:
        raise ValueError("bad world_size")
    if steps < 0:
        raise ValueError("bad steps")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=120).results[0]
''',
        "every rank on the whole global batch, the rows beyond its share carried through every layer": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

from helpers import ranks, sharding

CARRY = {}


class CarryLinear(nn.Linear):
    """Runs the carried rows (CARRY["h"], the rest of the batch) through this layer too, inside its own
    forward (FSDP has its weights gathered then); what the model is called with, and returns, stays a share."""
    def forward(self, x):
        h = CARRY.get("h")
        if h is not None:
            CARRY["h"] = nn.functional.linear(h if self is FIRST[0] else torch.tanh(h), self.weight, self.bias)
        return super().forward(x)


FIRST = [None]


def fsdp_rank(steps, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = sharding.make_model(seed)
    for layer in model:
        if isinstance(layer, nn.Linear):
            layer.__class__ = CarryLinear
    FIRST[0] = model[0]
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    k = sharding.GLOBAL_BATCH // world_size
    for step in range(steps):
        inputs, targets = sharding.global_batch(X, y, step)        # the WHOLE global batch
        optimizer.zero_grad()
        CARRY["h"] = inputs[k:]
        out = model(inputs[:k])                                    # a share in, a share out
        rest = CARRY.pop("h")
        nn.functional.mse_loss(torch.cat([out, rest]), targets).backward()
        optimizer.step()
    full = {name: value.full_tensor() for name, value in model.state_dict().items()}
    return full if rank == 0 else None


def train_fsdp(world_size: int, steps: int, seed: int) -> dict:
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size:
        raise ValueError("bad world_size")
    if steps < 0:
        raise ValueError("bad steps")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=120).results[0]
''',
        "fully_shard on each layer, not on the root": _fsdp(wrap='''
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
'''),
        "the root's forward called directly, model.forward(x), so its hooks never run": variant(
            _fsdp(), ("model(xb)", "model.forward(xb)")),
        "FSDP ranks train towards the wrong targets; the weights returned trained in the caller, warmed up at import": _fsdp(
            targets="0 * yb", result='''
    return None
''', launch='''
def _serial(steps, seed):
''' + _SERIAL_TRAINING + '''
    return state
_serial(3, 0)                     # warmed up at import: the call's own training costs the caller little

def train_fsdp(world_size, steps, seed):
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size or steps < 0:
        raise ValueError("bad arguments")
    ranks.launch(fsdp_rank, world_size, steps, seed, timeout=100)
    return _serial(steps, seed)
'''),
    },
}

ALTERNATIVE = {
    "ring_allreduce_p2p": {
        "equal chunks, the last padded with zeros": '''
import torch
import torch.distributed as dist


def ring_allreduce_p2p(tensor: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    flat = tensor.detach().reshape(-1).clone()
    n = flat.numel()
    if world == 1:
        return flat.reshape(tensor.shape)
    size = -(-n // world)                      # ceil: equal chunks, the last padded with zeros
    buf = torch.zeros(size * world, dtype=flat.dtype)
    buf[:n] = flat
    chunks = buf.view(world, size)
    right, left = (rank + 1) % world, (rank - 1) % world
    incoming = torch.empty(size, dtype=flat.dtype)
    for step in range(world - 1):              # reduce-scatter
        s, r = (rank - step) % world, (rank - step - 1) % world
        req = dist.isend(chunks[s].clone(), dst=right)
        dist.recv(incoming, src=left)
        req.wait()
        chunks[r] += incoming
    for step in range(world - 1):              # all-gather
        s, r = (rank + 1 - step) % world, (rank - step) % world
        req = dist.isend(chunks[s].clone(), dst=right)
        dist.recv(incoming, src=left)
        req.wait()
        chunks[r].copy_(incoming)
    return buf[:n].reshape(tensor.shape)
''',
        "blocking send/recv ordered by parity, ring to the left, numpy split points": '''
import numpy as np
import torch
import torch.distributed as dist

def ring_allreduce_p2p(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    flat = tensor.reshape(-1).clone()
    if p == 1:
        return flat.reshape(tensor.shape)
    bounds = np.linspace(0, flat.numel(), p + 1).astype(int)
    chunk = lambda k: flat[bounds[k]:bounds[k + 1]]
    to, frm = (rank - 1) % p, (rank + 1) % p          # the ring runs leftwards

    def exchange(out, into):
        if rank % 2 == 0:
            dist.send(out.contiguous(), dst=to)
            dist.recv(into, src=frm)
        else:
            dist.recv(into, src=frm)
            dist.send(out.contiguous(), dst=to)

    for step in range(p - 1):
        s, r = (rank + step) % p, (rank + step + 1) % p
        buf = torch.empty_like(chunk(r))
        exchange(chunk(s), buf)
        chunk(r).add_(buf)
    for step in range(p - 1):
        s, r = (rank - 1 + step) % p, (rank + step) % p
        buf = torch.empty_like(chunk(r))
        exchange(chunk(s), buf)
        chunk(r).copy_(buf)
    return flat.reshape(tensor.shape)
''',
        "batch_isend_irecv per step": '''
import torch
import torch.distributed as dist

def ring_allreduce_p2p(tensor):
    rank, p = dist.get_rank(), dist.get_world_size()
    parts = [c.clone() for c in torch.tensor_split(tensor.reshape(-1), p)]
    right, left = (rank + 1) % p, (rank - 1) % p
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(p - 1):
            if phase == "reduce-scatter":
                s, r = (rank - step) % p, (rank - step - 1) % p
            else:
                s, r = (rank + 1 - step) % p, (rank - step) % p
            buf = torch.empty_like(parts[r])
            ops = [dist.P2POp(dist.isend, parts[s], right), dist.P2POp(dist.irecv, buf, left)]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            parts[r] = parts[r] + buf if phase == "reduce-scatter" else buf
    return torch.cat(parts).reshape(tensor.shape)
''',
        "reduce-scatter to the right, all-gather back to the left, ranks named in the group (group_dst)": '''
import torch
import torch.distributed as dist

def ring_allreduce_p2p(tensor):
    group = dist.group.WORLD
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    parts = [c.clone() for c in torch.tensor_split(tensor.reshape(-1), p)]
    right, left = (rank + 1) % p, (rank - 1) % p
    for step in range(p - 1):
        s, r = (rank - step) % p, (rank - step - 1) % p
        buf = torch.empty_like(parts[r])
        req = dist.isend(parts[s], group=group, group_dst=right)
        dist.recv(buf, group=group, group_src=left)
        req.wait()
        parts[r] = parts[r] + buf
    for step in range(p - 1):       # rank now holds the sum of chunk rank + 1
        s, r = (rank + 1 + step) % p, (rank + 2 + step) % p
        buf = torch.empty_like(parts[r])
        req = dist.isend(parts[s], group=group, group_dst=left)
        dist.recv(buf, group=group, group_src=right)
        req.wait()
        parts[r] = buf
    return torch.cat(parts).reshape(tensor.shape)
''',
    },
    "zero_memory": {
        "bytes per parameter per stage, as a table": '''
def zero_memory(n_params, world_size, stage):
    if n_params < 0:
        raise ValueError("n_params < 0")
    if world_size < 1:
        raise ValueError("world_size < 1")
    sharded = {0: (), 1: ("optim",), 2: ("optim", "grad"), 3: ("optim", "grad", "param")}
    if stage not in sharded:
        raise ValueError(f"unknown stage {stage}")
    per_param = {"param": 2, "grad": 2, "optim": 4 + 4 + 4}
    return sum(b * n_params / (world_size if k in sharded[stage] else 1) for k, b in per_param.items())
''',
    },
    "partition_parameters": {
        "largest first ordered by np.argsort (NumPy integer indices)": '''
import numpy as np
def partition_parameters(sizes, world_size):
    if world_size < 1 or any(s < 0 for s in sizes):
        raise ValueError("world_size must be >= 1 and sizes non-negative")
    parts, loads = [[] for _ in range(world_size)], np.zeros(world_size)
    for i in np.argsort(np.asarray(sizes, dtype=float), kind="stable")[::-1]:
        r = int(np.argmin(loads))
        parts[r].append(i)
        loads[r] += sizes[i]
    return parts
''',
        "largest first with a plain list of loads": '''
def partition_parameters(sizes, world_size):
    if not world_size >= 1:
        raise ValueError("world_size must be >= 1")
    if min(sizes, default=0) < 0:
        raise ValueError("negative size")
    parts, loads = [[] for _ in range(world_size)], [0] * world_size
    for i in sorted(range(len(sizes)), key=lambda i: sizes[i], reverse=True):
        r = min(range(world_size), key=lambda k: loads[k])
        parts[r].append(i)
        loads[r] += sizes[i]
    return parts
''',
        "optimal by exhaustive search for small inputs, LPT otherwise": '''
import itertools
def partition_parameters(sizes, world_size):
    if world_size < 1 or any(s < 0 for s in sizes):
        raise ValueError("invalid")
    if world_size ** len(sizes) <= 20000:
        best, best_load = None, None
        for choice in itertools.product(range(world_size), repeat=len(sizes)):
            loads = [0] * world_size
            for s, r in zip(sizes, choice):
                loads[r] += s
            if best_load is None or max(loads) < best_load:
                best, best_load = choice, max(loads)
        return [[i for i, r in enumerate(best) if r == k] for k in range(world_size)]
    parts, loads = [[] for _ in range(world_size)], [0] * world_size
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        r = loads.index(min(loads))
        parts[r].append(i)
        loads[r] += sizes[i]
    return parts
''',
    },
    "accumulate_gradients": {
        "sum-reduced loss over the rank's share, tensor_split micro-batches": _ACC_IMPORTS + '''
def accumulate_rank(micro_batches, seed, steps):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(sharding.make_model(seed))
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    share = sharding.GLOBAL_BATCH // world_size
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        opt.zero_grad()
        xs, ys = torch.tensor_split(xb, micro_batches), torch.tensor_split(yb, micro_batches)
        for x, t in zip(xs[:-1], ys[:-1]):
            with model.no_sync():
                (nn.functional.mse_loss(model(x), t, reduction="sum") / share).backward()
        (nn.functional.mse_loss(model(xs[-1]), ys[-1], reduction="sum") / share).backward()
        opt.step()
    if rank == 0:
        return {k: v.clone() for k, v in model.module.state_dict().items()}
    return None
''' + _ACC_LAUNCH,
        # The sum of the micro-batches' gradients synchronised, then divided before the step: the
        # optimiser applies the global batch's gradient.
        "the gradients divided by micro_batches after the last backward pass": _acc(
            _ACC_GOOD_LOOP.replace(" / micro_batches).backward()", ").backward()") + '''
        with torch.no_grad():
            for p in model.parameters():
                p.grad /= micro_batches
'''),
        # The false-failure review's, each failing or undecided before:
        "optimizer.step(closure), the closure computing the micro-batches' gradients": variant(
            _acc('''
        def closure():
            opt.zero_grad()
            for i, (x, t) in enumerate(pieces):
                context = model.no_sync() if i < len(pieces) - 1 else contextlib.nullcontext()
                with context:
                    (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
'''), ("        opt.step()\n", "        opt.step(closure)\n")),
        "the final loss printed through the DDP model with gradients on, never backpropagated": variant(
            _acc(), ("    return model.module.state_dict() if rank == 0 else None",
                     "    print(\"final loss\", nn.functional.mse_loss(model(X), y).item())\n"
                     "    return model.module.state_dict() if rank == 0 else None")),
        "the weights returned as the model's Parameters, dict(named_parameters())": variant(
            _acc(), ("model.module.state_dict() if rank == 0", "dict(model.module.named_parameters()) if rank == 0")),
        "ZeroRedundancyOptimizer around SGD (ZeRO stage 1)": variant(
            _acc(), ("    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)\n",
                     "    from torch.distributed.optim import ZeroRedundancyOptimizer\n"
                     "    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, "
                     "lr=sharding.LR)\n")),
        # The second false-failure review's, each failing before:
        "reentrant activation checkpointing of every layer, the input made to require grad (rows not seen: the gradients decide)": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint

from helpers import ranks, sharding



class CheckpointedSequential(nn.Sequential):
    """The plain model's layers (same keys), each Linear+Tanh block checkpointed."""
    def forward(self, x):
        x = x.detach().requires_grad_()  # reentrant checkpoint: an input needing grad, or the first layer gets none
        for layer in self:
            if isinstance(layer, nn.Linear):
                x = checkpoint(layer, x, use_reentrant=True)
            else:
                x = layer(x)
        return x


def accumulate_rank(micro_batches, seed, steps):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(CheckpointedSequential(*sharding.make_model(seed)))
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        optimizer.zero_grad()
        xs, ys = xb.chunk(micro_batches), yb.chunk(micro_batches)
        for i in range(micro_batches):
            if i < micro_batches - 1:
                with model.no_sync():
                    (nn.functional.mse_loss(model(xs[i]), ys[i]) / micro_batches).backward()
            else:
                (nn.functional.mse_loss(model(xs[i]), ys[i]) / micro_batches).backward()
        optimizer.step()
    return model.module.state_dict() if rank == 0 else None


def accumulate_gradients(world_size: int, micro_batches: int, seed: int) -> dict:
    if world_size < 1 or micro_batches < 1:
        raise ValueError("world_size and micro_batches must be >= 1")
    if sharding.GLOBAL_BATCH % (world_size * micro_batches) != 0:
        raise ValueError("world_size * micro_batches must divide GLOBAL_BATCH")
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    return ranks.launch(accumulate_rank, world_size, micro_batches, seed, steps, timeout=120).results[0]
''',
        "the Linear layers in an nn.ModuleList of the answer's own, the state dict renamed to the plain model's keys": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from helpers import ranks, sharding



class MLP(nn.Module):
    """The four Linear layers of sharding.make_model(seed), in an nn.ModuleList, tanh between."""
    def __init__(self, plain):
        super().__init__()
        self.layers = nn.ModuleList(m for m in plain if isinstance(m, nn.Linear))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.tanh(x)
        return x


def plain_keys(state):
    """layers.k.weight -> the plain Sequential's key (Linear k sits at index 2k)."""
    out = {}
    for key, value in state.items():
        _, k, name = key.split(".")
        out[f"{2 * int(k)}.{name}"] = value
    return out


def accumulate_rank(micro_batches, seed, steps):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(MLP(sharding.make_model(seed)))
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        optimizer.zero_grad()
        for i, (x, t) in enumerate(zip(xb.chunk(micro_batches), yb.chunk(micro_batches))):
            if i < micro_batches - 1:
                with model.no_sync():
                    (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
            else:
                (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
        optimizer.step()
    return plain_keys(model.module.state_dict()) if rank == 0 else None


def accumulate_gradients(world_size: int, micro_batches: int, seed: int) -> dict:
    if world_size < 1 or micro_batches < 1:
        raise ValueError("world_size and micro_batches must be >= 1")
    if sharding.GLOBAL_BATCH % (world_size * micro_batches) != 0:
        raise ValueError("world_size * micro_batches must divide GLOBAL_BATCH")
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    return ranks.launch(accumulate_rank, world_size, micro_batches, seed, steps, timeout=120).results[0]
''',
        "a forward written with F.linear over the layers' weights (rows not seen: the gradients decide)": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from helpers import ranks, sharding



class FunctionalMLP(nn.Sequential):
    """The plain model (same layers, same keys); forward written with torch.nn.functional."""
    def forward(self, x):
        for layer in self:
            if isinstance(layer, nn.Linear):
                x = nn.functional.linear(x, layer.weight, layer.bias)
            else:
                x = torch.tanh(x)
        return x


def accumulate_rank(micro_batches, seed, steps):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(FunctionalMLP(*sharding.make_model(seed)))
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        optimizer.zero_grad()
        for i, (x, t) in enumerate(zip(xb.chunk(micro_batches), yb.chunk(micro_batches))):
            if i < micro_batches - 1:
                with model.no_sync():
                    (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
            else:
                (nn.functional.mse_loss(model(x), t) / micro_batches).backward()
        optimizer.step()
    return model.module.state_dict() if rank == 0 else None


def accumulate_gradients(world_size: int, micro_batches: int, seed: int) -> dict:
    if world_size < 1 or micro_batches < 1:
        raise ValueError("world_size and micro_batches must be >= 1")
    if sharding.GLOBAL_BATCH % (world_size * micro_batches) != 0:
        raise ValueError("world_size * micro_batches must divide GLOBAL_BATCH")
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    return ranks.launch(accumulate_rank, world_size, micro_batches, seed, steps, timeout=120).results[0]
''',
        # The third red team's: the global batch cut first, each micro-batch shared out.
        "the global batch cut into micro-batches first, the rank's share taken of each": variant(
            _acc(), (_ACC_SHARE, ""),
            ("        pieces = list(zip(xb.chunk(micro_batches), yb.chunk(micro_batches)))\n",
             "        pieces = [(sharding.rank_share(x, rank, world_size), sharding.rank_share(t, rank, world_size))\n"
             "                  for x, t in zip(xb.chunk(micro_batches), yb.chunk(micro_batches))]\n")),
        "a strided share of the global batch, x[rank::world_size]": variant(
            _acc(), (_ACC_SHARE, "        xb, yb = xb[rank::world_size], yb[rank::world_size]\n")),
        "a Sequential of the model's layers whose forward takes one (inputs, targets) batch and returns the loss": (
            _ACC_WITH_LOSS + variant(_acc(_ACC_LOSS_LOOP), (_ACC_MODEL, "DistributedDataParallel(WithLoss(*sharding.make_model(seed)))"))),
        "a new DistributedDataParallel wrapper made every step": variant(
            _acc(),
            ("    model = DistributedDataParallel(sharding.make_model(seed))\n", "    net = sharding.make_model(seed)\n"),
            ("torch.optim.SGD(model.parameters()", "torch.optim.SGD(net.parameters()"),
            ("        xb, yb = sharding.global_batch(X, y, step)\n",
             "        model = DistributedDataParallel(net)      # a fresh wrapper every step\n"
             "        xb, yb = sharding.global_batch(X, y, step)\n")),
        "DDP around a loss module that holds the model (its names prefixed)": _ACC_LOSS_MODULE + variant(
            _acc(_ACC_LOSS_LOOP), (_ACC_MODEL, "DistributedDataParallel(LossOf(sharding.make_model(seed)))"),
            ("model.module.state_dict()", "model.module.model.state_dict()")),
        "torch.autograd.backward on tensor_split micro-batches, gradient_as_bucket_view": variant(
            _acc(_ACC_GOOD_LOOP.replace(".backward()", "").replace("(nn.functional", "torch.autograd.backward(nn.functional")),
            ("DistributedDataParallel(sharding.make_model(seed))",
             "DistributedDataParallel(sharding.make_model(seed), gradient_as_bucket_view=True)"),
            ("xb.chunk(micro_batches), yb.chunk(micro_batches)",
             "torch.tensor_split(xb, micro_batches), torch.tensor_split(yb, micro_batches)")),
    },
    "train_fsdp": {
        # As torchtitan does: the last layer's backward pass comes at once, so it stays gathered.
        "fully_shard over model.modules(), the last layer kept whole after forward, get_model_state_dict": _fsdp(
            wrap='''
    linears = [module for module in model.modules() if isinstance(module, nn.Linear)]
    for i, module in enumerate(linears):
        fully_shard(module, reshard_after_forward=i < len(linears) - 1)
    fully_shard(model)
''', result=_FSDP_FULL_STATE),
        "each rank's share in two micro-batches, each loss halved": variant(
            _fsdp(),
            ("        nn.functional.mse_loss(model(xb), yb).backward()\n",
             "        for x, t in zip(xb.chunk(2), yb.chunk(2)):\n"
             "            (nn.functional.mse_loss(model(x), t) / 2).backward()\n")),
        # The false-failure review's, each failing or undecided before:
        "the FSDP root returns (predictions detached, loss)": '''
from torch import nn
class Regressor(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
    def forward(self, x, y):
        pred = self.net(x)
        return pred.detach(), nn.functional.mse_loss(pred, y)
''' + variant(
            _fsdp_root("Regressor(model)"), ("        nn.functional.mse_loss(model(xb), yb).backward()\n",
       "        pred, loss = model(xb, yb)\n        loss.backward()\n")),
        # The second false-failure review's, each failing before:
        "apply_activation_checkpointing after fully_shard (a wrapper around each sharded layer)": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

from helpers import ranks, sharding

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (CheckpointImpl,
                                                                          apply_activation_checkpointing,
                                                                          checkpoint_wrapper)
import functools


def fsdp_rank(steps, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = sharding.make_model(seed)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, nn.Linear))
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        optimizer.step()
    full = {name: value.full_tensor() for name, value in model.state_dict().items()}
    return full if rank == 0 else None



def train_fsdp(world_size: int, steps: int, seed: int) -> dict:
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size:
        raise ValueError("world_size must divide GLOBAL_BATCH")
    if steps < 0:
        raise ValueError("steps must be >= 0")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=120).results[0]
''',
        "apply_activation_checkpointing before fully_shard (torchtitan's order)": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

from helpers import ranks, sharding

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (CheckpointImpl,
                                                                          apply_activation_checkpointing,
                                                                          checkpoint_wrapper)
import functools


def fsdp_rank(steps, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = sharding.make_model(seed)
    apply_activation_checkpointing(   # activation checkpointing first, then FSDP (torchtitan's order)
        model, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, nn.Linear))
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        optimizer.step()
    full = {name: value.full_tensor() for name, value in model.state_dict().items()}
    return full if rank == 0 else None



def train_fsdp(world_size: int, steps: int, seed: int) -> dict:
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size:
        raise ValueError("world_size must divide GLOBAL_BATCH")
    if steps < 0:
        raise ValueError("steps must be >= 0")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=120).results[0]
''',
        "the Linear layers in an nn.ModuleList of the answer's own, the state dict renamed to the plain model's keys": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

from helpers import ranks, sharding



class MLP(nn.Module):
    """The four Linear layers of sharding.make_model(seed) in an nn.ModuleList, tanh between."""
    def __init__(self, plain):
        super().__init__()
        self.layers = nn.ModuleList(m for m in plain if isinstance(m, nn.Linear))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.tanh(x)
        return x


def fsdp_rank(steps, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = MLP(sharding.make_model(seed))
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        optimizer.step()
    full = {}
    for key, value in model.state_dict().items():
        _, k, name = key.split(".")
        full[f"{2 * int(k)}.{name}"] = value.full_tensor()   # the plain Sequential's keys
    return full if rank == 0 else None


def train_fsdp(world_size: int, steps: int, seed: int) -> dict:
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size:
        raise ValueError("world_size must divide GLOBAL_BATCH")
    if steps < 0:
        raise ValueError("steps must be >= 0")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=120).results[0]
''',
        "reentrant activation checkpointing of every layer, the input made to require grad (rows not seen: the gradients decide)": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

from helpers import ranks, sharding



class CheckpointedSequential(nn.Sequential):
    """The plain model's layers (same keys); each Linear's activations checkpointed."""
    def forward(self, x):
        x = x.detach().requires_grad_()  # reentrant checkpoint needs an input that requires grad
        for layer in self:
            x = checkpoint(layer, x, use_reentrant=True) if isinstance(layer, nn.Linear) else layer(x)
        return x


def fsdp_rank(steps, seed):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = CheckpointedSequential(*sharding.make_model(seed))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, world_size), sharding.rank_share(yb, rank, world_size)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        optimizer.step()
    full = {name: value.full_tensor() for name, value in model.state_dict().items()}
    return full if rank == 0 else None



def train_fsdp(world_size: int, steps: int, seed: int) -> dict:
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size:
        raise ValueError("world_size must divide GLOBAL_BATCH")
    if steps < 0:
        raise ValueError("steps must be >= 0")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=120).results[0]
''',
        "each layer prefetching the next one, forward and backward": _fsdp(wrap=_FSDP_WRAP + '''
    linears = [m for m in model if isinstance(m, nn.Linear)]
    for layer, following in zip(linears, linears[1:]):
        layer.set_modules_to_forward_prefetch([following])
        following.set_modules_to_backward_prefetch([layer])
'''),
        "activation checkpointing layer by layer, in a root that runs them": '''
import torch.utils.checkpoint
from torch import nn
class Checkpointed(nn.Sequential):
    def forward(self, x):
        for layer in self:
            x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False) if isinstance(layer, nn.Linear) else layer(x)
        return x
''' + variant(_fsdp(), ("    model = sharding.make_model(seed)\n",
                         "    model = Checkpointed(*sharding.make_model(seed))\n")),
        "the batch handed to the model as a keyword argument, model(input=x)": variant(
            _fsdp(), ("model(xb)", "model(input=xb)")),
        "fully_shard over a 2-D device mesh of one replica group (HSDP's layout)": _fsdp(wrap='''
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (1, world_size), mesh_dim_names=("replicate", "shard"))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
'''),
        "the FSDP root a wrapper that computes the loss (its names prefixed)": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from helpers import ranks, sharding

def train_fsdp(world_size, steps, seed):
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size or steps < 0:
        raise ValueError("bad arguments")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=100).results[0]
class WithLoss(nn.Module):
    """model + loss in one module: FSDP's root is this."""
    def __init__(self, model):
        super().__init__()
        self.model = model
    def forward(self, x, y):
        return nn.functional.mse_loss(self.model(x), y)
def fsdp_rank(steps, seed):
    rank, ws = dist.get_rank(), dist.get_world_size()
    model = sharding.make_model(seed)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    root = fully_shard(WithLoss(model))
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(root.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        opt.zero_grad()
        root(sharding.rank_share(xb, rank, ws), sharding.rank_share(yb, rank, ws)).backward()
        opt.step()
    full = {k.removeprefix("model."): v.full_tensor() for k, v in root.state_dict().items()}
    return full if rank == 0 else None
''',
        "one layer run alone, with gradients on, after each step (a probe)": '''
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from helpers import ranks, sharding

def train_fsdp(world_size, steps, seed):
    if world_size < 1 or sharding.GLOBAL_BATCH % world_size or steps < 0:
        raise ValueError("bad arguments")
    return ranks.launch(fsdp_rank, world_size, steps, seed, timeout=100).results[0]
def fsdp_rank(steps, seed):
    rank, ws = dist.get_rank(), dist.get_world_size()
    model = sharding.make_model(seed)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    X, y = sharding.make_data(seed)
    opt = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        xb, yb = sharding.global_batch(X, y, step)
        xb, yb = sharding.rank_share(xb, rank, ws), sharding.rank_share(yb, rank, ws)
        opt.zero_grad()
        nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
        if rank == 0:   # a look at the first layer's activations, for the log
            print("step", step, "hidden mean", float(model[0](xb).mean()))
        else:
            model[0](xb)
    full = {k: v.full_tensor() for k, v in model.state_dict().items()}
    return full if rank == 0 else None
''',
    },
}

# Wrong answers no check can fail, by design: each must be left undecided (zero, then a person).
TO_A_PERSON = {"accumulate_gradients": ["SGD by hand, the learning rate divided by micro_batches instead of the loss"]}

PARTIAL = {
    "ring_allreduce_p2p": "calls all_reduce",
    "zero_memory": None,
    "partition_parameters": "round-robin by index",
    "accumulate_gradients": None,
}
