"""Grading on an existing dask.distributed cluster (`grade --scheduler tcp://HOST:PORT`).

Each Dask worker hosts the same long-lived grading process as a local job
(`python -m autograder.pipeline.worker`, driven by `jobs._Worker`), one per worker
thread, started on its first submission and kept for the next ones. The
cluster only moves (assignment, student) pairs and small JSON answers: the
submissions, the graded notebooks and the logs stay in the course work folder,
which every machine must see at the same path (a shared file system), and the
scores go to the gradebook, which must be PostgreSQL (COURSE_DB_URL) as soon as
the workers run on more than one machine.

A worker that dies mid-submission loses that task; the scheduler gives it to
another worker (Dask's `allowed_failures` retries), and nbgrader's autograde
with force=True regrades it from scratch. The orphaned grading process notices
its parent is gone and exits (autograder/pipeline/worker.py), so it writes nothing more.

`grade` interrupted (Ctrl-C, SIGTERM) stops its run on every worker before it exits, as on one
machine (stop_run): no task of the run starts, and those in progress are stopped with their
kernels and judges and read as not graded.
"""
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

from .. import course
from . import jobs, lease, progress

# Settings a remote grader must share with this machine (read by nbgrader_config.py
# and the sandbox); the course's work folder and gradebook travel as COURSE_WORKDIR and COURSE_DB_URL.
SETTING_PREFIX = "COURSE_"
NOT_FORWARDED = ("COURSE_SCHEDULER",)

_graders_lock = threading.Lock()
_idle_graders = {}  # (verb, settings, log_dir, run) -> [jobs._Worker], per Dask worker process
# Per Dask worker process: run -> {id: (grader, (assignment, student), event set when its task
# returns)} of the submissions in progress, and the runs stopped (`grade` interrupted: stop_run).
_busy, _stopped_runs = {}, set()


def _settings(work):
    settings = {k: v for k, v in os.environ.items()
                if k.startswith(SETTING_PREFIX) and k not in NOT_FORWARDED}
    settings.update(COURSE_WORKDIR=str(work.workdir), COURSE_DB_URL=work.db_url)
    return settings


def graders_per_host(workers):
    """{host: grading threads of all the Dask workers there}, from the scheduler's `workers`
    ({address: {"host": ..., "nthreads": ...}}): the jobs that share one machine's cores."""
    shares = {}
    for info in workers.values():
        shares[info["host"]] = shares.get(info["host"], 0) + int(info["nthreads"])
    return shares


def lease_folder(run):
    """The lease on this machine for grading run `run` (lease.py), shared by the graders of every
    Dask worker here, so that a timing check gets the machine alone as in local grading. Made
    on first use (mode 0700, the grader's own), removed by `drop_lease` when the run ends."""
    folder = Path(tempfile.gettempdir()) / f"course-lease-{run}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return str(folder)


def stop_run(run, verb, workdir, db_url):
    """Run on every Dask worker when `grade` on the cluster is interrupted: as on one machine
    (jobs.stop_workers), the graders of run `run` here are killed, with their kernels and judges,
    and what the submissions in progress left is removed; no task of that run starts after it.
    Otherwise they went on grading, and dropping the run's lease under them failed each at its
    next cell, with a FileNotFoundError (and its zeros in the gradebook). The submissions stopped
    here, as (assignment, student) pairs."""
    with _graders_lock:
        _stopped_runs.add(run)
        busy = list(_busy.get(run, {}).values())
        graders = [grader for grader, _, _ in busy]
        for key in [key for key in _idle_graders if key[3] == run]:
            graders += _idle_graders.pop(key)
    work = course.Course(workdir, db_url)
    stopped = [pair for _, pair, _ in busy]
    jobs.stop_workers(graders, [done for _, _, done in busy], stopped, verb, work)
    for grader in graders:
        grader.close()
    return stopped


def drop_lease(run):
    """Remove this machine's lease folder of run `run` (run on every worker at the end)."""
    shutil.rmtree(Path(tempfile.gettempdir()) / f"course-lease-{run}", ignore_errors=True)


def grade_on_worker(verb, assignment, student, settings, log_dir, shares=None, run=None):
    """Run inside a Dask worker: hand one submission to one of this worker's graders.

    `shares`: graders_per_host of the cluster (BLAS and OpenMP threads are the machine's cores
    divided among all of them, not among this Dask worker's threads alone); `run`: the grading
    run, whose lease the graders of this machine share unless the settings name one already.
    Returns a plain dict (the JobResult's fields plus the Dask worker that did it).
    """
    from distributed import get_worker

    worker = get_worker()
    key = (verb, tuple(sorted(settings.items())), str(log_dir), run)
    with _graders_lock:
        if run in _stopped_runs:  # a task that started after its run was stopped: nobody awaits it
            raise InterruptedError("grading was interrupted")
        idle = _idle_graders.setdefault(key, [])
        grader = idle.pop() if idle else None
    if grader is None:
        work = course.Course(settings["COURSE_WORKDIR"], settings["COURSE_DB_URL"])
        here = urlparse(worker.address).hostname
        env = jobs.job_environment((shares or {}).get(here) or worker.state.nthreads, work)
        env.update(settings)
        if verb == "autograde" and run and not env.get(lease.ENV):
            env[lease.ENV] = lease_folder(run)
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        grader = jobs._Worker(verb, env, log_dir)
    done = threading.Event()
    with _graders_lock:
        if run in _stopped_runs:
            raise InterruptedError("grading was interrupted")
        _busy.setdefault(run, {})[id(done)] = (grader, (assignment, student), done)
    try:
        result = grader.run(verb, assignment, student, log_dir)
    finally:
        with _graders_lock:
            del _busy[run][id(done)]
            if run not in _stopped_runs:
                _idle_graders.setdefault(key, []).append(grader)
        done.set()
    return {"assignment": result.assignment, "student": result.student, "ok": result.ok,
            "seconds": result.seconds, "log": str(result.log), "worker": worker.address,
            "pid": os.getpid()}


CONNECT_TIMEOUT = 60  # seconds to wait for the scheduler to answer


def connect(address):
    """A distributed.Client of the scheduler at `address`; jobs.ClusterUnreachable, naming the
    address and what to check, when none answers within CONNECT_TIMEOUT (a mistyped host or
    port, a scheduler not started) or the address cannot be one."""
    from distributed import Client

    try:
        return Client(address, timeout=f"{CONNECT_TIMEOUT}s")
    except OSError:
        raise jobs.ClusterUnreachable(
            f"no Dask scheduler answered at {address} within {CONNECT_TIMEOUT:g} s: check the host and port "
            "(--scheduler, or COURSE_SCHEDULER), that `dask scheduler` runs there and that this machine "
            "can reach it; leave both out to grade on this machine") from None
    except (ValueError, TypeError) as err:
        raise jobs.ClusterUnreachable(f"{address!r} is not a Dask scheduler address ({err}): "
                                      "give it as tcp://HOST:PORT") from None


def run_all(verb, pairs, scheduler, desc=None, log_dir=None, work=None, on_result=None):
    """Like jobs.run_all, on the workers of the Dask cluster at `scheduler` (an address,
    or a distributed.Client). Returns JobResults sorted by assignment, student;
    `on_result(dict)` sees each answer as it arrives (the test uses it)."""
    from distributed import Client, as_completed

    work = work or course.Course()
    work = course.Course(work.workdir.resolve(), work.db_url)
    log_dir = Path(log_dir or work.reports / "logs").resolve()
    log_dir.mkdir(parents=True, exist_ok=True)
    settings = _settings(work)
    if work.db_url.startswith("sqlite"):
        print("note: grading on a Dask cluster into a SQLite gradebook: fine while every worker "
              "runs on this machine; set COURSE_DB_URL to PostgreSQL for workers elsewhere",
              file=sys.stderr)
    pairs = list(pairs)
    client = scheduler if isinstance(scheduler, Client) else connect(scheduler)
    run = uuid.uuid4().hex[:12]
    try:
        shares = graders_per_host(client.scheduler_info(n_workers=-1)["workers"])
        futures = [client.submit(grade_on_worker, verb, assignment, student, settings, str(log_dir),
                                 shares, run, key=f"{verb}-{student}-{assignment}-{time.time_ns()}",
                                 pure=False)
                   for assignment, student in pairs]
        results = []
        with progress.bar(len(pairs), desc or verb) as bar, _stopped_on_interrupt(client, futures, run, verb, work):
            for future in as_completed(futures):
                answer = future.result()
                results.append(jobs.JobResult(answer["assignment"], answer["student"], answer["ok"],
                                              answer["seconds"], Path(answer["log"])))
                if on_result is not None:
                    on_result(answer)
                bar.update()
                if not answer["ok"]:
                    bar.write(f"  {verb} failed for {answer['student']}/{answer['assignment']} "
                              f"on {answer['worker']}: see {answer['log']}")
    finally:
        with contextlib.suppress(Exception):  # a worker gone meanwhile keeps its empty folder
            client.run(drop_lease, run)
        if client is not scheduler:
            client.close()
    return sorted(results, key=lambda r: (r.assignment, r.student))


@contextlib.contextmanager
def _stopped_on_interrupt(client, futures, run, verb, work):
    """Interrupted (Ctrl-C, SIGTERM), the run stops on the cluster as on one machine: no task
    of it starts, and those in progress are stopped (stop_run) before `grade` exits; a second
    Ctrl-C meanwhile waits."""
    try:
        yield
    except BaseException:
        import signal
        held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        main = threading.current_thread() is threading.main_thread()
        previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in held} if main else {}
        try:
            with contextlib.suppress(Exception):  # a cluster gone meanwhile stops nothing more
                client.cancel(futures)
                client.run(stop_run, run, verb, str(work.workdir), work.db_url, wait=True)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        raise
