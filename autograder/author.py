"""`author`: edit a course notebook as text, in jupytext's percent format, and build it back.

    python -m autograder author export source/<a>/<a>.ipynb draft.py
    python -m autograder author build draft.py source/<a>/<a>.ipynb
    python -m autograder author new 13_<name> "<title>" <first exercise>
    python -m autograder author run [<assignment> ...] [--start-method spawn] [--out DIR]

`new` starts an assignment from the course's one notebook template (autograder/template.py).
`run` runs every cell of the source notebooks top to bottom (solutions, demos, visible tests
and the hidden checks in the kernel), as before a term starts, in a copy of each folder, with
every Python process of the run starting its workers by the start method asked for (the
default of macOS and Windows is `spawn`; of Linux from Python 3.14, `forkserver`). It prints
each notebook's time and every cell that raised, and exits with 1 if one did.

The source of truth is the .ipynb in source/. The text form is jupytext's
`py:percent` (JupyterLab opens it with the jupytext extension, and it diffs
line by line): `# %%` starts a code cell, `# %% [markdown]` a markdown cell,
and a cell's metadata follow on its header line. nbgrader's cell kinds have a
short spelling there:

    # %% answer="cpu_info"                       autograded answer cell
    # %% test="test_cpu_info" points=2           test cell (visible asserts + hidden block)
    # %% [markdown] written="q1" points=1        manually graded written answer
    # %% tags=["demo"]                           teaching demo: students run it, grading skips it

Any other metadata (nbgrader's in full, tags) is kept as it is. `build` keeps
the cell ids of the notebook it writes over, so the release and the
submissions made from it still match cell by cell; a new cell gets a stable id
(its grade_id, else a hash of the notebook's name and the cell's position).
"""
import hashlib
import itertools
import os
import sys
from pathlib import Path

import jupytext
import nbformat

FORMAT = "py:percent"
KINDS = ("answer", "test", "written")
JUPYTEXT_ONLY = ("lines_to_next_cell",)  # how jupytext spaces the text form; not notebook metadata


def nbgrader_metadata(kind, grade_id, points=None):
    """nbgrader's cell metadata for one of the short kinds."""
    base = {"schema_version": 3, "grade_id": grade_id, "locked": False, "task": False}
    if kind == "answer":
        return {**base, "grade": False, "solution": True}
    if points is None:
        raise ValueError(f"cell {grade_id}: a {kind} cell needs points=N")
    if kind == "test":
        return {**base, "grade": True, "solution": False, "locked": True, "points": float(points)}
    return {**base, "grade": True, "solution": True, "points": float(points)}


def _short_form(meta):
    """(kind, grade_id, points) when nbgrader metadata is exactly a short kind's, else None."""
    grade_id = meta.get("grade_id")
    for kind in KINDS if grade_id is not None else ():
        try:
            if nbgrader_metadata(kind, grade_id, meta.get("points")) == meta:
                return kind, grade_id, meta.get("points")
        except ValueError:
            continue
    return None


def to_text(nb):
    """The notebook in the text form (short kinds where they fit)."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader")
        short = _short_form(meta) if meta else None
        if short is not None and (short[0] == "written") == (cell.cell_type == "markdown"):
            kind, grade_id, points = short
            del cell.metadata["nbgrader"]
            cell.metadata[kind] = grade_id
            if points is not None:
                cell.metadata["points"] = int(points) if float(points).is_integer() else points
    return jupytext.writes(nb, fmt=FORMAT)


def from_text(text, previous=None, name="nb"):
    """A notebook from the text form; cell ids (and outputs) from `previous` where the cells match."""
    nb = jupytext.reads(text, fmt=FORMAT)
    nb.metadata.pop("jupytext", None)
    for index, cell in enumerate(nb.cells):
        for key in JUPYTEXT_ONLY:
            cell.metadata.pop(key, None)
        kinds = [k for k in KINDS if k in cell.metadata]
        if len(kinds) > 1:
            raise ValueError(f"cell {index}: one of {', '.join(KINDS)}, not {', '.join(kinds)}")
        if kinds:
            kind = kinds[0]
            if (kind == "written") != (cell.cell_type == "markdown"):
                raise ValueError(f"cell {index}: a {kind} cell must be "
                                 f"{'markdown' if kind == 'written' else 'code'}")
            grade_id = cell.metadata.pop(kind)
            cell.metadata["nbgrader"] = nbgrader_metadata(kind, grade_id, cell.metadata.pop("points", None))
    if previous is not None:
        from jupytext.combine import combine_inputs_with_outputs
        nb = combine_inputs_with_outputs(nb, previous, fmt=FORMAT)
        nb.metadata.pop("jupytext", None)
    _keep_ids(nb, previous, name)
    nb.metadata.setdefault("kernelspec", {"display_name": "Python 3 (ipykernel)", "language": "python",
                                          "name": "python3"})
    nb.metadata.setdefault("language_info", {"name": "python"})
    nbformat.validate(nb)
    return nb


def _keep_ids(nb, previous, name):
    """Give each cell its id in `previous`: first the cells whose kind and text are unchanged,
    wherever they moved (jupytext pairs cells in order, so a cell inserted mid-notebook would
    take the next cell's id and every later cell its neighbour's); then an edited cell keeps
    the id jupytext paired it with, if no unchanged cell holds it. Any other cell gets a stable
    id (its grade_id, else a hash of its place that no other cell holds), so that the release
    is reproducible."""
    unchanged = {}
    for cell in previous.cells if previous is not None else ():
        unchanged.setdefault((cell.cell_type, cell.source), []).append(cell.get("id"))
    kept = []
    for cell in nb.cells:
        ids = unchanged.get((cell.cell_type, cell.source))
        kept.append(ids.pop(0) if ids else None)
    known = {c.get("id") for c in previous.cells} if previous is not None else set()
    taken = {i for i in kept if i is not None}
    for index, (cell, same) in enumerate(zip(nb.cells, kept)):
        if same is not None:
            cell.id = same
            continue
        if cell.get("id") not in known or cell.get("id") in taken:
            cell.id = cell.metadata.get("nbgrader", {}).get("grade_id") or _new_id(name, index, known | taken)
        taken.add(cell.id)


def _new_id(name, index, used):
    """A stable id for a new cell that no other cell holds (an earlier cell made at this place
    may hold the plain hash of it)."""
    for salt in itertools.count():
        cell_id = hashlib.sha1(f"{name}:{index}{f':{salt}' if salt else ''}".encode()).hexdigest()[:12]
        if cell_id not in used:
            return cell_id


def command(args):
    """`python -m autograder author export|build|new ...` (arguments parsed by cli.py)."""
    missing = [path for path in (getattr(args, "notebook", None) if args.step == "export" else None,
                                 getattr(args, "text", None) if args.step == "build" else None)
               if path and not Path(path).is_file()]
    if missing:
        print(f"author {args.step}: no file {missing[0]}", file=sys.stderr)
        return 2
    if args.step == "export":
        return main(["export", args.notebook, *([args.text] if args.text else [])])
    if args.step == "build":
        return main(["build", args.text, args.notebook])
    if args.step == "run":
        return run(args.assignments, args.start_method, args.out)
    return main(["new", args.assignment, args.title, args.exercise])


# Put in front of the path, it takes the place of the environment's own sitecustomize (a Linux
# distribution's Python has one): that one is run first, from the rest of the path.
_START_METHOD_HOOK = """\
import importlib.machinery, importlib.util, multiprocessing, os, sys
_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or os.curdir) != _here])
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
multiprocessing.set_start_method({start_method!r}, force=True)
"""


def run_notebook(path, start_method=None, out=None, cell_timeout=600):
    """Run every cell of the notebook at `path` in a copy of its folder; optionally with
    `start_method` as every Python process's default (a sitecustomize on the kernel's path,
    which the processes it starts inherit), the executed notebook written into `out` with what the
    kernel and its processes wrote to the terminal (<name>.terminal.txt).
    Returns (seconds, [(cell index, grade id or None, "ErrorName: message") of each cell that raised])."""
    import shutil
    import tempfile
    import time

    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from .site import kernel_env
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix="course-run-") as scratch:
        run_dir = Path(scratch) / path.parent.name
        shutil.copytree(path.parent, run_dir, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        env = kernel_env(run_dir)
        env["TMPDIR"] = str(Path(scratch))  # what pools and forkservers leave there goes with it
        if start_method:
            hook = Path(scratch) / "start_method"
            hook.mkdir()
            (hook / "sitecustomize.py").write_text(_START_METHOD_HOOK.format(start_method=start_method))
            env["PYTHONPATH"] = os.pathsep.join([str(hook), env["PYTHONPATH"]])
            env["COURSE_START_METHOD"] = start_method  # helpers.workers.mp_context() follows it too
        nb = nbformat.read(str(path), as_version=4)
        client = NotebookClient(nb, timeout=cell_timeout, allow_errors=True, kernel_name="python3",
                                resources={"metadata": {"path": str(run_dir)}})
        start, stopped = time.perf_counter(), None
        # What the kernel and its workers write to the terminal (the tracebacks of workers a demo
        # breaks on purpose, say) goes to a file, kept beside the executed notebook in `out`.
        terminal = Path(scratch) / "terminal.txt"
        with terminal.open("wb") as written:
            try:
                client.execute(env=env, cwd=str(run_dir), stdout=written, stderr=written)
            except (CellTimeoutError, DeadKernelError) as err:  # the cells after it did not run
                stopped = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        seconds = time.perf_counter() - start
        if out is not None:
            Path(out).mkdir(parents=True, exist_ok=True)
            shutil.copy(terminal, Path(out) / f"{path.stem}.terminal.txt")
    raised = [(i, cell.metadata.get("nbgrader", {}).get("grade_id"), f"{o.ename}: {o.evalue}")
              for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
              for o in cell.outputs if o.output_type == "error"]
    if stopped:
        started = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.execution_count]
        index = started[-1] if started else 0  # the cell that was running: the kernel had numbered it
        raised = [entry for entry in raised if entry[0] != index]  # the interrupt that ended it, say
        raised.append((index, nb.cells[index].metadata.get("nbgrader", {}).get("grade_id"), stopped))
    if out is not None:
        nbformat.write(nb, str(Path(out) / path.name))
    return seconds, raised


def run(assignments, start_method=None, out=None):
    """`author run`: each assignment's source notebook, every cell; 0 when no cell raised."""
    from . import course
    unknown = [a for a in assignments if a not in course.assignments()]
    if unknown:
        print(f"author run: no assignment {unknown[0]} in source/ (there are: {', '.join(course.assignments())})",
              file=sys.stderr)
        return 2
    failed = 0
    for assignment in assignments or course.assignments():
        seconds, raised = run_notebook(course.source_notebook(assignment), start_method, out)
        method = f" ({start_method})" if start_method else ""
        count = {0: "no cell", 1: "1 cell"}.get(len(raised), f"{len(raised)} cells")
        print(f"{assignment}{method}: every cell in {seconds:.0f} s, {count} raised", flush=True)
        for index, grade_id, error in raised:
            print(f"  cell {index}{f' ({grade_id})' if grade_id else ''}: {error[:300]}", flush=True)
        failed += bool(raised)
    return 1 if failed else 0


def main(argv):
    if len(argv) == 3 and argv[0] == "build":
        src, dst = Path(argv[1]), Path(argv[2])
        if not dst.is_file() and dst.parent.name != dst.stem:
            print(f"author build: {dst} does not exist, and a course notebook is source/<a>/<a>.ipynb"
                  f"{_did_you_mean(dst)}; nothing written (a new assignment: author new)", file=sys.stderr)
            return 2
        previous = nbformat.read(str(dst), as_version=4) if dst.is_file() else None
        nb = from_text(src.read_text(encoding="utf-8"), previous, name=dst.stem)
        dst.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(dst))
        print(f"wrote {dst} ({len(nb.cells)} cells)")
        return 0
    if len(argv) in (2, 3) and argv[0] == "export":
        text = to_text(nbformat.read(argv[1], as_version=4))
        if len(argv) == 3:
            target = Path(argv[2])
            kept = ""
            if target.is_file() and target.read_text(encoding="utf-8") != text:
                # a draft with edits not built back yet would be lost: kept beside it
                backup = target.with_name(target.name + ".bak")
                target.replace(backup)
                kept = f" (the draft that was there, which differs, is now {backup})"
            target.write_text(text, encoding="utf-8")
            print(f"wrote {argv[2]}{kept}")
        else:
            sys.stdout.write(text)
        return 0
    if len(argv) == 4 and argv[0] == "new":
        try:
            path = new_assignment(*argv[1:])
        except ValueError as err:
            print(f"author new: {err}", file=sys.stderr)
            return 2
        print(f"wrote {path}: assignment {path.stem}, from the course's notebook template.\n" + NEXT_STEPS)
        return 0
    print(__doc__)
    return 2


def _did_you_mean(path):
    """': did you mean <the closest notebook beside it>?', or nothing."""
    import difflib
    near = [str(p) for p in path.parent.glob("*.ipynb")] if path.parent.is_dir() else []
    close = difflib.get_close_matches(str(path), near, n=1, cutoff=0.8)
    return f": did you mean {close[0]}?" if close else ""


NEXT_STEPS = """Then, as the instructor guide's "Adding an exercise to the contract" says:
- write the teaching cells, the exercise, its reference solution and visible asserts
  (`author export` / `author build` to edit it as text);
- the hidden checks in autograder/checks/<assignment>.py, the catalogue in autograder/samples/<assignment>.py;
- every notebook's first cell says "assignment N of M", and the one before this ends with a
  "**Next:**" line: `bin/test tests/test_docs.py` lists what to change; add the syllabus row;
- python -m autograder release <assignment>, then bin/test."""


def new_assignment(assignment, title, exercise, source_root=None):
    """Write source/<assignment>/<assignment>.ipynb from the template; refuse to overwrite one."""
    import re
    from . import course, template

    if not re.fullmatch(r"(\d\d)_[a-z0-9_]+", assignment):
        raise ValueError(f"name the assignment NN_words (as 13_gpu_kernels), not {assignment!r}")
    source_root = Path(source_root) if source_root is not None else course.SOURCE
    path = source_root / assignment / f"{assignment}.ipynb"
    if path.exists():
        raise ValueError(f"{path} exists: edit it (author export / author build) instead")
    number = int(assignment[:2])
    others = sorted(p.name for p in source_root.iterdir() if (p / f"{p.name}.ipynb").is_file()) \
        if source_root.is_dir() else []
    if any(int(a[:2]) == number for a in others):
        raise ValueError(f"assignment {number:02d} exists already: {[a for a in others if int(a[:2]) == number][0]}")
    total = max(number, len(others) + 1, *(int(a[:2]) for a in others))
    following = [a for a in others if int(a[:2]) == number + 1]
    next_title = _title(source_root / following[0] / f"{following[0]}.ipynb") if following else "title"
    nb = from_text(template.text(number, total, title, exercise, next_title), name=assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def _title(path):
    """The title of a course notebook, without its number ("Cores, processes and threads")."""
    first = nbformat.read(str(path), as_version=4).cells[0].source.split("\n", 1)[0]
    return first.split(" · ", 1)[-1]
