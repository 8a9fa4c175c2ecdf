"""nbgrader reads a submission whole, outside the sandbox, before any step of the course runs.
`grade` leaves an over-large notebook out before that (tests/test_cli_messages.py); the exporter
the course gives nbgrader (autograder/pipeline/reading.py) refuses it wherever else nbgrader grades
with the course's configuration: here through nbgrader's API, as formgrader's Autograde button
grades."""
import nbformat

from autograder import course
A1 = "01_processes_threads"


def test_formgrader_refuses_an_oversized_notebook_before_reading_it(workdir_factory, monkeypatch):
    work = workdir_factory("oversized", [A1])
    notebook = work.submit("bob", A1, nbformat.read(str(course.release_notebook(A1)), 4)) / f"{A1}.ipynb"
    monkeypatch.setenv("COURSE_MAX_NOTEBOOK_MB", "0.01")  # the release is about 0.04 MB
    result = work.course.api().autograde(A1, "bob")
    assert not result["success"], result["log"][-3000:]
    assert f"{notebook} was not graded: it is 0.0" in result["log"], result["log"][-3000:]
    assert "over the 0.01 MB a notebook may have (COURSE_MAX_NOTEBOOK_MB)" in result["log"]
    assert f"--clear-output --inplace {notebook})" in result["log"]
    assert not (work.path / "autograded" / "bob" / A1).exists()
