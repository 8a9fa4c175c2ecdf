"""Which submissions `grade` and `feedback` work on, as the command line names them: an empty
--students is not "everyone", named students must exist, a folder a worker cannot take is
refused before anything runs, and grade's summary lists this run's submissions only.
No grading here: the grading step is a spy."""
import argparse

import pytest

from autograder import cli, feedback, grade
from autograder.pipeline import jobs
from autograder.pipeline.jobs import JobResult

GRADED_VERBS = ("grade", "feedback", "all")


@pytest.fixture
def ran():
    """The (verb, pairs) that reached jobs.run_all in a `work` folder: none may."""
    return []


@pytest.fixture
def work(tmp_path, monkeypatch, ran):
    """A scratch work folder (COURSE_WORKDIR) in which nothing may be graded: run_all fails the test."""
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    monkeypatch.delenv("COURSE_DB_URL", raising=False)
    monkeypatch.delenv("COURSE_SCHEDULER", raising=False)

    def run_all(verb, pairs, *args, **kwargs):
        ran.append((verb, list(pairs)))
        raise AssertionError(f"{verb} ran on {pairs}")

    monkeypatch.setattr(jobs, "run_all", run_all)
    return tmp_path


def _folders(root, *paths):
    for path in paths:
        (root / path).mkdir(parents=True)


# 1. --students with no names, or a blank name, is an error, not "every student".

@pytest.mark.parametrize("verb", GRADED_VERBS)
@pytest.mark.parametrize("names", [[], [""], ["alice", " "]], ids=["none", "empty", "blank"])
def test_an_empty_students_option_is_an_argument_error(verb, names, cli_steps, capsys):
    seen = cli_steps
    with pytest.raises(SystemExit) as exit_:
        cli.main([verb, "--students", *names])
    assert exit_.value.code == 2  # argparse's usage error
    assert "--students" in capsys.readouterr().err
    assert seen == {}, "nothing may run"


@pytest.mark.parametrize("verb", ("grade", "feedback"))
def test_without_students_option_every_student_is_meant(verb, cli_steps):
    seen = cli_steps
    assert cli.main([verb]) == 0 and seen == {verb: None}
    assert cli.main([verb, "--students", "alice", "bob"]) == 0 and seen[verb] == ["alice", "bob"]


def test_an_empty_student_list_is_refused_by_the_pairs_too(work):
    _folders(work, "submitted/alice/A1")
    with pytest.raises(jobs.SubmissionsError, match="no students named"):
        jobs.submitted_pairs(students=[])
    assert jobs.submitted_pairs() == [("A1", "alice")]
    assert jobs.submitted_pairs(students=["alice"]) == [("A1", "alice")]


@pytest.mark.parametrize("verb, folder", [("grade", "submitted"), ("feedback", "autograded")])
def test_named_students_without_a_folder_are_an_error_before_anything_runs(verb, folder, work, ran):
    _folders(work, f"{folder}/alice/A1", f"{folder}/carol/A1")
    with pytest.raises(SystemExit) as exit_:
        cli.main([verb, "--students", "alice", "bob", "zed"])
    message = str(exit_.value.code)
    assert message.startswith(f"{verb}:") and "'bob'" in message and "'zed'" in message, message
    assert "alice" not in message and str(work / folder) in message, message
    assert ran == []


def test_named_students_are_checked_in_the_folder_asked_for(work):
    _folders(work, "submitted/alice/A1", "submitted/bob/A1", "autograded/alice/A1")
    assert jobs.submitted_pairs(students=["alice", "bob"]) == [("A1", "alice"), ("A1", "bob")]
    with pytest.raises(jobs.SubmissionsError, match="'bob'"):
        jobs.submitted_pairs(students=["alice", "bob"], root=work / "autograded")
    with pytest.raises(jobs.SubmissionsError, match="'alice'"):  # no autograded/ at all
        jobs.submitted_pairs(students=["alice"], root=work / "nowhere")


# 2. A folder name with whitespace cannot go to a worker ("ASSIGNMENT STUDENT" per line).

@pytest.mark.parametrize("bad", ["ann lee/A1", "ann\tlee/A1", "bob/A1 copy"])
def test_a_folder_name_with_whitespace_is_named_and_left_out(bad, work, ran, capsys):
    """Refused up front where it is asked for by name (feedback); grade leaves it out, says how to
    rename it and grades the others (one such folder stopped the whole class's grading)."""
    _folders(work, "submitted/alice/A1", f"submitted/{bad}")
    with pytest.raises(jobs.SubmissionsError) as error:
        jobs.submitted_pairs()
    bad_folder = work / "submitted" / bad if "copy" in bad else work / "submitted" / bad.split("/")[0]
    assert repr(str(bad_folder)) in str(error.value) and "whitespace" in str(error.value), error.value
    unworkable = []
    assert jobs.submitted_pairs(unworkable=unworkable) == [("A1", "alice")] and unworkable == [bad_folder]
    with pytest.raises(SystemExit):  # alice's folder holds no notebook: nothing left to grade
        cli.main(["grade"])
    said = capsys.readouterr().out
    assert f"grade: not graded: {jobs.shown(bad_folder)} (whitespace in its name" in said and "mv " in said, said
    assert "\t" not in said, "a tab (or any character a terminal acts on) is shown escaped"
    assert "alice" in said and ran == []


def test_whitespace_folders_not_asked_for_are_left_alone(work):
    _folders(work, "submitted/alice/A1", "submitted/alice/A1 copy", "submitted/ann lee/A1")
    assert jobs.submitted_pairs(["A1"], ["alice"]) == [("A1", "alice")]


def test_feedback_refuses_a_whitespace_folder_too(work, ran):
    _folders(work, "autograded/ann lee/A1")
    with pytest.raises(SystemExit) as exit_:
        feedback.main(argparse.Namespace(assignments=[], students=None, jobs=None, scheduler=None))
    assert "ann lee" in str(exit_.value.code) and ran == []


# 3. grade's summary: the submissions of this run, not the whole gradebook.

def test_the_grade_summary_lists_only_this_runs_submissions(monkeypatch, capsys, tmp_path):
    log, failed_log = tmp_path / "log", tmp_path / "bob.log"
    # As nbgrader logs a submission it cannot read: the reason, then its own closing exception.
    failed_log.write_text("""[ERROR] There was an error processing assignment: submitted/bob/A1
    Traceback (most recent call last):
      File "nbformat/reader.py", line 25, in parse_json
    nbformat.reader.NotJSONError: Notebook does not appear to be JSON: '{\x1b[2J "cells": [...
[ERROR] There was an error processing assignment 'A1' for student 'bob'
Traceback (most recent call last):
  File "nbgrader/converters/base.py", line 468, in convert_notebooks
nbgrader.converters.base.NbGraderException: Please see the the above traceback for details on the specific errors
""")
    results = [JobResult("A1", "alice", True, 1.0, log), JobResult("A1", "bob", False, 1.0, failed_log)]
    monkeypatch.setattr(grade, "grade", lambda *args, **kwargs: (results, {}, {}))

    def row(student, assignment, score, penalty=0.0):
        return {"student": student, "assignment": assignment, "raw_score": score, "late_penalty": penalty,
                "score": score - penalty, "max_score": 10.0}

    # The gradebook: this run's alice/A1, a stale bob/A1 (his grading failed now), and rows of
    # earlier runs (other students, another assignment).
    book = [row("alice", "A1", 7.0), row("alice", "A2", 9.0), row("bob", "A1", 3.0),
            *(row(f"s{i:03}", "A1", 5.0) for i in range(50))]
    monkeypatch.setattr(grade, "scores", lambda assignments=None, work=None: [
        r for r in book if not assignments or r["assignment"] in assignments])
    status = grade.main(argparse.Namespace(assignments=[], students=None, jobs=None, scheduler=None))
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert status == 1  # bob's grading failed
    assert [l.split()[:2] for l in lines if l.startswith("  ")] == [["alice", "A1"], ["bob", "A1"]], out
    assert "7.0 / 10" in out and "3.0" not in out and "s000" not in out and "A2" not in out, out
    bob = next(l for l in lines if "bob" in l)
    # Why, on the line itself; the student's text in it shown escaped, not acted on by the terminal.
    assert f"not graded: NotJSONError: Notebook does not appear to be JSON: '{{\\x1b[2J \"cells\"" in bob, bob
    assert "\x1b" not in out and bob.endswith(f"; see {failed_log}"), bob

    assert "1 of 2 submissions graded in this run; failed: bob/A1" in out, out


def test_the_failure_reason_is_the_last_traceback_of_the_log(tmp_path):
    """Only the traceback that ends the log says why: text a submission put in the log earlier (a
    file name logged with a newline in it) can look like one; an exception without a message is
    named all the same."""
    log = tmp_path / "log"
    log.write_text("""[WARNING] not graded, not expected beside the notebook: x
Traceback (most recent call last):
  File "grader.py", line 1, in grade
GradingServerError: disk full; this submission scored 17/17 before the crash
[ERROR] There was an error processing assignment: submitted/bob/A1
    Traceback (most recent call last):
      File "nbgrader/converters/base.py", line 344, in convert_single_notebook
        output, resources = self.exporter.from_filename(notebook_filename, resources=resources)
    MemoryError
[ERROR] There was an error processing assignment 'A1' for student 'bob'
Traceback (most recent call last):
  File "nbgrader/converters/base.py", line 468, in convert_notebooks
nbgrader.converters.base.NbGraderException: Please see the the above traceback for details on the specific errors
""")
    assert jobs.failure_reason(log) == "MemoryError"
    log.write_text(log.read_text().replace("    MemoryError", "    KeyError: 'grade_id'"))
    assert jobs.failure_reason(log) == "KeyError: 'grade_id'"
    log.write_text("[INFO] no traceback here\nValueError: a line that is not in one\n")
    assert jobs.failure_reason(log) is None and jobs.failure_reason(tmp_path / "missing") is None


# 4. A notebook not named as the release named it.

def test_a_renamed_notebook_is_named_in_the_message_and_others_still_grade(work, ran, monkeypatch, capsys):
    """`01_processes_threads (1).ipynb` (a browser's second download) failed in nbgrader with "No
    notebooks found, did you forget to run 'nbgrader generate_assignment'?", which sends the
    instructor the wrong way, and entered the student in the gradebook as not graded."""
    _folders(work, "submitted/alice/A1", "submitted/bob/A1", "submitted/cy/A1")
    (work / "submitted/alice/A1/A1.ipynb").write_text("{}")
    (work / "submitted/bob/A1/A1 (1).ipynb").write_text("{}")
    assert jobs.misnamed(jobs.submitted_pairs(["A1"])) == {("A1", "bob"): ["A1 (1).ipynb"], ("A1", "cy"): []}
    graded = []
    monkeypatch.setattr(grade, "autograde", lambda pairs, **kwargs: (graded.extend(pairs), ([], {}))[1])
    monkeypatch.setattr(grade, "scores", lambda assignments=None, work=None: [])
    monkeypatch.setattr(grade, "roster", lambda work=None: {"assignments": ["A1"]})
    status = grade.main(argparse.Namespace(assignments=["A1"], students=None, jobs=None, scheduler=None))
    out = capsys.readouterr().out
    assert graded == [("A1", "alice")], graded
    assert "no A1.ipynb in submitted/bob/A1/ (found 'A1 (1).ipynb')" in out, out
    assert "no A1.ipynb in submitted/cy/A1/ (found no notebook)" in out, out
    assert "2 submission(s) left out" in out and status == 1, out
    with pytest.raises(SystemExit, match="no submission to grade"):
        grade.grade(["A1"], ["bob", "cy"])


# 5. An assignment the gradebook does not know yet (never released here).

def test_an_assignment_not_released_is_named_before_anything_runs(work, ran):
    """On a fresh clone, grading before `release` failed every submission with only "not graded:
    see reports/logs/...", whose log spoke of the database: now the command says what to run.
    (The course's own names: a folder named after none of its assignments is a typo, which
    test_cli_messages.py covers.)"""
    a1, a2 = "01_processes_threads", "02_gil"
    _folders(work, f"submitted/alice/{a1}", f"submitted/alice/{a2}")
    (work / f"submitted/alice/{a1}/{a1}.ipynb").write_text("{}")
    (work / f"submitted/alice/{a2}/{a2}.ipynb").write_text("{}")
    with pytest.raises(SystemExit, match=rf"{a1}, {a2} not in the gradebook yet: run `python -m autograder release {a1} {a2}` first"):
        grade.grade(None, None)
    assert ran == []


def test_the_signal_handlers_are_put_back(tmp_path):
    """cli.main turns SIGTERM and SIGHUP into Ctrl-C while it runs, and puts back what it found:
    a handler left behind in a caller's process (a test's) reached the workers it forked, where a
    SIGTERM that came before a worker had set itself up was lost (Pool.terminate() hung)."""
    import multiprocessing
    import signal

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP)}
    assert cli.main(["author", "export", str(tmp_path / "nope.ipynb")]) == 2
    assert {signum: signal.getsignal(signum) for signum in before} == before
    with multiprocessing.get_context("fork").Pool(2) as pool:  # terminated at once, as in the hang
        assert pool.map(abs, [-1, -2, -3]) == [1, 2, 3]
