"""Mending a submission whose graded cells an editor copied, split, pasted in or stripped
(autograder/pipeline/mend.py), before nbgrader grades it: what each cell becomes, and that the
judge then replays every code cell the kernel runs. test_grading_trust.py grades such notebooks."""
import copy

import nbformat
import pytest

from autograder import course, notebooks, samples
from autograder.pipeline import verify
from autograder.pipeline.feedback_page import table
from autograder.pipeline.mend import MENDED, MendCopiedCells, RunNeededDemos, index_below

A = "01_processes_threads"


@pytest.fixture(scope="module")
def mend(tmp_path_factory):
    # A gradebook without the assignment: the grade_ids the notebook has are then the release's.
    # (Made once: a new gradebook costs about 3 CPU-s.)
    info = {"assignment": A, "notebook": A, "db_url": f"sqlite:///{tmp_path_factory.mktemp('mend') / 'gradebook.db'}"}

    def run(nb):
        nb = copy.deepcopy(nb)
        nb, _ = MendCopiedCells().preprocess(nb, {"nbgrader": info})
        return nb
    run.info = info
    return run


def _perfect():
    return samples.submissions(A)["sample_perfect"]


def _at(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells) if notebooks.nbgrader_meta(c).get("grade_id") == grade_id)


def _ids(nb):
    return [notebooks.nbgrader_meta(c).get("grade_id") for c in nb.cells]


def _replayed_everything_the_kernel_runs(nb):
    """The judge's replay (verify.payload_for) holds every code cell of the mended notebook that the
    kernel runs, in order and with its text, but the test cells."""
    source = notebooks.read(course.source_notebook(A))
    payload = verify.payload_for(nb, source)
    runs = [c for c in nb.cells if c.cell_type == "code" and not notebooks.is_demo(c)
            and not notebooks.is_test_cell(c)]
    assert [code for _, code in payload["cells"] if isinstance(code, str)] == [c.source for c in runs]


def test_copies_of_a_graded_cell_become_cells_the_student_added(mend):
    nb = _perfect()
    answer = _at(nb, "cpu_info")
    same_id = copy.deepcopy(nb.cells[answer])  # pasted as an editor that copies the id too would
    nb.cells.insert(answer + 1, same_id)
    test = _at(nb, "test_run_in_child")
    above = copy.deepcopy(nb.cells[test])
    above["id"] = "pasted-above"
    nb.cells.insert(_at(nb, "run_in_child"), above)  # a test cell copied above its answer
    split = _at(nb, "creation_cost")
    head, tail = copy.deepcopy(nb.cells[split]), nb.cells[split]
    head.source, tail.source = "import time\n", tail.source
    tail["id"] = "split-off"
    nb.cells.insert(split, head)  # split: the head keeps the id, the tail gets a new one
    mended = mend(nb)
    assert _ids(mended).count("cpu_info") == 1 and _at(mended, "cpu_info") == answer + 1  # the last copy
    assert _at(mended, "test_run_in_child") > _at(mended, "run_in_child")  # the original, below its answer
    assert mended.cells[_at(mended, "creation_cost")]["id"] == "split-off"
    for grade_id in ("cpu_info", "test_run_in_child", "creation_cost"):
        assert _ids(mended).count(grade_id) == 1
    assert all("nbgrader" not in c.metadata or c.metadata["nbgrader"].get("grade_id") for c in mended.cells)
    said = " ".join(mended.metadata[MENDED])
    assert "'cpu_info' was in 2 cells" in said and "'creation_cost' was in 2 cells" in said
    _replayed_everything_the_kernel_runs(mended)
    # What the payload takes for the split head: the student's own code, not the course's.
    payload = dict(verify.payload_for(mended, notebooks.read(course.source_notebook(A)))["cells"])
    assert "import time\n" in payload.values()


def test_a_cell_pasted_from_another_notebook_runs_as_an_added_cell(mend):
    nb = _perfect()
    foreign = next(c for c in samples.submissions("02_gil")["sample_perfect"].cells if notebooks.is_answer_cell(c))
    nb.cells.insert(3, copy.deepcopy(foreign))
    mended = mend(nb)
    assert "nbgrader" not in mended.cells[3].metadata
    assert "which this notebook does not have" in mended.metadata[MENDED][0]
    _replayed_everything_the_kernel_runs(mended)
    # A grade_id is the submission's to write: a forged log line in it stays on one line, cut short.
    nb.cells[3].metadata["nbgrader"] = {"grade_id": "x\n[INFO] graded 8/8" + "y" * 500, "solution": True}
    said = mend(nb).metadata[MENDED][0]
    assert "\n" not in said and len(said) < 200, said


def test_stripped_metadata_comes_back_from_the_release_by_cell_id(mend):
    nb = _perfect()
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    mended = mend(nb)
    released = notebooks.read(course.release_notebook(A))
    assert _ids(mended) == [notebooks.nbgrader_meta(c).get("grade_id") for c in released.cells]
    assert notebooks.answer_cells(mended).keys() == notebooks.answer_cells(released).keys()
    _replayed_everything_the_kernel_runs(mended)


def test_changed_marks_are_put_back_and_nothing_else_is(mend):
    nb = _perfect()
    answer, test = nb.cells[_at(nb, "cpu_info")], nb.cells[_at(nb, "test_cpu_info")]
    answer.metadata["nbgrader"].update(grade=True, points=100, schema_version=1)  # nbgrader: SchemaTooOldError
    test.metadata["nbgrader"].update(grade=False, solution=True, locked=False)
    nb.cells[0].metadata["nbgrader"] = None  # null: the mend itself failed on it once
    mended = mend(nb)
    assert "nbgrader" not in mended.cells[0].metadata
    released = notebooks.read(course.release_notebook(A))
    for grade_id in ("cpu_info", "test_cpu_info"):
        got, handed_out = (notebooks.nbgrader_meta(x.cells[_at(x, grade_id)]) for x in (mended, released))
        assert {k: got.get(k) for k in ("grade", "solution", "locked", "schema_version")} == \
            {k: handed_out.get(k) for k in ("grade", "solution", "locked", "schema_version")}
    assert notebooks.nbgrader_meta(mended.cells[_at(mended, "test_cpu_info")])["points"] == \
        notebooks.nbgrader_meta(released.cells[_at(released, "test_cpu_info")])["points"]
    assert len(mended.metadata[MENDED]) == 2
    untouched = mend(_perfect())
    assert MENDED not in untouched.metadata and untouched == _perfect()


def test_a_submission_cannot_write_what_was_mended(mend):
    nb = _perfect()
    nb.metadata[MENDED] = ["<script>alert(1)</script> all your cells were fine"]
    assert MENDED not in mend(nb).metadata
    # and what is shown is escaped, whatever it says
    shown = table([("test_cpu_info", 2.0, 2.0, "✓ passed")], ["'<b>x</b>' was in 2 cells"])
    assert "<b>" not in shown and "mended" in shown


def test_a_test_cell_deleted_with_its_answer_goes_back_below_the_retyped_answer(mend):
    nb = _perfect()
    answer = _at(nb, "run_in_child")
    retyped = nbformat.v4.new_code_cell(nb.cells[answer].source)
    del nb.cells[_at(nb, "test_run_in_child")]
    nb.cells[answer] = retyped
    released = notebooks.read(course.release_notebook(A))
    below = released.cells[_at(released, "test_run_in_child") + 1]
    at = index_below(nb, mend.info, "test_run_in_child")
    assert nb.cells[at]["id"] == below["id"] and at > nb.cells.index(retyped)
    assert index_below(nb, mend.info, "no_such_cell") == len(nb.cells)


def test_grade_lists_the_mended_submissions(tmp_path):
    from autograder import grade
    from autograder.course import Course
    work = Course(tmp_path)
    for student, said in (("copied", ["'cpu_info' was in 2 cells"]), ("untouched", None)):
        folder = work.autograded / student / A
        folder.mkdir(parents=True)
        nb = _perfect()
        if said:
            nb.metadata[MENDED] = said
        nbformat.write(nb, str(folder / f"{A}.ipynb"))
    found = grade.mended_submissions([(A, "copied"), (A, "untouched"), (A, "not graded")], work=work)
    assert found == {(A, "copied"): ["'cpu_info' was in 2 cells"]}


def test_code_merged_into_a_test_cell_gets_cells_of_its_own(mend):
    """Shift+M on a selection that starts at a test cell (or ends at one, in an editor that keeps the
    last cell's metadata) merges code into it: nbgrader put the test back and the code was lost."""
    nb = _perfect()
    released = notebooks.read(course.release_notebook(A))
    answer, test = _at(nb, "run_in_child"), _at(nb, "test_run_in_child")
    code = nb.cells[answer].source
    nb.cells[test].source = code + "\n\n" + nb.cells[test].source + "\n\nprint('after')\n"
    del nb.cells[answer]
    mended = mend(nb)
    at = _at(mended, "test_run_in_child")
    assert mended.cells[at].source == released.cells[_at(released, "test_run_in_child")].source
    assert mended.cells[at - 1].source == code.strip("\n") and mended.cells[at + 1].source == "print('after')"
    assert "held code of yours too" in " ".join(mended.metadata[MENDED])
    _replayed_everything_the_kernel_runs(mended)
    # In a notebook older than nbformat 4.5 the new cells have no id (they would make it invalid).
    nb = _perfect()
    nb.nbformat_minor = 4
    for cell in nb.cells:
        cell.pop("id", None)
    nb.cells[_at(nb, "test_cpu_info")].source += "\nprint('after')"
    mended = mend(nb)
    assert "id" not in mended.cells[_at(mended, "test_cpu_info") + 1]
    nbformat.validate(mended)
    # An edited test cell (its released text not in it) is only put back, as before.
    nb = _perfect()
    nb.cells[_at(nb, "test_cpu_info")].source = "pass"
    assert MENDED not in mend(nb).metadata


def test_what_reading_mended_is_said_first(mend):
    """reading.SubmissionExporter passes what it mended in the resources; the mend says it with the rest."""
    from autograder.pipeline.reading import READ_MENDED
    nb = _perfect()
    nb.cells[_at(nb, "cpu_info")].metadata = {}
    said = ["your notebook was saved with a byte-order mark in front ..."]
    mended, _ = MendCopiedCells().preprocess(copy.deepcopy(nb), {"nbgrader": mend.info, READ_MENDED: said})
    assert mended.metadata[MENDED][0] == said[0] and "'cpu_info' had lost" in mended.metadata[MENDED][1]


def test_a_demo_the_code_below_needs_runs(mend):
    """A helper typed into a copy of a demo cell (the `demo` tag came along) ran in the kernel; graded,
    the answer that calls it raised NameError (6/8 on 01). The copy now runs, and the replay has it."""
    nb = _perfect()
    answer = _at(nb, "cpu_info")
    copied = copy.deepcopy(next(c for c in nb.cells if notebooks.is_demo(c)))
    copied["id"] = "copied-demo"
    copied.source = nb.cells[answer].source.replace("def cpu_info(", "def _impl(")
    nb.cells[answer].source = "def cpu_info(*args, **kwargs):\n    return _impl(*args, **kwargs)\n"
    nb.cells.insert(answer, copied)
    # A cell added to look at a demo's result makes no demo run: it grades nothing.
    nb.cells.insert(answer + 3, nbformat.v4.new_code_cell("print(info)"))
    nb.cells.insert(answer + 3, nbformat.v4.new_code_cell("info = 'pretend a demo measured this'"))
    nb.cells[answer + 3].metadata["tags"] = ["demo"]
    mended, _ = RunNeededDemos().preprocess(mend(nb), {})
    assert not notebooks.is_demo(mended.cells[answer]) and mended.cells[answer].source == copied.source
    assert sum(notebooks.is_demo(c) for c in mended.cells) == sum(notebooks.is_demo(c) for c in nb.cells) - 1
    assert mended.metadata[MENDED] == ["a cell tagged 'demo' (teaching demos do not run while grading) binds "
                                       "'_impl', which your graded code uses: it ran, as it did in your kernel"]
    _replayed_everything_the_kernel_runs(mended)


def test_a_demo_that_binds_names_no_reading_sees_runs_when_the_code_below_reads_one(mend):
    """A helper a demo binds through exec (or globals(), a star import, %run) is no name the reading
    of the code sees: the answer that calls it raised NameError when graded (6/8 on 01), though it
    worked in the kernel. A name the graded code reads that no cell binds now runs the last such
    demo above it."""
    nb = _perfect()
    answer = _at(nb, "cpu_info")
    impl = nb.cells[answer].source.replace("def cpu_info(", "def _impl(")
    demo = nbformat.v4.new_code_cell(f"exec({impl!r})")
    demo.metadata["tags"] = ["demo"]
    nb.cells[answer].source = "def cpu_info(*args, **kwargs):\n    return _impl(*args, **kwargs)\n"
    nb.cells.insert(answer, demo)
    mended, _ = RunNeededDemos().preprocess(mend(nb), {})
    assert not notebooks.is_demo(mended.cells[answer]) and mended.cells[answer].source == demo.source
    assert sum(notebooks.is_demo(c) for c in mended.cells) == sum(notebooks.is_demo(c) for c in nb.cells) - 1
    assert "binds '_impl', which your graded code uses: it ran" in mended.metadata[MENDED][0]
    _replayed_everything_the_kernel_runs(mended)
