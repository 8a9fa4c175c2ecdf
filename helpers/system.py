"""What this machine offers: cores, memory, start methods, accelerators (without torch)."""
import multiprocessing
import os
import platform
import shutil
import sys


def process_alive(pid):
    """Whether a process with this pid exists (another user's included)."""
    if os.name == "nt":  # there, os.kill(pid, 0) sends Ctrl-C (CTRL_C_EVENT is 0) instead of asking
        import psutil
        return psutil.pid_exists(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def default_start_method():
    """The start method multiprocessing uses unless told otherwise, read without fixing it:
    multiprocessing.get_context() would, and a later set_start_method() would then raise
    "context has already been set"."""
    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]


def usable_cores():
    """CPUs this process may run on (its affinity mask).

    A container's CPU quota can lower this further; assignment 01 shows how to
    read it, and your own `cpu_info()` takes it into account.
    """
    if hasattr(os, "process_cpu_count"):          # Python 3.13+
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):          # Linux
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1                    # macOS, Windows


def busy_cpu_seconds(cpus=None):
    """CPU seconds the CPUs numbered in `cpus` (default: those this process may use) have spent
    busy since the machine started, whoever ran on them (all but idle and iowait), from Linux's
    /proc/stat; None elsewhere. Two readings around some work give how busy the cores were."""
    if cpus is None and not hasattr(os, "sched_getaffinity"):
        return None  # macOS, Windows: no /proc/stat either
    cpus = set(os.sched_getaffinity(0) if cpus is None else cpus)
    busy = 0
    try:
        with open("/proc/stat") as stat:
            for line in stat:
                name, *ticks = line.split()
                if name[:3] == "cpu" and name[3:].isdigit() and int(name[3:]) in cpus:
                    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, ticks[:8])
                    busy += user + nice + system + irq + softirq + steal
    except OSError:
        return None
    return busy / os.sysconf("SC_CLK_TCK")


def summary():
    """A dict describing the machine, for the top of every notebook."""
    try:
        import psutil
        physical = psutil.cpu_count(logical=False)
        memory_gib = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        physical, memory_gib = None, None
    return {
        "python": sys.version.split()[0],
        "platform": f"{platform.system()} {platform.machine()}",
        "logical cores": os.cpu_count(),
        "physical cores": physical,
        "usable cores": usable_cores(),
        "memory (GiB)": memory_gib,
        "default start method": default_start_method(),
        "NVIDIA driver (nvidia-smi)": shutil.which("nvidia-smi") is not None,
    }


def show():
    """Print summary() as an aligned table."""
    info = summary()
    width = max(map(len, info))
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")
