"""`feedback`: HTML feedback per student and assignment, hidden tests' code left out."""
from . import course, jobs


def generate(assignments=None, students=None, n_jobs=None):
    pairs = [(a, s) for a, s in jobs.submitted_pairs(assignments, students, root=course.AUTOGRADED)]
    return jobs.run_all("generate_feedback", pairs, n_jobs=n_jobs, desc="feedback")


def main(args):
    results = generate(args.assignments or None, args.students or None, args.jobs)
    failed = [r for r in results if not r.ok]
    print(f"feedback: {len(results) - len(failed)} files in {course.FEEDBACK}")
    return 1 if failed else 0
