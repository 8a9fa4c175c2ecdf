"""`benchmark`: how fast and how steady grading is, measured on this machine.

    python -m autograder benchmark 01_processes_threads --copies 8
        times plain `nbgrader autograde` (one command, one submission after the
        other) against `python -m autograder grade` (submissions in parallel) on
        the same copies of the reference answers, and prints the ratio;

    python -m autograder benchmark 01_processes_threads --repeat 20 --busy
        grades the reference answers 20 times while another process keeps one
        core busy, and prints every distinct score (one, if grading is steady).

Everything happens in a temporary work folder; the course's gradebook is untouched.
"""
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from . import course, gradebook, jobs, release, samples


@contextlib.contextmanager
def temporary_course(assignment, students):
    """A temp work folder with the reference answers submitted under each student name."""
    import os
    work = Path(tempfile.mkdtemp(prefix="course-bench-"))
    old = os.environ.get("COURSE_WORKDIR")
    os.environ["COURSE_WORKDIR"] = str(work)
    try:
        release.generate([assignment], release_dir=work / "release-check",
                         db_url=f"sqlite:///{work / 'gradebook.db'}")
        perfect = samples.submissions(assignment)["sample_perfect"]
        for student in students:
            folder = work / "submitted" / student / assignment
            folder.mkdir(parents=True)
            nbformat.write(perfect, str(folder / f"{assignment}.ipynb"))
        yield work
    finally:
        if old is None:
            os.environ.pop("COURSE_WORKDIR", None)
        else:
            os.environ["COURSE_WORKDIR"] = old


def totals(assignment):
    return {row["student"]: row["score"] for row in gradebook.scores([assignment])}


def compare_with_plain(assignment, copies, n_jobs=None):
    students = [f"copy_{i:02d}" for i in range(copies)]
    with temporary_course(assignment, students) as work:
        env = jobs.job_environment(1, work)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"],
                       cwd=course.ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        plain = time.perf_counter() - start
        plain_scores = totals(assignment)
        start = time.perf_counter()
        results = jobs.run_all("autograde", [(assignment, s) for s in students], n_jobs=n_jobs, workdir=work)
        parallel = time.perf_counter() - start
        ours = totals(assignment)
    return {"plain_seconds": plain, "parallel_seconds": parallel, "ratio": plain / parallel,
            "jobs": n_jobs or jobs.default_jobs(), "all_graded": all(r.ok for r in results),
            "same_scores": plain_scores == ours, "scores": sorted(set(ours.values()))}


def stability(assignment, repeat, busy):
    students = [f"run_{i:02d}" for i in range(repeat)]
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        with temporary_course(assignment, students) as work:
            results = jobs.run_all("autograde", [(assignment, s) for s in students], workdir=work)
            scores = totals(assignment)
    finally:
        if spinner:
            spinner.kill()
    return {"runs": repeat, "all_graded": all(r.ok for r in results), "distinct_scores": sorted(set(scores.values()))}


def main(args):
    assignment = (args.assignments or course.assignments())[0]
    if args.repeat:
        result = stability(assignment, args.repeat, args.busy)
        print(f"benchmark: {assignment} graded {result['runs']} times"
              f"{' with one core kept busy' if args.busy else ''}: scores {result['distinct_scores']}")
        return 0 if result["all_graded"] and len(result["distinct_scores"]) == 1 else 1
    result = compare_with_plain(assignment, args.copies, args.jobs)
    print(f"benchmark: {args.copies} submissions of {assignment}: plain nbgrader autograde "
          f"{result['plain_seconds']:.1f} s, parallel grade ({result['jobs']} jobs) "
          f"{result['parallel_seconds']:.1f} s: {result['ratio']:.2f}x; same scores: {result['same_scores']}")
    return 0 if result["all_graded"] and result["same_scores"] else 1
