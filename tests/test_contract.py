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


def _bound(tree):
    """Names a cell binds at its top level: definitions, imports, assignment and loop targets."""
    bound = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            bound |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return bound


def _loaded(statement):
    """Names a statement reads from before it: not its own loop, comprehension or `with` variables."""
    own = set()
    for node in ast.walk(statement):
        targets = []
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        elif isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            own |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        for target in targets:
            own |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - own


def _release_stub(source):
    """An answer cell as released: each solution block replaced by the stub's raise."""
    return re.sub(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION[ \t]*$", r"\1raise NotImplementedError()",
                  source, flags=re.M | re.S)


def test_a_test_cell_needs_no_other_exercise_answered(assignment):
    """A test cell runs its own exercise's answer only: a blank or wrong answer to one exercise
    costs no other exercise its points. Follows names through the cells grading runs (answer,
    test and course cells, in order): a name bound in a cell that uses another exercise's answer
    carries that exercise along."""
    nb = notebooks.read(course.source_notebook(assignment))
    carries = {}  # name -> the exercises whose answers it depends on
    cascades = []
    for cell in nb.cells:
        if cell.cell_type != "code" or notebooks.is_demo(cell):
            continue
        meta = notebooks.nbgrader_meta(cell)
        if notebooks.is_answer_cell(cell):
            # What a blank answer lacks: its functions (they raise NotImplementedError) and whatever
            # only the solution binds. Imports and constants outside the solution stay.
            solved = ast.parse(notebooks_python(notebooks.solution_code(cell.source)))
            stub = ast.parse(notebooks_python(_release_stub(cell.source)))
            defs = {n.name for n in solved.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            for name in defs | (_bound(solved) - _bound(stub)):
                carries[name] = {meta["grade_id"]}
            continue
        tree = ast.parse(notebooks_python(notebooks.visible_code(cell.source)))
        used_in_cell = set()
        for statement in tree.body:  # in order: a name bound again no longer carries what it did
            used = set().union(*(carries.get(name, set()) for name in _loaded(statement)))
            used_in_cell |= used
            for name in _bound(ast.Module(body=[statement], type_ignores=[])):
                carries[name] = used
        if notebooks.is_test_cell(cell):
            own = {e for e in course.contract()[assignment] if meta["grade_id"].startswith(f"test_{e}")}
            if used_in_cell - own:
                cascades.append(f"{meta['grade_id']} runs the answer of {sorted(used_in_cell - own)}")
    assert not cascades, "a blank or wrong answer would cost another exercise its points: " + "; ".join(cascades)
