"""The grade report and the feedback, written for the shared graded course (tests/conftest.py).

For the sample students of the first assignment, report.write() must produce
the CSVs (incl. the LMS one) and the plots, with the right numbers, and
feedback gives one HTML page per student.
"""
import argparse
import csv
import re
import shutil
import subprocess
import warnings

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
    paths = report.write([ASSIGNMENT], work=graded.course, with_samples=True)  # beside the serialised students
    rows = gradebook.cell_scores([ASSIGNMENT], graded.course)
    # reports/, or reports/<ASSIGNMENT>/ where the shared course holds other assignments too
    out = paths["grades for the LMS"].parent
    return {"work": work, "out": out, "paths": paths, "rows": rows, "graded": graded}


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
        path = reported["out"] / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width = matplotlib.image.imread(path).shape[:2]
        assert width >= 600 and height >= 200, (name, width, height)


def test_exercise_csv_has_every_graded_exercise(reported, course_tools):
    _skip_if_perfect_undecided(reported, course_tools)
    rows = _csv(reported["out"] / "scores_by_exercise.csv")
    for student in STUDENTS:
        exercises = [r["exercise"] for r in rows if r["student"] == student]
        # In the notebook's order (the contract's), as an instructor reads them beside it.
        assert exercises == course.contract()[ASSIGNMENT], (student, exercises)
    for r in rows:
        full = float(r["score"]) == float(r["max_score"]) > 0
        # What happened, as the feedback's results table says it: an instructor sees why points went.
        if r["student"] == "sample_perfect":
            assert full and r["what_happened"] == "passed", r
        elif r["student"] == "sample_blank":
            assert float(r["score"]) == 0 and r["what_happened"].startswith("not answered"), r


def test_grade_csvs_agree_with_the_gradebook(reported, course_tools):
    _skip_if_perfect_undecided(reported, course_tools)
    top = sum(r["max_score"] for r in reported["rows"] if r["student"] == "sample_perfect")
    grades = {r["student"]: r for r in _csv(reported["out"] / "grades.csv")}
    assert set(grades) == set(STUDENTS)
    assert float(grades["sample_perfect"]["score"]) == top == float(grades["sample_perfect"]["max_score"])
    assert float(grades["sample_blank"]["score"]) == 0
    lms = {r["student"]: r for r in _csv(reported["out"] / "grades_lms.csv")}
    # Every student of the gradebook (the shared course has others, who did not hand in this one).
    everyone = gradebook.roster(reported["graded"].course)
    assert set(lms) == set(everyone["students"]) >= set(STUDENTS)
    assert all(lms[s][ASSIGNMENT] == "" for s in set(lms) - set(STUDENTS)
               if (s, ASSIGNMENT) not in everyone["submissions"])
    assert float(lms["sample_perfect"][ASSIGNMENT]) == float(lms["sample_perfect"]["total"]) == top
    assert float(lms["sample_blank"]["total"]) == 0


def test_feedback_html_per_student(reported):
    for student in STUDENTS:
        html = (reported["work"] / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        assert "Score:" in html and "HIDDEN TESTS" not in html


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own add_submission
def test_a_written_answer_graded_by_a_person_counts(tmp_path, course_tools):
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
    course_tools.autograded(work, "ann", "essay")
    cells = {r["cell"]: (r["score"], r["max_score"]) for r in gradebook.cell_scores(work=work)}
    assert cells == {"test_speedup": (2.0, 2.0), "q1": (2.5, 3.0)}, cells
    report.write(work=work)
    grades = _csv(tmp_path / "reports" / "grades.csv")
    assert [(r["student"], float(r["score"]), float(r["max_score"]), r["status"]) for r in grades] == [
        ("ann", 4.5, 5.0, "graded")]


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_a_submission_whose_grading_failed_is_not_graded(tmp_path, monkeypatch, capsys, course_tools):
    """nbgrader makes a submission's grade rows, then on failure deletes autograded/<student>/<a>/:
    the tables showed its zeros (or a resubmission's old scores) as an ordinary grade."""
    work = course_tools.scratch_gradebook(tmp_path, ["A1"], ["ann", "bob"], {("ann", "A1"): 1, ("bob", "A1"): None})
    report.write(work=work)
    grades = {r["student"]: r for r in _csv(tmp_path / "reports" / "grades.csv")}
    assert grades["ann"]["status"] == "graded" and float(grades["ann"]["score"]) == 1
    assert grades["bob"]["status"] == "not graded (grading failed; see reports/logs/)", grades["bob"]
    assert grades["bob"]["score"] == "" and float(grades["bob"]["max_score"]) == 2, grades["bob"]
    lms = {r["student"]: r for r in _csv(tmp_path / "reports" / "grades_lms.csv")}
    assert (lms["bob"]["A1"], float(lms["bob"]["total"])) == ("", 0), lms["bob"]
    assert float(lms["ann"]["A1"]) == float(lms["ann"]["total"]) == 1
    assert {r["student"] for r in _csv(tmp_path / "reports" / "scores_by_exercise.csv")} == {"ann"}
    assert {(r["student"], r["status"]) for r in gradebook.scores(work=work)} == {
        ("ann", gradebook.GRADED), ("bob", gradebook.NOT_GRADED)}
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    monkeypatch.setenv("COURSE_DB_URL", work.db_url)
    assert report.main(argparse.Namespace(assignments=[])) == 0
    said = capsys.readouterr().out
    assert "1 submission(s) could not be graded" in said and "bob/A1" in said and "ann/A1" not in said, said


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_when_nothing_could_be_graded_the_tables_say_so_rather_than_stay_as_they_were(tmp_path, course_tools):
    """report stopped with "no submission could be graded" before writing anything: the previous
    run's grades.csv ("graded", its old scores) and plots stayed, ready to upload as current."""
    work = course_tools.scratch_gradebook(tmp_path, ["A1"], ["ann"], {("ann", "A1"): 2})
    report.write(work=work)
    assert _csv(tmp_path / "reports" / "grades.csv")[0]["status"] == "graded"
    # ann's resubmission fails to grade: nbgrader removes its autograded/ folder, keeps the rows
    shutil.rmtree(work.autograded / "ann" / "A1")
    with pytest.raises(SystemExit, match=r"no submission could be graded .*ann/A1.*grades\.csv says so"):
        report.write(work=work)
    [row] = _csv(tmp_path / "reports" / "grades.csv")
    assert row["status"] == "not graded (grading failed; see reports/logs/)" and row["score"] == "", row
    assert _csv(tmp_path / "reports" / "grades_lms.csv")[0]["A1"] == ""
    assert _csv(tmp_path / "reports" / "scores_by_exercise.csv") == []
    assert not (tmp_path / "reports" / "summary.png").exists()
    assert not (tmp_path / "reports" / "points_per_exercise.png").exists()


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_a_score_entered_by_hand_is_not_called_undecided(tmp_path, monkeypatch, capsys, course_tools):
    """report counted every row of manual_review.csv as "a hidden check could not decide twice;
    scored 0": a score a person entered by hand, which counts, is neither."""
    from autograder import grade
    work = course_tools.scratch_gradebook(tmp_path, ["A1"], ["ann", "bob"], {("ann", "A1"): 2, ("bob", "A1"): 0})
    grade._write_review_list({("A1", "bob"): ["test_x"]}, [("A1", "bob")], work,
                             [{"student": "ann", "assignment": "A1", "cell": "test_x", "manual_score": 1,
                               "auto_score": 2}])
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    monkeypatch.setenv("COURSE_DB_URL", work.db_url)
    assert report.main(argparse.Namespace(assignments=[])) == 0
    said = capsys.readouterr().out
    assert "report: 1 test cell(s) need a person (a hidden check could not decide twice" in said, said
    assert "report: 1 test cell(s) keep a score entered by hand over the autograde" in said, said


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_a_dropped_assignment_is_not_called_a_failed_grading(tmp_path, monkeypatch, capsys, course_tools):
    """A draft assignment graded, then dropped (its folders deleted, as the guide says) while the
    gradebook kept it: report called its graded submissions "grading failed; see reports/logs/".
    It says they are gone, and gives the command that takes the assignment out; that command works."""
    work = course_tools.scratch_gradebook(tmp_path, ["A1", "draft"], ["ann"], {("ann", "A1"): 2, ("ann", "draft"): 1})
    shutil.rmtree(work.submitted / "ann" / "draft")
    shutil.rmtree(work.autograded / "ann" / "draft")
    assert gradebook.status("ann", "draft", work) == gradebook.GONE
    assert gradebook.status("ann", "A1", work) == gradebook.GRADED
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    monkeypatch.setenv("COURSE_DB_URL", work.db_url)
    assert report.main(argparse.Namespace(assignments=[])) == 0
    said = capsys.readouterr().out
    assert "grading failed" not in said, said
    assert "1 submission(s) in the gradebook are gone from submitted/" in said and "ann/draft" in said, said
    remove = re.search(r"nbgrader db assignment remove draft --force", said)
    assert remove, said
    [row] = [r for r in _csv(tmp_path / "reports" / "grades.csv") if r["assignment"] == "draft"]
    assert row["status"] == gradebook.GONE and row["score"] == "", row
    subprocess.run(["nbgrader", *remove.group(0).split()[1:], f"--db={work.db_url}"], cwd=tmp_path,
                   check=True, capture_output=True, timeout=120)
    assert report.main(argparse.Namespace(assignments=[])) == 0
    said = capsys.readouterr().out
    assert "gone" not in said and "draft" not in (tmp_path / "reports" / "grades_lms.csv").read_text(), said


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_a_filtered_report_leaves_the_class_tables(tmp_path, course_tools):
    """`report A3 A1` overwrote reports/grades_lms.csv with a table whose total had A2 left out."""
    work = course_tools.scratch_gradebook(tmp_path, ["A1", "A2", "A3"], ["ann"],
                              {("ann", "A1"): 2, ("ann", "A2"): 1, ("ann", "A3"): 0.5})
    report.write(work=work)
    whole = (tmp_path / "reports" / "grades_lms.csv").read_text()
    paths = report.write(["A3", "A1"], work=work)
    assert {p.parent for p in paths.values()} == {tmp_path / "reports" / "A1+A3"}, paths
    assert (tmp_path / "reports" / "grades_lms.csv").read_text() == whole
    [line] = _csv(tmp_path / "reports" / "A1+A3" / "grades_lms.csv")
    assert line == {"student": "ann", "A1": "2.0", "A3": "0.5", "total": "2.5"}, line
    [line] = _csv(tmp_path / "reports" / "grades_lms.csv")
    assert float(line["total"]) == 3.5, line
    # Named explicitly, out_dir wins; a filter that names every assignment is the class table.
    assert report.write(["A2"], out_dir=tmp_path / "mine", work=work)["grades for the LMS"] == (
        tmp_path / "mine" / "grades_lms.csv")
    assert report.write(["A1", "A2", "A3"], work=work)["grades for the LMS"] == tmp_path / "reports" / "grades_lms.csv"


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_the_lms_table_lists_every_student_and_assignment(tmp_path, course_tools):
    """Students with no submission, and assignments nobody submitted, were missing from grades_lms.csv."""
    work = course_tools.scratch_gradebook(tmp_path, ["A1", "A2"], ["ann", "bob"], {("ann", "A1"): 2})
    report.write(work=work)
    lms = _csv(tmp_path / "reports" / "grades_lms.csv")
    assert lms == [{"student": "ann", "A1": "2.0", "A2": "", "total": "2.0"},
                   {"student": "bob", "A1": "", "A2": "", "total": "0"}], lms


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_extra_credit_on_a_zero_point_cell_counts(tmp_path, course_tools):
    """cell_scores skipped every 0-point cell, with the extra credit a person gave it."""
    from nbgrader.api import Gradebook

    work = course_tools.scratch_gradebook(tmp_path, ["A1"], ["ann"], {})
    with Gradebook(work.db_url) as gb:
        gb.add_grade_cell("bonus", "A1", "A1", max_score=0, cell_type="code")
        gb.add_grade_cell("nothing", "A1", "A1", max_score=0, cell_type="code")
        gb.add_submission("A1", "ann")
        gb.find_grade("test_x", "A1", "A1", "ann").auto_score = 2
        gb.find_grade("bonus", "A1", "A1", "ann").auto_score = 0
        gb.find_grade("bonus", "A1", "A1", "ann").extra_credit = 1.0
        gb.find_grade("nothing", "A1", "A1", "ann").auto_score = 0
        gb.db.commit()
    course_tools.autograded(work, "ann", "A1")
    cells = {r["cell"]: (r["score"], r["max_score"]) for r in gradebook.cell_scores(work=work)}
    assert cells == {"test_x": (2.0, 2.0), "bonus": (1.0, 0.0)}, cells
    report.write(work=work)
    [row] = _csv(tmp_path / "reports" / "grades.csv")
    assert (float(row["score"]), float(row["max_score"])) == (3.0, 2.0), row
    [line] = _csv(tmp_path / "reports" / "grades_lms.csv")
    assert float(line["A1"]) == float(line["total"]) == 3.0, line


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_the_sample_students_never_reach_the_class_tables_beside_a_class(tmp_path, course_tools):
    """bin/main grades the sample students into the class's gradebook; grades_lms.csv, grades.csv and
    the plots listed them beside the class, so an LMS upload made three students who do not exist.
    Alone (the main job on a fresh clone) they are the report; --with-samples keeps them."""
    for folder in ("alone", "class"):
        (tmp_path / folder).mkdir()
    alone = course_tools.scratch_gradebook(tmp_path / "alone", ["A1"], list(STUDENTS),
                                           {(s, "A1"): 1 for s in STUDENTS})
    report.write(work=alone)
    assert [r["student"] for r in _csv(tmp_path / "alone" / "reports" / "grades_lms.csv")] == sorted(STUDENTS)

    work = course_tools.scratch_gradebook(tmp_path / "class", ["A1"], ["ann", *STUDENTS],
                                          {("ann", "A1"): 2, **{(s, "A1"): 1 for s in STUDENTS}})
    report.write(work=work)
    out = tmp_path / "class" / "reports"
    assert _csv(out / "grades_lms.csv") == [{"student": "ann", "A1": "2.0", "total": "2.0"}]
    assert {r["student"] for r in _csv(out / "grades.csv")} == {"ann"}
    assert {r["student"] for r in _csv(out / "scores_by_exercise.csv")} == {"ann"}
    report.write(work=work, with_samples=True)
    assert {r["student"] for r in _csv(out / "grades_lms.csv")} == {"ann", *STUDENTS}
    assert report.left_out_samples(["ann", *STUDENTS]) == list(STUDENTS)
    assert report.left_out_samples(list(STUDENTS)) == [] == report.left_out_samples(["ann"])


def test_the_points_map_marks_what_waits_for_a_person(tmp_path, monkeypatch):
    """A score that waits for a person was drawn red, like a failed one: it is hatched, with a
    legend for that and for work not handed in (white); one student's map keeps its labels."""
    import matplotlib.pyplot as plt
    drawn = []
    monkeypatch.setattr(plt.Axes, "add_patch", lambda self, patch: drawn.append(patch.get_hatch()))
    table = {("ann", "01_processes_threads", "cpu_info"): (0.0, 2.0),
             ("ann", "01_processes_threads", "run_in_child"): (2.0, 2.0)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "tight layout not applied"
        report.plot_points(table, tmp_path / "map.png", {("ann", "01_processes_threads", "cpu_info")})
    assert drawn == ["///"] and (tmp_path / "map.png").stat().st_size > 1000
