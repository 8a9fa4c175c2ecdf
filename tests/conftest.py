"""Shared fixtures: the assignments present, and temporary course work folders to grade in."""
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder import course, gradebook, jobs, release
from autograder.grade import autograde

ASSIGNMENTS = course.assignments()


def pytest_generate_tests(metafunc):
    explicit = any("assignment" in m.args[0] for m in metafunc.definition.iter_markers("parametrize"))
    if "assignment" in metafunc.fixturenames and not explicit:
        metafunc.parametrize("assignment", ASSIGNMENTS)


class GradingWorkdir:
    """A throw-away course work folder (submitted/, autograded/, gradebook) for tests."""

    def __init__(self, path, assignments):
        self.path = Path(path)
        self.assignments = assignments
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("COURSE_WORKDIR", str(self.path))
            release.generate(assignments, release_dir=self.path / "release-check",
                             db_url=f"sqlite:///{self.path / 'gradebook.db'}")

    def submit(self, student, assignment, nb_or_folder):
        folder = self.path / "submitted" / student / assignment
        if folder.exists():
            shutil.rmtree(folder)
        if isinstance(nb_or_folder, (str, Path)):
            shutil.copytree(nb_or_folder, folder, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        else:
            shutil.copytree(course.RELEASE / assignment, folder, ignore=shutil.ignore_patterns("*.ipynb"))
            nbformat.write(nb_or_folder, str(folder / f"{assignment}.ipynb"))
        return folder

    def grade(self, students=None, env=None):
        """Autograde the submissions (all, or these students) as `python -m autograder grade`
        does: in parallel, then the undecided ones alone; list of JobResults."""
        pairs = jobs.submitted_pairs(self.assignments, students, root=self.path / "submitted")
        with pytest.MonkeyPatch.context() as mp:
            for key, value in (env or {}).items():
                mp.setenv(key, value)
            results, self.undecided = autograde(pairs, workdir=self.path)
            return results

    def scores(self):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("COURSE_WORKDIR", str(self.path))
            return gradebook.cell_scores()

    def total(self, student, assignment):
        rows = [r for r in self.scores() if r["student"] == student and r["assignment"] == assignment]
        return sum(r["score"] for r in rows), sum(r["max_score"] for r in rows)

    def graded_notebook(self, student, assignment):
        return nbformat.read(str(self.path / "autograded" / student / assignment / f"{assignment}.ipynb"), 4)


@pytest.fixture(scope="session")
def workdir_factory(tmp_path_factory):
    def make(name, assignments=None):
        return GradingWorkdir(tmp_path_factory.mktemp(name), assignments or ASSIGNMENTS)
    return make
