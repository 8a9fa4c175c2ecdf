"""The clean-process verifier's own parts: what it replays, and what counts as tampering."""
import subprocess
import sys
import textwrap

from autograder import course, notebooks
from autograder.grade import verify


def test_teaching_cells_contribute_only_definitions():
    code = verify.definitions_only("%matplotlib inline\nimport os\nx = heavy_demo()\ndef f():\n    return 1\n")
    assert "import os" in code and "def f" in code
    assert "heavy_demo" not in code and "matplotlib" not in code


def test_payload_takes_answers_and_added_cells_from_the_submission():
    a = "01_processes_threads"
    source = notebooks.read(course.source_notebook(a))
    submission = notebooks.read(course.source_notebook(a))  # test cells as restored for grading
    import nbformat
    submission.cells.insert(3, nbformat.v4.new_code_cell("HELPER = 1"))
    payload = verify.payload_for(submission, source)
    labels = [label for label, _ in payload["student"]]
    assert labels[0].startswith("added cell")
    assert set(course.contract()[a]) <= set(labels)
    assert {e for _, e in payload["exercises"]} == set(course.contract()[a])


def _run(script):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                         cwd=course.ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


def test_library_laziness_is_not_tampering_but_student_patches_are():
    lines = _run('''
        from autograder.grade import verify
        import numpy as np, torch, sys
        before = verify._snapshot()
        model = torch.nn.Linear(2, 2)
        torch.optim.SGD(model.parameters(), lr=0.1).step()   # torch wraps Optimizer.step lazily
        import torch._dynamo                                  # and re-wraps manual_seed
        print(verify._changed(before))
        np.allclose = lambda *a, **k: True
        print(verify._changed(before))
        np.allclose = before[("numpy", "allclose")]
        np.array_equal = np.isclose                            # a swap of two library functions
        print(verify._changed(before))
        np.array_equal = before[("numpy", "array_equal")]
        sys.settrace(lambda *a: None)
        print(verify._changed(before))
    ''')
    assert lines == ["[]", "['numpy.allclose']", "['numpy.array_equal']", "['sys.settrace/sys.setprofile']"]
