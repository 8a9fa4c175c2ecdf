"""Run one nbgrader command per submission, several at a time, with a progress bar.

nbgrader handles one submission per call; the course runs those calls in
parallel (joblib threads driving subprocesses), each with its own log, with
thread pools capped so that parallel graders do not oversubscribe the cores.
"""
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from helpers.system import usable_cores

from . import course

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


@dataclass
class JobResult:
    assignment: str
    student: str
    ok: bool
    seconds: float
    log: Path


def default_jobs():
    return max(1, usable_cores())


def job_environment(n_jobs, workdir=None):
    env = dict(os.environ)
    if workdir is not None:
        env["COURSE_WORKDIR"] = str(workdir)
    threads = str(max(1, usable_cores() // max(1, n_jobs)))
    for name in THREAD_VARIABLES:
        env[name] = threads
    env["PYTHONPATH"] = str(course.ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # nbgrader runs `alembic` from PATH: put this interpreter's bin/ first.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTHONWARNINGS"] = env.get("PYTHONWARNINGS", "ignore::DeprecationWarning")
    return env


def run_one(verb, assignment, student, env, log_dir, extra=()):
    log = Path(log_dir) / f"{verb}-{student}-{assignment}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "nbgrader", verb, assignment, "--student", student, "--force", *extra]
    start = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.call(cmd, cwd=course.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return JobResult(assignment, student, code == 0, time.perf_counter() - start, log)


def run_all(verb, pairs, n_jobs=None, desc=None, log_dir=None, extra=(), workdir=None):
    """Run `nbgrader <verb>` for every (assignment, student) pair; list of JobResults."""
    from joblib import Parallel, delayed
    from tqdm.auto import tqdm

    pairs = list(pairs)
    n_jobs = n_jobs or default_jobs()
    env = job_environment(n_jobs, workdir)
    log_dir = log_dir or (Path(workdir) if workdir else course.WORKDIR) / "reports" / "logs"
    results = []
    tasks = (delayed(run_one)(verb, a, s, env, log_dir, extra) for a, s in pairs)
    with tqdm(total=len(pairs), desc=desc or verb, unit="submission") as bar:
        for result in Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator_unordered")(tasks):
            results.append(result)
            bar.update()
            if not result.ok:
                bar.write(f"  {verb} failed for {result.student}/{result.assignment}: see {result.log}")
    return sorted(results, key=lambda r: (r.assignment, r.student))


def submitted_pairs(assignments=None, students=None, root=None):
    """(assignment, student) for every submission in submitted/."""
    root = Path(root or course.SUBMITTED)
    pairs = []
    if not root.is_dir():
        return pairs
    for student_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if students and student_dir.name not in students:
            continue
        for assignment_dir in sorted(p for p in student_dir.iterdir() if p.is_dir()):
            if assignments and assignment_dir.name not in assignments:
                continue
            pairs.append((assignment_dir.name, student_dir.name))
    return pairs
