"""Write course notebooks as plain text, and turn them into nbgrader notebooks.

The source of truth is the .ipynb in source/; this text form exists so that a
notebook can be drafted or reviewed in an editor and diffed line by line:

    python -m autograder author export source/01_x/01_x.ipynb > draft.txt
    python -m autograder author build draft.txt source/01_x/01_x.ipynb

A cell starts with a line `%% <kind> [grade_id] [points=N]`:

    %% md                      markdown, shown to students
    %% code                    teaching code cell
    %% answer cpu_info         autograded answer cell (### BEGIN/END SOLUTION inside)
    %% test test_cpu_info points=2   autograder test cell (visible tests + hidden block)
    %% written q1 points=1     manually graded markdown answer
"""
import hashlib
import re
import sys
from pathlib import Path

import nbformat

HEADER = re.compile(r"^%% (md|code|answer|test|written)(?: +(\S+))?(?: +points=([\d.]+))?\s*$")


def _meta(kind, grade_id, points):
    base = {"schema_version": 3, "grade_id": grade_id, "locked": False}
    if kind == "answer":
        return {**base, "grade": False, "solution": True, "task": False}
    if kind == "test":
        return {**base, "grade": True, "solution": False, "locked": True, "points": points,
                "task": False}
    if kind == "written":
        return {**base, "grade": True, "solution": True, "points": points, "task": False}
    return None


def parse(text):
    """[(kind, grade_id, points, source)] from the text form."""
    cells, current = [], None
    for line in text.splitlines():
        match = HEADER.match(line)
        if match:
            current = [match[1], match[2], float(match[3]) if match[3] else None, []]
            cells.append(current)
        elif current is None:
            if line.strip():
                raise ValueError(f"text before the first '%% <kind>' line: {line!r}")
        else:
            current[3].append(line)
    out = []
    for kind, grade_id, points, lines in cells:
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if kind in ("answer", "test", "written") and not grade_id:
            raise ValueError(f"a '{kind}' cell needs a grade_id")
        if kind in ("test", "written") and not points:
            raise ValueError(f"cell {grade_id} needs points=N")
        out.append((kind, grade_id, points, "\n".join(lines)))
    return out


def build(text, title_for_ids="nb"):
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for index, (kind, grade_id, points, source) in enumerate(parse(text)):
        if kind in ("md", "written"):
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell(source)
        meta = _meta(kind, grade_id, points)
        if meta:
            cell.metadata["nbgrader"] = meta
        # Stable ids keep the release byte-for-byte reproducible.
        cell.id = grade_id or hashlib.sha1(f"{title_for_ids}:{index}".encode()).hexdigest()[:12]
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def export(nb):
    parts = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id", "")
        if cell.cell_type == "markdown":
            head = f"%% written {gid} points={meta['points']:g}" if meta.get("grade") else "%% md"
        elif meta.get("grade") and not meta.get("solution"):
            head = f"%% test {gid} points={meta['points']:g}"
        elif meta.get("solution"):
            head = f"%% answer {gid}"
        else:
            head = "%% code"
        parts.append(f"{head}\n{cell.source}\n")
    return "\n".join(parts)


def command(args):
    """`python -m autograder author ...`"""
    return main(args.rest)


def main(argv):
    if len(argv) == 3 and argv[0] == "build":
        src, dst = Path(argv[1]), Path(argv[2])
        nb = build(src.read_text(encoding="utf-8"), title_for_ids=dst.stem)
        dst.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(dst))
        print(f"wrote {dst} ({len(nb.cells)} cells)")
        return 0
    if len(argv) == 2 and argv[0] == "export":
        sys.stdout.write(export(nbformat.read(argv[1], as_version=4)))
        return 0
    print(__doc__)
    return 2
