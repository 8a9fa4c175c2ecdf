"""release/ is exactly what the release step makes from source/, and gives nothing away."""
import filecmp
import re
from pathlib import Path

import pytest

from autograder import course, notebooks, release


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory):
    """Release into a fresh temporary folder with a throw-away gradebook."""
    tmp = tmp_path_factory.mktemp("release")
    return release.generate(release_dir=tmp / "release", work=course.Course(tmp))


def _files(folder):
    return sorted(p.relative_to(folder) for p in Path(folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


def test_release_is_up_to_date(fresh_release):
    committed, fresh = course.RELEASE, fresh_release
    assert _files(committed) == _files(fresh), "release/ has other files than a fresh release: run `python -m autograder release`"
    for rel in _files(fresh):
        assert filecmp.cmp(committed / rel, fresh / rel, shallow=False), (
            f"release/{rel} differs from a fresh release: run `python -m autograder release`")


def test_release_holds_no_solution_or_hidden_test(assignment):
    folder = course.RELEASE / assignment
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            for marker in ("### BEGIN SOLUTION", "### END SOLUTION", "BEGIN HIDDEN TESTS", "autograder"):
                assert marker not in text, f"{path} contains {marker!r}"


def test_release_answer_cells_are_stubs(assignment):
    nb = notebooks.read(course.release_notebook(assignment))
    for gid, src in notebooks.answer_cells(nb).items():
        assert "raise NotImplementedError()" in src, f"{gid}: the release answer cell is not a stub"
