"""A dataset whose items take time to produce, for the DataLoader experiments of 07.

It lives in a module (not in the notebook) so that DataLoader workers started
with `spawn` or `forkserver` can import it.
"""
import time

import torch
from torch.utils.data import Dataset


class SlowDataset(Dataset):
    """n items of shape (features,); each costs `delay` seconds, like reading and decoding a file."""

    def __init__(self, n=64, features=32, delay=0.01, seed=0):
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, features, generator=generator)
        self.y = (self.x.sum(dim=1) > 0).long()
        self.delay = delay

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        time.sleep(self.delay)  # stands for disk, network or decoding work
        return self.x[index], self.y[index]
