"""Workers for the synchronisation lessons of assignment 03 (Manager, shared_memory).

Importable, so they run under every start method. NumPy is imported inside the
functions that need it, to keep `import helpers.sync` cheap in a worker.
"""
import os
from multiprocessing import shared_memory


def store_square(table, x):
    """Write x -> (pid, x * x) into a Manager dict proxy (one round trip to the manager)."""
    table[x] = (os.getpid(), x * x)
    return x


def sum_array(array):
    """Sum an array that arrived pickled (copied through the pool's pipe)."""
    return float(array.sum())


def sum_shared(name, shape, dtype):
    """Sum an array that lives in the shared memory block `name`: nothing is copied.

    The worker attaches to the block, wraps it as an ndarray without copying,
    and closes its handle afterwards (the creator unlinks the block).
    """
    import numpy as np
    block = shared_memory.SharedMemory(name=name)
    try:
        return float(np.ndarray(shape, dtype=dtype, buffer=block.buf).sum())
    finally:
        block.close()


def array_in_shared_memory(array):
    """(block, view): a new shared memory block holding a copy of `array`, and an ndarray on it.

    The caller must `del view`, then `block.close()` and `block.unlink()` when done.
    """
    import numpy as np
    block = shared_memory.SharedMemory(create=True, size=max(1, array.nbytes))
    view = np.ndarray(array.shape, dtype=array.dtype, buffer=block.buf)
    view[...] = array
    return block, view
