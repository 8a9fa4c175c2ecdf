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
