"""`feedback`: HTML feedback per student and assignment, hidden tests' code left out
(nbgrader's generate_feedback, with the preprocessors set in nbgrader_config.py)."""
from . import course
from .pipeline import jobs


def generate(assignments=None, students=None, n_jobs=None, scheduler=None):
    """Feedback for the graded submissions in autograded/ (these students', if named: each
    must have a folder there, else jobs.SubmissionsError before any feedback is written)."""
    graded = course.Course().autograded
    pairs = [(a, s) for a, s in jobs.submitted_pairs(assignments, students, root=graded)]
    if not pairs:  # nbgrader would write nothing and say nothing
        what = (f"{' or '.join(assignments)} " if assignments else "") + (f"of {', '.join(students)} " if students else "")
        again = " ".join(["python -m autograder grade", *(assignments or ()), *(["--students", *students] if students else [])])
        raise SystemExit(f"feedback: nothing {what}has been graded yet ({jobs.empty_selection(assignments, students, graded)}); "
                         f"run `{again}` first")
    missing = jobs.lacking(pairs, assignments, students)
    if missing:
        print(f"feedback: {jobs.lacking_text(missing, graded)}: not graded yet, no feedback for them")
    return jobs.run_all("generate_feedback", pairs, n_jobs=n_jobs, desc="feedback", scheduler=scheduler)


def main(args):
    # args.students: None when --students was not given (every student); never [] from the
    # command line (cli.py refuses an empty --students).
    try:
        results = generate(args.assignments or None, args.students, args.jobs,
                           getattr(args, "scheduler", None))
    except (jobs.SubmissionsError, jobs.ClusterUnreachable) as err:
        first = ""
        if getattr(err, "missing", ()):  # no folder in autograded/: not graded yet
            again = " ".join(["python -m autograder grade", *(args.assignments or ()), "--students", *err.missing])
            first = f" (not graded yet: run `{again}` first)"
        raise SystemExit(f"feedback: {err}{first}") from None
    failed = [r for r in results if not r.ok]
    print(f"feedback: {len(results) - len(failed)} files in {course.Course().feedback}")
    return 1 if failed else 0
