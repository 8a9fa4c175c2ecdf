"""The gradebook in PostgreSQL, for real: concurrent writers.

A throw-away PostgreSQL server (Debian's `postgresql`, installed by the
fixture when missing) runs as an unprivileged user from a temp folder on a free
port (tests/conftest.py, `postgres`). Grading runs several submissions at once:
here 8 processes write the submissions of 8 assignments of the same students at
the same time, losing nothing. The course's own commands (release, samples,
grade on three Dask workers at once, feedback, report) run against the same
server end to end in tests/test_dask_cluster.py, and every cell's score must
equal the same submissions graded into SQLite.
"""
import multiprocessing

import pytest

pytestmark = [pytest.mark.scale, pytest.mark.timeout(900)]


def _write_submissions(db_url, assignment, students):
    """One concurrent writer, like one grader: its own connection, one commit per submission."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        for student in students:
            gb.add_submission(assignment, student)


def test_concurrent_writers_lose_nothing(postgres):
    """8 writers at once, each the submissions of one assignment for the same 25 students
    (created first by one writer, as `grade` does): every row arrives."""
    from nbgrader.api import Gradebook

    from autograder import course, gradebook

    db_url = postgres.url("course_writers")
    writers, students = 8, [f"student{i:02d}" for i in range(25)]
    gradebook.create(db_url)  # the course's tables on PostgreSQL, as on SQLite
    with Gradebook(db_url) as gb:
        for w in range(writers):
            gb.add_assignment(f"assignment{w}")
    work = course.Course(db_url=db_url)
    gradebook.add_students(students, work)
    gradebook.add_students(students, work)  # again: nothing to add, nothing fails
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    processes = [context.Process(target=_write_submissions, args=(db_url, f"assignment{w}", students))
                 for w in range(writers)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=300)
    assert [p.exitcode for p in processes] == [0] * writers
    with Gradebook(db_url) as gb:
        assert sorted(s.id for s in gb.students) == students
        for w in range(writers):
            assert len(gb.assignment_submissions(f"assignment{w}")) == len(students)
