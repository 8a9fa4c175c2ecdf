"""Reading scores back out of nbgrader's gradebook."""
from . import course


def _exercise_of(grade_id, exercises):
    """The exercise a test cell belongs to: the longest name with test_<name> as prefix."""
    matches = [e for e in exercises if grade_id.startswith(f"test_{e}")]
    return max(matches, key=len) if matches else grade_id


def create(db_url):
    """Make the gradebook's tables if it has none, as nbgrader's Gradebook does, but reading the
    schema's revision from nbgrader's migration scripts here: nbgrader asks a new `alembic`
    process for it, 2.4 s of CPU for every new gradebook (each course copy the tests grade in)."""
    from alembic.script import ScriptDirectory
    from nbgrader.api import Base
    from nbgrader.dbutil import ALEMBIC_DIR
    from sqlalchemy import create_engine, event, inspect, text
    from sqlalchemy.exc import SQLAlchemyError

    engine = create_engine(db_url, future=True)
    if engine.dialect.name == "sqlite":
        # Python's sqlite3 opens a transaction only before INSERT/UPDATE/DELETE: each CREATE TABLE
        # would be committed at once, and another process could find tables without a revision.
        # SQLAlchemy's recipe: the driver opens none, we say BEGIN ourselves.
        event.listen(engine, "connect", lambda connection, _: setattr(connection, "isolation_level", None))
        event.listen(engine, "begin", lambda connection: connection.exec_driver_sql("BEGIN"))
    try:
        if inspect(engine).get_table_names():
            return
        revision = ScriptDirectory(ALEMBIC_DIR).get_current_head()
        try:
            with engine.begin() as db:  # one transaction: another process sees all of it or none
                Base.metadata.create_all(bind=db)
                db.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
                db.execute(text("INSERT INTO alembic_version (version_num) VALUES (:revision)"),
                           {"revision": revision})
        except SQLAlchemyError:
            if "alembic_version" not in inspect(engine).get_table_names():
                raise
            # another process (a second grading worker) made it first
    finally:
        engine.dispose()


def add_students(students, work=None):
    """Create the students the gradebook lacks, from one writer, before parallel grading.

    nbgrader's autograde creates its student itself (look up, then insert): two
    submissions of one new student graded at the same time can both insert, and
    the second fails on the unique key. Creating them first leaves the graders
    only distinct rows to write.
    """
    from nbgrader.api import Gradebook

    db_url = (work or course.Course()).db_url
    create(db_url)
    with Gradebook(db_url) as gb:
        known = {s.id for s in gb.students}
        for student in sorted(set(students) - known):
            gb.add_student(student)


GRADED = "graded"
NOT_GRADED = "not graded (grading failed; see reports/logs/)"
GONE = "not graded (gone from submitted/: an assignment or student taken out of the course?)"


def status(student, assignment, work=None):
    """GRADED if the submission's autograding finished; else NOT_GRADED while it is still in
    submitted/ (nbgrader makes a submission's grade rows first and, when grading fails, deletes
    autograded/<student>/<assignment>/ but keeps the rows, at zero or a resubmission's old scores);
    else GONE: its folders were deleted (a dropped draft assignment, a student who left) while
    the gradebook still holds its rows."""
    work = work or course.Course()
    if (work.autograded / student / assignment / f"{assignment}.ipynb").is_file():
        return GRADED
    return NOT_GRADED if (work.submitted / student / assignment).is_dir() else GONE


def roster(work=None):
    """{"students", "assignments", "submissions"} of the gradebook: every student's and
    assignment's name, sorted, and every (student, assignment) with a submission, graded or not."""
    from nbgrader.api import Gradebook

    with Gradebook((work or course.Course()).db_url) as gb:
        assignments = sorted(a.name for a in gb.assignments)
        return {"students": sorted(s.id for s in gb.students), "assignments": assignments,
                "submissions": sorted((s.student_id, a) for a in assignments
                                      for s in gb.assignment_submissions(a))}


def cell_scores(assignments=None, work=None):
    """One row per graded cell of every autograded submission (of `work`, a course.Course)."""
    from nbgrader.api import Gradebook

    rows = []
    with Gradebook((work or course.Course()).db_url) as gb:
        for assignment in gb.assignments:
            if assignments and assignment.name not in assignments:
                continue
            exercises = course.contract().get(assignment.name, [])
            for submission in gb.assignment_submissions(assignment.name):
                for nb in submission.notebooks:
                    for grade in nb.grades:
                        # Test cells, and any cell a person grades (a written answer, a task):
                        # all of them count in nbgrader's own total.
                        # A 0-point cell counts only for the extra credit a person gave it.
                        if grade.max_score == 0 and not grade.score:
                            continue
                        rows.append({
                            "student": submission.student_id,
                            "assignment": assignment.name,
                            "exercise": _exercise_of(grade.name, exercises),
                            "cell": grade.name,
                            "score": float(grade.score),
                            "max_score": float(grade.max_score),
                        })
    return rows


def scored_by_hand(pairs, work=None, db_url=None):
    """{(assignment, student): {test cell: its score entered by hand}} of the `pairs` whose cells
    a person scored (in formgrader): a check that could not decide is settled then."""
    from nbgrader.api import Gradebook

    wanted, found = set(pairs), {}
    if not wanted:
        return found
    with Gradebook(db_url or (work or course.Course()).db_url) as gb:
        for assignment in sorted({a for a, _ in wanted}):
            for submission in gb.assignment_submissions(assignment):
                if (assignment, submission.student_id) in wanted:
                    for nb in submission.notebooks:
                        for grade in nb.grades:
                            if grade.manual_score is not None:
                                found.setdefault((assignment, submission.student_id), {})[grade.name] = float(
                                    grade.manual_score)
    return found


def hand_overrides(pairs, work=None):
    """Test cells of the (assignment, student) `pairs` whose score a person entered by hand
    differs from the autograder's: one {"student", "assignment", "cell", "auto_score",
    "manual_score"} each. nbgrader keeps a manual score through later autogrades (of a
    resubmission too), and it is the one that counts."""
    from nbgrader.api import Gradebook

    wanted, found = set(pairs), []
    if not wanted:
        return found
    with Gradebook((work or course.Course()).db_url) as gb:
        for assignment in sorted({a for a, _ in wanted}):
            for submission in gb.assignment_submissions(assignment):
                if (assignment, submission.student_id) not in wanted:
                    continue
                for nb in submission.notebooks:
                    for grade in nb.grades:
                        if (grade.auto_score is not None and grade.manual_score is not None
                                and float(grade.manual_score) != float(grade.auto_score)):
                            found.append({"student": submission.student_id, "assignment": assignment,
                                          "cell": grade.name, "auto_score": float(grade.auto_score),
                                          "manual_score": float(grade.manual_score)})
    return sorted(found, key=lambda r: (r["assignment"], r["student"], r["cell"]))


def _submissions(assignments=None, work=None):
    """(assignment name, nbgrader's submission) of every submission of the gradebook (of those
    assignments, when named), read inside one gradebook session."""
    from nbgrader.api import Gradebook

    with Gradebook((work or course.Course()).db_url) as gb:
        for assignment in gb.assignments:
            if not assignments or assignment.name in assignments:
                for submission in gb.assignment_submissions(assignment.name):
                    yield assignment.name, submission


def late_penalties(assignments=None, work=None):
    """{(student, assignment): points taken off for lateness} of every submission with a penalty:
    nbgrader's LateSubmissionPlugin stores it per notebook, apart from the cells' scores."""
    penalties = {}
    for assignment, submission in _submissions(assignments, work):
        penalty = sum(float(nb.late_submission_penalty or 0.0) for nb in submission.notebooks)
        if penalty:
            penalties[(submission.student_id, assignment)] = penalty
    return penalties


def lateness(assignments=None, work=None):
    """{(student, assignment): whole seconds past its due date (extension included)} of every
    submission handed in late: what "marked late" means where the late penalty is "none"."""
    import math

    late = {}
    for assignment, submission in _submissions(assignments, work):
        if submission.total_seconds_late > 0:
            late[(submission.student_id, assignment)] = math.ceil(submission.total_seconds_late)
    return late


def after_penalty(raw, penalty):
    """The score that counts: the cells' points less the late penalty, never below zero (as
    nbgrader's own export and feedback reckon it)."""
    return max(0.0, raw - penalty)


def scores(assignments=None, work=None):
    """One row per (student, assignment): the score that counts (after any late penalty), the
    cells' points before it (raw_score), the penalty, the maximum, and the status (GRADED, or
    NOT_GRADED or GONE, as status() says: the scores are then zeros or an older submission's)."""
    work = work or course.Course()
    totals = {}
    for row in cell_scores(assignments, work):
        key = (row["student"], row["assignment"])
        total = totals.setdefault(key, {"student": key[0], "assignment": key[1], "raw_score": 0.0,
                                        "max_score": 0.0})
        total["raw_score"] += row["score"]
        total["max_score"] += row["max_score"]
    penalties = late_penalties(assignments, work)
    for key, total in totals.items():
        total["late_penalty"] = penalties.get(key, 0.0)
        total["score"] = after_penalty(total["raw_score"], total["late_penalty"])
        total["status"] = status(*key, work)
    return [totals[k] for k in sorted(totals)]
