"""nbgrader settings for self-checks (bin/validate and the Validate button)."""
c = get_config()  # noqa: F821
# Cells of this course may take a while on a 2-core laptop: allow 3 minutes each.
c.Execute.timeout = 180
# Validate runs the notebook as grading does: without the teaching demos (cells tagged "demo":
# measurements and plots that grade nothing). The student runs those; a self-check that
# passes only because a demo ran first would fail when graded.
c.Execute.skip_cells_with_tag = "demo"

# A copied, pasted or split cell carries its nbgrader metadata along, grade_id and all, and stock
# validate then stops on "the nbgrader metadata may be corrupted". Grading keeps the metadata on
# the last cell of each grade_id and runs the others as cells the student added; validate does
# the same, and says so.
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute, NbGraderPreprocessor  # noqa: E402
from nbgrader.validator import Validator  # noqa: E402


class KeepLastOfCopies(NbGraderPreprocessor):
    def preprocess(self, nb, resources):
        kept, copies = set(), {}
        for cell in reversed(nb.cells):
            meta = cell.get("metadata", {}).get("nbgrader")
            grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
            if grade_id in kept:
                del cell.metadata["nbgrader"]
                copies[grade_id] = copies.get(grade_id, 1) + 1
            elif grade_id is not None:
                kept.add(grade_id)
        for grade_id, count in copies.items():
            self.log.warning("'%s' is in %d cells (a copied or split cell): grading grades the last of them as "
                             "'%s' and runs the others as cells you added, where they are; delete the copies you "
                             "do not need", grade_id, count, grade_id)
        return nb, resources


# nbgrader's own list with this step first (not a configurable option of nbgrader's Validator).
Validator.preprocessors = [KeepLastOfCopies, CheckCellMetadata, ClearOutput, Execute]
