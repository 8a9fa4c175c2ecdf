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


# 2. An assignment folder named after none of the course's assignments (a typo).

def test_a_misnamed_assignment_folder_is_named_and_the_rest_graded(work, ran, monkeypatch, capsys):
    released(monkeypatch, A1)
    submit(work, "alice", A1)
    submit(work, "carol", "01_process_threads")
    submit(work, "dave", "01_process_threads")
    status, out = command(["grade"], capsys)
    assert status == 1, out
    assert graded(ran) == [(A1, "alice")], ran
    lines = out.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if "01_process_threads" in line):][:2]
    assert "carol, dave" in lines[0] and "not an assignment of this course" in lines[0], out
    assert (f"rename each to {A1} and the notebook 01_process_threads.ipynb in it to {A1}.ipynb, then run: "
            f"python -m autograder grade {A1} --students carol dave") in lines[1], out
    assert "release 01_process_threads" not in out, out
    assert "left out" in out and "carol/01_process_threads" in out, out


def test_only_a_misnamed_folder_stops_with_its_name_and_the_close_one(work, ran, monkeypatch, capsys):
    released(monkeypatch, A1)
    submit(work, "carol", "01_process_threads")
    status, out = command(["grade", "--students", "carol"], capsys)
    assert status == 1 and graded(ran) == [], out
    assert str(work / "submitted" / "carol" / "01_process_threads") in out, out
    assert f"rename it to {A1}" in out and "Traceback" not in out, out
    assert "release 01_process_threads" not in out, out


# 2b. A notebook too large to read safely (printed output saved in it, or a student's attack on the
# grading machine's memory): left out, with its size, the limit and what to do.

def test_an_oversized_notebook_is_left_out_with_what_to_do(work, ran, monkeypatch, capsys):
    released(monkeypatch, A1)
    submit(work, "alice", A1)
    submit(work, "bob", A1)
    with open(work / "submitted" / "bob" / A1 / f"{A1}.ipynb", "wb") as notebook:
        notebook.truncate(3 * 2**20 + 1)  # sparse: 3 MiB and a byte, over a limit of 3
    monkeypatch.setenv("COURSE_MAX_NOTEBOOK_MB", "3")
    status, out = command(["grade"], capsys)
    assert status == 1 and graded(ran) == [(A1, "alice")], out
    line = " ".join(next(line for line in out.splitlines() if "bob" in line and "not graded" in line).split())
    assert "its notebook is 3 MB, over the 3 MB a notebook may have (COURSE_MAX_NOTEBOOK_MB)" in line, line
    assert f"--clear-output --inplace {work / 'submitted' / 'bob' / A1 / A1}.ipynb" in line, line
    assert "left out" in out and f"bob/{A1}" in out, out
    monkeypatch.delenv("COURSE_MAX_NOTEBOOK_MB")
    ran.clear()
    status, out = command(["grade"], capsys)  # the default limit (100 MB) reads both
    assert sorted(graded(ran)) == [(A1, "alice"), (A1, "bob")], out


# 3. A named student without the named assignment.

def test_a_named_student_without_the_assignment_is_said_so(work, ran, monkeypatch, capsys):
    released(monkeypatch, A1, A2)
    submit(work, "bob", A1)
    submit(work, "alice", A2)
    status, out = command(["grade", A2, "--students", "bob"], capsys)
    assert status == 1 and graded(ran) == [], out
    assert f"no {A2} in {work / 'submitted'} for bob (who has {A1} only)" in out, out
    assert "samples" not in out and "nothing in" not in out, out
    # With another named student who has it: that one is graded, bob is named as lacking it.
    status, out = command(["grade", A2, "--students", "alice", "bob"], capsys)
    assert graded(ran) == [(A2, "alice")], ran
    assert f"no {A2} in {work / 'submitted'} for bob" in out and "alice (" not in out, out


# 4. feedback with nothing graded.

def test_feedback_before_grade_says_to_grade_first(work, ran, capsys):
    status, out = command(["feedback"], capsys)
    assert status == 1, out
    assert "nothing has been graded yet" in out and "run `python -m autograder grade` first" in out, out
    assert "0 files" not in out, out


def test_feedback_of_an_assignment_nobody_was_graded_in(work, ran, capsys):
    submit(work, "alice", A1, folder="autograded")
    status, out = command(["feedback", A2], capsys)
    assert status == 1, out
    assert f"nothing {A2} has been graded yet" in out and f"run `python -m autograder grade {A2}` first" in out, out
    status, out = command(["feedback", A2, "--students", "alice"], capsys)
    assert status == 1 and f"for alice (who has {A1} only)" in out, out
    assert f"python -m autograder grade {A2} --students alice" in out, out
    status, out = command(["feedback", A1, "--students", "bob"], capsys)
    assert status == 1 and "'bob'" in out and f"python -m autograder grade {A1} --students bob" in out, out


# 5. samples before release.

def test_samples_before_release_says_to_release_first(work, monkeypatch, capsys):
    monkeypatch.setattr(course, "RELEASE", work / "release")  # nothing released
    status, out = command(["samples", A2], capsys)
    assert status == 1, out
    assert f"run `python -m autograder release {A2}` first" in out and "Traceback" not in out, out
    assert not (work / "submitted").exists()


# 6. An assignment without hidden checks (a draft from `author new`).

def test_an_assignment_without_checks_is_said_once_and_left_out(work, ran, monkeypatch, capsys):
    draft = "13_gpu_kernels"
    real = course.assignments()
    monkeypatch.setattr(course, "assignments", lambda: [*real, draft])
    released(monkeypatch, A1, draft)
    for student in ("alice", "bob"):
        submit(work, student, A1)
        submit(work, student, draft)
    status, out = command(["grade"], capsys)
    assert status == 1, out
    assert graded(ran) == [(A1, "alice"), (A1, "bob")], ran
    said = [line for line in out.splitlines() if "no hidden checks" in line]
    assert len(said) == 1, out
    assert f"{draft} cannot be graded yet" in said[0] and f"autograder/checks/{draft}.py is missing" in said[0], out
    assert "2 submission(s)" in said[0], out
    status, out = command(["grade", draft], capsys)
    assert status == 1 and len(graded(ran)) == 2, out
    assert f"autograder/checks/{draft}.py is missing" in out and "no submission to grade" in out, out


def test_an_exercise_without_checks_is_named(work, ran, monkeypatch, capsys):
    from autograder import hidden
    released(monkeypatch, A1)
    submit(work, "alice", A1)
    monkeypatch.setattr(hidden, "exercise_index", lambda: {})
    status, out = command(["grade"], capsys)
    assert status == 1 and graded(ran) == [], out
    assert re.search(rf"{A1} cannot be graded yet: no hidden checks for \w+", out), out
    assert f"autograder/checks/{A1}.py" in out, out


# 13. A Dask scheduler that does not answer.

@pytest.mark.parametrize("verb, folder", [("grade", "submitted"), ("feedback", "autograded")])
def test_an_unreachable_scheduler_is_one_line(verb, folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    monkeypatch.delenv("COURSE_DB_URL", raising=False)
    monkeypatch.delenv("COURSE_SCHEDULER", raising=False)
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT", 1)
    released(monkeypatch, A1)
    submit(tmp_path, "alice", A1, folder=folder)
    status, out = command([verb, A1, "--scheduler", "tcp://127.0.0.1:1"], capsys)
    assert status == 1, out
    assert "Traceback" not in out and "OSError" not in out, out
    line = next(line for line in out.splitlines() if line.startswith(f"{verb}:"))
    assert "tcp://127.0.0.1:1" in line and "check the host and port" in line, out


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


def test_a_command_run_outside_the_environment_says_to_source_env_sh(work, monkeypatch, capsys):
    """A new shell without `source bin/env.sh`: the verb's first import fails; the command says
    which package is missing and what to run, with no traceback. Inside the environment the same
    error is the course's own bug and keeps its traceback."""
    def missing(name):
        raise ModuleNotFoundError("No module named 'nbgrader'", name="nbgrader")

    monkeypatch.setattr(cli.importlib, "import_module", missing)
    monkeypatch.setattr(cli.sys, "prefix", "/usr")
    with pytest.raises(SystemExit, match=r"release: this Python .* has no `nbgrader`: .*Run `source bin/env.sh` first"):
        cli.main(["release", A1])
    monkeypatch.setattr(cli.sys, "prefix", str(course.ROOT / ".venv"))
    with pytest.raises(ModuleNotFoundError):
        cli.main(["release", A1])


def test_notebooks_no_grading_reads_are_named_with_what_to_do(work, ran, monkeypatch, capsys):
    """A notebook straight in a student's folder, a folder named after an assignment with no
    student's folder around it, and a second download beside the graded notebook: grade graded
    the rest and said nothing of them."""
    released(monkeypatch, A1)
    submit(work, "alice", A1)
    submit(work, "jo", A1)
    (work / "submitted" / "jo" / A1 / f"{A1} (1).ipynb").write_text("{}")
    (work / "submitted" / "jo" / A1 / f"{A1}\x1b[2J.ipynb").write_text("{}")  # a name that clears a terminal
    (work / "submitted" / "erin").mkdir()
    (work / "submitted" / "erin" / f"{A1}.ipynb").write_text("{}")
    (work / "submitted" / A1).mkdir()
    (work / "submitted" / A1 / f"{A1}.ipynb").write_text("{}")
    status, out = command(["grade", A1], capsys)
    assert graded(ran) == [(A1, "alice"), (A1, "jo")] and status == 1, (ran, status)
    erin = work / "submitted" / "erin" / f"{A1}.ipynb"
    assert f"grade: not graded: {erin} (not in its assignment's folder: mkdir -p" in out, out
    assert f"mv {erin} {work / 'submitted' / 'erin' / A1 / f'{A1}.ipynb'}" in out, out
    assert f"{A1}/ is named after an assignment, not a student" in out, out
    assert f"{A1} (1).ipynb' (beside {A1}.ipynb, which is the one graded" in out, out
    assert "\\x1b[2J.ipynb'" in out and "\x1b" not in out, "shown escaped, never sent to the terminal"
    assert "Traceback" not in out, out


def test_a_folder_named_after_nothing_close_is_named_by_its_notebook(work, ran, monkeypatch, capsys):
    """hal/assignment1/ holding 01_processes_threads.ipynb: the hint named all twelve assignments."""
    released(monkeypatch, A1)
    folder = work / "submitted" / "hal" / "assignment1"
    folder.mkdir(parents=True)
    (folder / f"{A1}.ipynb").write_text("{}")
    status, out = command(["grade", "--students", "hal"], capsys)
    assert status == 1 and f"rename it to {A1}, then run: python -m autograder grade {A1} --students hal" in out, out
