"""Which teaching demos a notebook's own code needs.

Grading skips the cells tagged `demo` (measurements and plots that grade nothing), and so does
Validate. A cell the student made by copying a demo keeps the tag: a helper function typed into
it, or an answer that reads a name a demo set, worked in the student's kernel and raised
NameError when graded. `needed_demos` finds the demo cells that bind a global name that a cell
which does run reads, where no running cell above it binds that name; grading and Validate
(`nbgrader_config.py`) run those too.

A module a `%%writefile` demo writes beside the notebook counts as a name that an `import` reads.
Names are read with `symtable` after IPython's own transforms (magics, `!` lines): a cell that
does not parse binds and reads nothing. Local names of functions are not global reads, so a
demo's `x` is not run for an answer's local `x`.
"""
import ast
import bisect
import builtins
import shlex
import symtable

# Names the kernel itself provides (IPython's user namespace).
KERNEL_NAMES = frozenset(dir(builtins)) | {"get_ipython", "display", "In", "Out", "exit", "quit",
                                           "_", "__", "___", "_i", "_ii", "_iii", "_oh", "_dh", "_ih"}


# Reading a cell's names parses it, outside any sandbox when grading: 5 MB of nested unary minus
# took the parser to 1.5 GB before it gave up. A cell longer than this, or the cells past this much
# code in all, bind and read nothing here (the course's notebooks: at most 4 KB a cell, 27 KB in all).
MAX_READ_CELL, MAX_READ_TOTAL = 64 * 1024, 2 * 1024 * 1024
NOTHING = (frozenset(), frozenset(), False)


def needed_demos(cells):
    """{index: the names wanted from it} of the demo cells to run, from `cells`: (source, is_demo)
    of a notebook's code cells in order. A demo that a needed demo needs is needed too.

    Each cell that runs is looked at once (a worklist, not passes over the notebook: a notebook of
    thousands of chained demos costs a moment, not hours)."""
    names, left = [], MAX_READ_TOTAL
    for source, _ in cells:
        left -= len(source)
        names.append(_names(source) if left >= 0 else NOTHING)
    runs = [not is_demo for _, is_demo in cells]
    # Below a running star import, names may come from it: nothing below it asks for a demo.
    star = min((i for i, (_, _, starred) in enumerate(names) if starred and runs[i]), default=len(cells))
    demos_binding, first_running = {}, {}
    for i, (binds, _, _) in enumerate(names):
        for name in binds:
            if runs[i]:
                first_running.setdefault(name, i)
            else:
                demos_binding.setdefault(name, []).append(i)
    needed, todo = {}, [i for i in range(len(cells)) if runs[i]]
    while todo:
        i = todo.pop()
        if i >= star:
            continue
        binds, reads, _ = names[i]
        for name in reads - binds - KERNEL_NAMES:
            if first_running.get(name, len(cells)) < i:
                continue
            above = demos_binding.get(name, [])
            at = bisect.bisect_left(above, i) - 1  # the last demo above the reader that binds the name
            if at < 0:
                continue
            j = above[at]
            needed.setdefault(j, set()).add(name)
            if not runs[j]:
                runs[j] = True
                todo.append(j)
                for bound in names[j][0]:
                    first_running[bound] = min(first_running.get(bound, len(cells)), j)
    return {i: sorted(needed[i]) for i in sorted(needed)}


def module_files(sources):
    """({"x.py" the cells import}, {"x.py" they write with %%writefile}): the modules beside the
    notebook that code of these cells may need (an import of a library is listed too)."""
    imported, written = set(), set()
    for source in sources:
        binds, reads, _ = _names(source)
        imported |= {name for name in reads if name.endswith(".py")}
        written |= {name for name in binds if name.endswith(".py")}
    return imported, written


def said(names):
    """What a needed demo gives the code below it, in words: "binds 'x', 'y'", "writes tasks.py"."""
    files = [name for name in names if name.endswith(".py")]
    bound = [f"'{name}'" for name in names if not name.endswith(".py")]
    parts = ([f"binds {', '.join(bound[:3])}{', ...' if len(bound) > 3 else ''}"] if bound else []) + \
            ([f"writes {', '.join(files)}"] if files else [])
    return " and ".join(parts)


def _names(source):
    """(global names the cell binds, global names it reads, whether it star-imports). A module file
    counts as a name too, "<module>.py": a `%%writefile` cell binds it, an `import` reads it."""
    if len(source) > MAX_READ_CELL:
        return NOTHING
    written = _written_module(source)
    if written is not None:
        return {written}, set(), False
    code = _as_python(source)
    try:
        table, tree = symtable.symtable(code, "<cell>", "exec"), ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set(), set(), False
    binds, reads = set(), set()
    for symbol in table.get_symbols():
        if symbol.is_assigned() or symbol.is_imported():
            binds.add(symbol.get_name())
        if symbol.is_referenced():
            reads.add(symbol.get_name())
    _inner_globals(table, binds, reads)
    star = any(isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names)
               for node in ast.walk(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            reads.update(f"{alias.name.split('.')[0]}.py" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            reads.add(f"{node.module.split('.')[0]}.py")
    return binds, reads, star


def _written_module(source):
    """"<module>.py" where the cell is `%%writefile [-a] <module>.py` (a module beside the notebook
    that workers started with `spawn` can import), else None."""
    first = source.lstrip().split("\n", 1)[0]
    if not first.startswith("%%writefile"):
        return None
    try:
        words = [word for word in shlex.split(first)[1:] if not word.startswith("-")]
    except ValueError:
        return None
    name = words[-1] if words else ""
    return name if name.endswith(".py") and name[:-3].isidentifier() else None


def _inner_globals(table, binds, reads):
    """Global names read or bound (`global x`) inside functions, classes and comprehensions."""
    for child in table.get_children():
        for symbol in child.get_symbols():
            if symbol.is_global() and symbol.is_referenced():
                reads.add(symbol.get_name())
            if symbol.is_declared_global() and symbol.is_assigned():
                binds.add(symbol.get_name())
        _inner_globals(child, binds, reads)


def _as_python(source):
    """The cell as Python, as IPython runs it (magics and shell lines become calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return source
    return TransformerManager().transform_cell(source)
