"""Feedback tracebacks keep the student's failure message, not the grader's code."""
import re

import nbformat

from autograder.pipeline.preprocessors import HideHiddenTraceback


def test_grader_frames_and_hidden_lines_are_cut():
    tb = [
        "\x1b[0;31m----------\x1b[0m",
        "Cell \x1b[0;32mIn[9], line 7\x1b[0m\n      3 assert x\n      5 ### BEGIN HIDDEN TESTS\n      6 from autograder.hidden import check\n----> 7 check(\"b\")\n      8 ### END HIDDEN TESTS",
        "File \x1b[0;32m/course/autograder/hidden.py:160\x1b[0m, in \x1b[0;36mcheck\x1b[0m\n    158 outcomes = run(...)\n--> 160 raise AssertionError(report(...))",
        "\x1b[0;31mAssertionError\x1b[0m: b: 1 of 2 hidden checks failed\n  - b works: the result is wrong",
    ]
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="b: ...", traceback=tb)]
    cell, _ = HideHiddenTraceback().preprocess_cell(cell, {}, 0)
    text = "\n".join(cell.outputs[0].traceback)
    assert "autograder" not in text and "HIDDEN" not in text and "check(" not in text
    assert "1 of 2 hidden checks failed" in text and "assert x" in text


def test_math_in_a_students_markdown_is_typeset_in_safe_mode():
    """A student's `$\\href{javascript:...}{x}$` is math, not HTML: the sanitizer leaves it, and
    MathJax makes the link in the instructor's browser. formgrader's and the feedback's pages
    (nbgrader's templates, on nbconvert's classic one) load MathJax with its Safe extension,
    which drops javascript: links, outside classes and styles; an upgrade that loads it
    otherwise fails here."""
    import pathlib
    import re

    import nbgrader
    from nbconvert import HTMLExporter

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "$E \\href{javascript:alert(1)}{=} mc^2$")])
    html, _ = HTMLExporter(template_name="classic").from_notebook_node(nb)
    loaders = re.findall(r'<script src="([^"]*mathjax[^"]*)"', html, flags=re.I)
    assert loaders and all(re.search(r"config=[^\"&]*\bSafe\b", url) for url in loaders), loaders
    templates = pathlib.Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"
    for page in ("formgrade/index.html.j2", "feedback/index.html.j2"):
        text = (templates / page).read_text()
        assert "nbconvert/templates/classic/index.html.j2" in text and "{{ mathjax() }}" in text, page
    # The course's feedback page is nbgrader's, less nbconvert's second <body>: its head, MathJax
    # included, is nbgrader's; and it is the one the feedback step uses.
    from autograder.course import ROOT
    ours = (ROOT / "autograder" / "pipeline" / "feedback_page.html.j2").read_text()
    assert "{%- extends 'index.html.j2' -%}" in ours and "block header" not in ours and "mathjax" not in ours
    from autograder import course
    assert course.load_config().GenerateFeedback.HTMLExporter.template_file.endswith("feedback_page.html.j2")


def _graded_cell(grade_id, points, score, *errors):
    cell = nbformat.v4.new_code_cell("x")
    cell.metadata.nbgrader = {"grade": True, "solution": False, "grade_id": grade_id,
                              "points": points, "score": score}
    cell.outputs = [nbformat.v4.new_output("error", ename=n, evalue=v, traceback=[f"{n}: {v}"])
                    for n, v in errors]
    return cell


def _answer_cell(grade_id, *errors):
    cell = _graded_cell(grade_id, 0, 0, *errors)
    cell.metadata.nbgrader = {"grade": False, "solution": True, "grade_id": grade_id}
    return cell


def test_the_results_table_says_what_happened_to_each_exercise():
    """The feedback page opens with each exercise's points and what happened, in notebook order:
    nbgrader's own list says only "Test cell (Score: 0.0 / 3.0)" (a student review had to read
    every cell to find where the points went)."""
    from autograder.pipeline import feedback_page
    from autograder.pipeline.verify import UNDECIDED

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 03 · Title"),
        _graded_cell("test_done", 2, 2),
        _graded_cell("test_blank", 2, 0, ("NotImplementedError", "")),
        _graded_cell("test_hidden", 3, 0, ("HiddenCheckFailed", "a test cell earns ...:\nhidden: 1 of 3 hidden checks failed\n  ✗ x")),
        _graded_cell("test_visible", 2, 0, ("AssertionError", "every index exactly once"),
                     ("HiddenCheckFailed", "found too")),
        _graded_cell("test_unsure", 2, 0, (UNDECIDED, "could not decide")),
        _answer_cell("CONSTANT", ("NotImplementedError", "")),  # the test cell then meets a NameError
        _graded_cell("test_CONSTANT", 1, 0, ("NameError", "name 'CONSTANT' is not defined")),
    ])
    nb.cells[6].metadata.nbgrader["comment"] = "No response."  # nbgrader's, on an answer left as released
    nb, _ = feedback_page.FeedbackSummary().preprocess(nb, {})
    assert "Your results" in nb.cells[0].source and nb.cells[1].source == "# 03 · Title"
    assert nb.cells[7].metadata.nbgrader["comment"] == feedback_page.UNANSWERED
    said = {g.removeprefix("test_"): (s, p, status) for g, s, p, status in feedback_page.rows(nb)}
    assert list(said) == ["done", "blank", "hidden", "visible", "unsure", "CONSTANT"]
    assert said["CONSTANT"][2].startswith("not answered")
    assert said["done"] == (2, 2, "✓ passed")
    assert said["blank"][2].startswith("not answered")
    assert said["hidden"][2] == "✗ hidden checks failed (1 of 3): x"
    assert said["visible"][2] == ("✗ AssertionError: every index exactly once "
                                  "(and hidden checks failed: the cell says what they found)")
    assert "person" in said["unsure"][2]
    assert '<a href="#test_visible">visible</a>' in nb.cells[0].source


def test_a_students_exception_cannot_put_markup_or_math_in_the_results_table():
    """The table quotes an exception's name and message, which the student's code chooses: every
    character of them but letters, digits and spaces becomes a character reference, so nothing of
    them becomes a tag, a link, markdown or math on the page (an instructor opens it too)."""
    import nbconvert

    from autograder.pipeline import feedback_page

    attack = '<img src=x onerror=alert(1)> [a](javascript:alert(2)) $\\href{javascript:alert(3)}{x}$ **b**'
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# 01 · Title"),
        _graded_cell("test_x", 1, 0, ("ValueError", attack)),
        _graded_cell('test_y"><script>alert(4)</script>', 1, 0, ("ValueError", "plain")),
    ])
    nb, _ = feedback_page.FeedbackSummary().preprocess(nb, {})
    table = nb.cells[0].source
    for piece in ("<img", "<script", "javascript:", "](", "$", "**", 'href="#test_y'):
        assert piece not in table, piece
    html, _ = nbconvert.HTMLExporter(template_name="classic").from_notebook_node(
        nbformat.v4.new_notebook(cells=[nb.cells[0]]))
    assert "<img" not in html and "<script>alert" not in html and 'href="javascript' not in html
    # The page decodes the references before MathJax reads the text: the table must be one it skips.
    assert re.search(r'<table class="[^"]*\btex2jax_ignore\b', html), "MathJax would typeset the student's $...$"
    assert "onerror=alert(1)" in html.replace("&#61;", "=").replace("&#40;", "(").replace("&#41;", ")")


def test_the_graded_cells_say_the_judges_verdict_and_keep_its_findings():
    """While grading, the kernel's line for a hidden block promises the failures below; the grader
    puts the judge's verdict in its place (with nothing below, a pass read like a lost list). The
    hidden checks' findings follow a failed visible assert too (they often say why it failed), but
    not in the cell of an exercise not answered yet."""
    from autograder import hidden
    from autograder.pipeline.preprocessors import ALL_OR_NOTHING, VerifyHiddenChecks

    def test_cell(name, *errors):
        cell = _graded_cell(f"test_{name}", 1, 0, *errors)
        cell.source = f'assert x\n### BEGIN HIDDEN TESTS\nfrom autograder.hidden import check\ncheck("{name}")\n### END HIDDEN TESTS'
        if not errors:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                   text="✓ visible\n" + hidden.PENDING.format(exercise=name) + "\n")]
        return cell

    failing = "1 of 3 hidden checks failed\n  ✗ a check\n    what it found"
    verdicts = {"cpu_info": (True, "cpu_info: all 3 hidden checks passed", False),
                "run_in_child": (False, f"run_in_child: {failing}", False),
                "visible_appends": (False, f"visible_appends: {failing}", False),
                "creation_cost": (False, "creation_cost: the answer cell raised NotImplementedError: ", False)}

    class Run:
        seconds = 0.0

        def verdicts(self):
            return verdicts

    nb = nbformat.v4.new_notebook(cells=[
        test_cell("cpu_info"), test_cell("run_in_child"),
        test_cell("visible_appends", ("AssertionError", "the list stayed empty")),
        test_cell("creation_cost", ("NameError", "name 'creation_cost' is not defined"))])
    nb, _ = VerifyHiddenChecks().preprocess(nb, {"course_judge": Run()})
    passed, hidden_only, visible_first, unanswered = nb.cells
    assert passed.outputs[0].text == "✓ visible\ncpu_info: all 3 hidden checks passed\n"
    assert len(passed.outputs) == 1
    assert hidden_only.outputs[0].text == "✓ visible\nrun_in_child: 1 of 3 hidden checks failed (below)\n"
    assert hidden_only.outputs[1].ename == "HiddenCheckFailed"
    assert hidden_only.outputs[1].evalue.startswith(ALL_OR_NOTHING) and "what it found" in hidden_only.outputs[1].evalue
    assert [o.ename for o in visible_first.outputs] == ["AssertionError", "HiddenCheckFailed"]
    assert "what it found" in visible_first.outputs[1].evalue
    assert [o.ename for o in unanswered.outputs] == ["NameError"]


def test_feedback_tracebacks_name_no_path_of_the_grading_machine():
    """A traceback through the course's helpers, the standard library and the installed packages
    shows them as helpers/..., <python>/... and <site-packages>/...: shorter lines, and nothing of
    where the grader keeps its files. IPython's note on a frame the helpers hide cannot be read as
    a hidden check."""
    import sysconfig

    from autograder import course

    tb = [f"File {course.ROOT}/helpers/workers.py:63, in fail_on(x)",
          f"File {sysconfig.get_paths()['stdlib']}/multiprocessing/pool.py:125, in worker",
          f"File {sysconfig.get_paths()['purelib']}/torch/nn/modules/module.py:1, in _call_impl",
          "    [... skipping hidden 1 frame]"]
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="cannot process 3", traceback=tb)]
    cell, _ = HideHiddenTraceback().preprocess_cell(cell, {}, 0)
    assert cell.outputs[0].traceback == [
        "File helpers/workers.py:63, in fail_on(x)", "File <python>/multiprocessing/pool.py:125, in worker",
        "File <site-packages>/torch/nn/modules/module.py:1, in _call_impl",
        "    [... 1 frame of the course's helpers left out]"]
