"""Limits and isolation for everything a submission runs: its kernel and the judge's student process.

Each grading process (nbgrader's kernel, the student's process of the judge) enters the sandbox
first thing, before any student code and before it starts threads:

- **processes**: a cgroup `pids.max` (a fork bomb stops there), else RLIMIT_NPROC
  (which Linux does not apply to root);
- **memory**: a cgroup memory limit (the kernel is killed, which grading reports),
  else RLIMIT_AS (allocations fail with MemoryError);
- **files** (needs root, or CAP_SYS_ADMIN): a private mount namespace in which
  every file system is read-only, the course root and the work folder are
  replaced by empty ones into which only an allow-list comes back read-only
  (`helpers/`, `release/`, the environment, the runner), `/tmp`, `/var/tmp` and
  `/dev/shm` are fresh and private, the grader's home is hidden, and only the
  submission's own folder is writable;
- **privileges** (same condition): after the mounts, the process drops to an
  unprivileged uid/gid of its own (one per concurrent submission, so that two
  submissions cannot signal or ptrace each other), with no supplementary
  groups, no capabilities and `PR_SET_NO_NEW_PRIVS`; it can then neither undo
  the mounts nor reach the grader's processes or files;
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
    memory_mb: int = 6144          # per submission: kernel, its workers and the student's process each
    max_processes: int = 256       # processes and threads at once, per submission
    network: bool = False          # False: no network but loopback
    protect_files: bool = True
    covered: list = field(default_factory=list)    # folders replaced by empty ones
    allowed: list = field(default_factory=list)    # paths inside them that come back read-only
    writable: str = ""                             # the one folder left writable
    uid: int = -1                                  # unprivileged uid/gid to run as (-1: keep)
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


# What student code may see of the course root (read-only); everything else there
# (source/, the checks, the answer catalogue, tests/, .git, the gradebook) is not there at all.
ALLOWED_IN_COURSE = ("helpers", "release", "autograder/__init__.py", "autograder/hidden.py")
UID_BASE = int(os.environ.get("COURSE_SANDBOX_UID_BASE", "64000"))
UID_SLOTS = 512


class UidSlot:
    """An unprivileged uid no other submission graded at the same time runs as.

    Two submissions with the same uid could signal or ptrace each other. A slot is
    an flock on a file, so a killed grader frees its slot with its last breath.
    """

    def __init__(self):
        import fcntl
        folder = Path(tempfile.gettempdir()) / "course-grading-uids"
        folder.mkdir(mode=0o700, exist_ok=True)
        for slot in range(UID_SLOTS):
            handle = open(folder / f"{slot}.lock", "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            self.uid, self._handle = UID_BASE + slot, handle
            return
        raise RuntimeError(f"all {UID_SLOTS} sandbox uids are in use")

    def release(self):
        self._handle.close()


def _chown_tree(folder, uid, gid):
    """chown a folder and what is in it, never following a link (a student's link to
    /etc must not make the grader chown /etc)."""
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
            try:
                os.lchown(name, uid, gid)
            except OSError:
                pass


class Sandbox:
    """Owned by the grading process: prepares the environment of one submission's processes."""

    def __init__(self, limits, own_folder):
        from .. import course
        own = Path(own_folder).resolve()
        limits.writable = str(own)
        root, work = course.ROOT.resolve(), course.WORKDIR.resolve()
        home = Path(os.path.expanduser("~")).resolve()
        limits.covered = sorted({str(root), str(work)} | ({str(home)} if home != Path("/") else set()))
        allowed = [root / rel for rel in ALLOWED_IN_COURSE]
        # The interpreter and its environment come back where they live in a covered
        # folder (a .venv in the course, a pyenv Python in the grader's home).
        # Both spellings: a .venv link in the course points elsewhere, and the interpreter
        # still looks for its packages under the link's own path.
        prefixes = {Path(p).absolute() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
        for prefix in prefixes | {p.resolve() for p in prefixes}:
            if any(prefix.is_relative_to(c) and prefix != Path(c) for c in limits.covered):
                allowed.append(prefix)
        limits.allowed = [str(p) for p in allowed if p.exists()]
        self.limits, self.own, self.slot = limits, own, None
        if limits.protect_files and os.geteuid() == 0:
            self.slot = UidSlot()
            limits.uid = self.slot.uid
            _chown_tree(own, limits.uid, limits.uid)  # the one folder the student's code may write
        elif limits.protect_files:
            _note(f"grading runs as uid {os.geteuid()}, not root: student code keeps that uid, "
                  "and the course files are protected only by their permissions")
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
        if self.slot is not None:
            _chown_tree(self.own, os.geteuid(), os.getegid())  # back to the grader
            self.slot.release()


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


def _mount_points():
    """Every mount point, deepest last (from /proc/self/mountinfo)."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        points.append(point)
    return points


PSEUDO = ("/proc", "/sys", "/dev")


def _protect_files(limits):
    """Private mount namespace: everything read-only, the course and work folders
    emptied but for an allow-list, private temp folders, one writable folder."""
    own = Path(limits.writable)
    _call(_libc.unshare, CLONE_NEWNS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Handles to what comes back, taken in the new namespace before anything is covered.
    keep = {path: os.open(path, os.O_PATH) for path in [limits.writable, *limits.allowed]
            if os.path.exists(path)}
    for point in _mount_points():
        if point == "/" or not point.startswith(PSEUDO):
            try:
                _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
            except OSError:
                pass  # a mount we may not touch stays as it is; the uid still cannot write it
    for folder in limits.covered:
        if os.path.isdir(folder):
            _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for temp in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(temp):
            _mount("tmpfs", temp, "tmpfs", MS_NOSUID | MS_NODEV, "size=2g,mode=1777")
    for path, fd in keep.items():
        target = Path(path)
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch(exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        read_only = MS_RDONLY if path != limits.writable else 0  # a bind keeps its source's flags
        _mount(None, target, None, MS_REMOUNT | MS_BIND | read_only | MS_NOSUID | MS_NODEV)
        os.close(fd)
    for folder in limits.covered:  # the emptied folders themselves cannot be written either
        if os.path.isdir(folder):
            try:
                _mount(None, folder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            except OSError:
                pass
    os.chdir(own)


def private_home(uid):
    """HOME, IPython's and matplotlib's folders for the sandboxed uid, in the private /tmp."""
    home = Path(tempfile.gettempdir()) / "course-home"
    for sub in ("", ".ipython", ".config/matplotlib", ".cache"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    if uid >= 0:
        _chown_tree(home, uid, uid)
    os.environ.update(HOME=str(home), IPYTHONDIR=str(home / ".ipython"), USER="student",
                      LOGNAME="student", MPLCONFIGDIR=str(home / ".config/matplotlib"),
                      XDG_CACHE_HOME=str(home / ".cache"), TMPDIR=tempfile.gettempdir())


PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38
SECRET_VARIABLES = ("COURSE_DB_URL", "PGPASSWORD", "COURSE_SCHEDULER")


def drop_privileges(uid):
    """Become `uid` (and gid `uid`) for good: no groups, no capabilities, no way back."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _call(_libc.prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    # A uid change makes the process undumpable, which would hide its own worker
    # processes' /proc entries from it; other submissions run as other uids.
    _call(_libc.prctl, PR_SET_DUMPABLE, 1, 0, 0, 0)
    if os.geteuid() != uid or os.getuid() != uid:
        raise OSError("could not drop privileges")


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


def enter(network_now=True, drop=True):
    """Apply COURSE_SANDBOX to this process; returns the Limits (None when not sandboxed).

    Call it while the process has one thread (a mount namespace cannot be
    entered later). With drop=False the caller finishes with `become_student(limits)`.
    """
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
            if limits.uid >= 0:  # the grader could protect, and half of it was done: stop
                os._exit(71)
    if network_now and not limits.network:
        try:
            cut_network()
        except OSError as err:
            _note(f"network isolation unavailable ({err}; needs root or CAP_SYS_ADMIN)")
    if drop:
        become_student(limits)
    return limits


def become_student(limits):
    """The last step: private home folders, then the unprivileged uid. A grader that
    asked for a uid and cannot get it stops here rather than run student code as root."""
    if limits is None:
        return
    for name in list(os.environ):  # the grader's secrets (a gradebook password) stay with it
        if name in SECRET_VARIABLES or any(word in name for word in ("PASSWORD", "TOKEN", "SECRET")):
            del os.environ[name]
    if limits.uid < 0:
        return
    private_home(limits.uid)
    try:
        drop_privileges(limits.uid)
    except OSError as err:
        _note(f"could not drop privileges to uid {limits.uid}: {err}")
        os._exit(70)


def _connection_file_argument():
    for flag in ("-f", "--f"):
        if flag in sys.argv[:-1]:
            return sys.argv.index(flag) + 1
    return None


def kernel_main():
    """Entry point of a sandboxed IPython kernel (replaces `-m ipykernel_launcher`).

    Order matters: the mounts need a single-threaded process; the kernel then
    binds its sockets to Jupyter in the host network; only then is the main
    thread (which runs every cell and starts every worker) cut off the network
    and the process dropped to its unprivileged uid.
    """
    if sys.path and sys.path[0] == "":
        del sys.path[0]  # as ipykernel_launcher does
    where = _connection_file_argument()
    connection = Path(sys.argv[where]).read_bytes() if where else None  # before its folder is hidden
    limits = enter(network_now=False, drop=False)
    if limits is not None and where:
        private = Path(tempfile.mkdtemp(prefix="course-kernel-"))  # root-only, in the private /tmp
        (private / "kernel.json").write_bytes(connection)
        sys.argv[where] = str(private / "kernel.json")
    sys.argv.append("--HistoryManager.enabled=False")  # no history file to write as another uid
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize()
    if limits is not None and not limits.network:
        try:
            cut_network()
        except OSError as err:
            _note(f"network isolation unavailable ({err}; needs root or CAP_SYS_ADMIN)")
    become_student(limits)
    # The kernel starts with -P: the notebook's own folder (its modules, a `%%writefile`)
    # comes last on sys.path, where it cannot stand in for a library or the grader.
    sys.path.append(os.getcwd())
    app.start()


if __name__ == "__main__":
    kernel_main()
