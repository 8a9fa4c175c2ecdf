"""A hidden check that cannot decide never counts as passed, end to end.

A timing check on a machine too busy to show a speed-up says "cannot decide"
(pytest.skip in the judge). `python -m autograder grade` then grades that
submission again alone; if the check still cannot decide, the cell scores zero,
reports/manual_review.csv lists it for a person, and the student's feedback
says why. No answer can make a check undecided (an answer's own skip is a
failure: tests/test_judge.py), so here a copy of the course has one check of
08 that never decides, and the instructor's commands run on that copy. (08: its
checks time nothing, so only that check is undecided, and its grading is the
lightest of the course.)
"""
import argparse
import contextlib
import csv
import shutil

import pytest

from autograder import course, gradebook

A = "08_amp_tensor_cores"
STUDENT = "sample_perfect"
NEVER_DECIDES = '''

def test_pad_to_multiple_never_decides(pad_to_multiple):
    """(the course's test of manual review) a check that never decides"""
    import pytest
    pytest.skip("this machine cannot decide")
'''


@pytest.fixture(scope="module")
def graded(tmp_path_factory, course_tools):
    root = course_tools.copy(tmp_path_factory.mktemp("undecided") / "course")
    with open(root / "autograder" / "checks" / f"{A}.py", "a") as checks:
        checks.write(NEVER_DECIDES)
    work = root.parent / "work"
    # A lease on the machine of its own: 08's checks time nothing, so this grading need not
    # wait for the test run's other timing checks (its regrade "alone" would).
    lease = root.parent / "lease"
    lease.mkdir()

    def run(*args):
        return course_tools.cli(*args, workdir=work, root=root, env={"COURSE_LEASE": str(lease)}).stdout

    run("release", A)  # also enters the assignment in the copy's gradebook
    run("samples", A)
    for other in ("sample_blank", "sample_partial"):
        shutil.rmtree(work / "submitted" / other)
    def run_in(folder, *args):
        return course_tools.cli(*args, workdir=folder, root=root, env={"COURSE_LEASE": str(lease)}).stdout

    return {"work": work, "grade": run("grade", A, "--students", STUDENT),
            "feedback": run("feedback", A, "--students", STUDENT), "report": run("report", A), "run_in": run_in}


def test_the_submission_was_graded_again_alone(graded):
    assert "grading them again, one at a time" in graded["grade"], graded["grade"]
    assert "need a person" in graded["grade"], graded["grade"]


def _review_list(graded):
    with open(graded["work"] / "reports" / "manual_review.csv") as listed:
        return list(csv.DictReader(listed))


def test_the_undecided_cell_scores_zero_and_the_others_full(graded):
    rows = gradebook.cell_scores(work=course.Course(graded["work"], f"sqlite:///{graded['work'] / 'gradebook.db'}"))
    cells = {r["cell"]: (r["score"], r["max_score"]) for r in rows if r["student"] == STUDENT}
    undecided = [cell for cell in cells if cell.startswith("test_pad_to_multiple")]
    assert undecided and all(cells[cell][0] == 0 for cell in undecided), cells
    others = {cell: scored for cell, scored in cells.items() if cell not in undecided}
    assert others and all(got == top for got, top in others.values()), others


def test_the_review_list_names_it(graded):
    rows = _review_list(graded)
    assert {(r["student"], r["assignment"]) for r in rows} == {(STUDENT, A)}, rows
    assert {r["cell"] for r in rows} == {"test_pad_to_multiple"}, rows
    assert "manual_review.csv" in graded["report"], graded["report"]


def test_the_feedback_says_why(graded):
    html = (graded["work"] / "feedback" / STUDENT / A / f"{A}.html").read_text()
    assert "could not decide" in html and "looked at by a person" in html


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")
def test_a_score_a_person_entered_settles_the_undecided_cell(graded, tmp_path):
    """Once a person has scored the cell (in formgrader: its manual score in the gradebook),
    report and the feedback page say so, instead of "need a person" and "score to follow"; the
    review list says what to do (grade again on a quiet machine, or score it by hand)."""
    from nbgrader.api import Gradebook

    assert "grade it again on a quiet machine" in _review_list(graded)[0]["why"]
    assert "need a person" in graded["report"] and "score to follow" in _feedback_table(graded["work"])
    assert _reported(graded["work"]) == ("", "wait for a person"), "a score not final stays out of the LMS file"
    work = tmp_path / "work"
    shutil.copytree(graded["work"], work)
    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        cell = gb.find_grade("test_pad_to_multiple", A, A, STUDENT)
        cell.manual_score = cell.max_score
        gb.db.commit()
    said = graded["run_in"](work, "report", A)
    assert "need a person" not in said and "1 test cell(s) that no check could decide were scored by a person" in said
    lms, status = _reported(work)
    assert float(lms) > 0 and status == "graded", (lms, status)
    graded["run_in"](work, "feedback", A, "--students", STUDENT)
    table = _feedback_table(work)
    assert "score to follow" not in table and "a person graded it" in table


def _reported(work):
    """(the student's cell in grades_lms.csv, the status of the submission in grades.csv, or the
    words 'wait for a person' where it says so)."""
    with open(work / "reports" / "grades_lms.csv", newline="") as f:
        lms = next(r for r in csv.DictReader(f) if r["student"] == STUDENT)[A]
    with open(work / "reports" / "grades.csv", newline="") as f:
        status = next(r for r in csv.DictReader(f) if r["student"] == STUDENT and r["assignment"] == A)["status"]
    return lms, "wait for a person" if "wait for a person" in status else status


def _feedback_table(work):
    """The results table at the top of the student's feedback page."""
    html = (work / "feedback" / STUDENT / A / f"{A}.html").read_text()
    return html[html.index("course-results"):html.index("</table>", html.index("course-results"))]


def test_the_regrade_alone_stays_on_this_machine_with_a_scheduler_set(monkeypatch, tmp_path):
    """With COURSE_SCHEDULER set, the undecided submissions' second grading still runs here, one at
    a time (it went to the cluster, which grades several side by side, so not alone)."""
    from autograder.pipeline import cluster, jobs

    def to_the_cluster(*args, **kwargs):
        raise AssertionError("the regrade alone was sent to the Dask cluster")

    monkeypatch.setattr(cluster, "run_all", to_the_cluster)
    monkeypatch.setenv("COURSE_SCHEDULER", "tcp://127.0.0.1:1")
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    assert jobs.run_all("autograde", [], work=course.Course(), alone=True) == []
    with pytest.raises(AssertionError, match="sent to the Dask cluster"):  # the batch itself does go
        jobs.run_all("autograde", [], work=course.Course())


def test_grading_other_submissions_keeps_the_cells_waiting_for_a_person(tmp_path):
    """manual_review.csv lists what every grading so far left to a person: grading another
    assignment, or one student again, replaces only the rows of what it graded (it rewrote the
    file, and the cells waiting for a person were lost)."""
    from autograder import grade

    work = course.Course(tmp_path, f"sqlite:///{tmp_path / 'gradebook.db'}")
    grade._write_review_list({("02_gil", "ann"): ["test_gil_experiment"]}, [("02_gil", "ann")], work)
    grade._write_review_list({("05_multiprocessing_pools", "bob"): ["test_parallel_map"]},
                             [("05_multiprocessing_pools", "bob"), ("05_multiprocessing_pools", "ann")], work)

    def listed():
        with open(tmp_path / "reports" / "manual_review.csv", newline="") as rows:
            return {(r["student"], r["assignment"], r["cell"]) for r in csv.DictReader(rows)}

    assert listed() == {("ann", "02_gil", "test_gil_experiment"),
                        ("bob", "05_multiprocessing_pools", "test_parallel_map")}
    grade._write_review_list({}, [("02_gil", "ann")], work)  # ann's 02 graded again, decided now
    assert listed() == {("bob", "05_multiprocessing_pools", "test_parallel_map")}


def test_a_submission_that_fails_to_grade_keeps_no_earlier_feedback(tmp_path):
    """A resubmission whose grading fails keeps its earlier scores in the gradebook (`report`
    marks it not graded) and got no new feedback: the earlier feedback, which `feedback` then
    skipped, looked current. It is removed; another submission's feedback stays."""
    from autograder import grade
    from autograder.pipeline.jobs import JobResult

    work = course.Course(tmp_path, f"sqlite:///{tmp_path / 'gradebook.db'}")
    for student in ("ann", "bob"):
        page = work.feedback / student / A / f"{A}.html"
        page.parent.mkdir(parents=True)
        page.write_text("Score: 8 / 8")
    grade._drop_stale_feedback([JobResult(A, "ann", False, 1.0, tmp_path / "ann.log")], work)
    assert not (work.feedback / "ann" / A).exists()
    assert (work.feedback / "bob" / A / f"{A}.html").is_file()


@pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's own add_submission
def test_a_score_entered_by_hand_that_outlives_an_autograde_is_listed(tmp_path, monkeypatch, course_tools, capsys):
    """nbgrader keeps a manual score through later autogrades (a resubmission's too), and it is
    the one that counts: a person who gave ann 1 of 2 for a failed test would never hear that her
    fixed resubmission now passes. Grading lists such cells in manual_review.csv and says so; a
    manual score equal to the new autograde's, or another submission's, is not listed."""
    from nbgrader.api import Gradebook

    from autograder import grade
    from autograder.pipeline import jobs

    work = course_tools.scratch_gradebook(tmp_path, ["A1", "A2"], ["ann", "bob"],
                                          {("ann", "A1"): 2, ("bob", "A1"): 2, ("ann", "A2"): 0})
    with Gradebook(work.db_url) as gb:
        gb.find_grade("test_x", "A1", "A1", "ann").manual_score = 1  # the autograde now says 2
        gb.find_grade("test_x", "A1", "A1", "bob").manual_score = 2  # agrees with it
        gb.find_grade("test_x", "A2", "A2", "ann").manual_score = 2  # not graded in this run
        gb.db.commit()
    graded = [("A1", "ann"), ("A1", "bob")]
    for assignment, student in graded:  # the handed-in notebooks grade() looks for
        (work.submitted / student / assignment).mkdir(parents=True, exist_ok=True)
        (work.submitted / student / assignment / f"{assignment}.ipynb").write_text("{}")
    monkeypatch.setattr(grade.warm, "kept", contextlib.nullcontext)
    monkeypatch.setattr(jobs, "run_all", lambda verb, pairs, **_: [
        jobs.JobResult(a, s, True, 0.1, tmp_path / f"{s}.log") for a, s in pairs])
    monkeypatch.setattr(course, "Course", lambda *_, **__: work)
    monkeypatch.setattr(jobs, "submitted_pairs", lambda *_, **__: graded)
    assert grade.main(argparse.Namespace(assignments=["A1"], students=None, jobs=1)) == 0
    with open(tmp_path / "reports" / "manual_review.csv", newline="") as rows:
        listed = [(r["student"], r["assignment"], r["cell"], r["why"]) for r in csv.DictReader(rows)]
    assert listed == [("ann", "A1", "test_x", "a score entered by hand (1) counts, not this autograde's (2): "
                                              "keep or change it in formgrader")], listed
    assert "1 cell(s) keep a score entered by hand" in capsys.readouterr().out
