"""Every assignment in source/ keeps the course contract (../shared/COURSE_SPEC.md)."""
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import course, hidden, notebooks

SHARED = course.ROOT.parent / "shared"


def test_contract_copy_matches_shared():
    shared = SHARED / "contract.json"
    if not shared.is_file():
        pytest.skip("../shared is not beside this checkout")
    assert json.loads(shared.read_text()) == course.spec_contract()


def test_the_notebooks_keep_the_spec():
    """The contract the course runs on is read from source/; it has every assignment and
    exercise the spec lists (and may add more)."""
    derived, spec = course.contract(), course.spec_contract()
    assert set(derived) == set(spec)
    for assignment, exercises in spec.items():
        missing = set(exercises) - set(derived[assignment])
        assert not missing, f"{assignment}: no answer cell for {sorted(missing)}"


def test_shared_contract_checker(assignment):
    tool = SHARED / "tools" / "check_contract.py"
    if not tool.is_file():
        pytest.skip("../shared/tools/check_contract.py is not beside this checkout")
    out = subprocess.run([sys.executable, str(tool), str(course.ROOT), assignment],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def _test_cells_of(nb, exercise):
    return {gid: src for gid, src in notebooks.test_cells(nb).items() if gid.startswith(f"test_{exercise}")}


def test_exercises_have_answer_and_test_cells(assignment):
    nb = notebooks.read(course.source_notebook(assignment))
    answers = notebooks.answer_cells(nb)
    for exercise in course.contract()[assignment]:
        assert exercise in answers, f"{exercise}: no answer cell"
        assert "### BEGIN SOLUTION" in answers[exercise]
        tests = _test_cells_of(nb, exercise)
        assert tests, f"{exercise}: no test_{exercise}* cell"
        assert any("### BEGIN HIDDEN TESTS" in src for src in tests.values()), f"{exercise}: no hidden block"
        visible = "".join(notebooks.visible_code(src) for src in tests.values())
        assert "assert" in visible, f"{exercise}: students get no visible test"


def test_hidden_blocks_call_the_runner_for_their_exercise(assignment):
    nb = notebooks.read(course.source_notebook(assignment))
    for gid, src in notebooks.test_cells(nb).items():
        block = re.search(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", src, re.S)
        if not block:
            continue
        calls = re.findall(r'^check\("([^"]+)"\)$', block.group(1), re.M)
        assert calls, f"{gid}: the hidden block does not call autograder.hidden.check"
        for exercise in calls:
            assert gid.startswith(f"test_{exercise}"), f"{gid}: hidden block checks {exercise}"
            assert hidden.assignment_of(exercise) == assignment, f"{exercise}: its checks are elsewhere"
            assert hidden.checks_for(assignment, exercise), f"{exercise}: no check in autograder/checks"


def test_every_exercise_has_hidden_checks(assignment):
    nb = notebooks.read(course.source_notebook(assignment))
    for exercise in notebooks.answer_cells(nb):
        assert hidden.checks_for(assignment, exercise), f"{exercise}: no hidden check"


def test_test_cells_end_with_a_statement(assignment):
    """A test cell whose last line is an expression would make its value the score."""
    nb = notebooks.read(course.source_notebook(assignment))
    for gid, src in notebooks.test_cells(nb).items():
        tree = ast.parse(notebooks_python(src))
        last = tree.body[-1]
        ok = not isinstance(last, ast.Expr) or (
            isinstance(last.value, ast.Call) and getattr(last.value.func, "id", "") in ("check", "print"))
        assert ok, f"{gid}: ends with an expression; end it with a statement"


def notebooks_python(src):
    """Cell source with IPython syntax (magics, top-level await) made parseable."""
    lines = [("pass  # " + line) if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines()]
    return "\n".join(lines).replace("await ", "")
