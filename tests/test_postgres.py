"""The gradebook in PostgreSQL, for real: COURSE_DB_URL=postgresql://... end to end.

A throw-away PostgreSQL server (Debian's `postgresql`, installed by the
fixture when missing) runs as an unprivileged user from a temp folder on a free
port (tests/conftest.py, `postgres`). The course's own commands release,
grade (several jobs at once), write feedback and the report into it, and every
cell's score must equal the same submissions graded into SQLite. Concurrent
writers: grading runs several submissions at once, and 8 processes write the
submissions of 8 assignments of the same students at the same time, losing
nothing.
"""
import csv
import multiprocessing

import pytest

pytestmark = [pytest.mark.scale, pytest.mark.timeout(900)]
# What the shared graded course (the SQLite baseline) must hold: conftest's SCALE_ASSIGNMENTS.
GRADED_ASSIGNMENTS = ("01_processes_threads",)


def test_course_end_to_end_on_postgresql(postgres, sqlite_baseline, course_tools, tmp_path):
    db_url = postgres.url("course_end_to_end")
    assert db_url.startswith("postgresql://")
    tools, assignments = course_tools, course_tools.assignments
    tools.prepare(tmp_path, assignments, db_url)
    assert not (tmp_path / "gradebook.db").exists()
    graded = tools.cli("grade", *assignments, "--jobs", "3", workdir=tmp_path, db_url=db_url)
    assert "3 of 3 submissions graded" in graded.stdout, graded.stdout

    scores = tools.scores(tmp_path, db_url)
    assert scores == sqlite_baseline, {k: (scores.get(k), sqlite_baseline.get(k))
                                      for k in set(scores) | set(sqlite_baseline)
                                      if scores.get(k) != sqlite_baseline.get(k)}
    assert not (tmp_path / "gradebook.db").exists(), "something wrote a SQLite gradebook"

    tools.cli("feedback", *assignments, workdir=tmp_path, db_url=db_url)
    for student, assignment in {(s, a) for s, a, _ in scores}:
        html = (tmp_path / "feedback" / student / assignment / f"{assignment}.html").read_text()
        assert "Score:" in html and "HIDDEN TESTS" not in html

    tools.cli("report", *assignments, workdir=tmp_path, db_url=db_url)
    with open(tmp_path / "reports" / "grades.csv", newline="") as f:
        report = {(r["student"], r["assignment"]): float(r["score"]) for r in csv.DictReader(f)}
    expected = {}
    for (student, assignment, _), (score, _) in sqlite_baseline.items():
        expected[(student, assignment)] = expected.get((student, assignment), 0.0) + score
    assert report == expected

    # The rows are really in the server.
    import psycopg
    with psycopg.connect(db_url) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM grade JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id")
        assert cursor.fetchone()[0] >= len(scores)


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
