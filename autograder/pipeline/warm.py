"""Warm starts for a grading worker: its zygotes (autograder/sandbox/zygote.py).

Two per worker, each started on first use and gone with the worker:

- "sandbox" forks nbgrader's kernels and the judge's student's processes. It
  imports only what student code may see anyway (the libraries and the
  sandbox's own modules): a child's memory is the student's to read.
- "judge" forks judges; it has also loaded every assignment's hidden checks,
  which must never be in the other one.

COURSE_WARM_START=0 turns them off: every process is then a new interpreter.
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from ..sandbox.limits import ENV, without_secrets

KINDS = {
    "sandbox": {
        "preload": ["numpy", "torch", "IPython", "IPython.core.inputtransformer2", "ipykernel.kernelapp",
                    "ipykernel.ipkernel", "cloudpickle", "autograder.sandbox.kernel", "autograder.sandbox.student"],
        "entries": ["autograder.sandbox.kernel:kernel_main", "autograder.sandbox.student:main"],
    },
    "judge": {
        "preload": ["numpy", "torch", "cloudpickle", "autograder.pipeline.judge", "autograder.hidden",
                    "autograder.checks._support"],
        "after": ["autograder.pipeline.warm:load_every_check"],
        "entries": ["autograder.pipeline.judge:main"],
    },
}
KERNEL = "autograder.sandbox.kernel:kernel_main"
STUDENT = "autograder.sandbox.student:main"
JUDGE = "autograder.pipeline.judge:main"
SOCKET_VARIABLE = "COURSE_ZYGOTE"  # the sandbox zygote's socket, for judges (they start the student's process)

_lock = threading.Lock()
_running = {}


def enabled():
    return os.environ.get("COURSE_WARM_START", "1") != "0"


def socket_path(kind):
    """The socket of this process's zygote of `kind`, started now if needed (None: warm starts are off)."""
    if not enabled():
        return None
    with _lock:
        zygote = _running.get(kind)
        if zygote is None or zygote.process.poll() is not None:
            zygote = _running[kind] = _Zygote(kind)
        return zygote.socket


def load_every_check():
    """(in the judge zygote) import every assignment's hidden checks."""
    from .. import course, hidden
    for assignment in course.assignments():
        hidden.load_checks(assignment)


class _Zygote:
    def __init__(self, kind):
        self.folder = tempfile.mkdtemp(prefix=f"course-zygote-{kind}-")  # mode 0700: the grader's alone
        self.socket = os.path.join(self.folder, "socket")
        env = without_secrets(os.environ)
        for name in (ENV, "NBGRADER_EXECUTION", "COURSE_CHECKS_OUTSIDE", SOCKET_VARIABLE):
            env.pop(name, None)  # a submission's settings arrive with each request, never from here
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-c", "from autograder.sandbox.zygote import serve; serve()", self.socket,
             json.dumps(KINDS[kind])], env=env, stdin=subprocess.DEVNULL, stdout=2, start_new_session=True)
        atexit.register(self.stop)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
