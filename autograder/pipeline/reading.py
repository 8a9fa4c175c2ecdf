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
  instructor); cell tags that are not a list of strings become one. What was mended goes to
  MendCopiedCells, which tells the log and the feedback page.
"""
import json
import os

import nbformat
from nbconvert.exporters import NotebookExporter

from . import jobs

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
    try:
        nb = nbformat.reads(text, as_version=4)
        return nb, said + _tags_as_lists(nb)
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
        return nb, said + _tags_as_lists(nb)


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
