"""helpers/demos.py: which cells tagged demo a notebook's running code needs (grading and Validate
run those; mend.py, the student bundle's nbgrader_config.py)."""
import subprocess
import sys

import pytest

from autograder import course, notebooks, samples
from helpers.demos import needed_demos, said

DEMO, RUNS = True, False


@pytest.mark.parametrize("cells, needed", [
    pytest.param([("def _impl(n):\n    return n * 2", DEMO), ("def answer(n):\n    return _impl(n)", RUNS)],
                 {0: ["_impl"]}, id="helper-in-a-demo-copy"),
    pytest.param([("from concurrent.futures import ProcessPoolExecutor", DEMO),
                  ("def answer():\n    with ProcessPoolExecutor() as pool:\n        return 1", RUNS)],
                 {0: ["ProcessPoolExecutor"]}, id="import-only-a-demo-made"),
    pytest.param([("def measure():\n    return 1", DEMO), ("t = measure()", DEMO), ("print(t)", RUNS)],
                 {0: ["measure"], 1: ["t"]}, id="a-demo-a-needed-demo-needs"),
    pytest.param([("x = 5\nresults = run()", DEMO), ("def answer(x):\n    results = [x]\n    return results", RUNS)],
                 {}, id="locals-and-parameters-are-not-global-reads"),
    pytest.param([("helper = 1", DEMO), ("def helper():\n    return 2", RUNS), ("helper()", RUNS)],
                 {}, id="bound-by-a-running-cell-first"),
    pytest.param([("print(later)", RUNS), ("later = 1", DEMO)], {}, id="a-demo-below-the-reader"),
    pytest.param([("from math import *", RUNS), ("pi = 3", DEMO), ("print(pi)", RUNS)], {}, id="star-import-above"),
    pytest.param([("%timeit -n1 sum([1])\nvalue = 2", DEMO), ("!echo hi\nprint(value)", RUNS)],
                 {0: ["value"]}, id="magics-and-shell-lines"),
    pytest.param([("value = (", DEMO), ("print(value)", RUNS)], {}, id="a-demo-that-does-not-parse"),
    pytest.param([("def set_it():\n    global G\n    G = 3", DEMO), ("print(G)", RUNS)], {0: ["G"]}, id="global-statement"),
    pytest.param([("class K:\n    pass", DEMO), ("class Sub(K):\n    size = len([])", RUNS)], {0: ["K"]}, id="classes"),
    pytest.param([("print = 1\nlen = 2", DEMO), ("print(len([]))", RUNS)], {}, id="builtins"),
    pytest.param([("%%writefile my_tasks.py\ndef square(x):\n    return x * x", DEMO),
                  ("import my_tasks\n\ndef answer(xs):\n    return list(map(my_tasks.square, xs))", RUNS)],
                 {0: ["my_tasks.py"]}, id="a-module-a-demo-writes"),
    pytest.param([("%%writefile -a my_tasks.py\nX = 1", DEMO), ("from my_tasks import X", RUNS)],
                 {0: ["my_tasks.py"]}, id="a-module-a-demo-appends-to"),
    pytest.param([("%%writefile my_tasks.py\nX = 1", DEMO), ("%%writefile my_tasks.py\nX = 2", RUNS),
                  ("import my_tasks", RUNS)], {}, id="a-module-a-running-cell-writes-first"),
    pytest.param([("%%writefile notes.txt\nimport os", DEMO), ("import notes", RUNS)], {}, id="not-a-module"),
    pytest.param([("x = " + "a." * 30_000 + "b", DEMO), ("print(x)", RUNS)], {}, id="too-deep-to-parse"),
    pytest.param([("x = 1\n" + "# " + "." * 70_000, DEMO), ("print(x)", RUNS)], {}, id="a-cell-too-long-to-read"),
    pytest.param([("x = 1", DEMO), *[("# " + "." * 60_000, RUNS)] * 40, ("print(x)", RUNS)], {},
                 id="past-the-code-read-in-all"),
])
def test_needed_demos(cells, needed):
    assert needed_demos(cells) == needed


def test_no_course_notebook_needs_a_demo():
    """By design everything an answer or a test needs lives in untagged cells: grading runs no demo
    of a release, a source notebook or a sample submission (a demo that ran would cost its time)."""
    found = []
    for assignment in course.assignments():
        nbs = {"release": notebooks.read(course.release_notebook(assignment)),
               "source": notebooks.read(course.source_notebook(assignment)), **samples.submissions(assignment)}
        for name, nb in nbs.items():
            code = [c for c in nb.cells if c.cell_type == "code"]
            needed = needed_demos([(c.source, notebooks.is_demo(c) and not notebooks.nbgrader_meta(c)) for c in code])
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
            "cells = [('a0 = 1', True)] + [(f'a{k} = a{k - 1} + 1', True) for k in range(1, 2000)]\n"
            "assert len(needed_demos(cells + [('print(a1999)', False)])) == 2000\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_cell_made_to_exhaust_the_parser_is_not_read():
    """5 MB of nested unary minus took the parser to 1.5 GB (outside the sandbox, when grading) before
    it raised MemoryError: cells that long are not read (here about 40 MB in all)."""
    code = ("import resource\n"
            "from helpers.demos import needed_demos\n"
            "assert needed_demos([('x = ' + '-' * 5_000_000 + '1', True), ('print(x)', False)]) == {}\n"
            "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "assert peak < 300 * 1024, f'{peak} kB'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
