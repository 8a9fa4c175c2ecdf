"""Feedback tracebacks keep the student's failure message, not the grader's code."""
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
