"""nbgrader's exchange, exercised with the real nbgrader verbs and the course's commands.

A temporary exchange folder stands in for JupyterHub's /srv/nbgrader/exchange.
The instructor (this repository as course folder, a temp work folder) releases
08 (the lightest to grade, and its checks time nothing, so every cell decides);
two students, each in a home folder of their own, fetch it, answer it and
submit (alice before the due date, bob after it); the
instructor collects, grades with `python -m autograder grade` (late penalty:
COURSE_LATE_PENALTY=zero), writes feedback and releases it; each student
fetches their feedback. Scores and the late penalty are checked in the
gradebook and in the students' feedback pages.
"""
import csv
import datetime
import os
import re
import shutil
import subprocess
import sys
import time

import nbformat
import pytest

from autograder import course, notebooks, samples

pytestmark = [pytest.mark.scale, pytest.mark.timeout(900)]
ASSIGNMENT = "08_amp_tensor_cores"
COURSE_ID = "parallel-python-pytorch"
# The `nbgrader` command (its entry point, nbgraderapp.main, as `python -m nbgrader` runs it), with
# the IRI parser deferred as in the course's own processes (autograder/deferred_imports.py): each
# verb's process would otherwise build it on import, 1 to 3 s of CPU, thirteen times.
NBGRADER = (f"import sys; sys.path.insert(0, {str(course.ROOT)!r}); "
            "from autograder.deferred_imports import defer_iri_parser; sys.path.pop(0); defer_iri_parser(); "
            "from nbgrader.apps.nbgraderapp import main; sys.exit(main())")


class Exchange:
    def __init__(self, tmp_path, course_tools):
        self.tmp = tmp_path
        self.root = tmp_path / "exchange"
        self.root.mkdir()
        self.root.chmod(0o777)
        self.work = tmp_path / "instructor-work"
        self.work.mkdir()
        self.db_url = f"sqlite:///{self.work / 'gradebook.db'}"
        self.tools = course_tools
        # The exchange is named as on a hub: by the course's nbgrader_config.py for the instructor,
        # by the student folder's for the students (COURSE_EXCHANGE in place of /srv/nbgrader/exchange).
        self.env = {**os.environ, "COURSE_WORKDIR": str(self.work), "COURSE_DB_URL": self.db_url,
                    "COURSE_LATE_PENALTY": "zero", "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
                    "MPLBACKEND": "Agg", "COURSE_EXCHANGE": str(self.root)}
        # /srv/course on the hub: the student folder's nbgrader_config.py, beside the helpers it reads
        self.srv = tmp_path / "srv-course"
        shutil.copytree(course.ROOT / "helpers", self.srv / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(course.ROOT / "autograder" / "student" / "bundle" / "nbgrader_config.py", self.srv)

    def nbgrader(self, *args, cwd=None, home=None):
        """An nbgrader verb, run by a user with a home of their own (nbgrader keeps a cache of
        submissions there); the instructor's run in the course folder (its nbgrader_config.py)."""
        home = home or self.tmp / "home-instructor"
        home.mkdir(exist_ok=True)
        env = {**self.env, "HOME": str(home), "JUPYTER_DATA_DIR": str(home / ".local" / "share" / "jupyter"),
               "JUPYTER_CONFIG_DIR": str(home / ".jupyter")}  # a student's own config (student())
        # No lease held around them (unlike the course's short verbs, tests/conftest.py): there are
        # thirteen, each would wait behind every check that takes the machine alone, and the test
        # then became part 2's longest chain (98 s before, 137 and 172 s with the lease held).
        done = subprocess.run([sys.executable, "-c", NBGRADER, *args],
                              cwd=cwd or course.ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        return done

    def student(self, name, *args):
        """A student's verb, configured as the guide has the administrator do it: a
        ~/.jupyter/nbgrader_config.py naming the course and loading the student folder's."""
        home = self.tmp / f"home-{name}"
        (home / ".jupyter").mkdir(parents=True, exist_ok=True)
        (home / ".jupyter" / "nbgrader_config.py").write_text(
            f'c = get_config()\nc.CourseDirectory.course_id = "{COURSE_ID}"\n'
            f'load_subconfig({str(self.srv / "nbgrader_config.py")!r})\n')
        return self.nbgrader(*args, cwd=home, home=home), home

    def autograder(self, *args):
        return self.tools.cli(*args, workdir=self.work, env=self.env)


def _due_date_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def test_exchange_round_trip_with_late_penalty(tmp_path, course_tools):
    ex = Exchange(tmp_path, course_tools)
    # The gradebook learns the assignment (as `python -m autograder release` does).
    course_tools.prepare(ex.work, [ASSIGNMENT], ex.db_url, with_samples=False)
    ex.nbgrader("release_assignment", ASSIGNMENT)
    # into the exchange the configuration names (nbgrader's default folder would do as well, for a
    # test run as root, and on a hub would not be the administrator's)
    assert (ex.root / COURSE_ID / "outbound" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()

    perfect = samples.submissions(ASSIGNMENT)["sample_perfect"]
    for name in ("alice", "bob"):
        _, home = ex.student(name, "fetch_assignment", ASSIGNMENT)
        fetched = home / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        assert notebooks.answer_cells(notebooks.read(fetched)), "the fetched notebook has no exercise"
        nbformat.write(perfect, str(fetched))
    ex.student("alice", "submit", ASSIGNMENT, "--student=alice")
    time.sleep(1.1)
    ex.nbgrader("db", "assignment", "add", ASSIGNMENT, f"--duedate={_due_date_now()}")
    time.sleep(1.1)
    ex.student("bob", "submit", ASSIGNMENT, "--student=bob")

    ex.nbgrader("collect", ASSIGNMENT)
    for name in ("alice", "bob"):
        assert (ex.work / "submitted" / name / ASSIGNMENT / "timestamp.txt").is_file()
    graded = ex.autograder("grade", ASSIGNMENT)
    assert "2 of 2 submissions graded" in graded.stdout, graded.stdout

    from nbgrader.api import Gradebook
    cells = course_tools.scores(ex.work, ex.db_url, [ASSIGNMENT])
    short = [(student, cell) for (student, _, cell), (score, top) in cells.items() if score < top]
    if short and {(s, ASSIGNMENT, c) for s, c in short} <= course_tools.undecided_cells(ex.work):
        pytest.skip(f"cells that could not decide on this machine now, twice: {sorted(short)}")
    with Gradebook(ex.db_url) as gb:
        alice = gb.find_submission(ASSIGNMENT, "alice")
        bob = gb.find_submission(ASSIGNMENT, "bob")
        top = alice.max_score
        assert top > 0 and alice.score == top, f"alice scored {alice.score}/{top}"
        assert alice.total_seconds_late == 0 and alice.late_submission_penalty == 0
        assert bob.score == top, f"bob's answers scored {bob.score}/{top} before the penalty"
        assert bob.total_seconds_late > 0 and bob.late_submission_penalty == top

    ex.autograder("feedback", ASSIGNMENT)
    ex.nbgrader("release_feedback", ASSIGNMENT)
    for name, penalty in (("alice", 0.0), ("bob", top)):
        _, home = ex.student(name, "fetch_feedback", ASSIGNMENT, f"--student={name}")
        pages = list((home / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
        assert len(pages) == 1, f"{name} fetched {pages}"
        html = pages[0].read_text()
        assert "HIDDEN TESTS" not in html
        # The header shows the score after the penalty, which has a line of its own.
        score = re.search(r"\(Score:\s*([0-9.]+)\s*/\s*([0-9.]+)\)", html)
        assert score and float(score[1]) == top - penalty and float(score[2]) == top, f"{name}'s feedback: {score}"
        late = re.search(r"Late submission penalty \(Score:\s*-([0-9.]+)\)", html)
        assert (float(late[1]) if late else 0.0) == penalty, f"{name}'s feedback shows penalty {late}"

    # The grade tables take the penalty off too: what an LMS imports is what the feedback says.
    ex.autograder("report", ASSIGNMENT)
    with open(ex.work / "reports" / "grades.csv", newline="") as rows:
        grades = {r["student"]: r for r in csv.DictReader(rows)}
    with open(ex.work / "reports" / "grades_lms.csv", newline="") as rows:
        lms = {r["student"]: r for r in csv.DictReader(rows)}
    for name, penalty in (("alice", 0.0), ("bob", top)):
        row = grades[name]
        assert (float(row["score"]), float(row["raw_score"]), float(row["late_penalty"])) == (
            top - penalty, top, penalty), f"{name}'s row of grades.csv: {row}"
        assert float(lms[name][ASSIGNMENT]) == float(lms[name]["total"]) == top - penalty, (
            f"{name}'s row of grades_lms.csv: {lms[name]}")
    # Late is said where it is seen, with or without a penalty: bob handed in over a second late.
    assert grades["alice"]["seconds_late"] == "" and int(grades["bob"]["seconds_late"]) >= 1, grades
