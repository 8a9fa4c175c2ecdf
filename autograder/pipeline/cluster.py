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
_idle_graders = {}  # (verb, settings, log_dir) -> [jobs._Worker], per Dask worker process


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
    try:
        result = grader.run(verb, assignment, student, log_dir)
    finally:
        with _graders_lock:
            _idle_graders[key].append(grader)
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
        with progress.bar(len(pairs), desc or verb) as bar:
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
