"""Ctrl-C in the instructor's terminal while `grade` runs, or a SIGTERM (a batch job's time limit):
it stops at once, says what to do, and leaves nothing of the submissions running
(autograder/cli.py, pipeline/jobs.py, pipeline/warm.py, sandbox/zygote.py).

Before: `grade` waited for the submission in progress (40 to 60 s here, up to a judge's limits),
printed a traceback, and the judge's student's process of a notebook that sleeps ran on, orphaned,
for as long as the cell slept (SIGKILL stopped its zygote without a word)."""
import copy
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder import gradebook, notebooks, samples

A = "01_processes_threads"


def _sleepy_submission():
    nb = copy.deepcopy(samples.submissions(A)["sample_perfect"])
    first = next(i for i, cell in enumerate(nb.cells) if notebooks.is_answer_cell(cell))
    nb.cells.insert(first, nbformat.v4.new_code_cell(
        "from pathlib import Path\nimport time\nPath('sleeping').touch()\ntime.sleep(100_000)"))
    return nb


def _holding(path):
    """Processes other than this one whose working folder or an open file is under `path`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            places = [os.readlink(f"/proc/{pid}/cwd")] + [os.readlink(f"/proc/{pid}/fd/{fd}")
                                                         for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if any(place.startswith(str(path)) for place in places):
            found.append(int(pid))
    return found


def _command_lines():
    """(pid, its command line's arguments) of every process readable here."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                yield int(pid), cmdline.read().decode(errors="replace").split("\0")
        except OSError:
            continue


def _started_by(pid):
    """Processes whose command line names `pid` as the parent they serve: the zygotes of `grade`
    and what they forked (kernels, judges, students' processes keep a zygote's command line)."""
    return [other for other, args in _command_lines() if any(f'"parent": {pid}' in arg for arg in args)]


def _workers_of(path):
    """The grading workers of the course at `path` (their log folder is under it)."""
    return [pid for pid, args in _command_lines()
            if "autograder.pipeline.worker" in args and any(arg.startswith(str(path)) for arg in args)]


def _connection_file_of_kernel(zygotes):
    """The `-f` file of the kernel's stand-in (`-m autograder.sandbox.zygote <socket> ...`) of these zygotes."""
    lines = dict(_command_lines())
    sockets = {arg for pid in zygotes for arg in lines.get(pid, []) if arg.endswith("/socket")}
    for args in lines.values():
        if "autograder.sandbox.zygote" in args and sockets & set(args) and "-f" in args:
            return args[args.index("-f") + 1]
    return None


@pytest.mark.parametrize("signum, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, False)],
                         ids=["ctrl-c in the terminal", "sigterm from a job scheduler", "sighup: the session closed"])
def test_an_interrupt_stops_grading_at_once_and_leaves_nothing_running(workdir_factory, signum, to_group):
    work = workdir_factory(f"interrupted-{signum}", [A])
    work.submit("sleepy", A, _sleepy_submission())
    env = {**os.environ, **work.course.environment()}
    env.pop("COURSE_ZYGOTE_SANDBOX", None), env.pop("COURSE_ZYGOTE_JUDGE", None)  # its own pair, as an instructor's
    grade = subprocess.Popen(
        [sys.executable, "-c", "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
         "os.execvp(sys.executable, [sys.executable, '-m', 'autograder', 'grade', sys.argv[1]])", A],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not list(work.path.rglob("sleeping")) and grade.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert grade.poll() is None and list(work.path.rglob("sleeping")), "the kernel never reached the sleeping cell"
        zygotes = _started_by(grade.pid)
        assert len(zygotes) >= 3, zygotes  # two zygotes and at least the kernel
        connection_file = _connection_file_of_kernel(zygotes)
        workers = _workers_of(work.path)  # whose judges' copies are named after them (other tests' run beside)
        assert workers and all(list(Path(tempfile.gettempdir()).glob(f"course-judge-{pid}-*")) for pid in workers)
        assert connection_file and any(Path(connection_file).name.startswith(f"course-connection-{pid}-")
                                       for pid in workers), connection_file  # and so are its kernels' files
        if to_group:
            os.killpg(grade.pid, signum)  # what the terminal does with Ctrl-C
        else:
            os.kill(grade.pid, signum)  # `kill <pid>`, a batch job's time limit
        out, err = grade.communicate(timeout=60)
    finally:
        if grade.poll() is None:
            os.killpg(grade.pid, signal.SIGKILL)
            grade.wait()
    assert grade.returncode == 128 + signum, (out[-2000:], err[-3000:])
    assert "grade: interrupted; the submissions graded before it keep their scores" in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    deadline = time.monotonic() + 15
    while (_holding(work.path) or any(Path(f"/proc/{pid}").exists() for pid in zygotes)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _holding(work.path), "a process of the stopped grading runs on"
    assert not any(Path(f"/proc/{pid}").exists() for pid in zygotes), "a zygote or a process it forked runs on"
    # Nothing of the stopped submission reads as graded (nbgrader had copied it into autograded/:
    # `feedback` and `report` took it for graded, with zeros), and the judge's copy of the student's
    # files is gone from the temp folder.
    assert gradebook.status("sleepy", A, work.course) == gradebook.NOT_GRADED
    assert not [copy for pid in workers for copy in Path(tempfile.gettempdir()).glob(f"course-judge-{pid}-*")]
    assert connection_file and not Path(connection_file).exists(), "the kernel's connection file (its key) is left"


def test_a_kernel_naming_another_file_on_its_command_line_does_not_get_it_removed(tmp_path, monkeypatch):
    """A stopped grading removes its kernels' connection files by their names (each names its
    grading process), never by reading its children's command lines: a kernel runs the student's
    code, which can rewrite its own command line (the bytes of its argv) to name another of the
    grader's files in the temp folder, as a connection file would be named there. Before, that
    file was removed."""
    from autograder.pipeline import jobs
    from autograder.pipeline.preprocessors import CONNECTION_PREFIX
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    decoy = tmp_path / "tmpx7decoy.json"  # as jupyter_client names its own connection files
    decoy.write_text("{}")
    ours = tmp_path / f"{CONNECTION_PREFIX}{os.getpid()}-k2m9.json"
    ours.write_text("{}")
    another = tmp_path / f"{CONNECTION_PREFIX}{os.getpid()}0-k2m9.json"  # another grading's
    another.write_text("{}")
    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-f", str(decoy)])
    try:
        deadline = time.monotonic() + 30
        while str(decoy) not in Path(f"/proc/{kernel.pid}/cmdline").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert jobs.connection_files([os.getpid()]) == [ours]
    finally:
        kernel.kill()
        kernel.wait()
