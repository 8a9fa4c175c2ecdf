"""Grading where the grader is not root (a laptop, a rootless container).

The sandbox's root-only layers (mount and network namespaces, the student's own
uid, cgroups, the kernel's process events) cannot all be applied there. Grading
must still give every sample student the score it gets as root, and the
grading log must say what could not be applied. The grader runs here in a user
namespace of its own (`unshare --user`): there it is not root (uid 65534) and
has none of root's powers outside it, while the course's files stay readable.
"""
import shutil
import subprocess

import pytest


A = "01_processes_threads"
STUDENTS = {"sample_perfect": "full", "sample_blank": "zero"}  # as graded as root (tests/test_grading.py)
# The one cell whose check times the machine: on a busy machine it may not decide, and then it
# goes to a person (reports/manual_review.csv) instead of counting; never a plain failure.
TIMED = "test_creation_cost"


def _can_unshare():
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "id", "-u"], capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.strip() != "0"


@pytest.fixture(scope="module")
def graded(tmp_path_factory, course_tools):
    if not _can_unshare():
        pytest.skip("`unshare --user` is not available here to grade as a user other than root")
    work = tmp_path_factory.mktemp("unprivileged")
    db_url = course_tools.prepare(work, [A])
    # Its own temp folder: `import torch` makes <TMPDIR>/torchinductor_<user>, here for uid 65534.
    temp = work / "tmp"
    temp.mkdir()
    done = course_tools.cli("grade", A, "--students", *STUDENTS, workdir=work, db_url=db_url,
                            env={"TMPDIR": str(temp)}, prefix=["unshare", "--user"])
    logs = "\n".join(p.read_text(errors="replace") for p in sorted((work / "reports" / "logs").glob("*.log")))
    review = (work / "reports" / "manual_review.csv").read_text()
    return {"scores": course_tools.scores(work, db_url, [A]), "output": done.stdout, "logs": logs, "review": review}


def test_the_sample_students_score_as_with_root(graded):
    """Full marks in every cell for the reference answers, none for the blank notebook."""
    for student, expected in STUDENTS.items():
        cells = {key[2]: value for key, value in graded["scores"].items() if key[0] == student}
        assert cells, f"{student} was not graded:\n{graded['output'][-3000:]}"
        wrong = {cell: f"{got:g}/{top:g}" for cell, (got, top) in cells.items()
                 if got != (top if expected == "full" else 0)
                 and not (cell == TIMED and f"{student},{A},{TIMED}" in graded["review"])}
        assert not wrong, f"{student} should score {expected}: {wrong}\n{graded['output'][-3000:]}"


def test_the_log_says_what_could_not_be_applied(graded):
    assert "[sandbox] grading runs as uid 65534, not root" in graded["logs"], graded["logs"][-3000:]
    assert "[sandbox] file protection unavailable" in graded["logs"], graded["logs"][-3000:]
