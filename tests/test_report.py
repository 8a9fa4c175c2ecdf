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
