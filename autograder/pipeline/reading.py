"""How nbgrader's Autograde reads a submission (its exporter, `c.Autograde.exporter_class`).

- A notebook over the size limit is refused before it is read. nbgrader reads a notebook whole in
  the grading worker, outside the sandbox, before any step of the course runs (a 315 MB notebook of
  printed output took the worker to 1.24 GB). `grade` leaves such a submission out before it
  reaches nbgrader (`jobs.oversized`); this holds the same limit wherever else nbgrader grades with
  the course's configuration, formgrader's Autograde button included, where nbgrader's pre-convert
  hook cannot stop a submission (it logs the hook's error and goes on).
- A notebook that Jupyter would refuse for its form alone is read as it was meant: a UTF-8
  byte-order mark in front (Windows tools write one), a cell or the notebook with `null` or no
  metadata (nbformat failed the whole submission on either, with a traceback for the
  instructor); cell tags that are not a list of strings become one. Parts that the schema
  refuses and grading does not need are read as Jupyter would have written them: a `kernelspec`
  without a `display_name` (JupyterLab saves one so once the kernel it names is uninstalled;
  jupytext writes one so) or empty, or an empty `language_info` (nbconvert failed the whole
  submission on either, when it checks the notebook after each step), an attachment or a
  cell-metadata entry out of form (how a cell is shown; never its `nbgrader` or `tags`), a cell
  of a kind Jupyter no longer has (read as raw text, unless graded). What cannot be mended so
  fails as before, with nbformat's words. What was mended goes to MendCopiedCells, which tells
  the log and the feedback page.
- The outputs of code cells are left out before nbformat reads the notebook (grading clears them
  first anyway), and a notebook of more than MAX_CELLS cells is refused: nbformat's check of a
  part out of form costs about half a millisecond each, so that an 8 MB notebook of 200,000
  made-up outputs kept a grading worker 135 s (a 100 MB one, half an hour); it takes 4 s now.
"""
import json
import os

import nbformat
from nbconvert.exporters import NotebookExporter

from . import jobs

MAX_CELLS = 10_000  # the course's notebooks have 33 to 84
READ_MENDED = "course_read_mended"  # resources: what reading mended, in plain words (mend.MendCopiedCells says it)


class NotebookTooLargeError(ValueError):
    """nbgrader logs it and fails this submission alone; the rest of the class is graded."""


class SubmissionExporter(NotebookExporter):
    def from_filename(self, filename, resources=None, **kw):
        size = os.stat(filename).st_size
        if size > jobs.notebook_limit_mb() * 2**20:
            raise NotebookTooLargeError(f"{filename} was not graded: it {jobs.too_large(size, filename)}")
        return super().from_filename(filename, resources, **kw)

    def from_file(self, file_stream, resources=None, **kw):
        nb, said = read_leniently(file_stream.read())
        resources = {} if resources is None else resources
        resources[READ_MENDED] = said
        return self.from_notebook_node(nb, resources=resources, **kw)


def read_leniently(text):
    """(notebook, what was mended) from a notebook file's text; nbformat's own error where the
    text is no notebook even so (not JSON, cut short, another format)."""
    said = []
    if text.startswith("\ufeff"):
        text = text[1:]
        said.append("your notebook was saved with a byte-order mark in front (by an editor other than "
                    "Jupyter?), which Jupyter refuses: it was read without it")
    text = _without_outputs(text)
    try:
        nb = nbformat.reads(text, as_version=4)
        return nb, said + _tags_as_lists(nb) + _in_form(nb)
    except Exception as refused:
        try:
            data = json.loads(text)
        except ValueError:
            raise refused from None
        bare = _without_metadata(data)
        if not bare:
            raise
        try:
            nb = nbformat.reads(json.dumps(data), as_version=4)
        except Exception:
            raise refused from None
        said.append(f"{bare} had no metadata (edited outside JupyterLab?): read with none")
        return nb, said + _tags_as_lists(nb) + _in_form(nb)


def _without_outputs(text):
    """The notebook's text with its code cells' outputs left out (grading clears them first
    anyway: ClearOutput), before nbformat checks them: an output out of form costs its schema
    check about half a millisecond (20,000 of them, 0.8 MB, took 9 s in each of nbformat's reading
    and the first check after it), and a notebook of more than MAX_CELLS cells is refused, so that
    no notebook within the size limit can cost minutes that way. Text that is no notebook is
    left for nbformat to refuse."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        return text
    if len(cells) > MAX_CELLS:
        raise NotebookTooLargeError(f"the notebook has {len(cells)} cells, more than the {MAX_CELLS} a notebook "
                                    "may have: it was not graded")
    for cell in cells:
        if isinstance(cell, dict) and cell.get("cell_type") == "code" and cell.get("outputs"):
            cell["outputs"] = []
    return json.dumps(data)


def _tags_as_lists(nb):
    """A cell's tags are a list of strings; nbformat reads a string there too (it only warns), which
    nbclient, skipping the demos, tests by substring ("demo" in "demos, plots"), and `null`, on which
    it fails. A string becomes a list of itself, anything else none; say so, or nothing."""
    mended = 0
    for cell in nb.cells:
        found = cell.get("metadata", {}).get("tags", [])
        if not (isinstance(found, list) and all(isinstance(tag, str) for tag in found)):
            cell.metadata["tags"] = [found] if isinstance(found, str) else (
                [tag for tag in found if isinstance(tag, str)] if isinstance(found, list) else [])
            mended += 1
    return [f"the tags of {mended} cell{'s' * (mended > 1)} were not a list of words: read as one"] if mended else []


def _without_metadata(data):
    """Give the notebook and its cells whose metadata is missing or not a mapping an empty one; say
    which, or None where none lacked it."""
    if not isinstance(data, dict):
        return None
    cells = [cell for cell in data.get("cells", []) if isinstance(cell, dict)]
    bare = [cell for cell in cells if not isinstance(cell.get("metadata"), dict)]
    for cell in bare:
        cell["metadata"] = {}
    whole = not isinstance(data.get("metadata"), dict)
    if whole:
        data["metadata"] = {}
    parts = (["the notebook"] if whole else []) + ([f"{len(bare)} cell{'s' * (len(bare) > 1)}"] if bare else [])
    return " and ".join(parts) or None


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
        errors = [tuple(error.absolute_path) for error in nbformat.validator.iter_validate(nb, relax_add_props=True)]
        done = [said for said in (_mend_one(nb, list(path)) for path in errors if path not in seen) if said]
        seen.update(errors)
        if not done:
            break
        for said in done:
            mended[said] = mended.get(said, 0) + 1
    return [f"parts of your notebook were not in Jupyter's form (saved by another tool?), which grading "
            f"does not need: {', '.join(said + (f' ({count} times)' if count > 1 else '') for said, count in mended.items())}"
            ] if mended else []


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
    graded = _grade_id(cell) is not None
    part = path[2] if len(path) > 2 else None
    if part == "outputs" and cell.get("cell_type") == "code":
        cell.outputs = []
        return "outputs were read as none (grading clears them anyway)"
    if part == "execution_count" and cell.get("cell_type") == "code":
        cell.execution_count = None
        return "execution counts were read as none"
    if part == "attachments" and "attachments" in cell:
        del cell["attachments"]
        return "a cell's attachments were read as none"
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


def _grade_id(cell):
    from helpers.demos import grade_id
    return grade_id(cell)
