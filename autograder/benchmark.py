"""`benchmark`: how fast and how steady grading is, measured on this machine.

    python -m autograder benchmark --copies 2
        grades N students who each hand in the reference answers of every
        assignment (or of the assignments named), once with plain nbgrader
        (its stock configuration, one `nbgrader autograde` command per
        assignment) and once with `python -m autograder grade`; prints seconds
        per student for each, how busy the cores were during `grade`
        (busy CPU seconds / (wall seconds x cores), the cores' own count in
        /proc/stat: run it on an otherwise idle machine), and where `grade`'s time went
        (kernel start, course/answer/test cells, hidden checks, nbgrader), per student
        and per assignment;

    python -m autograder benchmark --pace
        prints only the machine's pace: the CPU seconds a fresh interpreter
        spends on `import torch` (median of three), a figure to read the
        others by, since the same 2-core machine has run the same work at
        paces up to 2.8 times apart from one day to the next (bin/test
        prints it last, on the machine it has left idle);

    python -m autograder benchmark --repeat 20 [--busy]
        grades the reference answers 20 times with jobs = cores (optionally
        while another process keeps one core busy) and prints the distinct
        scores of each assignment (one each, full marks, if grading is steady).

Everything happens in a temporary work folder; the course's gradebook is untouched.
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import nbformat

from helpers.system import busy_cpu_seconds

from . import course, gradebook, release, samples
from .grade import autograde
from .pipeline import jobs

# One job's time, in order: these add up to the job's wall time with "nbgrader and the rest".
PARTS = ("kernel start", "course cells", "answer cells", "test cells", "judge, after the kernel")
# The judge starts with the kernel and runs beside it: its whole time, shown apart.
ALONGSIDE = "hidden checks (judge)"
WHOLE = "whole"


# What sets the pace of grading and of the tests: each kernel, judge, student's process and
# test worker is an interpreter that imports torch (or forks from one that did). Measured:
# 1.3 CPU-s on 2026-11-25's machine, 2.8-3.8 CPU-s on 2026-11-27's until mid-afternoon and 1.4
# after, where plain nbgrader took 199.8 s, 431.7 s and 205.4 s per student for the same twelve.
PACE_PROBE = "import torch"


def pace(probe=PACE_PROBE, tries=3):
    """The CPU seconds (user + system, the kernel's count for the child) a fresh interpreter
    spends running `probe`: the median of `tries`, after one untimed run that fills the page cache."""
    spent = []
    for _ in range(tries + 1):
        child = subprocess.Popen([sys.executable, "-c", probe], stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise RuntimeError(f"the pace probe {probe!r} failed (exit status {child.returncode})")
        spent.append(usage.ru_utime + usage.ru_stime)
    return sorted(spent[1:])[len(spent[1:]) // 2]


def pace_line(seconds):
    return f"machine pace: a fresh interpreter imports torch in {seconds:.2f} CPU-s (median of 3)"


@contextlib.contextmanager
def temporary_course(assignments, students):
    """A course.Course in a temp work folder, in which every student hands in the reference
    answers of each assignment."""
    folder = Path(tempfile.mkdtemp(prefix="course-bench-"))
    work = course.Course(folder)
    try:
        release.generate(assignments, release_dir=folder / "release-check", work=work)
        for assignment in assignments:
            perfect = samples.submissions(assignment)["sample_perfect"]
            for student in students:
                target = work.submitted / student / assignment
                shutil.copytree(course.RELEASE / assignment, target, ignore=shutil.ignore_patterns("*.ipynb"))
                nbformat.write(perfect, str(target / f"{assignment}.ipynb"))
        yield work
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def totals(assignments, work):
    return {(row["student"], row["assignment"]): row["score"] for row in gradebook.scores(assignments, work)}


def _stock_config(work):
    """A folder whose nbgrader_config.py is nbgrader's stock configuration for this course."""
    folder = work.workdir / "stock"
    folder.mkdir()
    (folder / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.course_id = 'parallel-python-pytorch'\n"
        f"c.CourseDirectory.root = {str(work.workdir)!r}\n"
        f"c.CourseDirectory.source_directory = {str(course.SOURCE)!r}\n"
        f"c.CourseDirectory.release_directory = {str(work.workdir / 'release-check')!r}\n"
        f"c.CourseDirectory.db_url = {work.db_url!r}\n")
    return folder


def _timings(work, student, assignment):
    """What one grading wrote about where its time went (RecordTimings), or {}."""
    path = work.reports / "timings" / f"{student}__{assignment}.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _per_assignment(work, students, assignments, results):
    """{assignment: {part: mean seconds per submission}} over the students' gradings, with WHOLE:
    the jobs' whole time per submission (nbgrader's own work and a regrade alone included)."""
    table = {}
    for assignment in assignments:
        sums = defaultdict(float)
        for student in students:
            for part, seconds in _timings(work, student, assignment).items():
                sums[part] += seconds
        whole = sum(r.seconds for r in results if r.assignment == assignment)
        table[assignment] = {part: sums[part] / len(students) for part in (*PARTS, ALONGSIDE)}
        table[assignment][WHOLE] = whole / len(students)
    return table


def _print_per_assignment(table):
    """Seconds per submission of each assignment, one job, as a table: where a class's grading
    time goes, and which assignment's checks to look at first."""
    columns = (WHOLE, *PARTS, ALONGSIDE)
    width = max(len(a) for a in table)
    print(f"  seconds per submission, one job ({WHOLE}: the job's time; the parts after it, as above, "
          "nbgrader's own work not shown):")
    print(f"    {'assignment':<{width}} | " + " | ".join(columns))
    for assignment, parts in table.items():
        print(f"    {assignment:<{width}} | " + " | ".join(f"{parts[c]:>{len(c)}.1f}" for c in columns))


def _where_time_went(work, students, assignments, results):
    """Seconds per student, by part, from the timings each grading wrote (RecordTimings)."""
    parts = defaultdict(float)
    for student in students:
        for assignment in assignments:
            for part, seconds in _timings(work, student, assignment).items():
                parts[part] += seconds
    measured = sum(parts[p] for p in PARTS)
    parts["nbgrader and the rest"] = sum(r.seconds for r in results) - measured
    shown = (*PARTS, "nbgrader and the rest", ALONGSIDE)
    return {part: parts[part] / len(students) for part in shown}


def compare_with_plain(assignments, copies, n_jobs=None):
    assignments = list(assignments)
    students = [f"copy_{i:02d}" for i in range(copies)]
    with temporary_course(assignments, students) as work:
        env, stock = jobs.job_environment(1, work), _stock_config(work)
        start = time.perf_counter()
        for assignment in assignments:
            subprocess.run([sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"],
                           cwd=stock, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        plain = time.perf_counter() - start
        plain_scores = totals(assignments, work)
        # The cores' own count (/proc/stat), not grade's children's CPU (getrusage): processes that
        # students' code leaves behind (pool and loky workers, forkservers) end as orphans, reaped
        # by the machine's init, and their CPU never reaches grade's count (measured on 06 and 09:
        # 49.2 CPU-s counted of 62.9 busy; 62.8 once the benchmark reaped the orphans itself).
        cpus = os.sched_getaffinity(0)
        busy, start = busy_cpu_seconds(cpus), time.perf_counter()
        results, _ = autograde([(a, s) for a in assignments for s in students], n_jobs=n_jobs, work=work)
        ours_seconds = time.perf_counter() - start
        busy = busy_cpu_seconds(cpus) - busy
        ours = totals(assignments, work)
        maxima = {a: _max(a, work) for a in assignments}
        breakdown = _where_time_went(work, students, assignments, results)
        per_assignment = _per_assignment(work, students, assignments, results)
    cores = jobs.default_jobs()
    return {"assignments": assignments, "students": copies, "jobs": n_jobs or cores,
            "plain_seconds_per_student": plain / copies, "grade_seconds_per_student": ours_seconds / copies,
            "ratio": plain / ours_seconds, "busy_cores": busy / (ours_seconds * len(cpus)),
            "breakdown": breakdown, "per_assignment": per_assignment, "all_graded": all(r.ok for r in results),
            "full_marks": bool(ours) and all(score == maxima[a] for (_, a), score in ours.items()),
            "plain_scores": plain_scores, "scores": ours}


def _max(assignment, work):
    rows = gradebook.scores([assignment], work)
    return rows[0]["max_score"] if rows else None


def stability(assignments, repeat, busy):
    assignments = list(assignments)
    students = [f"run_{i:02d}" for i in range(repeat)]
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        with temporary_course(assignments, students) as work:
            start = time.perf_counter()
            regraded = []
            results, unsure = autograde([(a, s) for a in assignments for s in students], work=work,
                                        regraded=regraded)
            seconds = time.perf_counter() - start
            scores = totals(assignments, work)
            maxima = {a: _max(a, work) for a in assignments}
            # Cells that scored below full other than because a check could not decide, twice
            # (scored zero and listed for a person: what grading must do on a machine too busy to tell).
            lost = sorted((row["student"], row["assignment"], row["cell"])
                          for row in gradebook.cell_scores(assignments, work) if row["score"] < row["max_score"]
                          and row["cell"] not in unsure.get((row["assignment"], row["student"]), ()))
            per_assignment = _per_assignment(work, students, assignments, results)
    finally:
        if spinner:
            spinner.kill()
    distinct = {a: sorted({v for (_, b), v in scores.items() if b == a}) for a in assignments}
    return {"runs": repeat, "all_graded": all(r.ok for r in results), "distinct_scores": distinct, "lost_decided": lost,
            "maxima": maxima, "regraded": len(regraded), "undecided": len(unsure), "seconds": seconds, "per_assignment": per_assignment}


def main(args):
    assignments = args.assignments or course.assignments()
    print(f"benchmark: {pace_line(pace())}", flush=True)
    if args.pace:
        return 0
    if args.repeat:
        result = stability(assignments, args.repeat, args.busy)
        steady = True
        for a in assignments:
            scores = result["distinct_scores"][a]
            steady &= scores == [result["maxima"][a]]
            print(f"benchmark: {a} graded {result['runs']} times"
                  f"{' with one core kept busy' if args.busy else ''}: scores {scores} of {result['maxima'][a]}")
        gradings = result["runs"] * len(assignments)
        print(f"  {gradings} gradings in {result['seconds']:.0f} s ({result['seconds'] / gradings:.1f} s each); "
              f"graded again alone because a check could not decide: {result['regraded']}, "
              f"of which still undecided (to a person): {result['undecided']}")
        _print_per_assignment(result["per_assignment"])
        return 0 if result["all_graded"] and steady else 1
    result = compare_with_plain(assignments, args.copies, args.jobs)
    print(f"benchmark: {result['students']} students x {len(assignments)} assignments (reference answers)")
    print(f"  plain nbgrader autograde (stock configuration): {result['plain_seconds_per_student']:.1f} s per student")
    print(f"  python -m autograder grade ({result['jobs']} jobs): {result['grade_seconds_per_student']:.1f} s "
          f"per student ({result['ratio']:.2f}x); cores busy {100 * result['busy_cores']:.0f} %")
    print("  where grade's time went, per student (seconds of one job; jobs run side by side):")
    for part, seconds in result["breakdown"].items():
        if part == ALONGSIDE:
            print(f"    {part:<32} {seconds:7.1f}  (alongside the kernel, from its start)")
        else:
            print(f"    {part:<32} {seconds:7.1f}")
    _print_per_assignment(result["per_assignment"])
    print(f"  every submission graded: {result['all_graded']}; full marks everywhere: {result['full_marks']}")
    return 0 if result["all_graded"] and result["full_marks"] else 1
