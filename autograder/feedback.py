"""`feedback`: HTML feedback per student and assignment, hidden tests' code left out
(nbgrader's generate_feedback, with the preprocessors set in nbgrader_config.py)."""
from . import course
from .pipeline import jobs


def generate(assignments=None, students=None, n_jobs=None, scheduler=None):
    pairs = [(a, s) for a, s in jobs.submitted_pairs(assignments, students, root=course.Course().autograded)]
    return jobs.run_all("generate_feedback", pairs, n_jobs=n_jobs, desc="feedback", scheduler=scheduler)


def main(args):
    results = generate(args.assignments or None, args.students or None, args.jobs,
                       getattr(args, "scheduler", None))
    failed = [r for r in results if not r.ok]
    print(f"feedback: {len(results) - len(failed)} files in {course.Course().feedback}")
    return 1 if failed else 0
