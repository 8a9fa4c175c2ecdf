"""How grading and Validate read a notebook file: as Jupyter would, where another tool saved it
slightly out of Jupyter's form, and never at a cost out of proportion.

- A notebook that Jupyter would refuse for its form alone is read as it was meant (_prepared,
  on its JSON, before nbformat reads it): a UTF-8 byte-order mark in front (Windows tools write
  one), a cell or the notebook with `null` or no metadata, tags that are not a list of distinct
  words without commas, a display setting of the wrong type (`collapsed`, `scrolled`, ...), an
  execution count out of form, a cell id out of form (or ids under a version number older than
  4.5); each of these failed the whole submission, with a traceback for the instructor. Then, by
  nbformat's schema (_in_form), what grading does not need: a `kernelspec` without a
  `display_name` (JupyterLab saves one so once the kernel it names is uninstalled; jupytext writes
  one so) or empty, an empty `language_info`, an attachment out of form, a cell of a kind Jupyter
  no longer has (read as raw text, unless graded). A graded cell's source, `nbgrader` entry, tags
  and kind are never changed. What cannot be mended so fails as before, with nbformat's words.
  `read_leniently` returns what was mended, in plain words: grading puts it on the feedback page
  (its MendCopiedCells step), Validate in its log (nbgrader_config.py of the student folder:
  bin/validate prints it; the Validate button shows only failed checks, and this fails none).
- What costs nbformat time or memory out of proportion is refused or left out before it reads
  the text: the code cells' outputs (grading and Validate clear them first anyway), a notebook of
  more than MAX_CELLS cells or of millions of JSON values. nbformat's schema check costs about half
  a millisecond for each part out of form, in reading and after each step of nbconvert: an 8 MB
  notebook of 200,000 made-up outputs kept a grading worker 135 s (a 100 MB one, half an hour),
  and 3 million empty mappings in 12 MB took nbformat to 3.8 GB. Now 4 s and a refusal.
"""
import itertools
import json
import re
import uuid

import nbformat

from .demos import grade_id

MAX_CELLS = 10_000  # the course's notebooks have 33 to 84
# The largest notebook graded, by default (nbgrader reads it whole, outside the sandbox; the
# course's notebooks with all their outputs are about 0.5 MB): Validate refuses a larger one too.
MAX_NOTEBOOK_MB = 100


class NotebookTooLargeError(ValueError):
    """nbgrader logs it and fails this submission alone; the rest of the class is graded."""


def read_leniently(text):
    """(notebook, what was mended) from a notebook file's text; nbformat's own error where the
    text is no notebook even so (not JSON, cut short, another format)."""
    said = []
    if text.startswith("\ufeff"):
        text = text[1:]
        said.append("your notebook was saved with a byte-order mark in front (by an editor other than "
                    "Jupyter?), which Jupyter refuses: it was read without it")
    text, prepared, out_of_form = _prepared(text)
    nb = nbformat.reads(text, as_version=4)
    out_of_form += _in_form(nb)
    if out_of_form:
        prepared.append("parts of your notebook were not in Jupyter's form (saved by another tool?), which grading "
                        f"does not need: {', '.join(out_of_form)}")
    return nb, said + prepared


def _prepared(text):
    """(the notebook's text as nbformat should read it, what was mended, the parts out of form it
    read as missing), mended on its JSON, where
    a mend costs nothing (nbformat's schema check costs about half a millisecond for each part out
    of form, in reading and again after each step of nbconvert: 20,000 made-up outputs in 0.8 MB
    took 9 s each time, 3,000 cells with five display settings out of form 10 s to mend in rounds):

    - refused: a notebook of more than MAX_CELLS cells, or of more than MAX_VALUES JSON values
      (MAX_VALUES_KEPT outside its outputs: 3 million empty mappings in 12 MB took nbformat to 3.8 GB);
    - the code cells' outputs are left out (grading clears them first anyway: ClearOutput);
    - a cell or the notebook with `null` or no metadata gets an empty one; tags become a list of
      distinct words without commas (nbclient, skipping the demos, tests a string by substring,
      "demo" in "demos, plots", and fails on `null`; nbconvert refuses the rest); a display
      setting of the wrong type (collapsed, scrolled, ...) or an execution count out of form is
      read as missing.

    v3 notebooks keep their cells in worksheets: the same holds for them. Text that is no notebook
    is left for nbformat to refuse."""
    values = sum(text.count(c) for c in "{[,")  # about one a JSON value (object, list or item)
    if values > MAX_VALUES:  # braces and commas in strings (sources, printed output) count here: look closer
        values = _values_outside_strings(text)
        if values > MAX_VALUES:
            raise NotebookTooLargeError(_too_many(values, MAX_VALUES, ""))
    try:
        data = json.loads(text)
    except ValueError:
        return text, [], []
    if not isinstance(data, dict):
        return text, [], []
    cells = _cells(data)
    if len(cells) > MAX_CELLS:
        raise NotebookTooLargeError(f"the notebook has {len(cells)} cells, more than the {MAX_CELLS} a notebook "
                                    "may have: it was not graded")
    for cell in cells:
        if cell.get("cell_type") == "code" and cell.get("outputs"):
            cell["outputs"] = []
    left = _count_values(data)
    if left > MAX_VALUES_KEPT:
        raise NotebookTooLargeError(_too_many(left, MAX_VALUES_KEPT, " outside its outputs"))
    said = []
    bare = _without_metadata(data, cells)
    if bare:
        said.append(f"{bare} had no metadata (edited outside JupyterLab?): read with none")
    said += _tags_in_form(cells)
    out_of_form = _display_in_form(cells) + _ids_in_form(data, cells)
    return json.dumps(data), said, out_of_form


MAX_VALUES = 20_000_000  # JSON values in the file: json.loads of as many short strings takes about 1.5 GB
# (a course notebook with its outputs holds about 10,000; 100 MB of printed lines of 10 characters, 7 million)
MAX_VALUES_KEPT = 1_000_000  # ... once the outputs are left out


def _too_many(count, limit, where):
    return (f"the notebook holds about {count} JSON values{where}, more than the {limit} a notebook may have "
            "(made up?): it was not graded")


def _values_outside_strings(text):
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)  # one string no longer than the text
    return sum(bare.count(c) for c in "{[,")


def _count_values(value):
    count, todo = 0, [value]
    while todo:
        item = todo.pop()
        count += 1
        if isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return count


def _cells(data):
    """The cell mappings of a notebook's JSON: v4's `cells`, or v3's and v2's worksheets' cells."""
    if isinstance(data.get("cells"), list):
        lists = [data["cells"]]
    else:
        sheets = data.get("worksheets")
        lists = [sheet["cells"] for sheet in sheets if isinstance(sheet, dict) and isinstance(sheet.get("cells"), list)
                 ] if isinstance(sheets, list) else []
    return [cell for cells in lists for cell in cells if isinstance(cell, dict)]


def _tags_in_form(cells):
    """Tags as nbclient and the schema take them: a list of distinct, non-empty words without
    commas. A string becomes a list of itself, a comma a semicolon (never split: "demo,plots" was
    no demo to nbclient, and stays none), anything else nothing; say so, or nothing."""
    mended = 0
    for cell in cells:
        found = cell["metadata"].get("tags", [])
        tags = [found] if isinstance(found, str) else found if isinstance(found, list) else []
        tags = list(dict.fromkeys(tag.replace(",", ";") for tag in tags if isinstance(tag, str) and tag))
        if tags != found:
            cell["metadata"]["tags"] = tags
            mended += 1
    return [f"the tags of {mended} cell{'s' * (mended > 1)} were not a list of words: read as one"] if mended else []


def _without_metadata(data, cells):
    """Give the notebook and its cells whose metadata is missing or not a mapping an empty one; say
    which, or None where none lacked it."""
    bare = [cell for cell in cells if not isinstance(cell.get("metadata"), dict)]
    for cell in bare:
        cell["metadata"] = {}
    whole = not isinstance(data.get("metadata"), dict)
    if whole:
        data["metadata"] = {}
    parts = (["the notebook"] if whole else []) + ([f"{len(bare)} cell{'s' * (len(bare) > 1)}"] if bare else [])
    return " and ".join(parts) or None


# How a cell is shown, by the schema's form of each setting; nothing of grading reads them.
_DISPLAY = {"collapsed": lambda v: isinstance(v, bool), "scrolled": lambda v: v is True or v is False or v == "auto",
            "name": lambda v: isinstance(v, str), "jupyter": lambda v: isinstance(v, dict),
            "execution": lambda v: isinstance(v, dict), "deletable": lambda v: isinstance(v, bool),
            "editable": lambda v: isinstance(v, bool), "format": lambda v: isinstance(v, str)}


def _display_in_form(cells):
    mended = {}
    for cell in cells:
        meta = cell["metadata"]
        for key, in_form in _DISPLAY.items():
            if key in meta and not in_form(meta[key]):
                del meta[key]
                mended[repr(key)] = mended.get(repr(key), 0) + 1
        if "collapsed" in cell and not isinstance(cell["collapsed"], bool):  # v3 keeps it on the cell
            del cell["collapsed"]
            mended["'collapsed'"] = mended.get("'collapsed'", 0) + 1
        found = cell.get("attachments")
        if "attachments" in cell and not isinstance(found, dict):  # nbformat's reader fails on it
            del cell["attachments"]
            mended["attachment"] = mended.get("attachment", 0) + 1
        elif isinstance(found, dict):
            for name in [name for name, bundle in found.items() if not isinstance(bundle, dict)]:
                del found[name]
                mended["attachment"] = mended.get("attachment", 0) + 1
        for key in ("execution_count", "prompt_number"):  # v4's and v3's
            count = cell.get(key)
            if cell.get("cell_type") == "code" and count is not None and not (type(count) is int and count >= 0):
                cell[key] = None
                mended["execution count"] = mended.get("execution count", 0) + 1
    return [f"a cell's {key} was read as missing" + (f" ({n} times)" if n > 1 else "") for key, n in mended.items()]


_CELL_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # the schema's (v4.5): nbformat refuses any other


def _ids_in_form(data, cells):
    """Give a cell whose id is out of form (too long, characters the schema refuses, not a string)
    a new one; nothing of grading reads it (nbgrader goes by the cell's `grade_id`). A repeated id
    nbformat itself mends."""
    taken = {cell["id"] for cell in cells if isinstance(cell.get("id"), str)}
    said = []
    if (any("id" in cell for cell in cells) and data.get("nbformat") == 4
            and isinstance(data.get("nbformat_minor"), int) and data["nbformat_minor"] < 5):
        # ids came with 4.5, its only change: a tool wrote the older number
        said.append(f"the notebook's cell ids were read as meant (its version, 4.{data['nbformat_minor']}, has none)")
        data["nbformat_minor"] = 5
    mended = 0
    for cell in cells:
        if "id" in cell and not (isinstance(cell["id"], str) and _CELL_ID.fullmatch(cell["id"])):
            cell["id"] = _fresh_id(taken)
            mended += 1
    if mended:
        said.append("a cell's id was read as a new one" + (f" ({mended} times)" if mended > 1 else ""))
    return said


def _fresh_id(taken):
    while True:
        new = uuid.uuid4().hex[:8]
        if new not in taken:
            taken.add(new)
            return new


def _in_form(nb):
    """Mend, in place, what nbformat's schema refuses where grading does not need it (see above);
    say what, or nothing. Errors it cannot mend are left for nbconvert to report as before, and so
    is the notebook where mending itself fails."""
    try:
        return _mend_all(nb)
    except Exception:  # noqa: BLE001 (nbconvert's check after the first step says what is wrong)
        return []


def _mend_all(nb):
    mended, seen = {}, set()  # what was done: how many times
    for _ in range(8):  # a mend can bring the next error to light; each round mends at least one
        # At most a thousand a round: finding each costs the schema check about a millisecond.
        errors = [tuple(error.absolute_path) for error in
                  itertools.islice(nbformat.validator.iter_validate(nb, relax_add_props=True), 1000)]
        done = [said for said in (_mend_one(nb, list(path)) for path in errors if path not in seen) if said]
        seen.update(errors)
        if not done:
            break
        for said in done:
            mended[said] = mended.get(said, 0) + 1
    return [said + (f" ({count} times)" if count > 1 else "") for said, count in mended.items()]


def _mend_one(nb, path):
    """Mend the part of `nb` at `path` (a schema error's); what was done, in a few words, or None."""
    if path[:1] == ["metadata"] and len(path) >= 2 and path[1] in nb.metadata:
        spec = nb.metadata[path[1]]
        if path[1] == "kernelspec" and isinstance(spec, dict) and isinstance(spec.get("name"), str) and spec["name"]:
            spec["display_name"] = spec["name"]
            return "the kernel's display name was read as its name"
        del nb.metadata[path[1]]
        return f"the notebook's {path[1]!r} was read as missing"
    if path[:1] != ["cells"] or len(path) < 2 or not isinstance(path[1], int) or path[1] >= len(nb.cells):
        return None
    cell = nb.cells[path[1]]
    graded = grade_id(cell) is not None
    part = path[2] if len(path) > 2 else None
    if part == "outputs" and cell.get("cell_type") == "code":
        cell.outputs = []
        return "outputs were read as none (grading clears them anyway)"
    if part == "execution_count" and cell.get("cell_type") == "code":
        cell.execution_count = None
        return "execution counts were read as none"
    if part == "attachments" and len(path) > 3 and path[3] in cell.get("attachments", {}):
        del cell["attachments"][path[3]]
        return "an attachment out of form was read as missing"
    if part == "metadata" and len(path) > 3 and path[3] not in ("nbgrader", "tags") and path[3] in cell.metadata:
        del cell.metadata[path[3]]  # how the cell is shown (collapsed, hidden, ...)
        return f"a cell's {path[3]!r} was read as missing"
    if part is None and not graded and cell.get("cell_type") not in ("code", "markdown", "raw"):
        source = cell.get("source", "")
        raw = {"cell_type": "raw", "metadata": cell.get("metadata", {}),
               "source": source if isinstance(source, str) else "".join(map(str, source))}
        if isinstance(cell.get("id"), str):
            raw["id"] = cell["id"]
        nb.cells[path[1]] = nbformat.from_dict(raw)  # its metadata is mended in the next round
        return "a cell of a kind Jupyter no longer has (a heading?) was read as text"
    return None

