"""The kernel's scheduler statistics of a process's threads, read from /proc, and a reader that
takes them from a process of its own.

`python -m autograder.checks._schedstat PID INTERVAL CLOCK` reads PID's threads every INTERVAL
seconds until its standard input is closed, then prints every reading as one JSON document. The
hidden checks use it where no judge reads the student's process from outside (the checks run
beside the answers, in one process): a reading thread of the process itself needs the GIL, and
pure-Python threads that hold it kept such a thread from reading for 200 ms and more (on 2 cores
and on 16 alike), far longer than the windows the checks look at. Standard library only: it
starts in a few milliseconds.
"""
import json
import os
import select
import sys
import time


def read_threads(pid, leave_out=None):
    """({thread id: (seconds on a core, seconds runnable but waiting for one, running or runnable
    now)} of pid's live threads but `leave_out`, whether the kernel keeps such statistics here)."""
    threads, available = {}, True
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = []
    for task in tasks:
        if int(task) == leave_out:
            continue
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as stat:
                numbers = stat.read().split()[:2]
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as stat:
                text = stat.read()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended meanwhile
        except OSError:
            available = False
            continue
        if not numbers or not text:
            continue  # ending as it was read: its files were empty
        try:
            run, wait = (int(v) / 1e9 for v in numbers)
            runnable = text[text.rindex(b")") + 2:text.rindex(b")") + 3] == b"R"
        except ValueError:
            available = False
            continue
        threads[int(task)] = (run, wait, runnable)
    return threads, available


def reading(pid, clock, previous_cpu=0.0, leave_out=None):
    """(time, the process's CPU seconds from its clock, read_threads(...)[0], available)."""
    threads, available = read_threads(pid, leave_out)
    try:
        cpu = time.clock_gettime(clock)
    except OSError:  # the process is gone
        available, cpu = False, previous_cpu
    return time.perf_counter(), cpu, threads, available


def _sample(pid, interval, clock):
    """Read until standard input closes; announce the first reading, print them all at the end
    (all at once: a pipe filled while the watcher waits would stall the readings)."""
    readings, available = [], True
    while True:
        t, cpu, threads, ok = reading(pid, clock, readings[-1][1] if readings else 0.0)
        available &= ok
        readings.append((t, cpu, {tid: list(v) for tid, v in threads.items()}))
        if len(readings) == 1:
            print("ready", flush=True)
        if select.select([sys.stdin], [], [], interval)[0]:
            break
    t, cpu, threads, ok = reading(pid, clock, readings[-1][1])
    readings.append((t, cpu, {tid: list(v) for tid, v in threads.items()}))
    json.dump({"readings": readings, "available": available and ok}, sys.stdout)


def parse(text):
    """The readings and availability that _sample printed, with thread ids and tuples restored."""
    found = json.loads(text)
    readings = [(t, cpu, {int(tid): tuple(v) for tid, v in threads.items()}) for t, cpu, threads in found["readings"]]
    return readings, found["available"]


if __name__ == "__main__":
    _sample(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]))
