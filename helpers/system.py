"""What this machine offers: cores, memory, start methods, accelerators (without torch)."""
import multiprocessing
import os
import platform
import shutil
import sys


def process_alive(pid):
    """Whether a process with this pid exists (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        "default start method": multiprocessing.get_start_method(allow_none=True)
        or multiprocessing.get_context().get_start_method(),
        "NVIDIA driver (nvidia-smi)": shutil.which("nvidia-smi") is not None,
    }


def show():
    """Print summary() as an aligned table."""
    info = summary()
    width = max(map(len, info))
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")
