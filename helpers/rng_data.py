"""Tiny torch datasets and a worker initialiser for the DataLoader lessons (imports torch).

They live in a module, not in a notebook, so that DataLoader workers started
with spawn or forkserver can import them.
"""
import os
import random

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info


def _worker_id():
    info = get_worker_info()
    return -1 if info is None else info.id


class GlobalNoise(Dataset):
    """Item i: [i, worker id, pid, torch.rand(), np.random.random(), random.random()].

    The three noises come from the three *global* generators, the ones a
    DataLoader seeds in every worker.
    """

    def __init__(self, n=8):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([i, _worker_id(), os.getpid(), torch.rand(()).item(),
                             np.random.random(), random.random()], dtype=torch.float64)


class OwnRngNoise(Dataset):
    """Item i: [i, worker id, noise from self.rng, torch.rand()].

    `self.rng` is a NumPy Generator made in __init__; with seed=None it is
    seeded from the operating system. Every worker receives a *copy* of this
    dataset, generator state included, so unless something reseeds
    `self.rng` in each worker, all workers draw the same noise.

    `readers`: a folder the course's checks may set; each process that reads an
    item then notes there, once, where it ran (helpers.workers.note_where), and,
    where `puzzles` ({index: puzzle}) names the item, the answer to its puzzle
    (helpers.workers.note_answer): CPU work the checks can see was not done by
    the process that iterates the loader.
    """

    readers = None
    puzzles = None

    def __init__(self, n=8, seed=None):
        self.n = n
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.readers is not None:
            from .workers import note_answer, note_where
            note_where(self.readers)
            if self.puzzles and i in self.puzzles:
                note_answer(self.readers, i, self.puzzles[i])
        return torch.tensor([i, _worker_id(), self.rng.random(), torch.rand(()).item()],
                            dtype=torch.float64)


def seed_worker(worker_id):
    """A DataLoader worker_init_fn: reseed what the DataLoader does not.

    PyTorch already seeds `random` and torch in each worker with
    `get_worker_info().seed` (base seed + worker id), and NumPy's global
    generator with a seed derived from the base seed and the worker id (since
    PyTorch 1.9). What it
    cannot know about is a generator that the dataset created for itself:
    this gives a dataset attribute `rng` (a NumPy Generator) a fresh,
    worker-specific generator derived from the same seed.
    """
    info = get_worker_info()
    seed = info.seed  # base_seed + worker_id, a 64-bit int
    np.random.seed(seed % 2**32)  # the recipe of PyTorch's docs: replaces the NumPy seed torch chose
    if isinstance(getattr(info.dataset, "rng", None), np.random.Generator):
        info.dataset.rng = np.random.default_rng(seed)
