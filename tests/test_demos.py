"""helpers/demos.py: which cells tagged demo a notebook's graded code needs (grading runs those:
mend.RunNeededDemos; Validate too: the student bundle's nbgrader_config.py)."""
import subprocess
import sys

import pytest

from autograder import course, notebooks, samples
from helpers.demos import grade_id, needed_demos, said, skipped, tags

# (is a skipped demo, is graded) of a code cell
DEMO, GRADED, ADDED = (True, False), (False, True), (False, False)


@pytest.mark.parametrize("cells, needed", [
    pytest.param([("def _impl(n):\n    return n * 2", DEMO), ("def answer(n):\n    return _impl(n)", GRADED)],
                 {0: ["_impl"]}, id="helper-in-a-demo-copy"),
    pytest.param([("def answer(n):\n    return _impl(n)", GRADED), ("def _impl(n):\n    return n * 2", DEMO),
                  ("answer(3)", GRADED)], {1: ["_impl"]}, id="helper-in-a-demo-copy-below-the-answer"),
    pytest.param([("from concurrent.futures import ProcessPoolExecutor", DEMO),
                  ("def answer():\n    with ProcessPoolExecutor() as pool:\n        return 1", GRADED)],
                 {0: ["ProcessPoolExecutor"]}, id="import-only-a-demo-made"),
    pytest.param([("from concurrent.futures import ProcessPoolExecutor", DEMO),
                  ("def helper():\n    return ProcessPoolExecutor", ADDED),
                  ("def answer():\n    return helper()", GRADED)],
                 {0: ["ProcessPoolExecutor"]}, id="through-a-cell-the-answer-reads"),
    pytest.param([("def measure():\n    return 1", DEMO), ("t = measure()", DEMO), ("print(t)", GRADED)],
                 {0: ["measure"], 1: ["t"]}, id="a-demo-a-needed-demo-needs"),
    pytest.param([("serial_time = measure()", DEMO), ("print(serial_time)", ADDED)], {},
                 id="a-cell-added-to-look-at-a-demo"),
    pytest.param([("x = 5\nresults = run()", DEMO), ("def answer(x):\n    results = [x]\n    return results", GRADED)],
                 {}, id="locals-and-parameters-are-not-global-reads"),
    pytest.param([("helper = 1", DEMO), ("def helper():\n    return 2", ADDED), ("helper()", GRADED)],
                 {}, id="bound-by-a-running-cell-first"),
    pytest.param([("print(later)", GRADED), ("later = 1", DEMO)], {}, id="a-demo-below-the-reader"),
    pytest.param([("from math import *", ADDED), ("pi = 3", DEMO), ("print(pi)", GRADED)], {}, id="star-import-above"),
    pytest.param([("%timeit -n1 sum([1])\nvalue = 2", DEMO), ("!echo hi\nprint(value)", GRADED)],
                 {0: ["value"]}, id="magics-and-shell-lines"),
    pytest.param([("%%time\nvalue = 2", DEMO), ("%%time\nprint(value)", GRADED)], {0: ["value"]},
                 id="the-body-of-time"),
    pytest.param([("value = 1", DEMO), ("%%time\nvalue = 2", ADDED), ("print(value)", GRADED)], {},
                 id="bound-in-a-time-cell"),
    pytest.param([("out = 1", DEMO), ("%%capture out\nprint(1)", ADDED), ("print(out)", GRADED)], {},
                 id="bound-by-capture"),
    pytest.param([("files = 1", DEMO), ("files = !ls", ADDED), ("print(files)", GRADED)], {},
                 id="bound-by-a-shell-line"),
    pytest.param([("value = 1", DEMO), ("%%bash\necho $value", GRADED)], {}, id="not-python"),
    pytest.param([("value = 1", DEMO), ("%%timeit\nvalue = 2", ADDED), ("print(value)", GRADED)], {0: ["value"]},
                 id="timeit-binds-nothing-that-lasts"),
    pytest.param([("def helper():\n    return 1", DEMO),
                  ("def answer():\n    x = 1\n# is this right?\n    return helper()  # or faster?", GRADED)],
                 {0: ["helper"]}, id="comments-that-ask"),
    pytest.param([("value = 1", DEMO), ("value?\n??value\nprint(value)", GRADED)], {0: ["value"]},
                 id="help-requests"),
    pytest.param([("\n".join(["%time x = 1"] * 600) + "\nvalue = 2", DEMO), ("print(value)", GRADED)],
                 {0: ["value"]}, id="hundreds-of-magic-lines"),
    pytest.param([("value = (", DEMO), ("print(value)", GRADED)], {}, id="a-demo-that-does-not-parse"),
    pytest.param([("def set_it():\n    global G\n    G = 3", DEMO), ("print(G)", GRADED)], {0: ["G"]},
                 id="global-statement"),
    pytest.param([("class K:\n    pass", DEMO), ("class Sub(K):\n    size = len([])", GRADED)], {0: ["K"]},
                 id="classes"),
    pytest.param([("print = 1\nlen = 2", DEMO), ("print(len([]))", GRADED)], {}, id="builtins"),
    pytest.param([("%%writefile my_tasks.py\ndef square(x):\n    return x * x", DEMO),
                  ("import my_tasks\n\ndef answer(xs):\n    return list(map(my_tasks.square, xs))", GRADED)],
                 {0: ["my_tasks.py"]}, id="a-module-a-demo-writes"),
    pytest.param([("%%file -a my_tasks.py\nX = 1", DEMO), ("from my_tasks import X", GRADED)],
                 {0: ["my_tasks.py"]}, id="a-module-a-demo-appends-to"),
    pytest.param([("%%writefile my_tasks.py\nX = 1", DEMO), ("%%writefile my_tasks.py\nX = 2", ADDED),
                  ("import my_tasks", GRADED)], {}, id="a-module-a-running-cell-writes-first"),
    pytest.param([("%%writefile notes.txt\nimport os", DEMO), ("import notes", GRADED)], {}, id="not-a-module"),
    pytest.param([("x = " + "a." * 30_000 + "b", DEMO), ("print(x)", GRADED)], {}, id="too-deep-to-parse"),
    pytest.param([("f = " + "lambda: " * 1500 + "x\nx = 1", DEMO), ("print(f)", GRADED)], {0: ["f"]},
                 id="nested-a-thousand-deep"),
    pytest.param([("x = 1\n" + "# " + "." * 70_000, DEMO), ("print(x)", GRADED)], {}, id="a-cell-too-long-to-read"),
    pytest.param([("x = 1", DEMO), *[("# " + "." * 60_000, ADDED)] * 40, ("print(x)", GRADED)], {},
                 id="past-the-code-read-in-all"),
    pytest.param([("from helpers.pools import *", DEMO), ("def answer():\n    return square(2)", GRADED)],
                 {0: ["square"]}, id="a-star-import-only-a-demo-made"),
    pytest.param([("exec('def helper():\\n    return 1')", DEMO), ("print(helper())", GRADED)],
                 {0: ["helper"]}, id="exec-in-a-demo"),
    pytest.param([("globals()['helper'] = len", DEMO), ("x = 1", DEMO), ("print(helper([]))", GRADED)],
                 {0: ["helper"]}, id="globals-in-a-demo"),
    pytest.param([("%run setup_helpers.py", DEMO), ("print(helper())", GRADED)], {0: ["helper"]},
                 id="run-a-script-in-a-demo"),
    pytest.param([("exec('a = 1')", DEMO), ("exec('b = 2')", DEMO), ("print(a, b)", GRADED)],
                 {1: ["a", "b"]}, id="the-last-such-demo-above"),
    pytest.param([("exec('a = 1')", DEMO), ("helper = 1", DEMO), ("print(helper)", GRADED)], {1: ["helper"]},
                 id="a-demo-that-binds-it-as-read-first"),
    pytest.param([("print(helper)", GRADED), ("exec('helper = 1')", DEMO)], {}, id="such-a-demo-below-the-reader"),
    pytest.param([("from math import *", DEMO), ("import numpy\nprint(numpy.pi)", GRADED)], {},
                 id="a-library-module-is-no-demos"),
    pytest.param([("exec('a = 1')", DEMO), ("print(len([]))", GRADED)], {}, id="builtins-need-no-such-demo"),
    pytest.param([("exec('a = 1')", DEMO), ("exec('a = 2')", ADDED), ("print(a)", GRADED)], {},
                 id="such-a-cell-that-runs-below-it"),
    pytest.param([("x = 1\nexec('b = 2')", DEMO), ("print(b, b2)", GRADED), ("print(x)", GRADED)],
                 {0: ["b", "b2"]}, id="such-a-demo-wanted-for-several-names"),
])
def test_needed_demos(cells, needed):
    assert needed_demos([(source, *kind) for source, kind in cells]) == needed


def test_tags_and_what_is_skipped():
    assert tags({"metadata": {"tags": "demo"}}) == [] and tags({"metadata": {"tags": None}}) == []
    assert tags({"metadata": {"tags": ["demo", 3]}}) == ["demo"]
    graded = {"metadata": {"tags": ["demo"], "nbgrader": {"grade_id": "test_x", "grade": True}}}
    assert grade_id(graded) == "test_x" and not skipped(graded) and skipped({"metadata": {"tags": ["demo"]}})


def test_no_course_notebook_needs_a_demo():
    """By design everything an answer or a test needs lives in untagged cells: grading runs no demo
    of a release, a source notebook or a sample submission (a demo that ran would cost its time)."""
    found = []
    for assignment in course.assignments():
        nbs = {"release": notebooks.read(course.release_notebook(assignment)),
               "source": notebooks.read(course.source_notebook(assignment)), **samples.submissions(assignment)}
        for name, nb in nbs.items():
            code = [c for c in nb.cells if c.cell_type == "code"]
            needed = needed_demos([(c.source, skipped(c), grade_id(c) is not None) for c in code])
            found += [f"{assignment} {name}: {code[i].source[:60]!r} for {names}" for i, names in needed.items()]
    assert not found, found


def test_what_a_needed_demo_gives_is_said_in_words():
    assert said(["G"]) == "binds 'G'"
    assert said(["a", "b", "c", "d"]) == "binds 'a', 'b', 'c', ..."
    assert said(["my_tasks.py"]) == "writes my_tasks.py"
    assert said(["x", "my_tasks.py"]) == "binds 'x' and writes my_tasks.py"


def test_a_long_chain_of_demos_is_quick():
    """The grader reads the notebook's names outside the sandbox, before any limit holds: 2,000 demos,
    each needing the one above (all needed), take about 0.2 s; passes over the notebook until
    nothing changed took O(n^3), hours. Run apart, so that a slow version fails rather than hangs."""
    code = ("from helpers.demos import needed_demos\n"
            "cells = [('a0 = 1', True, False)] + [(f'a{k} = a{k - 1} + 1', True, False) for k in range(1, 2000)]\n"
            "assert len(needed_demos(cells + [('print(a1999)', False, True)])) == 2000\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_cell_made_to_exhaust_the_parser_is_not_read(monkeypatch):
    """5 MB of nested unary minus took the parser to 1.5 GB (outside the sandbox, when grading) before
    it raised MemoryError: cells that long, or past the code read in all, never reach the parser."""
    import helpers.demos as demos

    parsed, parse = [], demos.symtable.symtable
    monkeypatch.setattr(demos.symtable, "symtable", lambda code, *a: parsed.append(len(code)) or parse(code, *a))
    cells = [("x = " + "-" * 5_000_000 + "1", True, False), ("print(x)", False, True)]
    cells += [("y = 1\n#" + "." * 60_000, False, False)] * 40
    assert needed_demos(cells) == {}
    assert parsed and max(parsed) <= demos.MAX_READ_CELL and sum(parsed) <= demos.MAX_READ_TOTAL, parsed
