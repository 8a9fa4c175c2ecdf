"""What every process of a submission does first, inside its sandbox (see autograder/sandbox/__init__.py):
join its cgroups, set rlimits, a private read-only view of the files, no network,
then the unprivileged uid."""
import ctypes
import os
import resource
import socket
import struct
import tempfile
from pathlib import Path

from .limits import Limits, is_secret, note

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)


def _call(fn, *args):
    if fn(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else str(s).encode()  # noqa: E731
    _call(_libc.mount, enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))


def chown_tree(folder, uid, gid):
    """chown a folder and what is in it, never following a link (a student's link to
    /etc must not make the grader chown /etc)."""
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
            try:
                os.lchown(name, uid, gid)
            except OSError:
                pass


def _join_cgroups(limits):
    for path in limits.cgroups.values():
        Path(path, "cgroup.procs").write_text(str(os.getpid()))


def _rlimits(limits):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # No file grows past it: its own folder (kept after grading) and the judge's log, which takes
    # its stdout, cannot fill the grader's disk in one file. Python ignores SIGXFSZ: a write past
    # it raises OSError (EFBIG) instead of killing the process.
    file_cap = limits.max_file_mb * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_cap, file_cap))
    if "memory" not in limits.cgroups and "unified" not in limits.cgroups:
        cap = max(limits.memory_mb, 8192) * 2**20  # address space, not memory: leave headroom
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        if limits.gpus:
            _hide_gpus("memory capped by address space (no memory cgroup), under which CUDA cannot start")
    if not limits.gpus:
        _hide_gpus("GradingLimits.gpus is off")
    if "pids" not in limits.cgroups and "unified" not in limits.cgroups:
        # Linux does not apply RLIMIT_NPROC to root, but the limit stays with the process when it
        # drops to the student's uid (become_student), and counts there.
        if os.geteuid() == 0 and limits.uid < 0:
            note("no pids cgroup and running as root: the process cap cannot be enforced")
        else:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes + 512,) * 2)


def _hide_gpus(why):
    """Student code sees no GPU, as on a grader without one: the default, so that a submission is
    judged alike on every grader and no submission takes another's GPU memory, which no cgroup
    caps. A grader that lets student code use its GPUs (Limits.gpus) needs a memory cgroup besides:
    CUDA reserves far more address space than memory when it starts (on an H200 machine a process's
    VmSize grew to 17 GiB at its first allocation), so under an 8 GiB RLIMIT_AS torch saw no GPU,
    with a warning, and under 16 GiB it saw one and failed at the first kernel ("CUDA error: out of
    memory"). The variable is read when CUDA starts, which no process forked from the zygote has
    done yet; torch.cuda.is_available() then asks NVML, which reads it too, rather than start CUDA
    (under the 8 GiB cap that start fails and prints a warning into the student's output)."""
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    if any(Path(path).exists() for path in ("/dev/nvidiactl", "/proc/driver/nvidia")):
        note(f"GPUs hidden from student code: {why}")


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
    if os.path.isdir("/tmp"):
        # The private /tmp is the temp folder from here on, whatever the grader's TMPDIR named
        # (a cluster job's scratch folder is read-only here, a root-only one under /tmp is gone:
        # every kernel died at its start on such a host).
        os.environ["TMPDIR"] = "/tmp"
        tempfile.tempdir = None
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
        chown_tree(home, uid, uid)
    os.environ.update(HOME=str(home), IPYTHONDIR=str(home / ".ipython"), USER="student",
                      LOGNAME="student", MPLCONFIGDIR=str(home / ".config/matplotlib"),
                      XDG_CACHE_HOME=str(home / ".cache"), TMPDIR=tempfile.gettempdir())


PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 4, 38


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


def isolate_network(limits):
    """cut_network() unless the limits allow the network. A grader that drops to a student's uid
    (so it is root, and could) and cannot cut it stops here, as for file protection, rather than
    run student code online; GradingLimits.network = True opts out."""
    if limits is None or limits.network:
        return
    try:
        cut_network()
    except OSError as err:
        note(f"network isolation unavailable ({err}; needs root or CAP_SYS_ADMIN)")
        if limits.uid >= 0:
            os._exit(72)


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
        note(f"could not join the cgroups: {err}")
    _rlimits(limits)
    if limits.protect_files:
        try:
            _protect_files(limits)
        except OSError as err:
            note(f"file protection unavailable ({err}; needs root or CAP_SYS_ADMIN)")
            if limits.uid >= 0:  # the grader could protect, and half of it was done: stop
                os._exit(71)
    if network_now:
        isolate_network(limits)
    if drop:
        become_student(limits)
    return limits


def become_student(limits):
    """The last step: private home folders, then the unprivileged uid. A grader that
    asked for a uid and cannot get it stops here rather than run student code as root."""
    if limits is None:
        return
    for name in list(os.environ):  # the grader's secrets (a gradebook password) stay with it
        if is_secret(name):  # (the grader also starts these processes without them)
            del os.environ[name]
    if limits.uid < 0:
        return
    private_home(limits.uid)
    try:
        drop_privileges(limits.uid)
    except OSError as err:
        note(f"could not drop privileges to uid {limits.uid}: {err}")
        os._exit(70)
