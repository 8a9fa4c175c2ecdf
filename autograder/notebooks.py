"""Reading nbgrader notebooks: answer cells, test cells, solutions."""
import re
import sys
import types
from pathlib import Path

from .deferred_imports import defer_iri_parser

defer_iri_parser()  # before nbformat imports jsonschema
import nbformat  # noqa: E402

SOLUTION_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
HIDDEN_BLOCK = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", re.M | re.S)


def read(path):
    return nbformat.read(str(path), as_version=4)


def nbgrader_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def is_answer_cell(cell):
    meta = nbgrader_meta(cell)
    return cell.cell_type == "code" and meta.get("solution", False) and not meta.get("grade", False)


def is_test_cell(cell):
    meta = nbgrader_meta(cell)
    return cell.cell_type == "code" and meta.get("grade", False) and not meta.get("solution", False)


# Teaching cells that only demonstrate (measurements, plots): students run them,
# grading skips them. Everything an answer or a test needs is in untagged cells.
DEMO_TAG = "demo"


def is_demo(cell):
    from helpers.demos import tags
    return DEMO_TAG in tags(cell)


def answer_cells(nb):
    """{grade_id: source} of the autograded answer cells, in notebook order."""
    return {nbgrader_meta(c)["grade_id"]: c.source for c in nb.cells if is_answer_cell(c)}


def test_cells(nb):
    """{grade_id: source} of the autograder test cells, in notebook order."""
    return {nbgrader_meta(c)["grade_id"]: c.source for c in nb.cells if is_test_cell(c)}


def solution_code(source):
    """An answer cell's source with the solution markers removed (the reference answer)."""
    return SOLUTION_MARKERS.sub("", source)


def visible_code(source):
    """A test cell's source without its hidden block (what students see)."""
    return HIDDEN_BLOCK.sub("", source)


def exec_answers(answers, module_name, workdir=None, names=None):
    """Execute answer-cell sources in order into a fresh module and return it; `names`, when
    given, are there first (the other answer cells' functions and imports, as grading's kernel
    has them from the cells above).

    The module is registered in sys.modules so that, under `fork`, functions
    defined in it can be pickled by reference, as they can from a kernel's
    __main__; and with cloudpickle (joblib's loky workers) by value, as a
    kernel's __main__ is: a worker started afresh could not import it.
    `workdir` (the assignment folder) goes on sys.path, as the notebook's own
    folder does for a kernel.
    """
    module = types.ModuleType(module_name)
    module.__file__ = str(Path(workdir or ".") / f"{module_name}.py")
    sys.modules[module_name] = module
    try:
        import cloudpickle
        cloudpickle.register_pickle_by_value(module)
    except ImportError:
        pass
    if workdir is not None and str(workdir) not in sys.path:
        sys.path.insert(0, str(workdir))
    module.__dict__.update({k: v for k, v in (names or {}).items() if not k.startswith("__")})
    for grade_id, source in answers.items():
        code = compile(source, f"<answer cell {grade_id}>", "exec")
        exec(code, module.__dict__)
    return module


def reference_module(assignment, root=None, leave_out=None):
    """The reference solutions of an assignment, executed from its source notebook (all but the
    answer cell `leave_out`, where given)."""
    from . import course
    root = Path(root) if root else course.SOURCE
    nb = read(root / assignment / f"{assignment}.ipynb")
    answers = {gid: solution_code(src) for gid, src in answer_cells(nb).items() if gid != leave_out}
    name = f"reference_{assignment}" if leave_out is None else f"reference_{assignment}_but_{leave_out}"
    return exec_answers(answers, name, workdir=root / assignment)
