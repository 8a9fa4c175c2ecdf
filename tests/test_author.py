"""The notebooks' text form (jupytext's percent format, autograder/author.py) loses nothing;
`author run` runs every cell of a notebook and says which raised."""
import os
import shutil

import nbformat
import pytest

from autograder import author, course, notebooks


def test_every_source_notebook_survives_the_text_form(assignment):
    nb = notebooks.read(course.source_notebook(assignment))
    text = author.to_text(nb)
    assert 'answer="' in text and 'test="' in text and 'tags=["demo"]' in text
    assert author.from_text(text, nb, name=assignment) == nb
    fresh = author.from_text(text, None, name=assignment)  # no notebook to take ids from
    assert [(c.cell_type, c.source, c.metadata) for c in fresh.cells] == \
        [(c.cell_type, c.source, c.metadata) for c in nb.cells]
    graded = [c.id for c in fresh.cells if "nbgrader" in c.metadata]
    assert graded == [c.metadata["nbgrader"]["grade_id"] for c in fresh.cells if "nbgrader" in c.metadata]
    assert len({c.id for c in fresh.cells}) == len(fresh.cells)


def test_export_then_build_rewrites_the_same_file(tmp_path):
    a = course.assignments()[0]
    target = tmp_path / f"{a}.ipynb"
    shutil.copy(course.source_notebook(a), target)
    assert author.main(["export", str(target), str(tmp_path / "draft.py")]) == 0
    assert author.main(["build", str(tmp_path / "draft.py"), str(target)]) == 0
    assert target.read_bytes() == course.source_notebook(a).read_bytes()


def test_cells_keep_their_ids_when_cells_are_inserted_before_them():
    """jupytext pairs cells in order: without author's own pairing by text, a cell inserted
    mid-notebook took its neighbour's id, and each later cell the next one's (seen in 02)."""
    a = course.assignments()[1]
    nb = notebooks.read(course.source_notebook(a))
    text = author.to_text(nb)
    middle = text.index("# %% [markdown]", len(text) // 2)
    inserted = "# %% [markdown]\n# A new paragraph.\n\n# %%\nprint('a new cell')\n\n"
    edited = author.from_text(text[:middle] + inserted + text[middle:], nb, name=a)
    old_ids = [c.id for c in nb.cells]
    new_cells = [c for c in edited.cells if c.id not in old_ids]
    assert [c.source for c in new_cells] == ["A new paragraph.", "print('a new cell')"]
    assert [c.id for c in edited.cells if c.id in old_ids] == old_ids
    assert len({c.id for c in edited.cells}) == len(edited.cells)
    again = author.from_text(text[:middle] + inserted + text[middle:], nb, name=a)
    assert [c.id for c in again.cells] == [c.id for c in edited.cells]  # reproducible


def test_short_kinds_become_nbgrader_metadata():
    text = ('# %% answer="double"\ndef double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n'
            '    ### END SOLUTION\n\n# %% test="test_double" points=2\nassert double(2) == 4\n\n'
            '# %% [markdown] written="why" points=1\n# YOUR ANSWER HERE\n')
    nb = author.from_text(text, name="demo")
    answer, test, written = (c.metadata["nbgrader"] for c in nb.cells)
    assert notebooks.is_answer_cell(nb.cells[0]) and notebooks.is_test_cell(nb.cells[1])
    assert test["points"] == 2.0 and test["locked"] and written["solution"] and written["grade"]
    assert [c.id for c in nb.cells[:2]] == ["double", "test_double"]
    with pytest.raises(ValueError, match="needs points"):
        author.from_text('# %% test="test_double"\nassert True\n')
    with pytest.raises(ValueError, match="must be markdown"):
        author.from_text('# %% written="why" points=1\nx = 1\n')


def test_a_new_assignment_starts_from_the_template(tmp_path):
    """`author new` writes a notebook that the template check passes, as the next assignment of
    the course, with the exercise asked for in an answer cell and its test cell; it builds back
    from its text form unchanged."""
    from autograder import template

    source = tmp_path / "source"
    shutil.copytree(course.source_notebook(course.assignments()[-1]).parent, source / course.assignments()[-1])
    number = int(course.assignments()[-1][:2]) + 1
    name = f"{number:02d}_gpu_kernels"
    path = author.new_assignment(name, "GPU kernels", "vector_add", source_root=source)
    nb = notebooks.read(path)
    assert template.problems(nb, number, number) == []
    assert notebooks.answer_cells(nb).keys() == {"vector_add"}
    assert list(notebooks.test_cells(nb)) == ["test_vector_add"]
    assert author.from_text(author.to_text(nb), nb, name=name) == nb
    with pytest.raises(ValueError, match="exists"):
        author.new_assignment(name, "again", "f", source_root=source)
    with pytest.raises(ValueError, match="exists already"):
        author.new_assignment(f"{number:02d}_other_name", "again", "f", source_root=source)
    with pytest.raises(ValueError, match="NN_words"):
        author.new_assignment("gpu-kernels", "GPU kernels", "f", source_root=source)
    with pytest.raises(ValueError, match="Python name"):
        author.new_assignment(f"{number + 1:02d}_more", "More", "vector-add", source_root=source)


def test_a_new_assignment_before_another_points_to_it(tmp_path):
    source = tmp_path / "source"
    last = course.assignments()[-1]
    shutil.copytree(course.source_notebook(last).parent, source / last)
    number = int(last[:2]) - 1
    path = author.new_assignment(f"{number:02d}_inserted", "Inserted", "f", source_root=source)
    summary = notebooks.read(path).cells[-1].source
    assert f"**Next:** *{last[:2]} · {notebooks.read(course.source_notebook(last)).cells[0].source.split(' · ', 1)[1].splitlines()[0]}*" in summary


def test_samples_of_an_assignment_without_a_catalogue_yet(monkeypatch, capsys, tmp_path):
    """An assignment started with `author new` has no answer catalogue until step 4 of the guide:
    `samples` (and so bin/main) stopped on a LookupError for the whole course. It now writes the
    perfect and the blank student of it, and says why there is no partial one."""
    import argparse

    from autograder import samples

    first = course.assignments()[0]
    monkeypatch.setattr(samples, "has_catalogue", lambda assignment: assignment != first)
    assert set(samples.submissions(first)) == {"sample_perfect", "sample_blank"}
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    assert samples.main(argparse.Namespace(assignments=[first])) == 0
    assert "has no answer catalogue yet" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "submitted").iterdir()) == ["sample_blank", "sample_perfect"]
    monkeypatch.undo()
    assert samples.has_catalogue(first) and set(samples.submissions(first)) == set(samples.STUDENTS)


def test_the_author_verb_answers_help_and_names_a_missing_file(capsys, tmp_path):
    """`author --help` showed one argument called "rest", and `author export --help` ended in a
    FileNotFoundError for '--help' (adoption review)."""
    from autograder import cli

    for argv in (["author", "--help"], ["author", "export", "--help"], ["author", "new", "--help"]):
        with pytest.raises(SystemExit) as done:
            cli.main(argv)
        assert done.value.code == 0, argv
    said = capsys.readouterr().out
    assert "{export,build,new,run}" in said and "notebook" in said and "exercise" in said, said
    assert cli.main(["author", "export", str(tmp_path / "nope.ipynb")]) == 2
    assert "no file" in capsys.readouterr().err
    assert cli.main(["author", "build", str(tmp_path / "nope.py"), str(tmp_path / "out.ipynb")]) == 2


def test_run_reports_each_cell_that_raised_under_the_start_method_asked_for(tmp_path, monkeypatch):
    """`author run`: every cell runs, a cell that raises is reported and the next still runs, the
    kernel and the processes it starts take the start method asked for, the notebook's own folder
    is left as it was, and the executed notebook is written where asked. The environment's own
    sitecustomize still runs (before, the start method's took its place)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SITE_MARK'] = 'kept'\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    folder = tmp_path / "nb"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import multiprocessing, os\n"
                                          "print(multiprocessing.get_start_method(), os.environ.get('SITE_MARK'))"),
                nbformat.v4.new_code_cell("open('left.txt', 'w').write('x')\nraise ValueError('on purpose')"),
                nbformat.v4.new_code_cell("import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', "
                                          "'import multiprocessing; print(multiprocessing.get_start_method())'], "
                                          "capture_output=True, text=True).stdout.strip())")]
    nbformat.write(nb, str(folder / "probe.ipynb"))
    seconds, raised = author.run_notebook(folder / "probe.ipynb", "spawn", out=tmp_path / "out")
    assert seconds > 0
    assert raised == [(1, None, "ValueError: on purpose")]
    ran = nbformat.read(str(tmp_path / "out" / "probe.ipynb"), as_version=4)
    printed = ["".join(o.get("text", "")) for c in ran.cells for o in c.outputs if o.output_type == "stream"]
    assert printed == ["spawn kept\n", "spawn\n"], printed   # the kernel's and a process it started
    assert sorted(p.name for p in folder.iterdir()) == ["probe.ipynb"]
    assert (tmp_path / "out" / "probe.terminal.txt").is_file()  # the kernel's own terminal output


def test_run_names_an_unknown_assignment(capsys):
    assert author.run(["99_no_such_assignment"]) == 2
    assert "no assignment 99_no_such_assignment" in capsys.readouterr().err


def test_run_reports_a_cell_that_ran_out_of_time(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("import time\ntime.sleep(60)"),
                nbformat.v4.new_code_cell("print('never')")]
    (tmp_path / "nb").mkdir()
    nbformat.write(nb, str(tmp_path / "nb" / "slow.ipynb"))
    seconds, raised = author.run_notebook(tmp_path / "nb" / "slow.ipynb", cell_timeout=3)
    assert seconds < 50
    assert [(index, error.split(":")[0]) for index, _, error in raised] == [(1, "CellTimeoutError")]


def test_run_exits_with_1_and_names_the_cell_when_one_raised(monkeypatch, capsys):
    a = course.assignments()[0]
    monkeypatch.setattr(author, "run_notebook", lambda path, method, out: (2.0, [(7, "test_x", "ValueError: v")]))
    assert author.run([a], "forkserver") == 1
    said = capsys.readouterr().out
    assert f"{a} (forkserver): every cell in 2 s, 1 cell raised" in said and "cell 7 (test_x): ValueError: v" in said


def test_a_mistyped_build_target_writes_nothing_and_release_names_a_stray_notebook(tmp_path, monkeypatch, capsys):
    """`author build` to a misspelt path wrote a second notebook beside the assignment's; the next
    release failed in nbgrader with a traceback that did not name it, and took the assignment's
    release/ folder away. build refuses such a path now, naming the close one; release names a
    notebook beside the assignment's before nbgrader runs."""
    from autograder import release

    a = course.assignments()[0]
    folder = tmp_path / a
    folder.mkdir()
    shutil.copy(course.source_notebook(a), folder / f"{a}.ipynb")
    assert author.main(["export", str(folder / f"{a}.ipynb"), str(tmp_path / "draft.py")]) == 0
    typo = folder / f"{a[:-1]}.ipynb"
    assert author.main(["build", str(tmp_path / "draft.py"), str(typo)]) == 2
    assert f"did you mean {folder / f'{a}.ipynb'}?" in capsys.readouterr().err and not typo.exists()
    typo.write_text("{}")  # as before the fix
    monkeypatch.setattr(course, "SOURCE", tmp_path)
    with pytest.raises(SystemExit, match=f"holds {typo.name} beside {a}.ipynb"):
        release.generate([a], release_dir=tmp_path / "release")


def test_export_over_a_draft_with_edits_keeps_it(tmp_path, capsys):
    """`author export` replaced a draft whose edits were not built back yet, without a word."""
    a = course.assignments()[0]
    draft = tmp_path / "draft.py"
    draft.write_text("# my edits, not built back yet\n")
    assert author.main(["export", str(course.source_notebook(a)), str(draft)]) == 0
    assert (tmp_path / "draft.py.bak").read_text() == "# my edits, not built back yet\n"
    assert "now " + str(tmp_path / "draft.py.bak") in capsys.readouterr().out
    assert author.main(["export", str(course.source_notebook(a)), str(draft)]) == 0  # the same text: no backup
    assert (tmp_path / "draft.py.bak").read_text() == "# my edits, not built back yet\n"
