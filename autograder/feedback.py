"""`feedback`: HTML feedback per student and assignment, hidden tests' code left out
(nbgrader's generate_feedback, with the preprocessors set in nbgrader_config.py)."""
from . import course
from .pipeline import jobs


def generate(assignments=None, students=None, n_jobs=None, scheduler=None):
    """Feedback for the graded submissions in autograded/ (these students', if named: each
    must have a folder there, else jobs.SubmissionsError before any feedback is written)."""
    pairs = [(a, s) for a, s in jobs.submitted_pairs(assignments, students, root=course.Course().autograded)]
    return jobs.run_all("generate_feedback", pairs, n_jobs=n_jobs, desc="feedback", scheduler=scheduler)


def main(args):
    # args.students: None when --students was not given (every student); never [] from the
    # command line (cli.py refuses an empty --students).
    try:
        results = generate(args.assignments or None, args.students, args.jobs,
                           getattr(args, "scheduler", None))
    except jobs.SubmissionsError as err:
        raise SystemExit(f"feedback: {err}") from None
    failed = [r for r in results if not r.ok]
    print(f"feedback: {len(results) - len(failed)} files in {course.Course().feedback}")
    return 1 if failed else 0
