"""How grading and Validate read a notebook's cells: which teaching demos its graded code needs,
and which copy of a graded cell is graded.

Grading skips the cells tagged `demo` (measurements and plots that grade nothing), and so does
Validate. A cell the student made by copying a demo keeps the tag: a helper function typed into
it, an answer that uses an import only a demo made, or a worker module written by a copy of a
`%%writefile` demo worked in the student's kernel and raised NameError or ImportError when graded.
`needed_demos` finds the demo cells that graded code needs, and grading and Validate
(`nbgrader_config.py`) run those too.

What a cell binds and reads is read from its text with `symtable` (magics and shell lines are
read as IPython runs them, the body of `%%time`, `%%timeit`, `%%prun` and `%%capture` as Python;
a module written with `%%writefile`/`%%file` is a name that an `import` reads). A name read in a
function's body is looked up when the function is called, after the cells above its caller ran:
it may come from anywhere in the notebook. Only what the graded cells (answers, tests) read, and
what the cells they read from read in turn, can call for a demo: a cell a student added to look at
a demo's result does not make the demo run. A name the graded code reads that no cell binds, as
read so, may come from a demo that binds names no reading sees (a star import, `exec`,
`globals()`, `vars()`, a `%run` script): the last such demo above the read runs.

A copied, pasted or split graded cell carries its grade_id along: the last cell of each grade_id
is graded and the others run as cells the student added (`drop_earlier_copies`), in grading
and in Validate alike.
"""
import ast
import bisect
import builtins
import re
import shlex
import symtable

DEMO_TAG = "demo"
# Names the kernel itself provides (IPython's user namespace).
KERNEL_NAMES = frozenset(dir(builtins)) | {"get_ipython", "display", "In", "Out", "exit", "quit",
                                           "_", "__", "___", "_i", "_ii", "_iii", "_oh", "_dh", "_ih"}
# Reading a cell's names parses it, outside any sandbox when grading: 5 MB of nested unary minus
# took the parser to 1.5 GB before it gave up. A cell longer than this, or the cells past this much
# code in all, bind and read nothing here (the course's notebooks: at most 4 KB a cell, 27 KB in all).
MAX_READ_CELL, MAX_READ_TOTAL = 64 * 1024, 2 * 1024 * 1024
# (binds, reads now, reads when a function it defines is called, how it may bind names no reading
# sees: STAR for a star import, DYNAMIC for exec, globals(), vars() or %run, else False)
STAR, DYNAMIC = "star", "dynamic"
NOTHING = (frozenset(), frozenset(), frozenset(), False)
# Cell magics whose body runs as Python in the kernel's namespace.
_PYTHON_BODY = {"time", "timeit", "prun", "capture"}  # (timeit's in a function of its own)
_WRITES = {"writefile", "file"}


def tags(cell):
    """A cell's tags as a list of strings (a string or anything else an editor left there: none)."""
    found = cell.get("metadata", {}).get("tags", [])
    return [tag for tag in found if isinstance(tag, str)] if isinstance(found, list) else []


def grade_id(cell):
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str) else None


def skipped(cell):
    """Whether grading and Validate skip this cell: tagged demo, and not graded (a graded cell always runs)."""
    return DEMO_TAG in tags(cell) and grade_id(cell) is None


def drop_earlier_copies(cells):
    """Leave a grade_id on the last of the cells that share it, and none on the others (they run as
    cells the student added); {grade_id: how many cells had it} of those that more than one had."""
    copies, kept = {}, set()
    for cell in reversed(cells):
        graded_as = grade_id(cell)
        if graded_as in kept:
            del cell["metadata"]["nbgrader"]
            copies[graded_as] = copies.get(graded_as, 1) + 1
        elif graded_as is not None:
            kept.add(graded_as)
    return copies


def needed_demos(cells):
    """{index: the names wanted from it} of the demo cells to run, from `cells`: (source, is_demo,
    is_graded) of a notebook's code cells in order. A demo that a needed one needs is needed too.

    A worklist from the graded cells: each cell is looked at once, so a notebook of thousands of
    chained demos costs a moment."""
    names, left = [], MAX_READ_TOTAL
    for source, _, _ in cells:
        if len(source) <= MAX_READ_CELL:  # a longer one is not read, and takes nothing from the rest
            left -= len(source)
        names.append(_names(source) if left >= 0 else NOTHING)
    end = len(cells)
    runs = [not is_demo for _, is_demo, _ in cells]
    # Below a star import that runs, any name may come from it: no read there calls for a demo.
    star = min((i for i, name in enumerate(names) if name[3] == STAR and runs[i]), default=end)
    # Cells that may bind any name (a star import, exec, globals(), %run): a name the graded code
    # reads that no cell binds may come from the last of them above the read: run it, if a demo.
    opaque = [i for i, name in enumerate(names) if name[3]]
    binders = {True: {}, False: {}}  # running or not -> name -> sorted indices of the cells binding it
    for i, (binds, _, _, _) in enumerate(names):
        for name in binds:
            binders[runs[i]].setdefault(name, []).append(i)
    needed, readers = {}, {i for i, (_, _, graded) in enumerate(cells) if graded}
    todo = sorted(readers, reverse=True)
    while todo:
        i = todo.pop()
        binds, now, later, _ = names[i]
        for name, before in [(n, i) for n in now - binds] + [(n, end) for n in later]:
            if name in KERNEL_NAMES or before > star:
                continue
            source = _last_before(binders[True].get(name, ()), before)
            if source is None:
                source = _last_before(binders[False].get(name, ()), before)
                if source is None and not name.endswith(".py"):  # a library module is no demo's
                    source = _last_before(opaque, before)
                if source is None or (runs[source] and source not in needed):  # none, or no demo
                    continue
                needed.setdefault(source, set()).add(name)
                if not runs[source]:
                    runs[source] = True
                    for bound in names[source][0]:
                        binders[False][bound].remove(source)
                        bisect.insort(binders[True].setdefault(bound, []), source)
            if source not in readers:
                readers.add(source)
                todo.append(source)
    return {i: sorted(needed[i]) for i in sorted(needed)}


def _last_before(indices, before):
    at = bisect.bisect_left(indices, before) - 1
    return indices[at] if at >= 0 else None


def module_files(sources):
    """({"x.py" the cells import}, {"x.py" they write with %%writefile}): the modules beside the
    notebook that code of these cells may need (an import of a library is listed too)."""
    imported, written = set(), set()
    for source in sources:
        binds, now, later, _ = _names(source)
        imported |= {name for name in now | later if name.endswith(".py")}
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
    """(global names the cell binds, those it reads as it runs, those the functions it defines read
    when called, how it may bind names no reading sees: STAR, DYNAMIC or False). A module file
    counts as a name too, "<module>.py": a `%%writefile` cell binds it, an `import` reads it.
    Whatever cannot be read reads as NOTHING."""
    if len(source) > MAX_READ_CELL:
        return NOTHING
    try:
        code, bound = _as_python(source)
        if isinstance(code, frozenset):  # a module the cell writes
            return code, frozenset(), frozenset(), False
        table, tree = symtable.symtable(code, "<cell>", "exec"), ast.parse(code)
        binds, now, later = set(bound), set(), set()
        for symbol in table.get_symbols():
            if symbol.is_assigned() or symbol.is_imported():
                binds.add(symbol.get_name())
            if symbol.is_referenced():
                now.add(symbol.get_name())
        _inner_globals(table, binds, now, later)
        star = DYNAMIC if _RUNS_A_SCRIPT.search(source) or {"exec", "globals", "vars"} & (now | later) else False
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                now.update(f"{alias.name.split('.')[0]}.py" for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                now.add(f"{node.module.split('.')[0]}.py")
                star = STAR if any(alias.name == "*" for alias in node.names) else star
        return frozenset(binds), frozenset(now), frozenset(later - now), star
    except Exception:  # noqa: BLE001 (SyntaxError, RecursionError, MemoryError...: nothing read)
        return NOTHING


def _inner_globals(table, binds, now, later):
    """Global names read or bound (`global x`) in nested scopes: read now in a class body or a
    comprehension run by the cell itself, later in a function's body. Iterative: nesting a thousand
    deep must not take Python's recursion limit."""
    todo = [(child, False) for child in table.get_children()]
    while todo:
        scope, deferred = todo.pop()
        deferred = deferred or (scope.get_type() == "function"
                                and scope.get_name() not in ("listcomp", "setcomp", "dictcomp", "genexpr"))
        for symbol in scope.get_symbols():
            if symbol.is_global() and symbol.is_referenced():
                (later if deferred else now).add(symbol.get_name())
            if symbol.is_declared_global() and symbol.is_assigned():
                binds.add(symbol.get_name())
        todo += [(child, deferred) for child in scope.get_children()]


_RUNS_A_SCRIPT = re.compile(r"^\s*%run\b", re.M)  # binds the script's names in the notebook's
# A line magic or shell line; a help request (`obj?`, `??obj`), and no other line ending in `?`.
_ESCAPED = re.compile(r"^\s*[%!]|^\s*\?{1,2}[\w.]*\s*$|^\s*[\w.]+\?{1,2}\s*$")
_CAPTURED = re.compile(r"^(\s*)([\w.,\s()\[\]]+?)\s*=\s*[%!]")  # `files = !ls`, `t = %timeit -o f()`


def _as_python(source):
    """(the cell as Python that binds and reads what the cell does, names it binds besides), or
    (frozenset({"x.py"}), ()) for a cell that writes module x. Line by line, linear in the cell."""
    lines = source.lstrip("\n").split("\n")
    bound = []
    if lines and lines[0].lstrip().startswith("%%"):
        words = shlex.split(lines[0].lstrip()[2:])
        magic = words[0] if words else ""
        if magic in _WRITES:
            files = [w for w in words[1:] if not w.startswith("-")]
            name = files[-1] if files else ""
            written = frozenset({name}) if name.endswith(".py") and name[:-3].isidentifier() else frozenset()
            return written, ()
        if magic not in _PYTHON_BODY:
            return "", ()  # %%bash, %%html, ...: no Python
        if magic == "capture":
            bound = [w for w in words[1:] if not w.startswith("-")][:1]
        lines = lines[1:]
        if magic == "timeit":  # its body runs in a function of its own: it binds nothing that lasts
            lines = ["def __timeit__():"] + ["    " + line for line in lines] + ["    pass"]
    out = []
    for line in lines:
        captured = _CAPTURED.match(line)
        if captured:
            out.append(f"{captured.group(1)}{captured.group(2)} = None")
        elif _ESCAPED.search(line):
            out.append(line[:len(line) - len(line.lstrip())] + "pass")
        else:
            out.append(line)
    return "\n".join(out), bound
