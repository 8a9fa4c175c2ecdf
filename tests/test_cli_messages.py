"""What the instructor's commands say about the likely mistakes that they cannot act on: a line
or two naming what is wrong and what to run, a non-zero exit status where nothing useful was done,
and no traceback (findings 1-6, 13 and 14 of the docs review). Nothing is graded here: every
mistake is found before grading starts, and the grading step is a spy."""
import re

import pytest

from autograder import cli, course, grade
from autograder.pipeline import cluster, jobs

A1, A2 = "01_processes_threads", "02_gil"


@pytest.fixture
def ran():
    """The (verb, pairs) that reached jobs.run_all, or grade's autograde."""
    return []


@pytest.fixture
def work(tmp_path, monkeypatch, ran):
    """A scratch work folder (COURSE_WORKDIR) where nothing is graded: jobs.run_all and
    grade.autograde only record what they were given (run_all fails on any submission)."""
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    monkeypatch.delenv("COURSE_DB_URL", raising=False)
    monkeypatch.delenv("COURSE_SCHEDULER", raising=False)

    def run_all(verb, pairs, *args, **kwargs):
        ran.append((verb, list(pairs)))
        assert not pairs, f"{verb} ran on {pairs}"
        return []

    def autograde(pairs, **kwargs):
        ran.append(("autograde", list(pairs)))
        return [], {}

    monkeypatch.setattr(jobs, "run_all", run_all)
    monkeypatch.setattr(grade, "autograde", autograde)
    monkeypatch.setattr(grade, "scores", lambda assignments=None, work=None: [])
    monkeypatch.setattr(grade, "hand_overrides", lambda pairs, work=None: [])
    return tmp_path


def released(monkeypatch, *assignments):
    """The gradebook knows these assignments (as after `release`)."""
    monkeypatch.setattr(grade, "roster", lambda work=None: {"assignments": sorted(assignments),
                                                            "students": [], "submissions": []})


def submit(work, student, assignment, folder="submitted"):
    path = work / folder / student / assignment
    path.mkdir(parents=True)
    (path / f"{assignment}.ipynb").write_text("{}")


def command(argv, capsys):
    """(exit status, what the command printed) of `python -m autograder ARGV`, as the shell sees
    them: SystemExit("text") prints the text and exits 1."""
    try:
        status = cli.main(argv)
    except SystemExit as exit_:
        status = exit_.code
    captured = capsys.readouterr()
    out = captured.out + captured.err
    if isinstance(status, str):
        out, status = out + status + "\n", 1
    return status, out


def graded(ran):
    return [pair for verb, pairs in ran if verb == "autograde" for pair in pairs]


# 1. Each verb's --help says what it works on when no assignment is named.

@pytest.mark.parametrize("verb, says", [
    ("grade", "every assignment folder found under submitted/<student>/"),
    ("feedback", "every assignment folder found under autograded/<student>/"),
    ("report", "every assignment in the gradebook"),
    ("release", "every assignment in source/"),
    ("samples", "every assignment in source/ (each must be released first)"),
    ("student", "dist/student/ is rebuilt with only those"),
    ("all", "report every assignment in the gradebook"),
])
def test_help_says_each_verbs_own_default(verb, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([verb, "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"default: {says}" in text or says in text, text
    if verb in ("grade", "feedback", "report"):
        assert "every assignment in source/" not in text, text


# 5. samples before release.

def test_samples_before_release_says_to_release_first(work, monkeypatch, capsys):
    monkeypatch.setattr(course, "RELEASE", work / "release")  # nothing released
    status, out = command(["samples", A2], capsys)
    assert status == 1, out
    assert f"run `python -m autograder release {A2}` first" in out and "Traceback" not in out, out
    assert not (work / "submitted").exists()


# 14. The closing line of `all` under COURSE_WORKDIR.

def test_all_ends_with_the_work_folders_own_paths(tmp_path, monkeypatch, cli_steps, capsys):
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    assert cli.main(["all"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("Done."), last
    for what, folder in (("Graded", "autograded"), ("Feedback", "feedback"), ("Reports", "reports")):
        assert f"{what}: {tmp_path / folder}/" in last, last
    assert f"Release: {course.RELEASE}/" in last, last


def test_all_ends_with_short_paths_in_the_repository(monkeypatch, cli_steps, capsys):
    monkeypatch.delenv("COURSE_WORKDIR", raising=False)
    assert cli.main(["all"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "Done. Release: release/   Graded: autograded/   Feedback: feedback/   Reports: reports/", last
