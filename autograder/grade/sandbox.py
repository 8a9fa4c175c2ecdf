"""Limits and isolation for everything a submission runs: its kernel and its verifier.

Each grading process (nbgrader's kernel, the clean verifier) enters the sandbox
first thing, before any student code and before it starts threads:

- **processes**: a cgroup `pids.max` (a fork bomb stops there), else RLIMIT_NPROC
  (which Linux does not apply to root);
- **memory**: a cgroup memory limit (the kernel is killed, which grading reports),
  else RLIMIT_AS (allocations fail with MemoryError);
- **files** (needs root, or CAP_SYS_ADMIN): a private mount namespace in which the
  course and work folders are read-only, the gradebook, source/ (solutions) and
  every other student's folders are hidden, and only the submission's own folder
  is writable;
- **network** (same condition): a new network namespace with only loopback. The
  kernel switches after binding its own sockets to Jupyter, so only the student's
  code is cut off;
- no core dumps.

What could not be applied is written once to stderr (the grading log), never
pretended. Settings come from the COURSE_SANDBOX environment variable (JSON),
written by `Sandbox` in the grading process; see `Limits` for the defaults.
"""
import ctypes
import json
import os
import resource
import signal
import socket
import struct
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

ENV = "COURSE_SANDBOX"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2


@dataclass
class Limits:
    memory_mb: int = 6144          # per submission: kernel, its workers and the verifier each
    max_processes: int = 256       # processes and threads at once, per submission
    network: bool = False          # False: no network but loopback
    protect_files: bool = True
    readonly: list = field(default_factory=list)   # folders mounted read-only
    hidden: list = field(default_factory=list)     # folders/files replaced by empty ones
    writable: str = ""                             # the one folder left writable
    cgroups: dict = field(default_factory=dict)    # controller -> cgroup folder to join

    def to_env(self):
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls):
        raw = os.environ.get(ENV)
        return cls(**json.loads(raw)) if raw else None


def _note(message):
    print(f"[sandbox] {message}", file=sys.stderr, flush=True)


_libc = ctypes.CDLL(None, use_errno=True)


def _call(fn, *args):
    if fn(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else str(s).encode()  # noqa: E731
    _call(_libc.mount, enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))


# --- cgroups (created and removed by the grading process) -------------------------------------
class Cgroups:
    """A fresh cgroup per controller (pids, memory), v1 or v2, under this process's own."""

    def __init__(self, limits):
        self.paths = {}
        self.available = True
        name = f"course-grading-{uuid.uuid4().hex[:12]}"
        try:
            for controller, parent in self._parents().items():
                self._remove_stale(parent)
                path = parent / name
                path.mkdir()
                self.paths[controller] = str(path)
                if controller in ("pids", "unified"):
                    (path / "pids.max").write_text(str(limits.max_processes))
                if controller == "memory":
                    (path / "memory.limit_in_bytes").write_text(str(limits.memory_mb * 2**20))
                if controller == "unified":
                    (path / "memory.max").write_text(str(limits.memory_mb * 2**20))
        except OSError as err:
            self.remove()
            self.paths, self.available = {}, False
            self.reason = str(err)

    @staticmethod
    def _remove_stale(parent, age=3600):
        """Drop empty cgroups that a killed grader left behind (rmdir refuses busy ones)."""
        for old in parent.glob("course-grading-*"):
            try:
                if time.time() - old.stat().st_mtime > age:
                    old.rmdir()
            except OSError:
                pass

    @staticmethod
    def _parents():
        parents = {}
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return parents
        for line in lines:
            _, controllers, rel = line.split(":", 2)
            for controller in controllers.split(","):
                if controller in ("pids", "memory") and (CGROUP_ROOT / controller).is_dir():
                    parents[controller] = CGROUP_ROOT / controller / rel.lstrip("/")
            if controllers == "" and (CGROUP_ROOT / "cgroup.controllers").is_file() and not parents:
                parents["unified"] = CGROUP_ROOT / rel.lstrip("/")
        if not parents:
            raise OSError("no writable pids/memory cgroup controller")
        return parents

    def pids(self):
        found = set()
        for path in self.paths.values():
            try:
                found |= {int(p) for p in Path(path, "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def kill_all(self, patience=5.0):
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def remove(self):
        for path in self.paths.values():
            try:
                os.rmdir(path)
            except OSError:
                pass


class Sandbox:
    """Owned by the grading process: prepares the environment of one submission's processes."""

    def __init__(self, limits, own_folder):
        from .. import course
        limits.writable = str(Path(own_folder).resolve())
        work = course.WORKDIR.resolve()
        limits.readonly = sorted({str(course.ROOT.resolve()), str(work)})
        limits.hidden = [str(p) for p in (work / "submitted", work / "autograded", work / "feedback",
                                          work / "reports", course.SOURCE.resolve(), work / "gradebook.db")]
        self.limits = limits
        self.cgroups = Cgroups(limits)
        limits.cgroups = self.cgroups.paths
        if not self.cgroups.available:
            _note(f"cgroups unavailable ({self.cgroups.reason}): using rlimits")

    def environment(self, base=None):
        env = dict(os.environ if base is None else base)
        env[ENV] = self.limits.to_env()
        return env

    def close(self):
        self.cgroups.kill_all()
        self.cgroups.remove()


# --- inside a sandboxed process -----------------------------------------------------------------------
def _join_cgroups(limits):
    for path in limits.cgroups.values():
        Path(path, "cgroup.procs").write_text(str(os.getpid()))


def _rlimits(limits):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if "memory" not in limits.cgroups and "unified" not in limits.cgroups:
        cap = max(limits.memory_mb, 8192) * 2**20  # address space, not memory: leave headroom
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    if "pids" not in limits.cgroups and "unified" not in limits.cgroups:
        if os.geteuid() == 0:
            _note("no pids cgroup and running as root: the process cap cannot be enforced")
        else:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes + 512,) * 2)


def _protect_files(limits):
    """Private mount namespace: read-only course, hidden secrets, one writable folder."""
    own = Path(limits.writable)
    _call(_libc.unshare, CLONE_NEWNS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    stash = tempfile.mkdtemp(prefix="course-own-")
    _mount(own, stash, None, MS_BIND | MS_REC)
    for folder in limits.readonly:
        _mount(folder, folder, None, MS_BIND | MS_REC)
        _mount(None, folder, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    for path in map(Path, limits.hidden):
        if path.is_dir():
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0755")
        elif path.is_file():
            _mount("/dev/null", path, None, MS_BIND)
    own.mkdir(parents=True, exist_ok=True)  # inside a hidden (tmpfs) folder, if it is one
    _mount(stash, own, None, MS_BIND | MS_REC)
    _libc.umount2(stash.encode(), MNT_DETACH)
    os.rmdir(stash)
    os.chdir(own)


def cut_network():
    """Move this thread (and what it starts later) into a network namespace with only loopback."""
    _call(_libc.unshare, CLONE_NEWNET)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        IFF_UP, IFF_LOOPBACK, IFF_RUNNING, SIOCSIFFLAGS = 0x1, 0x8, 0x40, 0x8914
        import fcntl
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))
    finally:
        sock.close()


def enter(network_now=True):
    """Apply COURSE_SANDBOX to this process; returns the Limits (None when not sandboxed)."""
    limits = Limits.from_env()
    if limits is None:
        return None
    try:
        _join_cgroups(limits)
    except OSError as err:
        _note(f"could not join the cgroups: {err}")
    _rlimits(limits)
    if limits.protect_files:
        try:
            _protect_files(limits)
        except OSError as err:
            _note(f"file protection unavailable ({err}; needs root or CAP_SYS_ADMIN)")
    if network_now and not limits.network:
        try:
            cut_network()
        except OSError as err:
            _note(f"network isolation unavailable ({err}; needs root or CAP_SYS_ADMIN)")
    return limits


def kernel_main():
    """Entry point of a sandboxed IPython kernel (replaces `-m ipykernel_launcher`)."""
    if sys.path and sys.path[0] == "":
        del sys.path[0]  # as ipykernel_launcher does
    limits = enter(network_now=False)
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize()  # binds the sockets Jupyter talks to, in the host network
    if limits is not None and not limits.network:
        try:
            cut_network()  # the main thread runs every cell, and starts every worker
        except OSError as err:
            _note(f"network isolation unavailable ({err}; needs root or CAP_SYS_ADMIN)")
    app.start()


if __name__ == "__main__":
    kernel_main()
