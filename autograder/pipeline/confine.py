"""The grading process's side of a submission's sandbox: its cgroups, its uid, what it may see.

`Sandbox` prepares the limits that every process of one submission (its kernel,
the judge's student's process) applies to itself on entry (autograder/sandbox/).
"""
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ..sandbox.enter import chown_tree
from ..sandbox.limits import ENV, note

CGROUP_ROOT = Path("/sys/fs/cgroup")


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


# --- after student code ran -------------------------------------------------------------------
def remove_links(folder):
    """Remove every symbolic link and special file (FIFO, socket, device) under `folder`, never
    following a link; returns their paths.

    Student code could write in the folder, and the grader writes there next (the
    graded notebook), sets permissions on what is there and copies it into the
    feedback: through a planted link to /etc/shadow it would overwrite, open up or
    hand out a file of the grader's; a FIFO named like the notebook would block it.
    """
    import stat
    removed = []
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                continue
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


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


class Sandbox:
    """Owned by the grading process: prepares the environment of one submission's processes."""

    def __init__(self, limits, own_folder):
        from .. import course
        own = Path(own_folder).resolve()
        limits.writable = str(own)
        root, work = course.ROOT.resolve(), course.Course().workdir.resolve()
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
            chown_tree(own, limits.uid, limits.uid)  # the one folder the student's code may write
        elif limits.protect_files:
            note(f"grading runs as uid {os.geteuid()}, not root: student code keeps that uid, "
                  "and the course files are protected only by their permissions")
        self.cgroups = Cgroups(limits)
        limits.cgroups = self.cgroups.paths
        if not self.cgroups.available:
            note(f"cgroups unavailable ({self.cgroups.reason}): using rlimits")

    def environment(self, base=None):
        env = dict(os.environ if base is None else base)
        env[ENV] = self.limits.to_env()
        return env

    def close(self):
        self.cgroups.kill_all()
        self.cgroups.remove()
        if self.slot is not None:
            chown_tree(self.own, os.geteuid(), os.getegid())  # back to the grader
            self.slot.release()
