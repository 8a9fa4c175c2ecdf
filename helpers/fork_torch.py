"""The fork-after-torch-threads hang (assignment 01), run in a separate interpreter.

Once a process has run a multi-threaded torch operation, torch's thread pool
holds locks owned by threads. `fork` copies the memory, locks included, but
only the thread that called fork: in the child, the first torch operation that
wants the pool waits for threads that do not exist, forever.

    fork_torch.trial("fork", child_threads=None, timeout=10)

starts `python -m helpers.fork_torch ...` (a fresh interpreter, so the
notebook's kernel never risks the hang), which warms torch's thread pool,
starts one child with the given start method, and waits at most `timeout` s.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent


def child_task(child_threads):
    """In the child: optionally set torch's thread count, then one small matmul."""
    import torch
    if child_threads is not None:
        torch.set_num_threads(child_threads)
    a = torch.randn(300, 300)
    return float((a @ a).sum())


def _experiment(method, child_threads, timeout):
    """Runs in the script's process: warm torch's threads, start a child, bounded wait."""
    import multiprocessing

    import torch
    torch.set_num_threads(max(2, torch.get_num_threads()))   # the hang needs a pool of 2+ threads
    a = torch.randn(1000, 1000)
    for _ in range(3):
        a @ a                                   # the parent's thread pool is now running
    child = multiprocessing.get_context(method).Process(target=child_task, args=(child_threads,))
    start = time.perf_counter()
    child.start()
    child.join(timeout)
    seconds = time.perf_counter() - start
    hung = child.is_alive()
    if hung:
        child.kill()
        child.join()
    return {"method": method, "child_threads": child_threads, "parent_threads": torch.get_num_threads(),
            "hung": hung, "exitcode": None if hung else child.exitcode, "seconds": seconds}


def trial(method, child_threads=None, timeout=10.0):
    """Run the experiment in a fresh interpreter; a dict with hung, exitcode and seconds."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(COURSE_ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "helpers.fork_torch", method, str(child_threads), str(timeout)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout + 120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the experiment failed:\n{done.stderr[-2000:]}")
    return json.loads(lines[-1])


if __name__ == "__main__":
    method, threads, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
    print(json.dumps(_experiment(method, None if threads == "None" else int(threads), limit)))
