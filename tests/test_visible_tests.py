"""Every approach a notebook offers passes its visible tests, not only its hidden checks.

For each assignment, one clean process replays the notebook as grading does
(the course's non-demo cells and the reference answers, in order), then, for
every correct ALTERNATIVE answer in the catalogue, runs it in place of the
reference and executes the visible part of its exercise's test cells.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from autograder import course, notebooks, samples
from autograder.pipeline import verify

CHILD = textwrap.dedent('''
    def _main():  # local names only: the notebook's cells share this module's globals
        import json, os, sys
        from autograder.sandbox import student as student_side
        spec = json.load(sys.stdin)
        sys.path.append(spec["folder"])
        namespace = sys.modules["__main__"].__dict__
        namespace["get_ipython"] = lambda: student_side.QuietShell()
        for label, code in spec["cells"]:
            try:
                student_side.run_cell(namespace, label, code)
            except BaseException as err:
                print(f"{label} raised {err!r}", file=sys.stderr)
        results = []
        for exercise, label, answer, reference, tests in spec["alternatives"]:
            student_side.run_cell(namespace, exercise, answer)
            for grade_id, code in tests:
                try:
                    student_side.run_cell(namespace, grade_id, code)
                    results.append([label, grade_id, True, ""])
                except BaseException as err:
                    results.append([label, grade_id, False, f"{type(err).__name__}: {err}"])
            student_side.run_cell(namespace, exercise, reference)
        with open(spec["out"], "w") as out:
            json.dump(results, out)
        sys.stdout.flush()
        os._exit(0)
    _main()
''')


def _spec(assignment, out):
    source = notebooks.read(course.source_notebook(assignment))
    answers = {gid: notebooks.solution_code(src) for gid, src in notebooks.answer_cells(source).items()}
    tests = notebooks.test_cells(source)
    alternatives = []
    for exercise, entries in samples.catalogue(assignment).ALTERNATIVE.items():
        visible = [(gid, notebooks.visible_code(src)) for gid, src in tests.items()
                   if gid.startswith(f"test_{exercise}")]
        for label, code in entries.items():
            alternatives.append((exercise, label, code, answers[exercise], visible))
    cells = [(label, answers.get(label, code)) for label, code in verify.payload_for(source, source)["cells"]]
    return {"cells": cells, "alternatives": alternatives, "out": str(out),
            "folder": str(course.SOURCE / assignment)}


def test_alternatives_pass_the_visible_tests(assignment, tmp_path, short_tmp):
    spec = _spec(assignment, tmp_path / "results.json")
    if not spec["alternatives"]:
        pytest.skip(f"{assignment} catalogues no alternative answer")
    # Output goes to a file, not a pipe: idle joblib (loky) workers outlive the child for
    # minutes and would hold a pipe open; they are stopped with the child's session.
    log = tmp_path / "child.log"
    with open(log, "w") as out:
        # It ends with os._exit: what its pools and forkservers leave in TMPDIR goes with short_tmp.
        child = subprocess.Popen([sys.executable, "-P", "-c", CHILD], stdin=subprocess.PIPE, stdout=out,
                                 stderr=subprocess.STDOUT, text=True, cwd=tmp_path, start_new_session=True,
                                 env={**os.environ, "TMPDIR": str(short_tmp)})
        try:
            child.communicate(json.dumps(spec), timeout=600)
        finally:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait()
    assert child.returncode == 0, log.read_text()[-3000:]
    failed = [f"{label} / {grade_id}: {message}"
              for label, grade_id, passed, message in json.loads((tmp_path / "results.json").read_text())
              if not passed]
    assert not failed, "correct alternatives fail a visible test:\n" + "\n".join(failed)
