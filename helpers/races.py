"""Workers for assignment 03 (race conditions): importable, so they run under every start method."""
import os
import time


def add_ones(counter, n, lock=None):
    """Add 1 to counter.value n times, as read, pause, write (time.sleep(0) lets others run).

    counter is a multiprocessing.Value (or anything with a .value). With `lock`
    given, each read-pause-write holds it; without, updates get lost when
    several processes do this at once.
    """
    for _ in range(n):
        if lock is None:
            current = counter.value
            time.sleep(0)
            counter.value = current + 1
        else:
            with lock:
                current = counter.value
                time.sleep(0)
                counter.value = current + 1


def fill_squares(array, start, stop):
    """array[i] = i * i for i in range(start, stop): each worker owns its own slice."""
    for i in range(start, stop):
        array[i] = i * i


def produce(queue, items, n_consumers):
    """Put every item on the queue, then one None per consumer to tell them to stop."""
    for item in items:
        queue.put(item)
    for _ in range(n_consumers):
        queue.put(None)


def consume_squares(tasks, results):
    """Take numbers from `tasks` until None; put (pid, x, x*x) on `results` for each."""
    while True:
        x = tasks.get()
        if x is None:
            return
        time.sleep(0.001)  # pretend each item takes a little work
        results.put((os.getpid(), x, x * x))


def count_multiples(start, stop, k):
    """How many numbers in range(start, stop) are multiples of k (a partial result)."""
    return sum(1 for i in range(start, stop) if i % k == 0)


def count_multiples_shared(start, stop, k, total):
    """The same count, added one by one to a shared Value under its lock (the slow way)."""
    for i in range(start, stop):
        if i % k == 0:
            with total.get_lock():
                total.value += 1
