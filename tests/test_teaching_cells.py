"""Every `helpers` name a notebook's cells use exists and takes the arguments the cells give it.

CI runs the teaching cells (tagged `demo`) of only a few notebooks (the site's two, the
browser's one, the benchmark's one): running every notebook's measurements would cost more
CPU than the rest of a test run's grading. What breaks a demo when the course changes is
mostly a helper renamed, moved or given other parameters; this reads every code cell of
every source notebook (demos, answers and tests alike), resolves what it imports from
`helpers`, and binds each call of a helper to the helper's signature, without running a cell.
"""
import ast
import importlib
import inspect

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from autograder import course, notebooks

_MISSING = object()


def _python(cell_source):
    """The cell as plain Python (IPython's magics and shell escapes turned into calls)."""
    return TransformerManager().transform_cell(cell_source)


def _bound_names(tree):
    """{name: object} that `from helpers... import ...` binds in one cell."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "helpers":
            module = importlib.import_module(node.module)
            for alias in node.names:
                value = getattr(module, alias.name, _MISSING)
                if value is _MISSING:                            # a submodule: from helpers import timing
                    try:
                        value = importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        value = _MISSING
                bound[alias.asname or alias.name] = (f"{node.module}.{alias.name}", value)
    return bound


def _assigned(tree):
    """Names the cell binds itself (assignments, definitions, loop targets): not helpers there."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _resolve(node, helpers_names):
    """(dotted name, object) for `name` or `name.attr...` rooted at a helpers name, else None."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in helpers_names:
        return None
    dotted, value = helpers_names[node.id]
    for attr in reversed(chain):
        if value is _MISSING:
            break
        dotted = f"{dotted}.{attr}"
        value = getattr(value, attr, _MISSING)
    return dotted, value


def _problems(assignment):
    """What in the assignment's cells names a missing helper or calls one with arguments it refuses."""
    helpers_names, problems = {}, []
    cells = [c for c in notebooks.read(course.source_notebook(assignment)).cells if c.cell_type == "code"]
    trees = [ast.parse(_python(cell.source)) for cell in cells]
    for tree in trees:
        helpers_names.update(_bound_names(tree))
    for tree in trees:
        for name in _assigned(tree):
            if name in helpers_names and not any(
                    isinstance(n, ast.ImportFrom) and any((a.asname or a.name) == name for a in n.names)
                    for n in ast.walk(tree)):
                helpers_names.pop(name)                          # the notebook rebinds it: not ours to check
    for number, tree in enumerate(trees, 1):
        for node in ast.walk(tree):
            if isinstance(node, (ast.Attribute, ast.Name)):
                found = _resolve(node, helpers_names)
                if found and found[1] is _MISSING:
                    problems.append(f"code cell {number}: {found[0]} does not exist")
            if not isinstance(node, ast.Call):
                continue
            found = _resolve(node.func, helpers_names)
            if not found or found[1] is _MISSING or not callable(found[1]):
                continue
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue                                         # *args or **kwargs: not decidable here
            try:
                signature = inspect.signature(found[1])
            except (TypeError, ValueError):
                continue                                         # a builtin without a signature
            try:
                signature.bind(*node.args, **{k.arg: k.value for k in node.keywords})
            except TypeError as err:
                problems.append(f"code cell {number}: {found[0]}({ast.unparse(node)[len(ast.unparse(node.func)) + 1:-1]}): {err}")
    return problems, helpers_names


@pytest.mark.parametrize("assignment", course.assignments())
def test_every_helper_a_cell_calls_exists_and_takes_its_arguments(assignment):
    problems, _ = _problems(assignment)
    assert not problems, "\n".join(problems)


def test_a_renamed_helper_or_a_lost_parameter_is_caught(monkeypatch):
    """The check itself can fail: a helper that loses a parameter, or goes, is reported."""
    from helpers import timing
    problems, names = _problems("02_gil")
    assert not problems and "timing" in names, "02 should call helpers.timing"
    used = sorted(name for name in vars(timing) if callable(getattr(timing, name)) and not name.startswith("_")
                  and any(f"timing.{name}(" in cell.source for cell in
                          notebooks.read(course.source_notebook("02_gil")).cells))
    assert used, "02's cells call no function of helpers.timing"
    monkeypatch.delattr(timing, used[0])
    gone, _ = _problems("02_gil")
    assert any(f"helpers.timing.{used[0]} does not exist" in p for p in gone), gone
    monkeypatch.undo()
    monkeypatch.setattr(timing, used[0], lambda: None)
    refused, _ = _problems("02_gil")
    assert any(f"helpers.timing.{used[0]}(" in p for p in refused), refused
