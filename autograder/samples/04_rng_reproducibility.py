"""Wrong and alternative answers of 04_rng_reproducibility (see autograder/samples/__init__.py)."""
from autograder.samples import variant

# The workers' context of the wrong seeded_loader answers whose fault is elsewhere: a forkserver
# that imported torch once, as the notebook teaches (without the preload each worker imports torch
# again, about 1.3 CPU-s each on a fast machine and over 3 on a slow one, 8 workers per answer).
_FORKSERVER_PRELOADED = '''
import multiprocessing
def _forkserver_preloaded():
    multiprocessing.set_forkserver_preload(["torch", "helpers.rng_data"])
    return dict(multiprocessing_context="forkserver")
'''

# The seeded_loader of the catalogue's one-process answers: their _OneProcessLoader (defined
# before it) reads every item in the calling process.
_ONE_PROCESS_LOADER = '''
def seeded_loader(dataset, batch_size, num_workers, seed):
    if num_workers < 0 or batch_size < 1:
        raise ValueError("bad arguments")
    loader = _OneProcessLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=0,
                               generator=torch.Generator().manual_seed(seed))
    loader.seed_ = seed
    return loader
'''

# A loader that reads every item in the calling process and writes worker ids 0, 1, 0, ... into
# the rows as they pass, while the processes _start_helpers(dataset) starts stand by: what the
# forged seeded_loader answers share.
_ROWS_REWRITTEN = '''
import itertools
import numpy as np
import torch
from torch.utils.data import DataLoader

class _OneProcessLoader(DataLoader):
    def __iter__(self):
        torch.manual_seed(self.seed_)
        self.dataset.rng = np.random.default_rng(self.seed_)
        stop = _start_helpers(self.dataset)
        turn = itertools.count()
        try:
            for batch in super().__iter__():
                batch = batch.clone()
                for row in batch:
                    row[1] = next(turn) % 2
                yield batch
        finally:
            stop()
''' + _ONE_PROCESS_LOADER

# forked_draws on the course's default context rather than the fork context the notebook asks for.
_FORKED_COURSE_CONTEXT = '''
from helpers.rng import legacy_draws
from helpers.workers import mp_context

def forked_draws(n_procs: int, size: int) -> list:
    if n_procs < 1:
        raise ValueError(f"n_procs must be at least 1, got {n_procs}")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    with mp_context().Pool(n_procs, maxtasksperchild=1) as pool:
        return pool.map(legacy_draws, [size] * n_procs, chunksize=1)
'''

_FORK_EXECUTOR_PER_CHILD = '''
import multiprocessing
import numpy as np
from helpers.rng import legacy_draws
def forked_draws(n_procs, size):
    if n_procs < 1:
        raise ValueError("n_procs must be >= 1")
    if size < 0:
        raise ValueError("size must be >= 0")
    ctx = multiprocessing.get_context("fork")
    from concurrent.futures import ProcessPoolExecutor
    out = []
    pools = [ProcessPoolExecutor(max_workers=1, mp_context=ctx) for _ in range(n_procs)]
    try:
        futures = [p.submit(legacy_draws, size) for p in pools]
        out = [f.result(timeout=30) for f in futures]
    finally:
        for p in pools:
            p.shutdown()
    return out
'''

_SPAWNED_GENERATORS_EXECUTOR = '''
import numpy as np
from concurrent.futures import ProcessPoolExecutor
from helpers.rng import uniform_draws
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError(f"invalid n_workers={n_workers} or size={size}")
    generators = np.random.default_rng(seed).spawn(n_workers)
    with ProcessPoolExecutor(n_workers, mp_context=mp_context()) as pool:
        return list(pool.map(uniform_draws, generators, [size] * n_workers))
'''

# Draws made in the caller while one idle process starts and ends beside them.
_CALLER_DRAWS_BESIDE_IDLE = '''
import time
import numpy as np
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad arguments")
    idle = mp_context().Process(target=time.sleep, args=(0,))
    idle.start()
    out = [np.random.default_rng(c).random(size) for c in np.random.SeedSequence(seed).spawn(n_workers)]
    idle.join()
    return out
'''

WRONG = {
    "forked_draws": {
        "the draws stacked into one array (np.stack: a 2-D array, not a list)": variant(
            _FORK_EXECUTOR_PER_CHILD, ("    return out\n", "    return np.stack(out)\n")),
        "spawned children": '''
import multiprocessing
from helpers.rng import legacy_draws
def forked_draws(n_procs, size):
    if n_procs < 1 or size < 0:
        raise ValueError("bad arguments")
    with multiprocessing.get_context("spawn").Pool(n_procs, maxtasksperchild=1) as pool:
        return pool.map(legacy_draws, [size] * n_procs, chunksize=1)
''',
        "drawn once in the parent and copied": '''
import numpy as np
def forked_draws(n_procs, size):
    if n_procs < 1 or size < 0:
        raise ValueError("bad arguments")
    values = np.random.random(size)
    return [values.copy() for _ in range(n_procs)]
''',
        "each child seeded with its index": '''
import multiprocessing
from helpers.rng import uniform_draws
def forked_draws(n_procs, size):
    if n_procs < 1 or size < 0:
        raise ValueError("bad arguments")
    with multiprocessing.get_context("fork").Pool(n_procs) as pool:
        return pool.starmap(uniform_draws, [(i, size) for i in range(n_procs)])
''',
        "drawn in the caller from a copy of the parent's state, beside idle forked children": '''
import multiprocessing
import time
import numpy as np
def forked_draws(n_procs, size):
    if n_procs < 1 or size < 0:
        raise ValueError("bad arguments")
    copy = np.random.RandomState()
    copy.set_state(np.random.get_state())    # the parent's state, without moving it
    values = copy.random_sample(size)
    idle = [multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,)) for _ in range(n_procs)]
    for p in idle:
        p.start()
    for p in idle:
        p.join()
    return [values.copy() for _ in range(n_procs)]
''',
        "one forked child draws, its array copied for the others, which draw nothing": '''
import multiprocessing
import time
from helpers.rng import legacy_draws
def forked_draws(n_procs, size):
    if n_procs < 1 or size < 0:
        raise ValueError("bad arguments")
    fork = multiprocessing.get_context("fork")
    with fork.Pool(1) as pool:                   # one child draws
        one = pool.apply(legacy_draws, (size,))
    idle = [fork.Process(target=time.sleep, args=(0,)) for _ in range(n_procs - 1)]
    for p in idle:
        p.start()
    for p in idle:
        p.join()
    return [one.copy() for _ in range(n_procs)]
''',
        "one reused worker continues its stream": '''
import multiprocessing
from helpers.rng import legacy_draws
def forked_draws(n_procs, size):
    if n_procs < 1 or size < 0:
        raise ValueError("bad arguments")
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.map(legacy_draws, [size] * n_procs)
''',
        "the course's mp_context() for the fork context asked for": _FORKED_COURSE_CONTEXT,
        "multiprocessing's default context for the fork context asked for": variant(
            _FORKED_COURSE_CONTEXT, ("from helpers.workers import mp_context\n", "import multiprocessing\n"),
            ("mp_context().Pool(", "multiprocessing.Pool(")),
        "a size of 0 refused": '''
import multiprocessing
from helpers.rng import legacy_draws

def forked_draws(n_procs, size):
    if n_procs < 1 or size < 1:            # size 0 refused
        raise ValueError("n_procs and size must be >= 1")
    fork = multiprocessing.get_context("fork")
    with fork.Pool(n_procs, maxtasksperchild=1) as pool:
        return pool.map(legacy_draws, [size] * n_procs, chunksize=1)
''',
    },
    "independent_draws": {
        "the draws stacked into one array (np.stack: a 2-D array, not a list)": variant(
            _SPAWNED_GENERATORS_EXECUTOR, ("return list(pool.map(", "return np.stack(pool.map(")),
        "same seed in every worker": '''
from helpers.rng import uniform_draws
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad arguments")
    with mp_context().Pool(n_workers) as pool:
        return pool.starmap(uniform_draws, [(seed, size)] * n_workers)
''',
        "seeded from the worker's PID": '''
from helpers.rng import pid_seeded_draws
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad arguments")
    with mp_context().Pool(n_workers) as pool:
        return pool.map(pid_seeded_draws, [size] * n_workers, chunksize=1)
''',
        "seeded from the clock": '''
import time
from helpers.rng import uniform_draws
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad arguments")
    with mp_context().Pool(n_workers) as pool:
        return pool.starmap(uniform_draws, [(time.time_ns() + i, size) for i in range(n_workers)])
''',
        "unseeded workers": '''
from helpers.rng import uniform_draws
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad arguments")
    with mp_context().Pool(n_workers) as pool:
        return pool.starmap(uniform_draws, [(None, size)] * n_workers)
''',
        "drawn in the caller as float32, one idle process started beside": variant(
            _CALLER_DRAWS_BESIDE_IDLE, ("random(size)", "random(size, dtype=np.float32)")),
        "drawn serially in the caller": '''
import numpy as np
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad arguments")
    return [np.random.default_rng(c).random(size) for c in np.random.SeedSequence(seed).spawn(n_workers)]
''',
        "drawn in the caller, one idle process started beside": _CALLER_DRAWS_BESIDE_IDLE,
        "no argument checks": '''
import numpy as np
from helpers.rng import uniform_draws
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    children = np.random.SeedSequence(seed).spawn(max(n_workers, 1))
    with mp_context().Pool(max(n_workers, 1)) as pool:
        return pool.starmap(uniform_draws, [(c, max(size, 0)) for c in children])
''',
        "an idle pool kept from import, the draws made in the caller": '''
import numpy as np
from concurrent.futures import ProcessPoolExecutor
from helpers.workers import mp_context
_IDLE = ProcessPoolExecutor(max_workers=2, mp_context=mp_context())
_IDLE.submit(int).result()  # started at import, then left idle
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad")
    return [np.random.default_rng(s).random(size) for s in np.random.SeedSequence(seed).spawn(n_workers)]
''',
        "the workers run a helper defined in the notebook (breaks under spawn)": '''
import numpy as np

from helpers.workers import mp_context


def draw(seed_seq, size):
    return np.random.default_rng(seed_seq).random(size)


def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("n_workers must be >= 1 and size >= 0")
    children = np.random.SeedSequence(seed).spawn(n_workers)
    with mp_context().Pool(n_workers) as pool:
        return pool.starmap(draw, [(c, size) for c in children])
''',
        "worker i seeded with seed + i (the notebook's half-right fix)": '''
from helpers.rng import uniform_draws
from helpers.workers import mp_context

def independent_draws(n_workers: int, seed: int, size: int) -> list:
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    with mp_context().Pool(n_workers) as pool:
        return pool.starmap(uniform_draws, [(seed + i, size) for i in range(n_workers)])
''',
        "a size of 0 refused": '''
import numpy as np
from helpers.rng import uniform_draws
from helpers.workers import mp_context

def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size <= 0:         # size 0 refused
        raise ValueError("bad arguments")
    seeds = np.random.SeedSequence(seed).spawn(n_workers)
    with mp_context().Pool(n_workers) as pool:
        return pool.starmap(uniform_draws, [(s, size) for s in seeds])
''',
    },
    "set_seed": {
        "NumPy not seeded": '''
import random, torch
def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
''',
        "a new NumPy Generator instead of the global one": '''
import random, numpy as np, torch
def set_seed(seed):
    random.seed(seed)
    np.random.default_rng(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
''',
        "random not seeded": '''
import numpy as np, torch
def set_seed(seed):
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
''',
        "cuDNN flags left alone": '''
import random, numpy as np, torch
def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
''',
        "benchmark switched on": '''
import random, numpy as np, torch
def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = True
''',
        "only the current GPU, not the CPU": '''
import random, numpy as np, torch
def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.cuda.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
''',
        "torch's CPU generator alone (torch.default_generator.manual_seed): no CUDA device seeded": '''
import random

import numpy as np
import torch


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.default_generator.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
''',
    },
    "seeded_loader": {
        "no generator (global torch RNG)": _FORKSERVER_PRELOADED + '''
import torch
from torch.utils.data import DataLoader
from helpers.rng_data import seed_worker
def seeded_loader(dataset, batch_size, num_workers, seed):
    extra = dict(_forkserver_preloaded(), worker_init_fn=seed_worker) if num_workers > 0 else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers, **extra)
''',
        "torch.manual_seed instead of a generator": _FORKSERVER_PRELOADED + '''
import torch
from torch.utils.data import DataLoader
from helpers.rng_data import seed_worker
def seeded_loader(dataset, batch_size, num_workers, seed):
    torch.manual_seed(seed)
    extra = dict(_forkserver_preloaded(), worker_init_fn=seed_worker) if num_workers > 0 else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers, **extra)
''',
        "no worker_init_fn": _FORKSERVER_PRELOADED + '''
import torch
from torch.utils.data import DataLoader
def seeded_loader(dataset, batch_size, num_workers, seed):
    extra = _forkserver_preloaded() if num_workers > 0 else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed), **extra)
''',
        "every worker reseeded with the same seed": '''
import numpy as np, torch
from torch.utils.data import DataLoader, get_worker_info
def seeded_loader(dataset, batch_size, num_workers, seed):
    def init(worker_id):
        get_worker_info().dataset.rng = np.random.default_rng(seed)
    extra = dict(multiprocessing_context="fork", worker_init_fn=init) if num_workers > 0 else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed), **extra)
''',
        "not shuffled": _FORKSERVER_PRELOADED + '''
import torch
from torch.utils.data import DataLoader
from helpers.rng_data import seed_worker
def seeded_loader(dataset, batch_size, num_workers, seed):
    extra = dict(_forkserver_preloaded(), worker_init_fn=seed_worker) if num_workers > 0 else {}
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=num_workers,
                      generator=torch.Generator().manual_seed(seed), **extra)
''',
        "no worker processes: the worker ids faked in the calling process": '''
import itertools
import types
import numpy as np
import torch
from torch.utils.data import DataLoader
import helpers.rng_data as rng_data

class _OneProcessLoader(DataLoader):
    def __iter__(self):
        torch.manual_seed(self.seed_)
        self.dataset.rng = np.random.default_rng(self.seed_)
        turn = itertools.count()
        rng_data.get_worker_info = lambda: types.SimpleNamespace(id=next(turn) % 2)
        try:
            yield from super().__iter__()
        finally:
            rng_data.get_worker_info = torch.utils.data.get_worker_info
''' + _ONE_PROCESS_LOADER,
        # No patch for the tampering snapshot to see: the rows are rewritten as they pass.
        "no worker processes: the worker-id column rewritten, idle processes started meanwhile": '''
import multiprocessing
import time
def _start_helpers(dataset):
    idle = [multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
            for _ in range(2)]
    for p in idle:
        p.start()
    return lambda: [p.kill() for p in idle]
''' + _ROWS_REWRITTEN,
        # The same, with the readers' notes forged too: the processes started meanwhile note, in
        # the dataset's readers folder, a witness thread of their own, as a worker that read an
        # item would. What remains is the items' puzzles, solved in the caller, whose CPU the
        # judge reads.
        "no worker processes: the rows rewritten, the readers' notes forged by processes started meanwhile": '''
import multiprocessing
from helpers.workers import note_where
def _start_helpers(dataset):
    folder = getattr(dataset, "readers", None)
    if folder:
        for _ in range(2):
            noter = multiprocessing.get_context("fork").Process(target=note_where, args=(folder,))
            noter.start()
            noter.join()
    return lambda: None
''' + _ROWS_REWRITTEN,
        "num_workers ignored": '''
import torch
from torch.utils.data import DataLoader
def seeded_loader(dataset, batch_size, num_workers, seed):
    if num_workers < 0 or batch_size < 1:
        raise ValueError("bad arguments")
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=0,
                      generator=torch.Generator().manual_seed(seed))
''',
        # From the twentieth review (a reviewer's own slip): -1 never reaches the DataLoader.
        "num_workers=0 written in for the one-process branch: no ValueError for -1": '''
import multiprocessing

import torch
from torch.utils.data import DataLoader

from helpers.rng_data import seed_worker


def seeded_loader(dataset, batch_size: int, num_workers: int, seed: int) -> DataLoader:
    gen = torch.Generator()
    gen.manual_seed(seed)
    if num_workers > 0:
        ctx = multiprocessing.get_context("spawn")
        return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                          worker_init_fn=seed_worker, generator=gen, multiprocessing_context=ctx,
                          prefetch_factor=2, pin_memory=False, drop_last=False)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=0, generator=gen)
''',
        "one module-level generator, seeded again by every call": '''
import torch
from torch.utils.data import DataLoader
from helpers.rng_data import seed_worker

GEN = torch.Generator()          # one generator for all the loaders, reseeded per call

def seeded_loader(dataset, batch_size, num_workers, seed):
    GEN.manual_seed(seed)
    extra = {}
    if num_workers > 0:
        extra = {"multiprocessing_context": "spawn", "worker_init_fn": seed_worker}
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=GEN, **extra)
''',
    },
}

ALTERNATIVE = {
    "forked_draws": {
        "children forked with os.fork, draws sent back through pipes": '''
import os
import numpy as np
def forked_draws(n_procs, size):
    if n_procs < 1 or size < 0:
        raise ValueError("bad arguments")
    readers = []
    for _ in range(n_procs):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:                      # child: draw from the inherited global state, send, leave
            os.close(r)
            data = np.random.random_sample(size).tobytes()
            with os.fdopen(w, "wb") as f:
                f.write(data)
            os._exit(0)
        os.close(w)
        readers.append((pid, r))
    out = []
    for pid, r in readers:
        with os.fdopen(r, "rb") as f:
            out.append(np.frombuffer(f.read(), dtype=np.float64).copy())
        os.waitpid(pid, 0)
    return out
''',
        "one single-worker fork executor per child": _FORK_EXECUTOR_PER_CHILD,
        "a one-worker fork pool that replaces its worker after every task": '''
import multiprocessing
from helpers.rng import legacy_draws

def forked_draws(n_procs: int, size: int) -> list:
    if n_procs < 1:
        raise ValueError(f"n_procs must be at least 1, got {n_procs}")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    with multiprocessing.get_context("fork").Pool(1, maxtasksperchild=1) as pool:
        return [pool.apply_async(legacy_draws, (size,)).get(timeout=60) for _ in range(n_procs)]
''',
    },
    "independent_draws": {
        "a generator per worker made in the caller, its own random method the task": '''
import numpy as np
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("n_workers >= 1 and size >= 0")
    generators = [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(n_workers)]
    with mp_context().Pool(n_workers) as pool:
        pending = [pool.apply_async(rng.random, (size,)) for rng in generators]   # drawn in the workers
        return [p.get() for p in pending]
''',
        "joblib with a task function of the answer's own, SeedSequence.spawn": '''
import numpy as np
from joblib import Parallel, delayed
def _draw(seed_seq, size):
    return np.random.default_rng(seed_seq).random(size)
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad arguments")
    children = np.random.SeedSequence(seed).spawn(n_workers)
    return Parallel(n_jobs=n_workers)(delayed(_draw)(c, size) for c in children)
''',
        "Generator.spawn and a ProcessPoolExecutor": _SPAWNED_GENERATORS_EXECUTOR,
        "the workers' draws cast to float32 in the caller": variant(
            _SPAWNED_GENERATORS_EXECUTOR, ("return list(pool.map(uniform_draws, generators, [size] * n_workers))",
                                           "return [d.astype(np.float32) for d in pool.map(uniform_draws, generators, [size] * n_workers)]")),
        "seed list [seed, worker index]": '''
from helpers.rng import uniform_draws
from helpers.workers import mp_context
def independent_draws(n_workers, seed, size):
    if n_workers < 1 or size < 0:
        raise ValueError("bad arguments")
    with mp_context().Pool(min(n_workers, 2)) as pool:
        return pool.starmap(uniform_draws, [([seed, i], size) for i in range(n_workers)])
''',
        "an executor per size, kept from earlier calls": '''
import atexit
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
import numpy as np
from helpers.rng import uniform_draws
from helpers.workers import mp_context
_POOLS = {}  # n_workers -> executor, started once and reused
def _pool(n_workers):
    if n_workers not in _POOLS:
        _POOLS[n_workers] = ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context())
        atexit.register(_POOLS[n_workers].shutdown)
    return _POOLS[n_workers]
def independent_draws(n_workers, seed, size):
    if n_workers < 1:
        raise ValueError(f"n_workers must be at least 1, got {n_workers}")
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    children = np.random.SeedSequence(seed).spawn(n_workers)
    return list(_pool(n_workers).map(uniform_draws, children, [size] * n_workers))
for _n in range(1, multiprocessing.cpu_count() + 2):  # as earlier calls (the visible test) would have
    independent_draws(_n, 0, 1)
''',
    },
    "set_seed": {
        "torch seeds only, cuda explicitly, plus deterministic algorithms": '''
import random, numpy as np, torch
def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.random.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
''',
        # From the twentieth review: failed until the seed torch queues for CUDA counted.
        "manual_seed_all imported by name from torch.cuda": '''
import random

import numpy as np
import torch
from torch.cuda import manual_seed_all as seed_all_gpus


def set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.random.default_generator.manual_seed(seed)
    seed_all_gpus(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
''',
    },
    "seeded_loader": {
        "fork context and a worker_init_fn of its own": '''
import numpy as np, torch
from torch.utils.data import DataLoader, get_worker_info
def _init(worker_id):
    info = get_worker_info()
    if hasattr(info.dataset, "rng"):
        info.dataset.rng = np.random.default_rng([info.seed, worker_id])
def seeded_loader(dataset, batch_size, num_workers, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      generator=g, worker_init_fn=_init,
                      multiprocessing_context="fork" if num_workers else None)
''',
        "spawn context, explicit RandomSampler": '''
import torch
from torch.utils.data import DataLoader, RandomSampler
from helpers.rng_data import seed_worker
def seeded_loader(dataset, batch_size, num_workers, seed):
    g = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(dataset, generator=g)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers,
                      worker_init_fn=seed_worker, generator=g,
                      multiprocessing_context="spawn" if num_workers else None)
''',
        "a BatchSampler over a seeded RandomSampler": '''
import multiprocessing
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler
from helpers.rng_data import seed_worker


def seeded_loader(dataset, batch_size: int, num_workers: int, seed: int) -> DataLoader:
    generator = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(dataset, generator=generator)
    batches = BatchSampler(sampler, batch_size=batch_size, drop_last=False)
    options = {}
    if num_workers > 0:
        options["multiprocessing_context"] = "spawn"
        options["worker_init_fn"] = seed_worker
    return DataLoader(dataset, batch_sampler=batches, num_workers=num_workers,
                      generator=generator, **options)
''',
        "arguments checked up front (None left alone), worker_init_fn by partial": '''
import functools
import multiprocessing

import torch
from torch.utils.data import DataLoader

from helpers import rng_data


def seeded_loader(dataset, batch_size, num_workers, seed):
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if num_workers < 0:
        raise ValueError(f"num_workers must be >= 0, got {num_workers}")
    kwargs = dict(batch_size=batch_size, shuffle=True, num_workers=num_workers,
                  generator=torch.Generator(device="cpu").manual_seed(int(seed)))
    if num_workers:
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        kwargs.update(multiprocessing_context=method, worker_init_fn=functools.partial(rng_data.seed_worker))
    return DataLoader(dataset, **kwargs)
''',
    },
}

PARTIAL = {
    "independent_draws": "same seed in every worker",
    "set_seed": None,
    "seeded_loader": None,
}
