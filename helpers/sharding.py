"""The training recipe of assignment 12 (collectives and sharding), shared by every rank.

    make_model(seed)        a small MLP of four Linear layers (same seed, same weights)
    make_data(seed)         (X, y): N_SAMPLES regression samples, fixed by the seed
    global_batch(X, y, step)  the GLOBAL_BATCH samples of optimiser step `step` (in order, wrapping)
    rank_share(t, rank, world_size)  rank's contiguous equal share of a batch
    GLOBAL_BATCH, LR        one SGD step per GLOBAL_BATCH samples, learning rate LR, MSE loss
    make_wide_mlp(...)      a bigger model for the memory and checkpointing measurements
"""
import torch
from torch import nn

N_SAMPLES = 96
GLOBAL_BATCH = 24
IN_FEATURES = 8
HIDDEN = 16
LR = 0.05


def make_model(seed):
    """Four Linear layers with Tanh between them; initial weights depend only on `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.Tanh(),
                             nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                             nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                             nn.Linear(HIDDEN, 1))


def make_data(seed):
    """N_SAMPLES pairs (x, y), y a noisy non-linear function of x; the same for every rank."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(N_SAMPLES, IN_FEATURES, generator=g)
    w = torch.randn(IN_FEATURES, 1, generator=g)
    y = torch.sin(X @ w) + 0.1 * torch.randn(N_SAMPLES, 1, generator=g)
    return X, y


def global_batch(X, y, step):
    """The samples of optimiser step `step`: the next GLOBAL_BATCH in order, wrapping round."""
    start = (step * GLOBAL_BATCH) % len(X)
    index = torch.arange(start, start + GLOBAL_BATCH) % len(X)
    return X[index], y[index]


def rank_share(t, rank, world_size):
    """Rank `rank`'s contiguous share of a batch whose length world_size divides."""
    if len(t) % world_size:
        raise ValueError(f"a batch of {len(t)} cannot be split equally over {world_size} ranks")
    size = len(t) // world_size
    return t[rank * size:(rank + 1) * size]


def make_wide_mlp(width=1024, depth=8, seed=0):
    """depth Linear(width, width) layers with ReLU: big enough for memory to show."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        return nn.Sequential(*layers[:-1])


def tensor_bytes(tensors):
    """Bytes held by these tensors (a DTensor counts only its local shard)."""
    total = 0
    for t in tensors:
        if t is None:
            continue
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total
