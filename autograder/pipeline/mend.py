"""Mend what an editor did to a submission's graded cells, before grading (an nbgrader sanitize step).

Copying, pasting or splitting a cell in JupyterLab copies its nbgrader metadata, grade_id and
all; so does pasting a cell from another assignment's notebook. nbgrader keeps the metadata on the
last cell of a grade_id and leaves the others an empty `nbgrader` entry (DeduplicateIds), on which
its own OverwriteCells then fails (KeyError 'grade_id', with add_missing_cells on); a grade_id the
gradebook lacks fails too. Either way the whole submission went ungraded, and an instructor had
to copy the student's work into a fresh release by hand (jupyter/nbgrader#1083, #1941).

`MendCopiedCells`, in place of DeduplicateIds:
- of the cells that share a grade_id, the last keeps it (nbgrader's choice: a test cell copied
  above its answer leaves the original below it); the others become cells the student added;
- a cell with a grade_id this notebook does not have becomes a cell the student added;
- a cell that lost its nbgrader metadata but kept the id of a graded cell of the release, whose
  grade_id no other cell holds, gets the release's metadata back;
- a graded cell whose marks (grade, solution, locked, task, points, schema_version) were changed
  gets the release's back (nbgrader put back the points and the lock, and failed the submission on
  the others);
- a test cell that holds its released text and code around it (cells merged into it) gives that
  code cells of its own, around it (nbgrader put the test back and the code was lost).
`RunNeededDemos`, after OverwriteCellsAsReleased: a cell tagged `demo` (grading skips those) that the
graded code needs (a helper typed into a copy of a demo cell) runs, as it did in the kernel.
(The judge replays what the kernel runs whatever the cells' ids: verify.payload_for.)

Nothing here can raise a score: test cells are overwritten from the gradebook next
(OverwriteCellsAsReleased), and a cell the student added runs as their code, where it is. What
was mended goes to the log and, as `course_mended` in the notebook's metadata (set here, whatever
the submission had there), to the feedback page.
"""
import copy
from functools import lru_cache

from nbformat.v4 import new_code_cell
from nbgrader.preprocessors import NbGraderPreprocessor

from .reading import READ_MENDED

# What makes a cell graded, and how; and the metadata's format (nbgrader refuses a cell whose
# schema_version it does not know, failing the submission).
FLAGS = ("grade", "solution", "locked", "task", "points", "schema_version")
MENDED = "course_mended"  # notebook metadata: what was mended, in plain words, for the feedback page


class MendCopiedCells(NbGraderPreprocessor):
    """Grade a notebook whose graded cells were copied, split, pasted in or stripped in an editor."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        release_cells = _release_cells(info)
        released = _released_graded_cells(release_cells)
        _drop_blank_entries(nb)
        said = list(resources.get(READ_MENDED, ()))  # what reading the file mended (reading.py)
        said += _drop_unknown(nb, _known_grade_ids(info, released))
        said += _keep_last_of_copies(nb)
        said += _restore_lost(nb, released)
        said += _reset_marks(nb, released)
        said += _split_merged_tests(nb, _released_tests(release_cells))
        nb.metadata.pop(MENDED, None)
        if said:
            nb.metadata[MENDED] = said
            for line in said:
                self.log.warning("mended before grading: %s", line)
        return nb, resources


class RunNeededDemos(NbGraderPreprocessor):
    """A cell tagged `demo` (grading skips those) that graded code needs runs, as it did in the
    student's kernel: a helper typed into a copy of a demo cell, an import or a worker module only a
    demo made (helpers/demos.py). After the test cells are back as released, so that what they
    read is the course's text, not the student's edit of it."""

    def preprocess(self, nb, resources):
        from helpers.demos import DEMO_TAG, grade_id, needed_demos, said, skipped, tags

        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        needed = needed_demos([(cell.source, skipped(cell), grade_id(cell) is not None) for cell in code])
        lines = []
        for index, names in needed.items():
            code[index].metadata["tags"] = [tag for tag in tags(code[index]) if tag != DEMO_TAG]
            lines.append(f"a cell tagged 'demo' (teaching demos do not run while grading) {said(names)}, which "
                         "your graded code uses: it ran, as it did in your kernel")
        if lines:
            nb.metadata[MENDED] = list(nb.metadata.get(MENDED, [])) + lines
            for line in lines:
                self.log.warning("mended before grading: %s", line)
        return nb, resources


def _drop_blank_entries(nb):
    """An nbgrader entry that is not a mapping with a grade_id (`{}`, as nbgrader's own DeduplicateIds
    leaves; `null`, a list) is none."""
    for cell in nb.cells:
        meta = cell.get("metadata", {})
        if "nbgrader" in meta and not (isinstance(meta["nbgrader"], dict)
                                       and isinstance(meta["nbgrader"].get("grade_id"), str)
                                       and meta["nbgrader"]["grade_id"]):
            del meta["nbgrader"]


def _drop_unknown(nb, known):
    said = []
    for cell in nb.cells:
        grade_id = _grade_id(cell)
        if grade_id is not None and grade_id not in known:
            del cell.metadata["nbgrader"]
            # The name is the submission's own: shown cut short, on one line, in the instructor's log too.
            said.append(f"a cell marked {_shown(grade_id)}, which this notebook does not have (pasted from "
                        "another notebook?), ran as a cell you added")
    return said


def _shown(name, room=60):
    """A name from the submission as a quoted Python literal on one line, at most `room` characters of it."""
    return repr(name[:room] + ("…" if len(name) > room else ""))


def _keep_last_of_copies(nb):
    from helpers.demos import drop_earlier_copies

    return [f"'{grade_id}' was in {count} cells (a copied or split cell): the last of them was graded as "
            f"'{grade_id}', the others ran as cells you added, where they are"
            for grade_id, count in drop_earlier_copies(nb.cells).items()]


def _restore_lost(nb, released):
    said, held = [], {_grade_id(cell) for cell in nb.cells} - {None}
    for cell in nb.cells:
        grade_id, meta = released.get(cell.get("id"), (None, None))
        if _grade_id(cell) is None and grade_id is not None and grade_id not in held:
            cell.metadata["nbgrader"] = copy.deepcopy(meta)
            held.add(grade_id)
            said.append(f"the cell '{grade_id}' had lost its grading marks (edited outside JupyterLab?): "
                        "they were put back as the release has them")
    return said


def _reset_marks(nb, released):
    said, as_released = [], dict(released.values())
    for cell in nb.cells:
        grade_id = _grade_id(cell)
        meta, handed_out = cell.get("metadata", {}).get("nbgrader", {}), as_released.get(grade_id, {})
        changed = [flag for flag in FLAGS if flag in handed_out and meta.get(flag) != handed_out[flag]]
        if changed:
            meta.update({flag: handed_out[flag] for flag in changed})
            said.append(f"the grading marks of the cell '{grade_id}' ({', '.join(changed)}) had been "
                        "changed: they were put back as the release has them")
    return said


def _split_merged_tests(nb, tests):
    """A test cell that holds the released test and code around it (cells merged into it, as
    Shift+M does with a selection that starts at the test cell): the code goes to cells of its own
    around the test cell, where the kernel runs it, rather than away with the text the gradebook
    puts back. (Merged into the answer cell instead, the test cell is missing: nbgrader adds it back.)"""
    said = []
    for index in reversed(range(len(nb.cells))):
        cell = nb.cells[index]
        test = tests.get(_grade_id(cell))
        if test is None or cell.cell_type != "code" or cell.source == test or test not in cell.source:
            continue
        at = cell.source.index(test)
        before, after = cell.source[:at].strip("\n"), cell.source[at + len(test):].strip("\n")
        cell.source = test
        for place, code in ((index + 1, after), (index, before)):
            if code.strip():
                added = new_code_cell(code)
                if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) < (4, 5):
                    del added["id"]  # cell ids came with nbformat 4.5: an older notebook with one is invalid
                nb.cells.insert(place, added)
        said.append(f"the test cell '{_grade_id(cell)}' held code of yours too (merged cells?): it ran as a cell "
                    "you added, where it was, and the test cell as released")
    return said


def _released_tests(release_cells):
    """{grade_id: source} of the release notebook's test cells, as handed out."""
    return {cell.metadata["nbgrader"]["grade_id"]: cell.source for cell in release_cells
            if cell.cell_type == "code" and isinstance(cell.get("metadata", {}).get("nbgrader"), dict)
            and cell.metadata["nbgrader"].get("grade") and not cell.metadata["nbgrader"].get("solution")
            and cell.source.strip()}


def _grade_id(cell):
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) else None


def _release_cells(info):
    """The cells of the notebook as released (none where the release has no such notebook); read-only."""
    from .. import course

    path = course.RELEASE / info["assignment"] / f"{info['notebook']}.ipynb"
    return _read_cells(str(path), path.stat().st_mtime_ns) if path.is_file() else []


@lru_cache(maxsize=4)
def _read_cells(path, mtime_ns):
    from .. import notebooks

    return notebooks.read(path).cells


def _released_graded_cells(release_cells):
    """{cell id: (grade_id, nbgrader metadata)} of the release notebook's graded cells."""
    found = {}
    for cell in release_cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("id") and meta.get("grade_id"):
            found[cell["id"]] = (meta["grade_id"], copy.deepcopy(dict(meta)))
    return found


def index_below(nb, info, grade_id):
    """Where the cell `grade_id`, missing from `nb`, goes back: before the first cell below it in the
    release that `nb` still has (graded cells known by grade_id, the others by cell id), or last."""
    def key(cell):
        return _grade_id(cell) or cell.get("id")

    released = [key(cell) for cell in _release_cells(info)]
    if grade_id in released:
        at = {}
        for index, cell in enumerate(nb.cells):
            at.setdefault(key(cell), index)
        for below in released[released.index(grade_id) + 1:]:
            if below in at:
                return at[below]
    return len(nb.cells)


def _known_grade_ids(info, released):
    """The grade_ids of this notebook in the gradebook (those of the release where it has none)."""
    from nbgrader.api import Gradebook, MissingEntry

    try:
        with Gradebook(info["db_url"]) as gradebook:
            return {c.name for c in gradebook.find_notebook(info["notebook"], info["assignment"]).source_cells}
    except MissingEntry:
        return {grade_id for grade_id, _ in released.values()}
