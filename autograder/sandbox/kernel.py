"""nbgrader's kernel for a submission: `python -P -m autograder.sandbox.kernel -f <connection file>`
(in place of `-m ipykernel_launcher`), an IPython kernel inside the submission's sandbox."""
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .enter import become_student, enter, isolate_network


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
    private = None
    if limits is not None and where:
        # Root-only; in the private /tmp, or, with file protection off, in the machine's.
        private = Path(tempfile.mkdtemp(prefix="course-kernel-"))
        (private / "kernel.json").write_bytes(connection)
        sys.argv[where] = str(private / "kernel.json")
    sys.argv.append("--HistoryManager.enabled=False")  # no history file to write as another uid
    # ipykernel reads these when it is imported, which in a zygote (autograder/sandbox/zygote.py)
    # happened before this process had its environment: give it this process's.
    for trait, variable in (("parent_handle", "JPY_PARENT_PID"), ("interrupt", "JPY_INTERRUPT_EVENT")):
        if os.environ.get(variable):
            sys.argv.append(f"--IPKernelApp.{trait}={int(os.environ[variable])}")
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize()
    if private is not None:
        # Read and rewritten by now; the key it holds is not left behind (the kernel, once it is
        # the student's uid, could not remove a root-only folder at exit).
        shutil.rmtree(private, ignore_errors=True)
    isolate_network(limits)
    become_student(limits)
    if os.environ.get("IPYTHONDIR") and app.shell is not None:
        # IPython chose its profile folder at initialize, as the grader, where the student's uid cannot
        # write: `%cd` (which keeps its history in the profile's db), `%bookmark` and `%store` failed
        # with PermissionError. The db goes to the student's own IPython folder (enter.private_home).
        from IPython.external.pickleshare import PickleShareDB
        app.shell.db = PickleShareDB(os.path.join(os.environ["IPYTHONDIR"], "profile_default", "db"))
    # The kernel starts with -P: the notebook's own folder (its modules, a `%%writefile`)
    # comes last on sys.path, where it cannot stand in for a library or the grader.
    sys.path.append(os.getcwd())
    app.start()


if __name__ == "__main__":
    kernel_main()
