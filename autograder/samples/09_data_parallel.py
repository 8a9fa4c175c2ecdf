"""Wrong and alternative answers of 09_data_parallel (see autograder/samples/__init__.py)."""
from autograder.samples import WITNESS_HELPER, variant

_DDP_IMPORTS = '''
import os, shutil, tempfile, time
import torch
import torch.distributed as dist
import torch.multiprocessing
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler
import ddp_worker
'''

_LAUNCH = '''
def run_ddp(world_size, epochs, seed):
    if world_size < 1 or ddp_worker.GLOBAL_BATCH % world_size or epochs < 0:
        raise ValueError("world_size")
    out_dir = tempfile.mkdtemp()
    ctx = torch.multiprocessing.start_processes(
        ddp_worker.run_by_value,
        args=(ddp_worker.by_value(train_rank), world_size, PORT(), epochs, seed, out_dir),
        nprocs=world_size, join=False, start_method=ddp_worker.torch_start_method())
    deadline = time.monotonic() + 100
    try:
        while not ctx.join(timeout=0.2):
            if time.monotonic() > deadline:
                raise TimeoutError("workers hang")
        return torch.load(os.path.join(out_dir, "weights.pt"))
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
            p.join(5)
        shutil.rmtree(out_dir, ignore_errors=True)
'''


def _rank(body, init="dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=world_size)"):
    return f'''
def train_rank(rank, world_size, port, epochs, seed, out_dir):
    torch.set_num_threads(1)
    {init}
{body}
'''


_GOOD_BODY = '''    model = DistributedDataParallel(ddp_worker.make_model(seed))
    data = ddp_worker.make_dataset(seed)
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(data, batch_size=ddp_worker.GLOBAL_BATCH // world_size, sampler=sampler)
    opt = torch.optim.SGD(model.parameters(), lr=ddp_worker.LR)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xb), yb).backward()
            opt.step()
    if rank == 0:
        torch.save(model.module.state_dict(), os.path.join(out_dir, "weights.pt"))
'''


def _ddp(body=_GOOD_BODY, port="ddp_worker.free_port", **kw):
    return _DDP_IMPORTS + f"PORT = {port}\n" + _rank(body, **kw) + _LAUNCH


# Edits of _LAUNCH for the answers that do not wait in a loop with a deadline: the loop and the
# clean-up of what is left go (the launch itself then waits, with join=True).
_NO_WAIT_LOOP = ((
    """    deadline = time.monotonic() + 100
    try:
        while not ctx.join(timeout=0.2):
            if time.monotonic() > deadline:
                raise TimeoutError("workers hang")
        return""", """    try:
        return"""), (
    """        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
            p.join(5)
""", ""))


# A serial answer that writes the data set's read record as if processes of its own (`idle`)
# had read their shares: the catalogue's forged run_ddp answers start from it.
_TRAIN_HERE_FORGE_READS = '''
import multiprocessing, tempfile, time
from pathlib import Path
import torch
import ddp_worker

def _train_here_forge_reads(world_size, epochs, seed, idle):
    if world_size < 1 or ddp_worker.GLOBAL_BATCH % world_size or epochs < 0:
        raise ValueError("world_size")
    net = ddp_worker.make_model(seed)
    data = ddp_worker.make_dataset(seed)
    X, y = data.X, data.y
    opt = torch.optim.SGD(net.parameters(), lr=ddp_worker.LR)
    for epoch in range(epochs):
        order = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed + epoch))
        for batch in order.split(ddp_worker.GLOBAL_BATCH):
            opt.zero_grad(); torch.nn.functional.mse_loss(net(X[batch]), y[batch]).backward(); opt.step()
    trace = Path(tempfile.gettempdir()) / f"course-ddp-trace-{seed}"
    if trace.is_dir():
        for k, p in enumerate(idle[:world_size]):
            lines = [str(i) for i in range(k, len(X), world_size) for _ in range(epochs)]
            (trace / f"{p.pid}.txt").write_text("\\n".join(lines))
    return net.state_dict()
'''

# DDP by hand (an all-reduce of averaged gradients, results through a queue), as an alternative
# answer and, without its check of epochs, a wrong one.
_HAND_MADE_DDP = '''
import time
import torch
import torch.distributed as dist
import torch.multiprocessing as tmp
from torch.utils.data import DataLoader, DistributedSampler
import ddp_worker

def train_rank(rank, world_size, port, epochs, seed, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    model = ddp_worker.make_model(seed)
    data = ddp_worker.make_dataset(seed)
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, seed=seed)
    loader = DataLoader(data, batch_size=ddp_worker.GLOBAL_BATCH // world_size, sampler=sampler)
    opt = torch.optim.SGD(model.parameters(), lr=ddp_worker.LR)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xb), yb).backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world_size
            opt.step()
    if rank == 0:
        # plain arrays: a tensor sent through a queue is shared memory that dies with this process
        queue.put({k: v.numpy().copy() for k, v in model.state_dict().items()})

def run_ddp(world_size, epochs, seed):
    if world_size <= 0 or 24 % world_size != 0:
        raise ValueError("world_size must divide 24")
    ctx = tmp.get_context(ddp_worker.torch_start_method())
    queue = ctx.SimpleQueue()
    port = ddp_worker.free_port()
    payload = ddp_worker.by_value(train_rank)
    procs = [ctx.Process(target=ddp_worker.run_by_value,
                         args=(r, payload, world_size, port, epochs, seed, queue)) for r in range(world_size)]
    for p in procs:
        p.start()
    try:
        deadline = time.monotonic() + 100
        result = None
        while result is None:
            if not queue.empty():
                result = queue.get()
            elif time.monotonic() > deadline or any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError("the workers failed or hung")
            else:
                time.sleep(0.05)
        for p in procs:
            p.join(30)
        return {k: torch.from_numpy(v) for k, v in result.items()}
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)
'''

# A ring all-reduce simulated by hand, in the arrays' own dtype: for wrong answers that differ from
# it by a line or two.
_RING_BY_HAND = '''
import numpy as np


def ring_allreduce(chunks: list) -> tuple:
    """Simulated ring all-reduce: (each rank's final buffer, number of communication steps)."""
    if len(chunks) == 0:
        raise ValueError("ring_allreduce needs at least one rank's array")
    shape = np.shape(chunks[0])
    if any(np.shape(c) != shape for c in chunks):
        raise ValueError("every rank's array must have the same shape")
    p = len(chunks)
    buffers = [np.array(c, copy=True).reshape(-1) for c in chunks]
    bounds = np.cumsum([0] + [len(s) for s in np.array_split(np.arange(buffers[0].size), p)])
    segment = [slice(bounds[k], bounds[k + 1]) for k in range(p)]
    steps = 0
    # Reduce-scatter: at step t, rank r sends segment (r - t) % p to rank r + 1, which adds it.
    for t in range(p - 1):
        sent = [buffers[r][segment[(r - t) % p]].copy() for r in range(p)]
        for r in range(p):
            dst, k = (r + 1) % p, (r - t) % p
            buffers[dst][segment[k]] = buffers[dst][segment[k]] + sent[r]
        steps += 1
    # Now rank r holds the full sum of segment (r + 1) % p. All-gather: pass finished segments on.
    for t in range(p - 1):
        sent = [buffers[r][segment[(r + 1 - t) % p]].copy() for r in range(p)]
        for r in range(p):
            buffers[(r + 1) % p][segment[(r + 1 - t) % p]] = sent[r]
        steps += 1
    return [b.reshape(shape) for b in buffers], steps
'''

# Training in the calling process alone, warmed up at import (so that its CPU is not the call's):
# the weights two wrong answers return beside ranks that do not give them.
_SERIAL_IN_CALLER = '''
def _serial(epochs, seed):
    net = ddp_worker.make_model(seed)
    data = ddp_worker.make_dataset(seed)
    X, y = data.X, data.y
    opt = torch.optim.SGD(net.parameters(), lr=ddp_worker.LR)
    for epoch in range(epochs):
        order = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed + epoch))
        for batch in order.split(ddp_worker.GLOBAL_BATCH):
            opt.zero_grad(); torch.nn.functional.mse_loss(net(X[batch]), y[batch]).backward(); opt.step()
    return net.state_dict()

_serial(2, 0)  # warm-up at import time
'''

WRONG = {
    "sharded_gradient": {
        'float64 gradients for float32 parameters': '''
import torch


def sharded_gradient(model, loss_fn, X, y, n_shards):
    """Shard gradients summed in float64 (many shards: less rounding), weighted by shard size."""
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards out of range")
    params = list(model.parameters())
    acc = [torch.zeros(p.shape, dtype=torch.float64) for p in params]
    for xs, ys in zip(torch.tensor_split(X, n_shards), torch.tensor_split(y, n_shards)):
        grads = torch.autograd.grad(loss_fn(model(xs), ys), params)
        for a, g in zip(acc, grads):
            a += g.double() * (len(xs) / len(X))
    return acc
''',
        "sums the shard gradients": '''
import torch
def sharded_gradient(model, loss_fn, X, y, n_shards):
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards")
    model.zero_grad()
    for xs, ys in zip(torch.tensor_split(X, n_shards), torch.tensor_split(y, n_shards)):
        loss_fn(model(xs), ys).backward()          # gradients accumulate: a sum
    return [p.grad.clone() for p in model.parameters()]
''',
        "plain average, shards not weighted by size": '''
import torch
def sharded_gradient(model, loss_fn, X, y, n_shards):
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards")
    grads = []
    for xs, ys in zip(torch.tensor_split(X, n_shards), torch.tensor_split(y, n_shards)):
        model.zero_grad()
        loss_fn(model(xs), ys).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    return [sum(g[i] for g in grads) / n_shards for i in range(len(grads[0]))]
''',
        "full batch, no shards at all": '''
def sharded_gradient(model, loss_fn, X, y, n_shards):
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards")
    model.zero_grad()
    loss_fn(model(X), y).backward()
    return [p.grad.clone() for p in model.parameters()]
''',
        "torch.chunk, drops to fewer shards": '''
import torch
def sharded_gradient(model, loss_fn, X, y, n_shards):
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards")
    params = list(model.parameters())
    total = [torch.zeros_like(p) for p in params]
    for xs, ys in zip(X.chunk(n_shards), y.chunk(n_shards)):
        model.zero_grad()
        loss_fn(model(xs), ys).backward()
        for t, p in zip(total, params):
            t += len(xs) / len(X) * p.grad
    return total
''',
        "decoy shard passes under no_grad, the gradient from one full-batch model.forward (skips the model's hook)": '''
import torch
def sharded_gradient(model, loss_fn, X, y, n_shards):
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards out of range")
    with torch.no_grad():
        for xs in torch.tensor_split(X, n_shards):
            model(xs)          # decoy forward passes, results thrown away
    model.zero_grad()
    loss_fn(model.forward(X), y).backward()   # one full-batch pass; forward() skips the hooks
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad()
    return grads
''',
        "no ValueError": '''
import torch
def sharded_gradient(model, loss_fn, X, y, n_shards):
    n_shards = max(1, min(n_shards, len(X)))
    params = list(model.parameters())
    total = [torch.zeros_like(p) for p in params]
    for xs, ys in zip(torch.tensor_split(X, n_shards), torch.tensor_split(y, n_shards)):
        model.zero_grad()
        loss_fn(model(xs), ys).backward()
        for t, p in zip(total, params):
            t += len(xs) / len(X) * p.grad
    return total
''',
        "one sample per shard refused (>= for >)": '''
import torch


def sharded_gradient(model, loss_fn, X, y, n_shards: int) -> list:
    """Full-batch gradient, shard by shard; refuses n_shards == len(X) (off by one)."""
    if n_shards < 1 or n_shards >= len(X):
        raise ValueError(f"n_shards must be between 1 and the batch size {len(X)}, got {n_shards}")
    params = list(model.parameters())
    total = [torch.zeros_like(p) for p in params]
    for X_shard, y_shard in zip(torch.tensor_split(X, n_shards), torch.tensor_split(y, n_shards)):
        model.zero_grad()
        loss_fn(model(X_shard), y_shard).backward()
        weight = len(X_shard) / len(X)
        for acc, p in zip(total, params):
            acc += weight * p.grad
    model.zero_grad()
    return total
''',
        "shards of n // k with the whole remainder in the last": '''
import torch


def sharded_gradient(model, loss_fn, X, y, n_shards):
    """WRONG: shards of len(X) // n_shards, the last one takes the whole remainder (sizes can differ by > 1)."""
    n = len(X)
    if not 1 <= n_shards <= n:
        raise ValueError("n_shards")
    size = n // n_shards
    params = list(model.parameters())
    total = [torch.zeros_like(p) for p in params]
    for k in range(n_shards):
        stop = n if k == n_shards - 1 else (k + 1) * size
        xs, ys = X[k * size:stop], y[k * size:stop]
        model.zero_grad()
        loss_fn(model(xs), ys).backward()
        for t, p in zip(total, params):
            t += len(xs) / n * p.grad
    return total
''',
        "the shards' gradients added to what the model's .grad already held": '''
import torch


def sharded_gradient(model, loss_fn, X, y, n_shards):
    """WRONG: accumulates scaled shard losses into p.grad without clearing it first: a gradient the
    model already holds (from an earlier backward) is added to the result."""
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards")
    for xs, ys in zip(torch.tensor_split(X, n_shards), torch.tensor_split(y, n_shards)):
        (loss_fn(model(xs), ys) * (len(xs) / len(X))).backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad()
    return grads
''',
    },
    "ring_allreduce": {
        "one sum copied to every rank": '''
import numpy as np
def ring_allreduce(chunks):
    if not chunks or any(np.shape(c) != np.shape(chunks[0]) for c in chunks):
        raise ValueError("chunks")
    total = np.sum(chunks, axis=0)
    return [total.copy() for _ in chunks], 2 * (len(chunks) - 1)
''',
        "gather to rank 0 then broadcast, p - 1 additions in rank order": '''
import numpy as np
def ring_allreduce(chunks):
    if not chunks or any(np.shape(c) != np.shape(chunks[0]) for c in chunks):
        raise ValueError("chunks")
    acc = np.array(chunks[0], copy=True)
    for c in chunks[1:]:
        acc = acc + c
    return [acc.copy() for _ in chunks], 2 * (len(chunks) - 1)
''',
        "counts only the reduce-scatter steps": '''
import numpy as np
def ring_allreduce(chunks):
    if not chunks or any(np.shape(c) != np.shape(chunks[0]) for c in chunks):
        raise ValueError("chunks")
    p, shape = len(chunks), np.shape(chunks[0])
    buf = [np.array(c, copy=True).reshape(-1) for c in chunks]
    idx = np.array_split(np.arange(buf[0].size), p)
    for t in range(p - 1):
        sent = [buf[r][idx[(r - t) % p]].copy() for r in range(p)]
        for r in range(p):
            buf[(r + 1) % p][idx[(r - t) % p]] += sent[r]
    for t in range(p - 1):
        sent = [buf[r][idx[(r + 1 - t) % p]].copy() for r in range(p)]
        for r in range(p):
            buf[(r + 1) % p][idx[(r + 1 - t) % p]] = sent[r]
    return [b.reshape(shape) for b in buf], p - 1
''',
        "modifies the inputs in place": '''
import numpy as np
def ring_allreduce(chunks):
    if not chunks or any(np.shape(c) != np.shape(chunks[0]) for c in chunks):
        raise ValueError("chunks")
    p, shape = len(chunks), np.shape(chunks[0])
    buf = [c.reshape(-1) for c in chunks]            # views: writes go into the inputs
    idx = np.array_split(np.arange(buf[0].size), p)
    for t in range(p - 1):
        sent = [buf[r][idx[(r - t) % p]].copy() for r in range(p)]
        for r in range(p):
            buf[(r + 1) % p][idx[(r - t) % p]] += sent[r]
    for t in range(p - 1):
        sent = [buf[r][idx[(r + 1 - t) % p]].copy() for r in range(p)]
        for r in range(p):
            buf[(r + 1) % p][idx[(r + 1 - t) % p]] = sent[r]
    return [b.reshape(shape).copy() for b in buf], 2 * (p - 1)
''',
        "stops after the reduce-scatter": '''
import numpy as np
def ring_allreduce(chunks):
    if not chunks or any(np.shape(c) != np.shape(chunks[0]) for c in chunks):
        raise ValueError("chunks")
    p, shape = len(chunks), np.shape(chunks[0])
    buf = [np.array(c, copy=True).reshape(-1) for c in chunks]
    idx = np.array_split(np.arange(buf[0].size), p)
    for t in range(p - 1):
        sent = [buf[r][idx[(r - t) % p]].copy() for r in range(p)]
        for r in range(p):
            buf[(r + 1) % p][idx[(r - t) % p]] += sent[r]
    return [b.reshape(shape) for b in buf], 2 * (p - 1)
''',
        "the buffers made float64 whatever the arrays' dtype": '''
import numpy as np
def ring_allreduce(chunks):
    # ignores "work in the arrays' own dtype": always float64 (int inputs come back float)
    if len(chunks) == 0: raise ValueError("empty")
    shape = np.shape(chunks[0])
    if any(np.shape(c) != shape for c in chunks): raise ValueError("shapes")
    p = len(chunks)
    buf = [np.array(c, dtype=np.float64).reshape(-1) for c in chunks]
    segs = np.array_split(np.arange(buf[0].size), p)
    steps = 0
    for t in range(p - 1):
        sent = [buf[r][segs[(r - t) % p]].copy() for r in range(p)]
        for r in range(p):
            buf[(r + 1) % p][segs[(r - t) % p]] += sent[r]
        steps += 1
    for t in range(p - 1):
        sent = [buf[r][segs[(r + 1 - t) % p]].copy() for r in range(p)]
        for r in range(p):
            buf[(r + 1) % p][segs[(r + 1 - t) % p]] = sent[r]
        steps += 1
    return [b.reshape(shape) for b in buf], steps
''',
        "summed in float64, cast back to the arrays' dtype": variant(
            _RING_BY_HAND, ("np.array(c, copy=True).reshape(-1)", "np.array(c, dtype=float).reshape(-1)"),
            ("    return [b.reshape(shape) for b in buffers], steps",
             "    dtype = np.asarray(chunks[0]).dtype\n    return [b.reshape(shape).astype(dtype) for b in buffers], steps")),
        "sizes compared, not shapes": variant(
            _RING_BY_HAND, ("if any(np.shape(c) != shape for c in chunks):",
                            "if any(np.size(c) != np.size(chunks[0]) for c in chunks):")),
    },
    "run_ddp": {
        "ranks only read their shares (no process group); the caller trains serially, warmed up at import": '''
import time
import torch
import torch.multiprocessing
from torch.utils.data import DistributedSampler
import ddp_worker

def read_rank(rank, world_size, epochs, seed):
    # "rank": reads its DistributedSampler share, trains nothing, no process group
    data = ddp_worker.make_dataset(seed)
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for i in sampler:
            data[i]


''' + _SERIAL_IN_CALLER + '''ddp_worker.by_value(read_rank); ddp_worker.torch_start_method()

def run_ddp(world_size, epochs, seed):
    if world_size < 1 or ddp_worker.GLOBAL_BATCH % world_size or epochs < 0:
        raise ValueError("world_size")
    ctx = torch.multiprocessing.start_processes(
        ddp_worker.run_by_value, args=(ddp_worker.by_value(read_rank), world_size, epochs, seed),
        nprocs=world_size, join=False, start_method=ddp_worker.torch_start_method())
    state = _serial(epochs, seed)
    while not ctx.join(timeout=0.2):
        pass
    return state
''',
        "every rank reads its share, then rank 0 alone trains serially on the global batches (no all-reduce)": '''
import os, shutil, tempfile
import torch
import torch.multiprocessing
from torch.utils.data import DistributedSampler
import ddp_worker

def rank_fn(rank, world_size, epochs, seed, out_dir):
    torch.set_num_threads(1)
    data = ddp_worker.make_dataset(seed)
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    for epoch in range(epochs):          # every "rank" reads its share (what the grader traces)...
        sampler.set_epoch(epoch)
        for i in sampler:
            data[i]
    if rank == 0:                        # ...but rank 0 alone trains serially on the global batch
        net = ddp_worker.make_model(seed)
        X, y = data.X, data.y
        opt = torch.optim.SGD(net.parameters(), lr=ddp_worker.LR)
        for epoch in range(epochs):
            order = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed + epoch))
            for batch in order.split(ddp_worker.GLOBAL_BATCH):
                opt.zero_grad(); torch.nn.functional.mse_loss(net(X[batch]), y[batch]).backward(); opt.step()
        torch.save(net.state_dict(), os.path.join(out_dir, "w.pt"))

def run_ddp(world_size, epochs, seed):
    if world_size < 1 or ddp_worker.GLOBAL_BATCH % world_size or epochs < 0:
        raise ValueError("world_size")
    out_dir = tempfile.mkdtemp()
    try:
        torch.multiprocessing.start_processes(
            ddp_worker.run_by_value, args=(ddp_worker.by_value(rank_fn), world_size, epochs, seed, out_dir),
            nprocs=world_size, join=True, start_method=ddp_worker.torch_start_method())
        return torch.load(os.path.join(out_dir, "w.pt"))
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
''',
        "trains in the calling process; the reads forged for processes started beforehand": _TRAIN_HERE_FORGE_READS + '''
_IDLE = [multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,), daemon=True) for _ in range(3)]
for _p in _IDLE:
    _p.start()

def run_ddp(world_size, epochs, seed):
    return _train_here_forge_reads(world_size, epochs, seed, _IDLE)
''',
        "trains in the calling process; the reads forged for idle processes started meanwhile": _TRAIN_HERE_FORGE_READS + '''
def run_ddp(world_size, epochs, seed):
    if world_size < 1 or ddp_worker.GLOBAL_BATCH % world_size or epochs < 0:
        raise ValueError("world_size")
    idle = [multiprocessing.get_context("fork").Process(target=time.sleep, args=(120,), daemon=True)
            for _ in range(world_size)]
    for p in idle:
        p.start()
    try:
        state = _train_here_forge_reads(world_size, epochs, seed, idle)
        time.sleep(0.1)  # long enough for the judge's /proc view of the tree to see them
        return state
    finally:
        for p in idle:
            p.kill()
''',
        # The same, with the witnesses forged too: each process started meanwhile starts a thread on
        # request and reports its kernel id, written into its forged trace; the puzzles the checks
        # left in the trace folder are solved here. What remains is their CPU, spent by the
        # calling process, which the judge reads.
        "trains in the calling process; the reads and witnesses forged by processes started meanwhile": WITNESS_HELPER + _TRAIN_HERE_FORGE_READS + '''
def run_ddp(world_size, epochs, seed):
    if world_size < 1 or ddp_worker.GLOBAL_BATCH % world_size or epochs < 0:
        raise ValueError("world_size")
    helpers = [_WitnessHelper() for _ in range(world_size)]
    try:
        state = _train_here_forge_reads(world_size, epochs, seed, [h.process for h in helpers])
        trace = Path(tempfile.gettempdir()) / f"course-ddp-trace-{seed}"
        if trace.is_dir():
            answers = []
            if (trace / "puzzles").exists():
                from helpers.workers import solve_puzzle
                for line in (trace / "puzzles").read_text().split("\\n"):
                    if line.strip():
                        i, base, modulus, squarings = (int(part) for part in line.split())
                        answers.append(f"answer {i} {solve_puzzle((base, modulus, squarings))}")
            for k, helper in enumerate(helpers):
                path = trace / f"{helper.pid}.txt"
                lines = [f"witness {helper.witness()}"] + (answers if k == 0 else []) + [path.read_text()]
                path.write_text("\\n".join(lines))
        time.sleep(0.1)  # long enough for the judge's /proc view of the tree to see them
        return state
    finally:
        for helper in helpers:
            helper.stop()
''',
        "trains in the calling process (no DDP)": '''
import torch
import ddp_worker
def run_ddp(world_size, epochs, seed):
    if world_size < 1 or ddp_worker.GLOBAL_BATCH % world_size or epochs < 0:
        raise ValueError("world_size")
    net = ddp_worker.make_model(seed)
    data = ddp_worker.make_dataset(seed)
    opt = torch.optim.SGD(net.parameters(), lr=ddp_worker.LR)
    for epoch in range(epochs):
        order = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed + epoch))
        for batch in order.split(ddp_worker.GLOBAL_BATCH):
            xb = torch.stack([data[i][0] for i in batch]); yb = torch.stack([data[i][1] for i in batch])
            opt.zero_grad(); torch.nn.functional.mse_loss(net(xb), yb).backward(); opt.step()
    return net.state_dict()
''',
        "no DistributedSampler: every rank reads all the data": _ddp(_GOOD_BODY.replace(
            "sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)",
            "sampler = torch.utils.data.RandomSampler(data, generator=torch.Generator().manual_seed(seed))\n"
            "    sampler.set_epoch = lambda e: sampler.generator.manual_seed(seed + e)").replace(
            "batch_size=ddp_worker.GLOBAL_BATCH // world_size", "batch_size=ddp_worker.GLOBAL_BATCH")),
        "never calls set_epoch": _ddp(_GOOD_BODY.replace("        sampler.set_epoch(epoch)\n", "")),
        "per-rank batch is the global batch": _ddp(_GOOD_BODY.replace(
            "batch_size=ddp_worker.GLOBAL_BATCH // world_size", "batch_size=ddp_worker.GLOBAL_BATCH")),
        "per-rank batch hard-coded for the notebook's two ranks (GLOBAL_BATCH // 2)": _ddp(_GOOD_BODY.replace(
            "batch_size=ddp_worker.GLOBAL_BATCH // world_size", "batch_size=ddp_worker.GLOBAL_BATCH // 2")),
        "sampler without shuffling": _ddp(_GOOD_BODY.replace("shuffle=True", "shuffle=False")),
        "returns DDP's state dict (module. keys)": _ddp(_GOOD_BODY.replace(
            "model.module.state_dict()", "model.state_dict()")),
        "summed gradients by hand, no averaging": _ddp(_GOOD_BODY.replace(
            "model = DistributedDataParallel(ddp_worker.make_model(seed))",
            "model = ddp_worker.make_model(seed)").replace(
            "            opt.step()",
            "            for p in model.parameters():\n"
            "                dist.all_reduce(p.grad)\n"
            "            opt.step()").replace("model.module.state_dict()", "model.state_dict()")),
        "fixed port 29500": _ddp(port="lambda: 29500"),
        "start_processes with join=True: no time limit on the wait": variant(
            _ddp(), ("join=False, start_method", "join=True, start_method"), *_NO_WAIT_LOOP),
        "mp.spawn as in the tutorials (join=True)": variant(
            _ddp(), ("    ctx = torch.multiprocessing.start_processes(", "    torch.multiprocessing.spawn("), (
                "nprocs=world_size, join=False, start_method=ddp_worker.torch_start_method())",
                "nprocs=world_size, join=True)"), *_NO_WAIT_LOOP),
        # The red team's: processes that only read their shares pass the reads, witnesses and
        # puzzles; no gradient is ever all-reduced between them.
        "no ValueError for epochs < 0 (DDP by hand, otherwise right)": _HAND_MADE_DDP,
        # The red team's: real ranks with real all-reduces (summed, not averaged), whose weights are
        # thrown away; the weights returned come from training in the caller, warmed up at import.
        "ranks train with summed gradients, their weights thrown away; the caller's serial training returned": (
            variant(_ddp(_GOOD_BODY.replace(
                "model = DistributedDataParallel(ddp_worker.make_model(seed))",
                "model = ddp_worker.make_model(seed)").replace(
                "            opt.step()",
                "            for p in model.parameters():\n"
                "                dist.all_reduce(p.grad)\n"
                "            opt.step()").replace("model.module.state_dict()", "model.state_dict()")),
                ("def run_ddp(world_size, epochs, seed):", "def _ranks_run_ddp(world_size, epochs, seed):")) + '''

''' + _SERIAL_IN_CALLER + '''
def run_ddp(world_size, epochs, seed):
    _ranks_run_ddp(world_size, epochs, seed)
    return _serial(epochs, seed)
'''),
        "the ranks forked from the caller (start_method='fork')": variant(
            _ddp(), ("start_method=ddp_worker.torch_start_method()", 'start_method="fork"')),
    },
}

ALTERNATIVE = {
    "sharded_gradient": {
        "each shard's gradient in a forked worker process, averaged by shard size": '''
import multiprocessing
import torch
_JOB = None
def _shard_grad(i):
    model, loss_fn, X, y, n_shards = _JOB
    xs, ys = torch.tensor_split(X, n_shards)[i], torch.tensor_split(y, n_shards)[i]
    params = list(model.parameters())
    grads = torch.autograd.grad(loss_fn(model(xs), ys), params)
    return len(xs), [g.detach().numpy().copy() for g in grads]
def sharded_gradient(model, loss_fn, X, y, n_shards):
    """each shard's gradient computed in its own worker process ("device"), then averaged by size"""
    global _JOB
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards out of range")
    _JOB = (model, loss_fn, X, y, n_shards)
    try:
        with multiprocessing.get_context("fork").Pool(n_shards) as pool:
            parts = pool.map(_shard_grad, range(n_shards))
    finally:
        _JOB = None
    n = len(X)
    return [sum(torch.from_numpy(g[k]) * (size / n) for size, g in parts) for k in range(len(parts[0][1]))]
''',
        "torch.func.grad per shard, shards from np.array_split": '''
import numpy as np
import torch
from torch.func import functional_call, grad
def sharded_gradient(model, loss_fn, X, y, n_shards):
    if n_shards < 1 or n_shards > len(X):
        raise ValueError(f"bad n_shards {n_shards}")
    params = dict(model.named_parameters())
    detached = {k: v.detach() for k, v in params.items()}
    def loss(p, xs, ys):
        return loss_fn(functional_call(model, p, (xs,)), ys)
    out = {k: torch.zeros_like(v) for k, v in detached.items()}
    for idx in np.array_split(np.arange(len(X)), n_shards):
        idx = torch.as_tensor(idx)
        g = grad(loss)(detached, X[idx], y[idx])
        for k in out:
            out[k] += g[k] * (len(idx) / len(X))
    return [out[k] for k in params]
''',
        "loss scaled by shard size, gradients accumulated": '''
import torch
def sharded_gradient(model, loss_fn, X, y, n_shards):
    if not 1 <= n_shards <= len(X):
        raise ValueError("n_shards out of range")
    model.zero_grad()
    for xs, ys in zip(torch.tensor_split(X, n_shards), torch.tensor_split(y, n_shards)):
        (loss_fn(model(xs), ys) * (len(xs) / len(X))).backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    model.zero_grad()
    return grads
''',
        "torch.autograd.grad per shard of tensor_split, a tuple of gradients": '''
import torch


def sharded_gradient(model, loss_fn, X, y, n_shards: int) -> list:
    """torch.autograd.grad per shard, shards by torch.split with divmod sizes, tuple returned."""
    n = X.shape[0]
    if not isinstance(n_shards, int) or n_shards < 1 or n_shards > n:
        raise ValueError(f"n_shards must be in [1, {n}]")
    base, extra = divmod(n, n_shards)
    sizes = [base + 1 if k < extra else base for k in range(n_shards)]
    params = [p for p in model.parameters()]
    result = None
    for xs, ys in zip(torch.split(X, sizes), torch.split(y, sizes)):
        grads = torch.autograd.grad(loss_fn(model(xs), ys), params)
        w = xs.shape[0] / n
        if result is None:
            result = [w * g for g in grads]
        else:
            result = [r + w * g for r, g in zip(result, grads)]
    return tuple(result)
''',
        "a replica per shard run by threads, combined by shard size": '''
import copy
from concurrent.futures import ThreadPoolExecutor

import torch


def sharded_gradient(model, loss_fn, X, y, n_shards):
    """One replica (deep copy) per shard, each in its own thread, like DataParallel; size-weighted mean."""
    if n_shards < 1 or n_shards > len(X):
        raise ValueError("n_shards out of range")
    shards = list(zip(torch.tensor_split(X, n_shards), torch.tensor_split(y, n_shards)))

    def replica_grad(shard):
        xs, ys = shard
        replica = copy.deepcopy(model)
        replica.zero_grad()
        loss_fn(replica(xs), ys).backward()
        return len(xs), [p.grad.detach().clone() for p in replica.parameters()]

    with ThreadPoolExecutor(max_workers=n_shards) as pool:
        parts = list(pool.map(replica_grad, shards))
    weights = torch.tensor([size / len(X) for size, _ in parts])
    out = []
    for i in range(len(parts[0][1])):
        stacked = torch.stack([g[i] for _, g in parts])
        out.append((weights.view(-1, *([1] * (stacked.dim() - 1))).to(stacked.dtype) * stacked).sum(0))
    return out
''',
    },
    "ring_allreduce": {
        "segments simulated in flat copies, in the arrays' own dtype": _RING_BY_HAND,
        "explicit send/recv mailboxes, ring direction to the right": '''
import numpy as np
def ring_allreduce(chunks):
    if len(chunks) == 0:
        raise ValueError("no ranks")
    shape = chunks[0].shape
    if any(c.shape != shape for c in chunks):
        raise ValueError("shapes differ")
    p = len(chunks)
    segs = [list(np.array_split(c.ravel().copy(), p)) for c in chunks]
    steps = 0
    for t in range(p - 1):
        mail = {}
        for r in range(p):
            k = (r - t) % p
            mail[(r + 1) % p] = (k, segs[r][k].copy())
        for dst, (k, data) in mail.items():
            segs[dst][k] = segs[dst][k] + data
        steps += 1
    for t in range(p - 1):
        mail = {}
        for r in range(p):
            k = (r + 1 - t) % p
            mail[(r + 1) % p] = (k, segs[r][k].copy())
        for dst, (k, data) in mail.items():
            segs[dst][k] = data
        steps += 1
    return [np.concatenate(s).reshape(shape) for s in segs], steps
''',
    },
    "run_ddp": {
        "start_processes, each rank's Process.join(time left), then what is left terminated": variant(_ddp(), (
            """    deadline = time.monotonic() + 100
    try:
        while not ctx.join(timeout=0.2):
            if time.monotonic() > deadline:
                raise TimeoutError("workers hang")
        return""", """    deadline = time.monotonic() + 100
    try:
        for p in ctx.processes:
            p.join(max(0.0, deadline - time.monotonic()))
        if any(p.exitcode != 0 for p in ctx.processes):
            raise RuntimeError(f"ranks ended with {[p.exitcode for p in ctx.processes]}")
        return"""), (
            """        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
            p.join(5)
""", """        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
                p.join()
""")),
        "hand-made all-reduce of averaged gradients, results through a queue": variant(_HAND_MADE_DDP, (
            'raise ValueError("world_size must divide 24")' + "\n",
            'raise ValueError("world_size must divide 24")' + "\n    if epochs < 0:\n        raise ValueError(\"epochs must be >= 0\")\n")),
        # From the twentieth review: failed until the ranks' count of all-reduces saw the function
        # under the module that defines it (torch.distributed.distributed_c10d) too.
        "hand-made all-reduce, all_reduce imported by name from torch.distributed": variant(_HAND_MADE_DDP, (
            'raise ValueError("world_size must divide 24")' + "\n",
            'raise ValueError("world_size must divide 24")' + "\n    if epochs < 0:\n        raise ValueError(\"epochs must be >= 0\")\n"), (
            "import torch.distributed as dist\n", "import torch.distributed as dist\nfrom torch.distributed import all_reduce\n"), (
            "dist.all_reduce(p.grad)", "all_reduce(p.grad)")),
        "spawned ranks with join=False, weights sent back through a queue as bytes": '''
import io
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

import ddp_worker


def train_rank(rank, world_size, port, epochs, seed, results):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    model = DistributedDataParallel(ddp_worker.make_model(seed), device_ids=None)
    data = ddp_worker.make_dataset(seed)
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(data, batch_size=ddp_worker.GLOBAL_BATCH // world_size, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=ddp_worker.LR)
    mse = torch.nn.MSELoss()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for inputs, targets in loader:
            optimizer.zero_grad()
            mse(model(inputs), targets).backward()
            optimizer.step()
    if rank == 0:
        buffer = io.BytesIO()
        torch.save(model.module.state_dict(), buffer)
        results.put(buffer.getvalue())        # plain bytes: nothing in shared memory


def run_ddp(world_size, epochs, seed):
    """mp.spawn(join=False); rank 0's weights come back as bytes through a queue."""
    if world_size < 1 or 24 % world_size:
        raise ValueError(f"world_size must divide 24, got {world_size}")
    if epochs < 0:
        raise ValueError("negative epochs")
    results = mp.get_context("spawn").SimpleQueue()
    context = mp.spawn(ddp_worker.run_by_value,
                       args=(ddp_worker.by_value(train_rank), world_size, ddp_worker.free_port(), epochs, seed,
                             results),
                       nprocs=world_size, join=False)
    deadline = time.time() + 160
    try:
        while not context.join(timeout=1):
            if time.time() > deadline:
                raise TimeoutError("DDP ranks hang")
        return torch.load(io.BytesIO(results.get()))
    finally:
        for process in context.processes:
            if process.is_alive():
                process.terminate()
            process.join(5)
''',
    },
}

PARTIAL = {
    "ring_allreduce": "one sum copied to every rank",
    "sharded_gradient": None,
}
