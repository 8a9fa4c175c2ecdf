"""What this machine offers: cores, memory, start methods, accelerators (without torch)."""
import math
import multiprocessing
import os
import platform
import shutil
import sys
from pathlib import Path


def cgroup_cpu_limit():
    """CPUs granted by a container's cgroup quota (e.g. 1.5), or None when unlimited."""
    v2 = Path("/sys/fs/cgroup/cpu.max")
    try:
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
        period = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
        if quota.is_file() and period.is_file():
            q = int(quota.read_text())
            return None if q <= 0 else q / int(period.read_text())
    except (OSError, ValueError):
        pass
    return None


def usable_cores():
    """CPUs this process may really use: affinity mask, then container quota."""
    if hasattr(os, "process_cpu_count"):          # Python 3.13+
        count = os.process_cpu_count() or 1
    elif hasattr(os, "sched_getaffinity"):        # Linux
        count = len(os.sched_getaffinity(0))
    else:                                         # macOS, Windows
        count = os.cpu_count() or 1
    quota = cgroup_cpu_limit()
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return count


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
        "cgroup CPU quota": cgroup_cpu_limit(),
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
