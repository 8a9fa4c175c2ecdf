"""The course's one notebook template: what every assignment's notebook looks like, and a new one.

Every source notebook follows it (`problems()` says where one does not; tests/test_docs.py
holds all of them to it), and `python -m autograder author new` starts a new assignment from it:

- cell 0, markdown: `# NN · Title`, "**Parallel Computing in Python and PyTorch**, assignment N
  of M.", what the notebook is about, and "**You will learn to**" with a list;
- cell 1, code: `%matplotlib inline`, the imports, and `system.show()` (the student's machine,
  which every measurement below depends on);
- sections: a heading (`## 1. ...`, `### ...`) begins its own markdown cell; teaching demos
  (measurements and plots that grade nothing) are tagged `demo`;
- each exercise: a markdown cell `### ✏️ Exercise K: `name``, the answer cell (grade_id `name`,
  the solution between `### BEGIN SOLUTION` and `### END SOLUTION`), then right after it the
  test cell (grade_id `test_name`: visible asserts, the line that says they passed
  (PASSED_LINE: a student's test cell that raises nothing otherwise prints nothing), then the
  hidden block calling `check("name")`);
- the last cell: `## Summary`, a list, and "**Next:** *NN+1 · Title*: ..." (but in the last assignment).
"""
import ast
import re

from .course import TITLE as COURSE

# The text form of a new notebook (jupytext's percent format, as `author export` writes it).
TEXT = '''# %% [markdown]
# # {number:02d} · {title}
#
# **{course}**, assignment {number} of {total}.
#
# What this assignment is about, and what the last one left open. Every number in it is measured on **your** computer.
#
# **You will learn to**
# - the first thing a student can do afterwards;
# - the second.

# %%
%matplotlib inline
import matplotlib.pyplot as plt

from helpers import plots, system, timing

system.show()

# %% [markdown]
# ## 1. The first idea
#
# One idea per cell, in plain words; a measurement on the student's machine right after it.

# %% tags=["demo"]
seconds = timing.measure(sum, range(1_000_000))
print(f"sum of a million integers: {{seconds * 1e3:.1f}} ms")

# %% [markdown]
# ### ✏️ Exercise 1: `{exercise}`
#
# Write `{exercise}(...)`: what it returns, for which arguments, and what it raises (`ValueError`) for which.

# %% answer="{exercise}"
def {exercise}(n: int) -> int:
    """One line on what it returns (students read it)."""
    ### BEGIN SOLUTION
    raise NotImplementedError("the reference solution goes here")
    ### END SOLUTION

# %% test="test_{exercise}" points=2
# Visible asserts students can run: a few plain cases, each with a message that says what is wrong.
result = {exercise}(3)
print(result)
assert isinstance(result, int), "return an int"
print("✓ {exercise}: the visible checks passed (the grader runs more)")
### BEGIN HIDDEN TESTS
from autograder.hidden import check
check("{exercise}")
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - What to remember, one line per idea.
{next}'''

TITLE_LINE = re.compile(r"\A# (\d\d) · \S")
HIDDEN_BLOCK = ('### BEGIN HIDDEN TESTS\nfrom autograder.hidden import check\ncheck("{name}")\n'
                '### END HIDDEN TESTS')
# Before the hidden block, so that while grading it speaks only of what the kernel decided: the
# hidden block's line and any failing hidden check follow it in the feedback.
PASSED_LINE = 'print("✓ {name}: the visible checks passed (the grader runs more)")'


def text(number, total, title, exercise, next_title=None):
    """The text form of a new assignment's notebook (assignment `number` of `total`)."""
    if not exercise.isidentifier():
        raise ValueError(f"the exercise name must be a Python name, not {exercise!r}")
    following = (f"#\n# **Next:** *{number + 1:02d} · {next_title}*: what it adds.\n"
                 if number < total else "")
    return TEXT.format(number=number, total=total, title=title, course=COURSE, exercise=exercise,
                       next=following)


def headings_inside(source):
    """The section headings (## and ###) of a markdown cell that do not begin it, code fences left out."""
    fences = [m.start() for m in re.finditer(r"^```", source, re.M)]
    return [source[m.start():].split("\n", 1)[0] for m in re.finditer(r"^#{2,3} ", source, re.M)
            if m.start() > 0 and sum(f < m.start() for f in fences) % 2 == 0]


def bare_asserts(code):
    """The line numbers of `code`'s asserts that have no message. A failing one shows the student a bare
    AssertionError, and bin/validate only its first 87 characters of the line."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a cell magic: nothing to read here
        return []
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert) and node.msg is None]


def problems(nb, number, total):
    """Where notebook `nb`, assignment `number` of `total`, departs from the template (empty: nowhere)."""
    from . import notebooks

    found = []
    cells = nb.cells
    if len(cells) < 3:
        return ["a notebook needs at least a title cell, a set-up cell and a summary"]
    first, setup, last = cells[0], cells[1], cells[-1]
    if first.cell_type != "markdown" or not TITLE_LINE.match(first.source) \
            or not first.source.startswith(f"# {number:02d} · "):
        found.append(f"cell 0 must begin with the title '# {number:02d} · ...'")
    if f"**{COURSE}**, assignment {number} of {total}." not in first.source:
        found.append(f"cell 0 must say '**{COURSE}**, assignment {number} of {total}.'")
    if "**You will learn to**" not in first.source:
        found.append("cell 0 must list what the student will learn to do ('**You will learn to**')")
    if setup.cell_type != "code" or not setup.source.startswith("%matplotlib inline") \
            or "system.show()" not in setup.source:
        found.append("cell 1 must be the set-up: '%matplotlib inline', the imports and system.show()")
    if last.cell_type != "markdown" or not last.source.startswith("## Summary"):
        found.append("the last cell must be the summary ('## Summary')")
    elif number < total and f"**Next:** *{number + 1:02d} · " not in last.source:
        found.append(f"the summary must end with '**Next:** *{number + 1:02d} · ...*' (assignment {number + 1} follows)")
    for index, cell in enumerate(cells):
        if index and cell.cell_type == "markdown" and headings_inside(cell.source):
            found.append(f"cell {index}: headings in the middle of a cell (split it there): {headings_inside(cell.source)}")
        if notebooks.is_answer_cell(cell):
            name = notebooks.nbgrader_meta(cell)["grade_id"]
            after = cells[index + 1] if index + 1 < len(cells) else None
            if after is None or notebooks.nbgrader_meta(after).get("grade_id") != f"test_{name}":
                found.append(f"cell {index}: the answer cell '{name}' must be followed by its test cell 'test_{name}'")
            elif not after.source.rstrip().endswith(HIDDEN_BLOCK.format(name=name)):
                found.append(f"cell {index + 1}: the test cell must end with the hidden block calling check(\"{name}\")")
            elif not after.source.rstrip().endswith(PASSED_LINE.format(name=name) + "\n" + HIDDEN_BLOCK.format(name=name)):
                found.append(f"cell {index + 1}: the visible asserts must end with the line that says they passed, "
                             f"right before the hidden block: {PASSED_LINE.format(name=name)}")
            elif re.search(r"^finally:", notebooks.visible_code(after.source), re.M):
                found.append(f"cell {index + 1}: a top-level try/finally in a test cell (a kernel's traceback "
                             "then points at the finally line, not at the failing call): use a with block")
            elif bare_asserts(notebooks.visible_code(after.source)):
                found.append(f"cell {index + 1}: visible asserts without a message saying what is wrong "
                             f"(lines {bare_asserts(notebooks.visible_code(after.source))})")
            # Right after its exercise's heading, or after the pair before it of the same exercise
            # (an exercise may ask for several functions: 02's run_threads and run_processes).
            before = index - 1
            while before > 0 and notebooks.nbgrader_meta(cells[before]).get("grade_id"):
                before -= 1
            heading = cells[before]
            if heading.cell_type != "markdown" or not heading.source.startswith("### ✏️ Exercise ") \
                    or f"`{name}`" not in heading.source.split("\n", 1)[0]:
                found.append(f"cell {index}: the answer cell '{name}' must come right after the "
                             f"'### ✏️ Exercise K: `{name}`' cell that asks for it")
    return found
