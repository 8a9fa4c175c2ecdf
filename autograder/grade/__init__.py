"""`grade`: autograde every submission in submitted/, in parallel, into the gradebook.

Each submission is graded by nbgrader's own `autograde` with the preprocessors
set in nbgrader_config.py (autograder.grade.preprocessors).
"""
from .. import jobs
from ..gradebook import scores


def grade(assignments=None, students=None, n_jobs=None, scheduler=None):
    pairs = jobs.submitted_pairs(assignments, students)
    if not pairs:
        raise SystemExit("grade: nothing in submitted/ (run `python -m autograder samples` "
                         "or collect submissions first)")
    return jobs.run_all("autograde", pairs, n_jobs=n_jobs, desc="autograde", scheduler=scheduler)


def main(args):
    results = grade(args.assignments or None, args.students or None, args.jobs,
                    getattr(args, "scheduler", None))
    failed = [r for r in results if not r.ok]
    table = scores()
    for row in table:
        print(f"  {row['student']:<20} {row['assignment']:<28} {row['score']:6.1f} / {row['max_score']:g}")
    print(f"grade: {len(results) - len(failed)} of {len(results)} submissions graded"
          + (f"; failed: {', '.join(f'{r.student}/{r.assignment}' for r in failed)}" if failed else ""))
    return 1 if failed else 0
