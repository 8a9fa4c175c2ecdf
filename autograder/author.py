"""`author`: edit a course notebook as text, in jupytext's percent format, and build it back.

    python -m autograder author export source/<a>/<a>.ipynb draft.py
    python -m autograder author build draft.py source/<a>/<a>.ipynb
    python -m autograder author new 13_<name> "<title>" <first exercise>

`new` starts an assignment from the course's one notebook template (autograder/template.py).

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
    return main(["new", args.assignment, args.title, args.exercise])


def main(argv):
    if len(argv) == 3 and argv[0] == "build":
        src, dst = Path(argv[1]), Path(argv[2])
        previous = nbformat.read(str(dst), as_version=4) if dst.is_file() else None
        nb = from_text(src.read_text(encoding="utf-8"), previous, name=dst.stem)
        dst.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(dst))
        print(f"wrote {dst} ({len(nb.cells)} cells)")
        return 0
    if len(argv) in (2, 3) and argv[0] == "export":
        text = to_text(nbformat.read(argv[1], as_version=4))
        if len(argv) == 3:
            Path(argv[2]).write_text(text, encoding="utf-8")
            print(f"wrote {argv[2]}")
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
