"""nbgrader settings for self-checks (bin/validate and the Validate button)."""
c = get_config()  # noqa: F821
# Cells of this course may take a while on a 2-core laptop: allow 3 minutes each.
c.Execute.timeout = 180
# Validate runs the notebook as grading does: without the teaching demos (cells tagged "demo":
# measurements and plots that grade nothing). The student runs those; a self-check that
# passes only because a demo ran first would fail when graded.
c.Execute.skip_cells_with_tag = "demo"
# On a JupyterHub (the instructor's guide), nbgrader's exchange: the folder the administrator made,
# the one the instructor's nbgrader_config.py names too; COURSE_EXCHANGE names another.
import os  # noqa: E402

c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")

# Grading reads the notebook's cells by the rules of helpers/demos.py; validate follows the same.
import sys  # noqa: E402

from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute, NbGraderPreprocessor  # noqa: E402
from nbgrader.validator import Validator  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # `helpers`, with a server started by hand too
from helpers.demos import (drop_earlier_copies, grade_id, module_files, needed_demos, said, skipped,  # noqa: E402
                           tags)


# A notebook another tool saved slightly out of Jupyter's form (VS Code, jupytext, an editor that
# writes a byte-order mark, ...) is graded as it was meant; nbgrader's own reader refused it here
# with a traceback. Validate reads it as grading does, and says what it read so.
import traitlets.log  # noqa: E402
from nbgrader import validator as _validator  # noqa: E402

from helpers.notebook_form import MAX_NOTEBOOK_MB, NotebookTooLargeError, read_leniently  # noqa: E402


def _read_as_grading_reads(path, as_version=4):
    size = os.stat(path).st_size
    if size > MAX_NOTEBOOK_MB * 2**20:
        raise NotebookTooLargeError(
            f"{path} is {size / 2**20:.3g} MB, over the {MAX_NOTEBOOK_MB} MB a notebook may have to be graded, "
            "most likely printed output: clear it (Edit > Clear Outputs of All Cells), save, and validate again")
    with open(path, encoding="utf-8") as notebook:
        nb, mended = read_leniently(notebook.read())
    for words in mended:
        traitlets.log.get_logger().warning("%s: %s (grading reads it the same way)", path, words)
    return nb


_validator.read_nb = _read_as_grading_reads


# A copied, pasted or split cell carries its nbgrader metadata along, grade_id and all, and stock
# validate then stops on "the nbgrader metadata may be corrupted". Grading keeps the metadata on
# the last cell of each grade_id and runs the others as cells you added; validate does the same,
# and says so.
class KeepLastOfCopies(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        for copied, count in drop_earlier_copies(nb.cells).items():
            self.log.warning("'%s' is in %d cells (a copied or split cell): grading grades the last of them as "
                             "'%s' and runs the others as cells you added, where they are; delete the copies you "
                             "do not need", copied, count, copied)
        return nb, resources


# A cell tagged demo that your graded code needs (a helper typed into a copy of a demo cell, an import
# or a worker module only a demo made) runs while grading, as in your notebook; validate the same.
class RunNeededDemos(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        needed = needed_demos([(cell.source, skipped(cell), grade_id(cell) is not None) for cell in code])
        for index, names in needed.items():
            code[index].metadata["tags"] = [tag for tag in tags(code[index]) if tag != "demo"]
            self.log.warning("a cell tagged demo %s, which your graded code uses: grading runs that cell "
                             "(and skips the other demos), and so does this check", said(names))
        return nb, resources


# Only the notebook is handed in, and grading puts the modules an assignment ships back as shipped:
# a module of your own beside the notebook, or your edits of a shipped one, work here and fail when
# graded. course_files.json (written by the instructor's `student` step) lists what each ships.
import hashlib  # noqa: E402
import json  # noqa: E402

import nbformat  # noqa: E402


class WarnModulesNotHandedIn(NbGraderPreprocessor):
    """Says so as a failed check (the Validate button shows failed cells, not the log): a cell
    added at the end of the copy that is checked, never to the notebook."""

    def preprocess(self, nb, resources):
        folder = os.path.abspath(resources.get("metadata", {}).get("path") or ".")
        try:
            with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "course_files.json")) as f:
                shipped = json.load(f).get(os.path.basename(folder))
        except (OSError, ValueError):
            shipped = None
        if shipped is None:  # not an assignment folder of the course
            return nb, resources
        runs = [cell.source for cell in nb.cells if cell.cell_type == "code" and not skipped(cell)]
        imported, written = module_files(runs)
        said = []
        for name in sorted(imported - written):
            path = os.path.join(folder, name)
            if not os.path.isfile(path):
                continue
            with open(path, "rb") as module:
                digest = hashlib.sha256(module.read()).hexdigest()
            if name not in shipped:
                said.append(f"{name}, beside the notebook, is not graded (only the notebook is): grading has no "
                            "such module, and the code that imports it fails there. Write it from a cell of the "
                            f"notebook instead (%%writefile {name}), which grading runs too.")
            elif digest != shipped[name]:
                said.append(f"{name} is not as the course shipped it: grading uses the course's copy, not your "
                            "edits. Put functions of your own in a module written from a cell of the notebook "
                            "(%%writefile my_tasks.py).")
        if said:
            check = nbformat.v4.new_code_cell("# Added by Validate, not in your notebook: what grading will not have.\n"
                                              f"raise ImportError({' '.join(said)!r})")
            check.metadata["nbgrader"] = {"grade": True, "grade_id": "course_modules_beside_the_notebook",
                                          "locked": True, "points": 0, "solution": False, "schema_version": 3}
            nb.cells.append(check)
        return nb, resources


# nbgrader's own list with these steps first (not a configurable option of nbgrader's Validator).
Validator.preprocessors = [KeepLastOfCopies, RunNeededDemos, WarnModulesNotHandedIn, CheckCellMetadata, ClearOutput,
                           Execute]
