"""Grading on a Dask cluster: `python -m autograder grade --scheduler tcp://HOST:PORT`.

A dask.distributed LocalCluster of three separate worker processes (each with
a nanny that restarts it) stands in for a scheduler and N machines; the
gradebook is the throw-away PostgreSQL server, the work folder is shared
(same path for all). The course's own command grades the sample submissions
through that scheduler; while a submission is being graded, its Dask worker is
killed with SIGKILL. The submission must be graded again elsewhere, the
orphaned grading process must exit, the progress must still show, and the
gradebook must equal the local SQLite run. The same course then goes through
`feedback` and `report` reading PostgreSQL: the gradebook in PostgreSQL end to
end (release, samples, grade, feedback, report), with no SQLite file written.
"""
import contextlib
import csv
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder import course

pytestmark = [pytest.mark.scale, pytest.mark.timeout(900)]
# What the shared graded course (the SQLite baseline) must hold: conftest's SCALE_ASSIGNMENTS.
# The test asks for it only once the cluster has graded (the course is graded meanwhile, beside it).
GRADED_ASSIGNMENTS = ("01_processes_threads",)
ASSIGNMENT = "01_processes_threads"


def _busy_worker(client, pids, psutil):
    """(address, key) of a worker in the middle of a submission (its grader's kernel or judge runs),
    else None."""
    for address, keys in client.processing().items():
        if not keys or address not in pids:
            continue
        with contextlib.suppress(psutil.Error):
            if _grading_below(psutil.Process(pids[address]), psutil):
                return address, list(keys)[0]
    return None


def _stacks(client):
    """Every thread's stack on every Dask worker, and the processes below each (a test's diagnosis)."""
    def where():
        import traceback

        import psutil
        stacks = "".join(f"--- thread {ident}\n" + "".join(traceback.format_stack(frame))
                         for ident, frame in sys._current_frames().items())
        below = [" ".join(p.cmdline())[:160] for p in psutil.Process().children(recursive=True)]
        return stacks[-8000:] + "\nbelow:\n" + "\n".join(below)
    try:
        return "\n".join(f"== {address}\n{text}" for address, text in client.run(where).items())
    except Exception as failed:  # noqa: BLE001
        return f"(no answer: {failed!r})"


def _grading_below(process, psutil):
    """Whether a kernel or judge runs below `process`: its stand-in (`python -m
    autograder.sandbox.zygote <socket> <entry> ...`, whose process a zygote forks, the run's
    own or the pair bin/test shares) or, without zygotes, the kernel itself. A zygote names the
    kernel's entry on its command line too: no looser reading of command lines tells them apart."""
    grading = {"autograder.sandbox.zygote", "autograder.sandbox.kernel"}
    with contextlib.suppress(psutil.Error):
        for child in process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                argv = child.cmdline()
                if any(a == "-m" and b in grading for a, b in zip(argv, argv[1:])):
                    return True
    return False


def test_grade_on_dask_cluster_survives_a_killed_worker(postgres, course_tools, tmp_path, request):
    distributed = pytest.importorskip("distributed")
    dask = pytest.importorskip("dask")
    psutil = pytest.importorskip("psutil")
    db_url = postgres.url("course_dask")
    course_tools.prepare(tmp_path, [ASSIGNMENT], db_url)

    # The scheduler's and workers' scratch space in the test's folder (else /tmp/dask-scratch-space stays).
    scratch = dask.config.set({"temporary-directory": str(tmp_path / "dask")})
    # The workers' temp folder of their own (short: a forkserver's socket path has 108 bytes), to
    # see what the killed grading leaves there.
    temp = Path(tempfile.mkdtemp(prefix="course-dask-"))
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    with scratch, distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, host="127.0.0.1",
                                           scheduler_port=course_tools.free_port(), dashboard_address=None,
                                           silence_logs=logging.ERROR, env={"TMPDIR": str(temp)}) as cluster, \
            distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        env = {**os.environ, "COURSE_WORKDIR": str(tmp_path), "COURSE_DB_URL": db_url}
        grading = subprocess.Popen(
            [sys.executable, "-m", "autograder", "grade", ASSIGNMENT, "--scheduler", cluster.scheduler_address],
            cwd=course.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            victim, deadline = None, time.monotonic() + 300
            while victim is None and grading.poll() is None and time.monotonic() < deadline:
                victim = _busy_worker(client, pids, psutil)
                time.sleep(0.2)
            assert victim is not None, "no submission was seen running on a worker"
            address, key = victim
            worker = psutil.Process(pids[address])
            graders = [p for p in worker.children() if "autograder.pipeline.worker" in " ".join(p.cmdline())]
            assert graders, "the Dask worker hosts no long-lived grading process"
            # The three workers' graders divide this machine's cores (each took them all).
            from helpers.system import usable_cores
            threads = {p.environ().get("OMP_NUM_THREADS") for p in graders}
            assert threads == {str(max(1, usable_cores() // 3))}, threads
            killed_at = time.time()
            os.kill(pids[address], signal.SIGKILL)
            # The orphaned grader stops at once rather than finish (and write) the submission.
            gone, alive = psutil.wait_procs(graders, timeout=10)
            assert not alive, f"grading processes still running after their worker died: {alive}"
            out, err = grading.communicate(timeout=600)
        finally:
            if grading.poll() is None:
                grading.kill()
    assert grading.returncode == 0, f"{out[-3000:]}\n{err[-3000:]}"
    assert (tmp_path / "dask" / "dask-scratch-space").is_dir(), "the cluster's scratch space is elsewhere"
    # The killed grading removed its kernel's connection file (with the kernel's key) and the
    # judge's copy of the student's files as it stopped; the others, as they ended.
    left = sorted(p.name for p in temp.iterdir() if p.name.startswith("course-judge-") or p.suffix == ".json")
    assert not left, f"left in the workers' temp folder: {left}"
    assert "3 of 3 submissions graded" in out, out
    # stderr is a pipe here, so the progress comes as plain lines, not a bar's carriage returns
    assert "autograde: 3/3 submissions (100 %)" in err and "\r" not in err, "no progress on stderr"

    # The killed submission was graded again, after the kill.
    student = next(s for s in ("sample_perfect", "sample_blank", "sample_partial") if f"-{s}-" in key)
    regraded = tmp_path / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert regraded.stat().st_mtime > killed_at, f"{student} was not graded again after its worker died"

    expected = {k: v for k, v in request.getfixturevalue("sqlite_baseline").items() if k[1] == ASSIGNMENT}
    scores = course_tools.scores(tmp_path, db_url)
    # A timing check that could not decide, twice, in one run and not the other (a busy test machine)
    # makes that cell differ without any fault of the cluster: skipped, visibly; other differences fail.
    differ = {k for k in set(scores) | set(expected) if scores.get(k) != expected.get(k)}
    unsure = course_tools.undecided_cells(request.getfixturevalue("graded_course")["work"], tmp_path)
    if differ and differ <= unsure:
        pytest.skip(f"only cells that could not decide on this machine now differ: {sorted(differ)}")
    assert scores == expected, {k: (scores.get(k), expected.get(k)) for k in set(scores) | set(expected)
                                if scores.get(k) != expected.get(k)}

    # Feedback and the report, read from PostgreSQL.
    course_tools.cli("feedback", ASSIGNMENT, workdir=tmp_path, db_url=db_url)
    for student, assignment in {(s, a) for s, a, _ in scores}:
        html = (tmp_path / "feedback" / student / assignment / f"{assignment}.html").read_text()
        assert "Score:" in html and "HIDDEN TESTS" not in html
    course_tools.cli("report", ASSIGNMENT, workdir=tmp_path, db_url=db_url)
    with open(tmp_path / "reports" / "grades.csv", newline="") as f:
        report = {(r["student"], r["assignment"]): float(r["score"]) for r in csv.DictReader(f)}
    totals = {}
    for (student, assignment, _), (score, _) in expected.items():
        totals[(student, assignment)] = totals.get((student, assignment), 0.0) + score
    assert report == totals
    assert not (tmp_path / "gradebook.db").exists(), "something wrote a SQLite gradebook"


def test_grade_interrupted_on_a_dask_cluster_stops_the_run_there_too(course_tools, tmp_path):
    """Ctrl-C on `grade --scheduler` stops the run on the workers as on one machine
    (cluster.stop_run): the submissions in progress (two that sleep, one on each worker) are
    stopped with their kernels and judges and read as not graded, and the workers grade the next
    run. Before, the run's lease was dropped under the graders still at work, and each failed at
    its next cell (a FileNotFoundError in its log) while `grade` said they might still finish."""
    distributed = pytest.importorskip("distributed")
    dask = pytest.importorskip("dask")
    psutil = pytest.importorskip("psutil")
    import re
    import shutil
    import tempfile
    from pathlib import Path

    import nbformat

    from autograder import gradebook, notebooks, samples
    db_url = course_tools.prepare(tmp_path, [ASSIGNMENT])
    work = course.Course(tmp_path, db_url)
    sleepy = samples.submissions(ASSIGNMENT)["sample_perfect"]
    first = next(i for i, cell in enumerate(sleepy.cells) if notebooks.is_answer_cell(cell))
    sleepy.cells.insert(first, nbformat.v4.new_code_cell(
        "from pathlib import Path\nimport time\nPath('sleeping').touch()\ntime.sleep(100_000)"))
    for student in ("sleepy1", "sleepy2"):
        folder = work.submitted / student / ASSIGNMENT
        shutil.copytree(course.RELEASE / ASSIGNMENT, folder, ignore=shutil.ignore_patterns("*.ipynb"))
        nbformat.write(sleepy, str(folder / f"{ASSIGNMENT}.ipynb"))
    leases = re.compile(r"course-lease-[0-9a-f]{12}$")  # a cluster run's (cluster.lease_folder)
    leases_before = {p for p in os.listdir(tempfile.gettempdir()) if leases.match(p)}
    with dask.config.set({"temporary-directory": str(tmp_path / "dask")}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     scheduler_port=course_tools.free_port(), dashboard_address=None,
                                     silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        dask_workers = [psutil.Process(pid) for pid in pids.values()]

        def below():
            found = []
            for worker in dask_workers:
                with contextlib.suppress(psutil.Error):
                    found += worker.children(recursive=True)
            return found

        env = {**os.environ, "COURSE_WORKDIR": str(tmp_path), "COURSE_DB_URL": db_url}
        command = [sys.executable, "-m", "autograder", "grade", ASSIGNMENT, "--scheduler", cluster.scheduler_address]
        # Ctrl-C as in a terminal: a test run in the background of a shell (as CI may start it)
        # passes SIGINT on ignored, and Python then leaves it so. SIGUSR1 prints where `grade` is
        # (faulthandler), should it not stop in time.
        traced = [sys.executable, "-c", "import faulthandler, runpy, signal, sys; "
                  "signal.signal(signal.SIGINT, signal.default_int_handler); faulthandler.register(signal.SIGUSR1); "
                  "sys.argv = ['autograder', *sys.argv[1:]]; runpy.run_module('autograder', run_name='__main__')",
                  *command[3:]]
        grading = subprocess.Popen(traced + ["--students", "sleepy1", "sleepy2"], cwd=course.ROOT, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            while (len(list((tmp_path / "autograded").rglob("sleeping"))) < 2 and grading.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.1)
            assert len(list((tmp_path / "autograded").rglob("sleeping"))) == 2, "the two never slept side by side"
            assert all(_grading_below(worker, psutil) for worker in dask_workers), "not one on each worker"
            graders = [p.pid for p in below() if "autograder.pipeline.worker" in " ".join(p.cmdline())]
            grading.send_signal(signal.SIGINT)
            sent = time.monotonic()
            try:
                out, err = grading.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                grading.send_signal(signal.SIGUSR1)
                time.sleep(2)
                grading.kill()
                out, err = grading.communicate()
                pytest.fail(f"grade did not stop within 180 s; where it was:\n{err[-6000:]}\n"
                            f"on the workers:\n{_stacks(client)}")
            took = time.monotonic() - sent
        finally:
            if grading.poll() is None:
                grading.kill()
        assert grading.returncode == 130, (out[-2000:], err[-3000:])
        assert "grade: interrupted; the submissions graded before it keep their scores; those in progress were " \
               "stopped" in err and "Traceback" not in err, err[-3000:]
        assert took < 60, f"stopping took {took:.0f} s"  # 2 s here
        # Nothing of the run goes on on the workers (stop_run waited for it before `grade` exited).
        assert not below(), [p.cmdline() for p in below()]
        left = {p for p in os.listdir(tempfile.gettempdir()) if leases.match(p)}
        assert left <= leases_before, "the run's lease is left"
        assert graders and not [c for pid in graders for c in Path(tempfile.gettempdir()).glob(f"course-judge-{pid}-*")]
        for student in ("sleepy1", "sleepy2"):
            assert gradebook.status(student, ASSIGNMENT, work) == gradebook.NOT_GRADED
            assert not (work.autograded / student / ASSIGNMENT).exists()
        logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "reports" / "logs").glob("*.log"))
        assert "FileNotFoundError" not in logs
        # The same workers grade the next run.
        done = subprocess.run(command + ["--students", "sample_blank"], cwd=course.ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "1 of 1 submissions graded" in done.stdout, \
            done.stdout[-2000:] + done.stderr[-2000:]
        assert gradebook.status("sample_blank", ASSIGNMENT, work) == gradebook.GRADED
        # A run that ended leaves no grader behind on the workers (each kept one per worker thread,
        # with nbgrader imported, for as long as the worker lived).
        deadline = time.monotonic() + 30
        while below() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not below(), [" ".join(p.cmdline())[:120] for p in below()]


class _Client:
    """A stand-in for distributed.Client in the stop of an interrupted run."""

    def __init__(self, run):
        self.cancelled, self._run = [], run

    def cancel(self, futures):
        self.cancelled.append(list(futures))

    def run(self, function, *args, **kwargs):
        return self._run()


@pytest.mark.parametrize("answer, said", [
    pytest.param(lambda: {"tcp://w1": []}, None, id="every-worker-stopped"),
    pytest.param(lambda: time.sleep(3600), "not every worker answered within 1 s",
                 id="a-worker-that-does-not-answer"),
    pytest.param(lambda: (_ for _ in ()).throw(OSError("connection lost")), "OSError: connection lost",
                 id="the-cluster-gone"),
])
def test_an_interrupted_run_that_the_workers_do_not_all_stop_says_so(monkeypatch, answer, said):
    """A worker alive but not answering (a hung host, a paused VM) held `grade` until the scheduler
    dropped it, minutes, with Ctrl-C ignored meanwhile: the wait now ends after STOP_LIMIT, and
    `grade` says that the submissions in progress may go on there."""
    from autograder import cli
    from autograder.pipeline import cluster
    monkeypatch.setattr(cluster, "STOP_LIMIT", 1)
    client, futures = _Client(answer), ["f1", "f2"]
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt) as stopped:
        with cluster._stopped_on_interrupt(client, futures, "run1", "autograde", course.Course("/nonexistent")):
            raise KeyboardInterrupt
    assert time.monotonic() - started < 10 and client.cancelled == [futures]
    assert getattr(stopped.value, "course_said", None) == (said and cluster.INCOMPLETE_STOP.format(why=said))
    if said:
        assert "may go on there" in stopped.value.course_said and "grade every one left" in stopped.value.course_said
    else:
        assert cli.INTERRUPTED["grade"].startswith("; the submissions graded before it keep their scores")


def test_grade_says_what_the_stop_on_the_cluster_left(monkeypatch, capsys):
    from autograder import cli

    def step(name, *_):
        def run(args):
            stopped = KeyboardInterrupt()
            stopped.course_said = "; the cluster's workers did not all say that they stopped those in progress"
            raise stopped
        return run
    monkeypatch.setattr(cli, "_verb", step)
    monkeypatch.setattr(os, "environ", dict(os.environ))  # main() sets the job's environment
    assert cli.main(["grade", ASSIGNMENT]) == 130
    assert "grade: interrupted; the cluster's workers did not all say that they stopped" in capsys.readouterr().err
