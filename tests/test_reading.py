"""nbgrader reads a submission whole, outside the sandbox, before any step of the course runs.
`grade` leaves an over-large notebook out before that (tests/test_cli_messages.py); the exporter
the course gives nbgrader (autograder/pipeline/reading.py) refuses it wherever else nbgrader grades
with the course's configuration: here through nbgrader's API, as formgrader's Autograde button
grades. A notebook Jupyter refuses for its form alone (a byte-order mark, cells without metadata)
is read as meant; what was mended reaches the feedback through MendCopiedCells (test_mend.py)."""
import json

import nbformat
import pytest

from autograder import course
from helpers.notebook_form import read_leniently
A1 = "01_processes_threads"


def test_formgrader_refuses_an_oversized_notebook_before_reading_it(workdir_factory, monkeypatch):
    work = workdir_factory("oversized", [A1])
    notebook = work.submit("bob", A1, nbformat.read(str(course.release_notebook(A1)), 4)) / f"{A1}.ipynb"
    monkeypatch.setenv("COURSE_MAX_NOTEBOOK_MB", "0.01")  # the release is about 0.04 MB
    result = work.course.api().autograde(A1, "bob")
    assert not result["success"], result["log"][-3000:]
    assert f"{notebook} was not graded: it is 0.0" in result["log"], result["log"][-3000:]
    assert "over the 0.01 MB a notebook may have (COURSE_MAX_NOTEBOOK_MB)" in result["log"]
    assert f"--clear-output --inplace {notebook})" in result["log"]
    assert not (work.path / "autograded" / "bob" / A1).exists()


def _release_text():
    return course.release_notebook(A1).read_text(encoding="utf-8")


def test_a_sound_notebook_is_read_as_nbformat_reads_it():
    nb, said = read_leniently(_release_text())
    assert nb == nbformat.reads(_release_text(), as_version=4) and said == []


def test_a_byte_order_mark_is_read_past_and_said():
    nb, said = read_leniently("\ufeff" + _release_text())
    assert nb == nbformat.reads(_release_text(), as_version=4)
    assert len(said) == 1 and "byte-order mark" in said[0], said


def test_cells_and_a_notebook_without_metadata_are_read_with_empty_metadata():
    data = json.loads(_release_text())
    data["metadata"] = None
    data["cells"][2]["metadata"] = None
    del data["cells"][5]["metadata"]
    nb, said = read_leniently(json.dumps(data))
    assert nb.metadata == {} and nb.cells[2].metadata == {} and nb.cells[5].metadata == {}
    assert [c.source for c in nb.cells] == ["".join(c["source"]) for c in data["cells"]]
    assert said == ["the notebook and 2 cells had no metadata (edited outside JupyterLab?): read with none"]


@pytest.mark.parametrize("text", [
    pytest.param(_release_text()[:3000], id="cut-short"),
    pytest.param("\ufeff" + _release_text()[:3000], id="cut-short-with-a-mark"),
    pytest.param(json.dumps({**json.loads(_release_text()), "cells": None}), id="no-cells"),
])
def test_what_is_no_notebook_even_so_fails_as_nbformat_fails_it(text):
    with pytest.raises(Exception) as refused:
        read_leniently(text)
    with pytest.raises(type(refused.value)):
        nbformat.reads(text.lstrip("\ufeff"), as_version=4)


def test_tags_that_are_not_a_list_are_read_as_one():
    """nbclient skips the demos by `"demo" in tags`: a string is tested by substring, and `null` fails."""
    data = json.loads(_release_text())
    data["cells"][2]["metadata"]["tags"] = "demos, plots"
    data["cells"][3]["metadata"]["tags"] = None
    data["cells"][4]["metadata"]["tags"] = ["demo", 7]
    data["cells"][5]["metadata"]["tags"] = ["demo", "demo", "", "plots,figures"]
    nb, said = read_leniently(json.dumps(data))
    # A comma is the schema's to refuse: never split, so that no cell becomes a demo that nbclient
    # did not skip ("demo" in "demos, plots" tested the string; in the list it is no demo).
    assert [nb.cells[i].metadata["tags"] for i in (2, 3, 4, 5)] == [["demos; plots"], [], ["demo"],
                                                                      ["demo", "plots;figures"]]
    assert said == ["the tags of 4 cells were not a list of words: read as one"]
    nbformat.validate(nb, relax_add_props=True)  # as nbconvert checks it after each step


def _out_of_form(data):
    """The release as other tools save it: parts the schema refuses, none that grading needs."""
    data["metadata"]["kernelspec"] = {"name": "course-env"}  # JupyterLab, once that kernel is uninstalled
    data["metadata"]["language_info"] = {}
    data["cells"].insert(1, {"cell_type": "heading", "level": 2, "source": ["Old ", "title"], "metadata": {}})
    code = next(cell for cell in data["cells"] if cell["cell_type"] == "code" and "nbgrader" not in cell["metadata"])
    code["outputs"] = [{"output_type": "stream", "text": "no name\n"}]
    code["metadata"]["jupyter"] = "hidden"
    text = next(cell for cell in data["cells"] if cell["cell_type"] == "markdown")
    text["attachments"] = "figure.png"  # nbformat's own reading failed on it
    graded = [cell for cell in data["cells"] if "nbgrader" in cell["metadata"]]
    graded[0]["id"], graded[1]["id"], code["id"] = "x" * 65, "answer cell", None  # ids the schema refuses
    return data


def test_parts_out_of_form_that_grading_does_not_need_are_read_as_jupyter_writes_them():
    data = _out_of_form(json.loads(_release_text()))
    graded = next(cell for cell in data["cells"] if "nbgrader" in cell["metadata"])
    graded["metadata"]["collapsed"] = "yes, please"
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(nbformat.from_dict(json.loads(json.dumps(data))), relax_add_props=True)
    nb, said = read_leniently(json.dumps(data))
    nbformat.validate(nb, relax_add_props=True)
    assert nb.metadata.kernelspec == {"name": "course-env", "display_name": "course-env"}
    assert "language_info" not in nb.metadata
    assert nb.cells[1].cell_type == "raw" and nb.cells[1].source == "Old title"
    release = nbformat.reads(_release_text(), as_version=4)
    graded = [(c.source, c.metadata) for c in release.cells if "nbgrader" in c.metadata]
    assert [(c.source, c.metadata) for c in nb.cells if "nbgrader" in c.metadata] == graded  # collapsed: gone
    assert len(said) == 1 and "not in Jupyter's form" in said[0], said
    for words in ("display name", "'language_info'", "(a heading?) was read as text", "'jupyter'", "attachment",
                  "a cell's id was read as a new one (3 times)"):
        assert words in said[0], said
    assert all(cell.outputs == [] for cell in nb.cells if cell.cell_type == "code")  # cleared as grading does


@pytest.mark.parametrize("minor", [5, 4, 0])
def test_cell_ids_out_of_form_are_read_as_new_ones_and_the_rest_kept(minor):
    """nbformat refuses an id that is too long, has characters other than letters, digits, `-` and
    `_`, or is no string, and ids in a notebook whose version number is older than 4.5 (a tool wrote
    the older number): nothing of grading reads the id (nbgrader goes by `grade_id`)."""
    data = json.loads(_release_text())
    data["nbformat_minor"] = minor
    kept = [cell["id"] for cell in data["cells"][3:]]
    data["cells"][0]["id"], data["cells"][1]["id"], data["cells"][2]["id"] = "x" * 65, "a b/c", 7
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(nbformat.from_dict(json.loads(json.dumps(data))))
    nb, said = read_leniently(json.dumps(data))
    nbformat.validate(nb)
    ids = [cell.id for cell in nb.cells]
    assert ids[3:] == kept and len(set(ids)) == len(ids) and all(len(i) == 8 for i in ids[:3]), ids[:3]
    assert len(said) == 1 and "a cell's id was read as a new one (3 times)" in said[0], said
    assert ("read as meant (its version, 4.%d, has none)" % minor in said[0]) == (minor < 5), said


def test_a_graded_cell_of_a_kind_jupyter_does_not_have_is_left_for_nbconvert_to_refuse():
    data = json.loads(_release_text())
    graded = next(cell for cell in data["cells"] if "nbgrader" in cell["metadata"])
    graded["cell_type"] = "heading"
    nb, said = read_leniently(json.dumps(data))
    assert nb.cells[data["cells"].index(graded)].cell_type == "heading" and said == [], said
    with pytest.raises(nbformat.ValidationError):
        nbformat.validate(nb, relax_add_props=True)


def test_a_notebook_out_of_form_grades_through_nbgraders_api(workdir_factory):
    """nbconvert checks the notebook against the schema after each step: before this reading, a
    kernelspec without display_name (or empty) failed the whole submission."""
    from autograder import samples
    work = workdir_factory("out-of-form", [A1])
    notebook = work.submit("bob", A1, samples.submissions(A1)["sample_perfect"]) / f"{A1}.ipynb"
    notebook.write_text(json.dumps(_out_of_form(json.loads(notebook.read_text()))))
    result = work.course.api().autograde(A1, "bob")
    assert result["success"], result["log"][-3000:]
    assert "not in Jupyter's form" in result["log"]


def test_outputs_out_of_form_never_reach_the_schema_check():
    """Grading clears outputs first anyway; nbformat's check of an output out of form costs about
    half a millisecond each (20,000: 9 s of CPU in reading, 9 s more in each check after it)."""
    import time
    data = json.loads(_release_text())
    code = next(cell for cell in data["cells"] if cell["cell_type"] == "code" and "nbgrader" not in cell["metadata"])
    code["outputs"] = [{"output_type": "stream", "text": "no name\n"} for _ in range(20_000)]
    start = time.thread_time()
    nb, said = read_leniently(json.dumps(data))
    spent = time.thread_time() - start
    assert said == [] and all(cell.outputs == [] for cell in nb.cells if cell.cell_type == "code")
    assert spent < 3.0, f"reading took {spent:.1f} CPU-s"  # 0.1 s here; 9 s and more before


def test_a_notebook_of_too_many_cells_is_refused_before_nbformat_reads_it():
    from helpers.notebook_form import MAX_CELLS, NotebookTooLargeError
    data = json.loads(_release_text())
    data["cells"] += [{"cell_type": "markdown", "source": "", "metadata": {}}] * (MAX_CELLS + 1 - len(data["cells"]))
    with pytest.raises(NotebookTooLargeError, match=f"has {MAX_CELLS + 1} cells, more than the {MAX_CELLS}"):
        read_leniently(json.dumps(data))
    data["cells"].pop()
    assert len(read_leniently(json.dumps(data))[0].cells) == MAX_CELLS


def _v3(cells):
    return json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": ""},
                       "worksheets": [{"cells": cells, "metadata": {}}]})


def test_a_v3_notebook_is_held_to_the_same_limits_and_read():
    """v3 and v2 keep their cells in worksheets: 20,000 made-up outputs there took 44 s and 978 MB."""
    import time
    from helpers.notebook_form import MAX_CELLS, NotebookTooLargeError
    code = {"cell_type": "code", "input": "x = 1", "language": "python", "metadata": {},
            "outputs": [{"output_type": "pyout", "prompt_number": "x", "text": "a"}] * 20_000}
    start = time.thread_time()
    nb, said = read_leniently(_v3([code, {"cell_type": "markdown", "source": "# v3", "metadata": {}}]))
    assert time.thread_time() - start < 3.0
    assert [(c.cell_type, c.source) for c in nb.cells] == [("code", "x = 1"), ("markdown", "# v3")]
    assert nb.cells[0].outputs == [] and said == []
    with pytest.raises(NotebookTooLargeError, match="cells, more than the"):
        read_leniently(_v3([{"cell_type": "markdown", "source": "", "metadata": {}}] * (MAX_CELLS + 1)))


def test_a_notebook_of_millions_of_json_values_is_refused_before_it_is_read(monkeypatch):
    """3 million empty mappings in 12 MB took nbformat to 3.8 GB: more than MAX_VALUES in the file,
    or MAX_VALUES_KEPT outside the outputs, is refused; braces and commas in strings do not count.
    (Limits a hundredth of the course's here: the same rule, less to build.)"""
    from helpers import notebook_form as reading
    monkeypatch.setattr(reading, "MAX_VALUES", reading.MAX_VALUES // 100)
    monkeypatch.setattr(reading, "MAX_VALUES_KEPT", reading.MAX_VALUES_KEPT // 100)
    MAX_VALUES, MAX_VALUES_KEPT, NotebookTooLargeError = reading.MAX_VALUES, reading.MAX_VALUES_KEPT, reading.NotebookTooLargeError
    data = json.loads(_release_text())
    data["cells"][3]["metadata"]["made_up"] = [{}] * (MAX_VALUES // 2 + 1)
    with pytest.raises(NotebookTooLargeError, match="JSON values, more than"):
        read_leniently(json.dumps(data))
    data["cells"][3]["metadata"]["made_up"] = [0] * (MAX_VALUES_KEPT + 1)
    with pytest.raises(NotebookTooLargeError, match="outside its outputs"):
        read_leniently(json.dumps(data))
    data["cells"][3]["metadata"]["made_up"] = "{[," * (MAX_VALUES + 1)  # text, as printed output can be
    nb, _ = read_leniently(json.dumps(data))
    assert nb.cells[3].metadata["made_up"].startswith("{[,")


def test_display_settings_out_of_form_are_read_as_missing_at_once():
    """Mended in rounds of the schema check, 3,000 cells with five such settings took 10 s."""
    import time
    data = json.loads(_release_text())
    data["nbformat_minor"] = 4  # cells with ids in a 4.4 notebook: nbformat's closer look refused them whole
    bad = {"collapsed": None, "scrolled": 2, "name": 3, "jupyter": 4, "execution": 5}
    data["cells"] += [{"cell_type": "code", "id": f"c{i}", "metadata": dict(bad), "source": "", "outputs": [],
                       "execution_count": -1} for i in range(3000)]
    start = time.thread_time()
    nb, said = read_leniently(json.dumps(data))
    assert time.thread_time() - start < 3.0
    nbformat.validate(nb, relax_add_props=True)
    assert len(said) == 1 and "a cell's 'collapsed' was read as missing (3000 times)" in said[0], said
    assert "execution count was read as missing (3000 times)" in said[0], said
