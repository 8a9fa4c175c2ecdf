"""The grade report and the feedback, written for the shared graded course (tests/conftest.py).

For the sample students of the first assignment, report.write() must produce
the CSVs (incl. the LMS one) and the plots, with the right numbers, and
feedback gives one HTML page per student.
"""
import csv

import pytest

from autograder import course, gradebook, report, samples
from autograder.pipeline import jobs

ASSIGNMENT = course.assignments()[0]
STUDENTS = samples.STUDENTS  # perfect, blank, partial


GRADED_ASSIGNMENTS = (ASSIGNMENT,)


@pytest.fixture(scope="module")
def reported(graded_course):
    graded = graded_course["work"]
    work = graded.path
    pairs = [(ASSIGNMENT, student) for student in STUDENTS]
    fed = jobs.run_all("generate_feedback", pairs, work=graded.course)
    assert all(r.ok for r in fed), [r.log.read_text()[-1500:] for r in fed if not r.ok]
    paths = report.write([ASSIGNMENT], work=graded.course)
    rows = gradebook.cell_scores([ASSIGNMENT], graded.course)
    return {"work": work, "paths": paths, "rows": rows, "graded": graded}


def _skip_if_perfect_undecided(reported, course_tools):
    short = [r["cell"] for r in reported["rows"] if r["student"] == "sample_perfect" and r["score"] < r["max_score"]]
    course_tools.skip_if_only_undecided(reported["graded"], "sample_perfect", ASSIGNMENT, short)


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_report_writes_every_file(reported):
    names = sorted(p.name for p in reported["paths"].values())
    assert names == sorted(["scores_by_exercise.csv", "grades.csv", "grades_lms.csv",
                            "points_per_exercise.png", "summary.png"])
    for path in reported["paths"].values():
        assert path.is_file() and path.stat().st_size > 0, path


def test_plots_are_real_images(reported):
    import matplotlib.image

    for name in ("points_per_exercise.png", "summary.png"):
        path = reported["work"] / "reports" / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width = matplotlib.image.imread(path).shape[:2]
        assert width >= 600 and height >= 200, (name, width, height)


def test_exercise_csv_has_every_graded_exercise(reported, course_tools):
    _skip_if_perfect_undecided(reported, course_tools)
    rows = _csv(reported["work"] / "reports" / "scores_by_exercise.csv")
    for student in STUDENTS:
        exercises = {r["exercise"] for r in rows if r["student"] == student}
        assert exercises == set(course.contract()[ASSIGNMENT]), student
    for r in rows:
        full = float(r["score"]) == float(r["max_score"]) > 0
        if r["student"] == "sample_perfect":
            assert full, r
        elif r["student"] == "sample_blank":
            assert float(r["score"]) == 0, r


def test_grade_csvs_agree_with_the_gradebook(reported, course_tools):
    _skip_if_perfect_undecided(reported, course_tools)
    top = sum(r["max_score"] for r in reported["rows"] if r["student"] == "sample_perfect")
    grades = {r["student"]: r for r in _csv(reported["work"] / "reports" / "grades.csv")}
    assert set(grades) == set(STUDENTS)
    assert float(grades["sample_perfect"]["score"]) == top == float(grades["sample_perfect"]["max_score"])
    assert float(grades["sample_blank"]["score"]) == 0
    lms = {r["student"]: r for r in _csv(reported["work"] / "reports" / "grades_lms.csv")}
    assert set(lms) == set(STUDENTS)
    assert float(lms["sample_perfect"][ASSIGNMENT]) == float(lms["sample_perfect"]["total"]) == top
    assert float(lms["sample_blank"]["total"]) == 0


def test_feedback_html_per_student(reported):
    for student in STUDENTS:
        html = (reported["work"] / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        assert "Score:" in html and "HIDDEN TESTS" not in html


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own add_submission
def test_a_written_answer_graded_by_a_person_counts(tmp_path):
    """A manually graded written answer (the author tool's `written` cell, graded in Formgrader)
    counts in the grade tables as in nbgrader's total; they left it out (code cells only)."""
    from nbgrader.api import Gradebook

    from autograder import gradebook, report

    work = course.Course(tmp_path, f"sqlite:///{tmp_path / 'gradebook.db'}")
    gradebook.create(work.db_url)
    with Gradebook(work.db_url) as gb:
        gb.add_assignment("essay")
        gb.add_notebook("essay", "essay")
        gb.add_grade_cell("test_speedup", "essay", "essay", max_score=2, cell_type="code")
        gb.add_grade_cell("q1", "essay", "essay", max_score=3, cell_type="markdown")
        gb.add_student("ann")
        gb.add_submission("essay", "ann")
        gb.find_grade("test_speedup", "essay", "essay", "ann").auto_score = 2
        gb.find_grade("q1", "essay", "essay", "ann").manual_score = 2.5
        gb.db.commit()
    cells = {r["cell"]: (r["score"], r["max_score"]) for r in gradebook.cell_scores(work=work)}
    assert cells == {"test_speedup": (2.0, 2.0), "q1": (2.5, 3.0)}, cells
    report.write(work=work)
    grades = _csv(tmp_path / "reports" / "grades.csv")
    assert [(r["student"], float(r["score"]), float(r["max_score"])) for r in grades] == [("ann", 4.5, 5.0)]
