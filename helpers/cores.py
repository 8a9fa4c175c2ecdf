"""Watching the machine from a notebook: per-core load while code runs, and scripts run aside.

    with cores.watch() as load:
        ...                       # run a pool here
    cores.load_plot(load)

`run_script` writes Python code to a file and runs it in a fresh interpreter
with a time limit: the way to show what happens in a *script* (spawn
re-importing it, a missing `if __name__ == "__main__":`, a fork that hangs)
without putting the notebook's kernel at risk.
"""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent


class Load:
    """Per-core utilisation samples: times (s since start) and percent[sample][cpu]."""

    def __init__(self):
        self.times, self.percent = [], []
        self.marks = []                          # (seconds since start, label)
        self._start = time.perf_counter()

    def mark(self, label):
        """Note that a new phase starts now (drawn as a labelled vertical line)."""
        self.marks.append((time.perf_counter() - self._start, label))

    @property
    def n_cpus(self):
        return len(self.percent[0]) if self.percent else 0

    def mean_per_core(self):
        """Average utilisation of each logical CPU over the samples (percent)."""
        if not self.percent:
            return []
        return [sum(s[c] for s in self.percent) / len(self.percent) for c in range(self.n_cpus)]


@contextmanager
def watch(interval=0.1):
    """Sample psutil.cpu_percent(percpu=True) every `interval` s while the block runs.

    The sampler is a daemon thread that sleeps between samples (it uses almost
    no CPU itself). Yields a Load that fills up while the block runs.
    """
    import psutil

    load, stop = Load(), threading.Event()
    psutil.cpu_percent(percpu=True)            # the first call only sets the reference point
    start = load._start = time.perf_counter()

    def sample():
        while not stop.wait(interval):
            load.percent.append(psutil.cpu_percent(percpu=True))
            load.times.append(time.perf_counter() - start)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield load
    finally:
        stop.set()
        sampler.join(5 * interval + 1)


def load_plot(load, *, title="Utilisation of each logical CPU", ax=None):
    """One line per logical CPU: percent busy against time."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(7, 3))[1]
    for cpu in range(load.n_cpus):  # a dash pattern each: CPUs busy alike draw one line over another
        ax.plot(load.times, [s[cpu] for s in load.percent], label=f"CPU {cpu}", lw=1.2,
                ls=("-", "--", "-.", ":")[cpu % 4])
    for seconds, label in load.marks:
        ax.axvline(seconds, color="grey", ls=":", lw=1)
        ax.text(seconds, 102, " " + label, fontsize=7, va="bottom", rotation=0)
    ax.set_ylim(-5, 112)
    ax.set_xlabel("seconds")
    ax.set_ylabel("% busy")
    ax.set_title(title)
    if load.n_cpus <= 16:
        ax.legend(fontsize=7, ncol=min(4, max(1, load.n_cpus)), loc="lower right")
    return ax


def run_script(code, *args, timeout=60, name="script.py", folder=None):
    """Write `code` to folder/name and run it with this Python; never longer than `timeout` s.

    Returns a dict: returncode (None when it was stopped), timed_out, seconds,
    stdout, stderr. The course root is put on PYTHONPATH so that the script can
    `import helpers`. Without `folder`, a fresh temporary folder is used and removed.
    """
    if folder is None:  # a folder of its own, removed afterwards
        with tempfile.TemporaryDirectory(prefix="course-script-", ignore_cleanup_errors=True) as own:
            return run_script(code, *args, timeout=timeout, name=name, folder=own)
    folder = Path(folder)
    path = folder / name
    path.write_text(code, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(COURSE_ROOT), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    # A session of its own, so that a script stopped at the time limit (or by an interrupted
    # cell) takes the processes it started (a hung fork, a pool's workers) with it.
    script = subprocess.Popen([sys.executable, str(path), *map(str, args)], cwd=folder, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=os.name == "posix")
    try:
        out, err, timed_out = _communicate_until(script, start + timeout)
        returncode = None if timed_out else script.returncode
    except BaseException:  # the cell interrupted (KeyboardInterrupt): the script goes too
        _stop_session(script)
        script.wait()
        raise
    return {"returncode": returncode, "timed_out": timed_out,
            "seconds": time.perf_counter() - start, "stdout": out, "stderr": err}


def _communicate_until(script, deadline, slice_s=0.25):
    """The script's (stdout, stderr, timed_out), stopping it at `deadline` (perf_counter).

    Waits in short slices: Jupyter's interrupt is a SIGINT to the kernel process, which the
    operating system may hand to any of the kernel's threads; one wait as long as the time
    limit would then only see the KeyboardInterrupt at the limit. Retrying communicate()
    after its TimeoutExpired loses no output (the subprocess documentation says so)."""
    while True:
        try:
            out, err = script.communicate(timeout=max(0.0, min(slice_s, deadline - time.perf_counter())))
            return out, err, False
        except subprocess.TimeoutExpired:
            if time.perf_counter() >= deadline:
                _stop_session(script)
                out, err = script.communicate()
                return out, err, True


def _stop_session(script):
    """Kill a script started by run_script and, on POSIX, every process of its session."""
    if os.name != "posix":
        script.kill()
        return
    try:
        os.killpg(script.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def last_lines(text, n=3):
    """The last n non-empty lines of a text (the end of a traceback, say)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-n:])
