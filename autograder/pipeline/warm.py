"""Warm starts for grading: the zygotes (autograder/sandbox/zygote.py).

Two kinds, started by `python -m autograder grade` for all its workers
(`shared()`), or by a worker that was given none (a Dask worker) on first use;
they end with the process that started them. A caller that grades many times
(the course's own tests) may start one pair for all of them with
`python -m autograder.pipeline.warm` and pass its sockets down in the
environment (`inherited()`): `grade` then starts none.

- "sandbox" forks nbgrader's kernels and the judge's student's processes. It
  imports only what student code may see anyway (the libraries and the
  sandbox's own modules): a child's memory is the student's to read.
- "judge" forks judges; it has also loaded every assignment's hidden checks,
  which must never be in the other one.

COURSE_WARM_START=0 turns them off: every process is then a new interpreter.
"""
import atexit
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from .. import course
from ..sandbox.zygote import FAILED
from ..sandbox.limits import ENV, without_secrets

KINDS = {
    "sandbox": {
        # torch._dynamo: the student's process imports it before its snapshot (0.9 s of CPU).
        # matplotlib.pyplot: every notebook imports it, 0.4-0.5 s of CPU in each kernel and
        # student's process (its font list is then loaded from the grader's cache, too).
        "preload": ["numpy", "torch", "torch._dynamo", "scipy", "matplotlib", "matplotlib.pyplot",
                    "matplotlib_inline.backend_inline", "IPython", "IPython.core.inputtransformer2",
                    "ipykernel.kernelapp", "ipykernel.ipkernel", "cloudpickle", "autograder.sandbox.kernel",
                    "autograder.sandbox.student"],
        "entries": ["autograder.sandbox.kernel:kernel_main", "autograder.sandbox.student:main"],
    },
    "judge": {
        "preload": ["numpy", "torch", "torch._dynamo", "cloudpickle", "autograder.pipeline.judge",
                    "autograder.hidden", "autograder.checks._support"],
        "after": ["autograder.pipeline.warm:load_every_check"],
        "entries": ["autograder.pipeline.judge:main"],
    },
}
KERNEL = "autograder.sandbox.kernel:kernel_main"
STUDENT = "autograder.sandbox.student:main"
JUDGE = "autograder.pipeline.judge:main"
SOCKET_VARIABLE = "COURSE_ZYGOTE"  # the sandbox zygote's socket, for judges (they start the student's process)
SHARED_VARIABLES = {"sandbox": "COURSE_ZYGOTE_SANDBOX", "judge": "COURSE_ZYGOTE_JUDGE"}  # from shared()
HELD_FOR = "COURSE_ZYGOTE_FOR"  # whom a held pair serves (held_for()): main() prints it with the sockets

_lock = threading.Lock()
_running = {}


def enabled():
    return os.environ.get("COURSE_WARM_START", "1") != "0"


def socket_path(kind):
    """The socket of this process's zygote of `kind`, started now if needed and ready to fork
    (None: warm starts are off, or the zygote could not start: new interpreters then)."""
    if not enabled():
        return None
    given = os.environ.get(SHARED_VARIABLES[kind])
    if os.environ.get(HELD_FOR, held_for()) != held_for():
        given = None  # a pair held for another course or grader (inherited())
    if given:  # the grading process's, shared by its workers (or one held for them, inherited())
        deadline = time.monotonic() + 120
        while not os.path.exists(given) and time.monotonic() < deadline:
            # It will never answer: its imports failed, or it ended and took its folder along.
            if os.path.exists(given + FAILED) or not os.path.isdir(os.path.dirname(given)):
                return None
            time.sleep(0.02)
        return given if os.path.exists(given) else None
    with _lock:
        zygote = _running.get(kind)
        if zygote is None or zygote.process.poll() is not None:
            zygote = _running[kind] = _Zygote(kind)
        return zygote.socket if zygote.ready() else None


# The zygotes ({kind: _Zygote}) that kept() keeps for several grading passes, innermost last.
_kept = []


@contextlib.contextmanager
def shared(env):
    """Start both zygotes now, for every worker that gets `env` (which this adds their sockets to);
    they import while the workers start, and stop when the block ends. Inside kept(), the kept
    pair serves instead, and a pair this process inherited (inherited()) before either."""
    if not enabled():
        yield env
        return
    if _kept:
        yield {**_not_held(env), **_sockets(_kept[-1])}
        return
    given = inherited()
    if given:
        yield {**env, **given}
        return
    with kept():
        yield {**_not_held(env), **_sockets(_kept[-1])}


def _not_held(env):
    """`env` for workers given a pair of ours: no HELD_FOR of a pair held for someone else."""
    return {name: value for name, value in env.items() if name != HELD_FOR}


@contextlib.contextmanager
def kept():
    """One pair of zygotes for every shared() of the block: `grade` keeps its batch's pair for
    the regrade alone (about 6 CPU-s, 3 s, to start a pair). A zygote serves each request as
    it did the first: nothing of one grading stays in it for the next."""
    if not enabled() or inherited():
        yield
        return
    zygotes = {kind: _Zygote(kind) for kind in KINDS}
    _kept.append(zygotes)
    try:
        yield
    finally:
        _kept.remove(zygotes)
        for zygote in zygotes.values():
            zygote.stop()


def _sockets(zygotes):
    """Their sockets, a zygote that has died replaced first (every start would wait for it)."""
    for kind, zygote in list(zygotes.items()):
        if zygote.process.poll() is not None:
            zygote.stop()
            zygotes[kind] = _Zygote(kind)
    return {SHARED_VARIABLES[kind]: zygote.socket for kind, zygote in zygotes.items()}


def inherited():
    """{variable: socket} of the pair the environment names (SHARED_VARIABLES), held by main() for
    this very course and grader (HELD_FOR), when both zygotes answer; else None. A pair imported
    its course's code and runs its children with its holder's powers: a copy of the course with
    other checks, or a grader with fewer powers (another user, a user namespace), starts its own."""
    sockets = {variable: os.environ.get(variable) for variable in SHARED_VARIABLES.values()}
    if os.environ.get(HELD_FOR) != held_for() or not all(sockets.values()):
        return None
    if not all(_answers(path) for path in sockets.values()):
        return None
    return sockets


def held_for():
    """This process's course, uid and user namespace, as one string."""
    try:
        namespace = os.readlink("/proc/self/ns/user")
    except OSError:
        namespace = "?"
    return f"{os.getuid()}:{namespace}:{course.ROOT}"


def _answers(path):
    """Whether a zygote listens at `path` for us (the zygote takes an empty connection as no request)."""
    import socket
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def load_every_check():
    """(in the judge zygote) import every assignment's hidden checks."""
    from .. import course, hidden
    for assignment in course.assignments():
        hidden.load_checks(assignment)


# A Unix socket's path has at most 107 bytes (sun_path, with its NUL): a cluster job's scratch
# TMPDIR can be longer than that leaves room for. The zygote binds "socket.new" first.
_SOCKET_PATH_BYTES = 107


def _socket_folder(kind):
    """A new folder (mode 0700: the grader's alone) for a zygote's socket: in the temp folder where
    the socket's path fits, else in the first of /tmp, /dev/shm and $XDG_RUNTIME_DIR where it does.
    Where none does, the temp folder's: the zygote then fails at once, and processes start cold."""
    prefix = f"course-zygote-{kind}-"
    for parent in (None, "/tmp", "/dev/shm", os.environ.get("XDG_RUNTIME_DIR")):
        try:
            folder = tempfile.mkdtemp(prefix=prefix, dir=parent)
        except (OSError, TypeError):  # not there, not writable; TypeError: $XDG_RUNTIME_DIR unset
            continue
        if len(os.fsencode(os.path.join(folder, "socket.new"))) <= _SOCKET_PATH_BYTES:
            return folder
        os.rmdir(folder)
    return tempfile.mkdtemp(prefix=prefix)


class _Zygote:
    def __init__(self, kind):
        self.folder = _socket_folder(kind)
        self.socket = os.path.join(self.folder, "socket")
        env = without_secrets(os.environ)
        for name in (ENV, "NBGRADER_EXECUTION", "COURSE_CHECKS_OUTSIDE", SOCKET_VARIABLE, HELD_FOR,
                     *SHARED_VARIABLES.values()):
            env.pop(name, None)  # a submission's settings arrive with each request, never from here
        # It runs with -P: without the repository on its path (`python -m autograder grade` from a
        # shell that did not source bin/env.sh) it could not import autograder and would die.
        env["PYTHONPATH"] = course.python_path(env)
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-c", "from autograder.sandbox.zygote import serve; serve()", self.socket,
             json.dumps({**KINDS[kind], "parent": os.getpid()})], env=env, stdin=subprocess.DEVNULL, stdout=2, start_new_session=True)
        atexit.register(self.stop)

    def ready(self, timeout=120):
        """Whether it answers (it makes its socket once its imports are done), waiting while it starts."""
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.socket):
            if self.process.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def stop(self):
        """SIGTERM first: the zygote then kills what it forked (a judge, a kernel, a student's
        process still running when `grade` was interrupted); SIGKILL left them running on."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def main():
    """python -m autograder.pipeline.warm: start a pair of zygotes, print their sockets as
    VARIABLE=path lines once both answer (and HELD_FOR=held_for()), and keep them until this
    process's parent (the shell that runs the course's tests) is gone, or a SIGTERM."""
    import signal
    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    zygotes = {kind: _Zygote(kind) for kind in KINDS}
    try:
        if not all(zygote.ready() for zygote in zygotes.values()):
            raise SystemExit("warm: a zygote did not start")
        for kind, zygote in zygotes.items():
            print(f"{SHARED_VARIABLES[kind]}={zygote.socket}", flush=True)
        print(f"{HELD_FOR}={held_for()}", flush=True)
        while os.getppid() == parent and all(z.process.poll() is None for z in zygotes.values()):
            time.sleep(0.5)
    finally:
        for zygote in zygotes.values():
            zygote.stop()


if __name__ == "__main__":
    main()
