"""The grade report and the feedback, written for a graded temporary course.

Two sample students of the first assignment are graded in a temporary work
folder (as in test_grading.py); report.write() must then produce the CSVs
(incl. the LMS one) and the plots, with the right numbers, and feedback
gives one HTML page per student.
"""
import csv

import pytest

from autograder import course, gradebook, jobs, release, report, samples

ASSIGNMENT = course.assignments()[0]
STUDENTS = ("sample_perfect", "sample_blank")


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    work = tmp_path_factory.mktemp("report-course")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COURSE_WORKDIR", str(work))
        release.generate([ASSIGNMENT], release_dir=work / "release-check", db_url=f"sqlite:///{work / 'gradebook.db'}")
        samples.write([ASSIGNMENT], submitted=work / "submitted")
        pairs = [(a, s) for a, s in jobs.submitted_pairs(root=work / "submitted") if s in STUDENTS]
        graded = jobs.run_all("autograde", pairs, workdir=work)
        assert all(r.ok for r in graded), [r.log.read_text()[-1500:] for r in graded if not r.ok]
        fed = jobs.run_all("generate_feedback", pairs, workdir=work)
        assert all(r.ok for r in fed), [r.log.read_text()[-1500:] for r in fed if not r.ok]
        paths = report.write([ASSIGNMENT], out_dir=work / "reports")
        rows = gradebook.cell_scores([ASSIGNMENT])
    return {"work": work, "paths": paths, "rows": rows}


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_report_writes_every_file(graded_course):
    names = sorted(p.name for p in graded_course["paths"].values())
    assert names == sorted(["scores_by_exercise.csv", "grades.csv", "grades_lms.csv",
                            "points_per_exercise.png", "summary.png"])
    for path in graded_course["paths"].values():
        assert path.is_file() and path.stat().st_size > 0, path


def test_plots_are_real_images(graded_course):
    import matplotlib.image

    for name in ("points_per_exercise.png", "summary.png"):
        path = graded_course["work"] / "reports" / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width = matplotlib.image.imread(path).shape[:2]
        assert width >= 600 and height >= 200, (name, width, height)


def test_exercise_csv_has_every_graded_exercise(graded_course):
    rows = _csv(graded_course["work"] / "reports" / "scores_by_exercise.csv")
    for student in STUDENTS:
        exercises = {r["exercise"] for r in rows if r["student"] == student}
        assert exercises == set(course.contract()[ASSIGNMENT]), student
    for r in rows:
        full = float(r["score"]) == float(r["max_score"]) > 0
        assert full if r["student"] == "sample_perfect" else float(r["score"]) == 0, r


def test_grade_csvs_agree_with_the_gradebook(graded_course):
    top = sum(r["max_score"] for r in graded_course["rows"] if r["student"] == "sample_perfect")
    grades = {r["student"]: r for r in _csv(graded_course["work"] / "reports" / "grades.csv")}
    assert set(grades) == set(STUDENTS)
    assert float(grades["sample_perfect"]["score"]) == top == float(grades["sample_perfect"]["max_score"])
    assert float(grades["sample_blank"]["score"]) == 0
    lms = {r["student"]: r for r in _csv(graded_course["work"] / "reports" / "grades_lms.csv")}
    assert set(lms) == set(STUDENTS)
    assert float(lms["sample_perfect"][ASSIGNMENT]) == float(lms["sample_perfect"]["total"]) == top
    assert float(lms["sample_blank"]["total"]) == 0


def test_feedback_html_per_student(graded_course):
    for student in STUDENTS:
        html = (graded_course["work"] / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        assert "Score:" in html and "HIDDEN TESTS" not in html
