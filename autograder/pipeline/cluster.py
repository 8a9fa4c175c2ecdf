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
# returns)} of the submissions in progress, and the runs over (stop_run, end_run: no task of
# theirs starts, and a grader of theirs goes back to no pool).
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
    on first use (mode 0700, the grader's own), removed by `end_run` when the run ends."""
    folder = Path(tempfile.gettempdir()) / f"course-lease-{run}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return str(folder)


async def stop_run(run, verb, workdir):
    """Run on every Dask worker when `grade` on the cluster is interrupted: as on one machine
    (jobs.stop_workers), the graders of run `run` here are killed, with their kernels and judges,
    and what the submissions in progress left is removed; no task of that run starts after it.
    Otherwise they went on grading, and dropping the run's lease under them failed each at its
    next cell, with a FileNotFoundError. The submissions stopped here, as (assignment, student)
    pairs. In a thread: the worker's event loop (its heartbeats) goes on meanwhile."""
    import asyncio
    return await asyncio.to_thread(_stop_run, run, verb, workdir)


def _stop_run(run, verb, workdir):
    with _graders_lock:
        _stopped_runs.add(run)
        busy = list(_busy.get(run, {}).values())
        idle = _idle_of(run)
    stopped = [pair for _, pair, _ in busy]
    jobs.stop_workers([grader for grader, _, _ in busy] + idle, [done for _, _, done in busy], stopped, verb,
                      course.Course(workdir))
    for grader in idle:  # a busy one is closed by its task, once its answer is read
        grader.close()
    return stopped


def _idle_of(run):
    """Take the idle graders of run `run` out of the pool (under _graders_lock)."""
    graders = []
    for key in [key for key in _idle_graders if key[3] == run]:
        graders += _idle_graders.pop(key)
    return graders


async def end_run(run):
    """Run on every worker at the end of run `run`, interrupted or not: its graders here, idle
    now, are closed (each is a process with nbgrader imported, kept for the run's next
    submission), and this machine's lease folder of the run is removed."""
    import asyncio
    with _graders_lock:
        _stopped_runs.add(run)  # a task of it that still returns closes its grader
        graders = _idle_of(run)
        _busy.pop(run, None)
    await asyncio.to_thread(lambda: [grader.close() for grader in graders])
    drop_lease(run)


def drop_lease(run):
    """Remove this machine's lease folder of run `run`."""
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
    done = threading.Event()
    # One hold of the lock: a grader taken here is one stop_run finds (busy), whenever it runs.
    with _graders_lock:
        if run in _stopped_runs:  # a task that started after its run was stopped: nobody awaits it
            raise InterruptedError("grading was interrupted")
        idle = _idle_graders.setdefault(key, [])
        grader = idle.pop() if idle else _new_grader(verb, settings, log_dir, shares, run, worker)
        _busy.setdefault(run, {})[id(done)] = (grader, (assignment, student), done)
    try:
        result = grader.run(verb, assignment, student, log_dir)
    finally:
        with _graders_lock:
            _busy.get(run, {}).pop(id(done), None)
            kept = run not in _stopped_runs
            if kept:
                _idle_graders.setdefault(key, []).append(grader)
        done.set()
        if not kept:
            grader.close()
    return {"assignment": result.assignment, "student": result.student, "ok": result.ok,
            "seconds": result.seconds, "log": str(result.log), "worker": worker.address,
            "pid": os.getpid()}


def _new_grader(verb, settings, log_dir, shares, run, worker):
    """A grader (jobs._Worker: its process starts with its first submission) for this Dask worker."""
    work = course.Course(settings["COURSE_WORKDIR"], settings["COURSE_DB_URL"])
    here = urlparse(worker.address).hostname
    env = jobs.job_environment((shares or {}).get(here) or worker.state.nthreads, work)
    env.update(settings)
    if verb == "autograde" and run and not env.get(lease.ENV):
        env[lease.ENV] = lease_folder(run)
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    return jobs._Worker(verb, env, log_dir)


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
    results, futures, ended = [], [], False
    try:
        shares = graders_per_host(client.scheduler_info(n_workers=-1)["workers"])
        with progress.bar(len(pairs), desc or verb) as bar, _stopped_on_interrupt(client, futures, run, verb, work):
            futures += [client.submit(grade_on_worker, verb, assignment, student, settings, str(log_dir),
                                      shares, run, key=f"{verb}-{student}-{assignment}-{time.time_ns()}",
                                      pure=False)
                        for assignment, student in pairs]
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
        ended = True
    finally:
        try:  # a worker gone or not answering keeps its idle graders until it ends, and its empty folder
            _within(END_LIMIT, lambda: client.run(end_run, run))
        except KeyboardInterrupt:
            if ended:
                raise
        except Exception:  # noqa: BLE001
            pass
        if client is not scheduler:
            client.close()
    return sorted(results, key=lambda r: (r.assignment, r.student))


STOP_LIMIT = 180  # seconds to wait for the workers to stop a run (each waits at most 60 s for its graders)
END_LIMIT = 30  # ... to close a run's idle graders (each leaves at once)
INCOMPLETE_STOP = ("; the submissions graded before it keep their scores; the cluster's workers did not all "
                   "say that they stopped those in progress ({why}): these may go on there, and run the same "
                   "command again to grade every one left")


@contextlib.contextmanager
def _stopped_on_interrupt(client, futures, run, verb, work):
    """Interrupted (Ctrl-C, SIGTERM), or ended by an error, the run stops on the cluster as on one
    machine: no task of it starts, and those in progress are stopped (stop_run) before `grade`
    exits. A worker that does not answer within STOP_LIMIT, or a second Ctrl-C meanwhile, ends
    the wait: `grade` then says that some may go on (the message goes with the KeyboardInterrupt:
    cli.main)."""
    try:
        yield
    except BaseException as err:
        why = None
        try:
            client.cancel(futures)
            if not _within(STOP_LIMIT, lambda: client.run(stop_run, run, verb, str(work.workdir), wait=True)):
                why = f"not every worker answered within {STOP_LIMIT} s"
        except KeyboardInterrupt:
            why = "interrupted again"
        except Exception as failed:  # noqa: BLE001 (a cluster gone meanwhile stops nothing more)
            why = f"{type(failed).__name__}: {failed}"
        if why is not None and isinstance(err, KeyboardInterrupt):
            err.course_said = INCOMPLETE_STOP.format(why=why)
        raise


def _within(seconds, call):
    """call() in a thread of its own; whether it returned within `seconds` (its error is raised
    here). A Ctrl-C meanwhile reaches this thread at once."""
    box, done = {}, threading.Event()

    def run():
        try:
            box["value"] = call()
        except BaseException as failed:  # noqa: BLE001 (raised again in the caller)
            box["error"] = failed
        finally:
            done.set()
    threading.Thread(target=run, daemon=True).start()
    deadline = time.monotonic() + seconds
    while not done.wait(min(0.5, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return False
    if "error" in box:
        raise box["error"]
    return True
