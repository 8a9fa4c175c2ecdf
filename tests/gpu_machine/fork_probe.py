"""python tests/gpu_machine/fork_probe.py: the grading processes are forked from zygotes that have
imported torch and the course's modules (autograder/pipeline/warm.py): CUDA must not have started in
them, or no child could use the GPU. Imports what the zygotes preload (those here), says whether the
CUDA driver is loaded, then forks children that enter the sandbox's limits and use CUDA: two of the
five should (no limits; GPUs asked for with a memory cgroup)."""
import importlib
import json
import os
import sys

sys.path.insert(0, os.getcwd())
from autograder.pipeline import warm  # noqa: E402

loaded = []
for kind in warm.KINDS.values():
    for name in kind["preload"]:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except ImportError:
            pass
warm.load_every_check()
driver = any("libcuda.so" in line for line in open("/proc/self/maps"))
print(json.dumps({"imported": loaded, "libcuda mapped after the imports (loaded, not started)": driver}), flush=True)

from autograder.sandbox import enter  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402

# What each should show: the GPU used only with no sandbox, or where GPUs are asked for
# (GradingLimits.gpus) and memory is in a cgroup; hidden, quietly, everywhere else.
cases = {"no limits": None, "address-space cap 8 GiB (default)": Limits(cgroups={}),
         "address-space cap 16 GiB, GPUs asked for": Limits(memory_mb=16384, gpus=True, cgroups={}),
         "memory cgroup (no address-space cap)": Limits(cgroups={"memory": "-"}),
         "memory cgroup, GPUs asked for": Limits(gpus=True, cgroups={"memory": "-"})}
for label, limits in cases.items():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            if limits is not None:
                enter._rlimits(limits)
            import torch
            ok = torch.cuda.is_available()
            value = float((torch.ones(256, 256, device="cuda") @ torch.ones(256, 256, device="cuda")).sum()) if ok else None
            answer = {"available": ok, "matmul": value, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
                      "count": torch.cuda.device_count()}
        except BaseException as err:
            answer = {"error": repr(err)[:300]}
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.waitpid(pid, 0)
    print(label, data.decode(), flush=True)
