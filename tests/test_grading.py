"""Grading end to end, on every assignment, in the shared graded course (tests/conftest.py).

The reference answers typed into the release notebook score full marks (a
cell whose timing check could not decide on the busy test machine, twice, is
not a failure of the reference: that test is skipped, visibly); the
blank release scores zero on every test cell; the partly wrong sample lands
between, its right answers scoring full beside the wrong ones; its feedback
explains without showing the hidden tests.
"""
import pytest

from autograder import course, samples
from autograder.pipeline import jobs


@pytest.fixture
def graded(graded_course):
    return graded_course


def _cells(graded, student, assignment):
    return [r for r in graded["rows"] if r["student"] == student and r["assignment"] == assignment]


def test_every_submission_was_graded(graded):
    failed = [f"{r.student}/{r.assignment} ({r.log.read_text()[-2000:]})" for r in graded["results"] if not r.ok]
    assert not failed, "autograde failed for: " + "\n".join(failed)


@pytest.mark.parametrize("assignment", [a for a in course.assignments() if (a, "sample_perfect") not in samples.GRADED_ALONE])
def test_reference_answers_score_full_marks(graded, assignment, course_tools):
    """(samples.GRADED_ALONE are graded in part 3, on a quiet machine: tests/test_decided_alone.py)"""
    student = "sample_perfect"
    cells = _cells(graded, student, assignment)
    assert cells, f"{student}/{assignment} has no graded cell"
    short = [r for r in cells if r["score"] < r["max_score"]]
    course_tools.skip_if_only_undecided(graded["work"], student, assignment, [r["cell"] for r in short])
    lost = [f"{r['cell']} ({r['score']}/{r['max_score']})" for r in short]
    assert not lost, f"{student}/{assignment} lost points in: {', '.join(lost)}; see {graded['work'].path}/autograded"


def test_blank_release_scores_zero_on_every_test_cell(graded, assignment):
    cells = _cells(graded, "sample_blank", assignment)
    assert cells
    scored = [r["cell"] for r in cells if r["score"] > 0]
    assert not scored, f"the blank release scores points in {scored}: a test that cannot fail"


def test_partial_sample_lands_in_between(graded, assignment, course_tools):
    cells = _cells(graded, "sample_partial", assignment)
    total = sum(r["score"] for r in cells)
    top = sum(r["max_score"] for r in cells)
    assert 0 < total < top, f"sample_partial scored {total}/{top}"
    catalogue = samples.catalogue(assignment)
    for exercise in catalogue.PARTIAL:
        lost = [r for r in cells if r["exercise"] == exercise]
        assert lost and all(r["score"] == 0 for r in lost), f"{exercise} should have scored 0 in sample_partial"
    # The right answers beside the wrong and blank ones score full: one exercise's failure (a broken
    # student's process, say) costs no other exercise its points.
    right = [r for r in cells if r["exercise"] not in catalogue.PARTIAL]
    assert right, "sample_partial has no right answer"
    short = [r for r in right if r["score"] < r["max_score"]]
    course_tools.skip_if_only_undecided(graded["work"], "sample_partial", assignment, [r["cell"] for r in short])
    assert not short, ("right answers beside wrong ones lost points: "
                       + ", ".join(f"{r['cell']} ({r['score']}/{r['max_score']})" for r in short))


def test_feedback_explains_without_revealing_hidden_tests(graded):
    work = graded["work"].path
    pairs = [(a, "sample_partial") for a in graded["assignments"]]
    results = jobs.run_all("generate_feedback", pairs, work=graded["work"].course)
    assert all(r.ok for r in results), [r.log.read_text()[-1500:] for r in results if not r.ok]
    for assignment in graded["assignments"]:
        html = (work / "feedback" / "sample_partial" / assignment / f"{assignment}.html").read_text()
        assert "HIDDEN TESTS" not in html and "autograder" not in html
        assert "Score:" in html
        # One page body (autograder/pipeline/feedback_page.html.j2): nbgrader's template wrapped
        # nbconvert's whole <body>, #notebook and #notebook-container in its own.
        assert [html.count(tag) for tag in ("<body", "</body>", 'id="notebook"', 'id="notebook-container"')] == [1] * 4
        # The results table on top (autograder/pipeline/feedback_page.py) names every exercise.
        table = html[html.index("Your results, exercise by exercise"):html.index("</table>")]
        missing = [e for e in course.contract()[assignment] if f">{e}</a>" not in table]
        assert not missing, f"{assignment}: the results table leaves out {missing}"


def test_only_undecided_cells_skip(tmp_path, course_tools):
    """The skip above covers cells that could not decide, and nothing else."""
    work = course_tools.workdir(tmp_path, [], released=True)
    work.undecided = {("02_gil", "sample_perfect"): ["test_gil_experiment"]}
    with pytest.raises(pytest.skip.Exception, match="test_gil_experiment"):
        course_tools.skip_if_only_undecided(work, "sample_perfect", "02_gil", ["test_gil_experiment"])
    # a cell lost to a check that decided, beside an undecided one; another student; nothing lost
    course_tools.skip_if_only_undecided(work, "sample_perfect", "02_gil", ["test_gil_experiment", "test_run_threads"])
    course_tools.skip_if_only_undecided(work, "sample_partial", "02_gil", ["test_gil_experiment"])
    course_tools.skip_if_only_undecided(work, "sample_perfect", "02_gil", [])


def test_undecided_cells_read_the_review_list(tmp_path, course_tools):
    """The cells a work folder's grading sent to a person, as the exchange and Dask tests read them."""
    assert course_tools.undecided_cells(tmp_path) == set()
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "manual_review.csv").write_text(
        "student,assignment,cell,why\nalice,01_processes_threads,test_creation_cost,\"a hidden check could not decide, twice\"\n")
    assert course_tools.undecided_cells(tmp_path) == {("alice", "01_processes_threads", "test_creation_cost")}


def _graded_test_cells(graded, student):
    """(assignment, cell) of every graded test cell of `student`'s autograded notebooks."""
    from autograder import notebooks
    for assignment in graded["assignments"]:
        path = graded["work"].path / "autograded" / student / assignment / f"{assignment}.ipynb"
        if not path.exists():  # samples.GRADED_ALONE: graded in part 3
            continue
        for cell in notebooks.read(path).cells:
            if notebooks.is_test_cell(cell):
                yield assignment, cell


def _text(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_each_hidden_block_says_its_verdict_in_the_feedback(graded):
    """The kernel's line for a hidden block ("any that fail are listed below") gives way to the
    judge's verdict: with nothing below it, a pass could not be told from a lost list. No C++ log line
    of torch's stands under it either (the sandbox's gloo ranks logged one per connection)."""
    from autograder import hidden
    pending = hidden.PENDING.format(exercise="\0").split("\0")[1]
    passing = 0
    for student in ("sample_perfect", "sample_partial"):
        for assignment, cell in _graded_test_cells(graded, student):
            text = _text(cell)
            assert pending not in text, f"{student}/{assignment}: a hidden block's line kept no verdict:\n{text}"
            assert "[c10d]" not in text, f"{student}/{assignment}: torch's C++ log in the feedback:\n{text}"
            if student == "sample_perfect" and not any(o.get("output_type") == "error" for o in cell.outputs):
                passing += 1
                assert "hidden checks passed" in text, f"{assignment}: a passing test cell says no verdict:\n{text}"
    assert passing, "no passing test cell of sample_perfect was looked at"


def test_hidden_findings_are_shown_where_a_visible_assert_failed_first(graded):
    """Where a visible assert fails, the hidden checks' findings follow it: they often say why (an
    unbalanced partition's loads against the best possible, cumulative times summing past the call)."""
    both = [(a, c) for a, c in _graded_test_cells(graded, "sample_partial")
            if [o.get("ename") for o in c.get("outputs", []) if o.get("output_type") == "error"][:1] == ["AssertionError"]
            and any(o.get("ename") == "HiddenCheckFailed" for o in c.get("outputs", []))]
    assert both, "no test cell of sample_partial shows the hidden checks' findings below a failed visible assert"
    unanswered = [a for a, c in _graded_test_cells(graded, "sample_blank")
                  if any(o.get("ename") == "HiddenCheckFailed" for o in c.get("outputs", []))]
    assert not unanswered, f"an unanswered exercise's cell lists the hidden checks too: {unanswered}"
