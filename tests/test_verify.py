"""What the judge replays, and what counts as tampering in the student's process."""
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autograder import course, notebooks
from autograder.pipeline import verify


def _notebook(*cells):
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _answer(grade_id, source):
    import nbformat
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": True, "grade": False, "locked": False,
                                 "schema_version": 3}
    return cell


def test_replay_runs_what_the_kernel_runs_as_it_runs_it():
    """The student's process replays the submission's code cells with the submission's text, a
    teaching cell the student edited too, and leaves out what the kernel leaves out: the cells
    tagged demo (by the submission's tags, whatever their ids), and the test cells, whose places
    it marks. (It replayed teaching cells as source/ has them, and chose demos by cell id: an answer
    whose imports moved into the top cell failed its hidden checks; a notebook whose cell ids an
    editor renewed had every demo replayed.)"""
    import nbformat
    setup = nbformat.v4.new_code_cell("CONTEXT = 'spawn'")
    demo = nbformat.v4.new_code_cell("slow_plot()")
    demo.metadata["tags"] = ["demo"]
    test = nbformat.v4.new_code_cell('assert f()\n### BEGIN HIDDEN TESTS\ncheck("cpu_info")\n### END HIDDEN TESTS')
    test.metadata["nbgrader"] = {"grade_id": "test_f", "grade": True, "solution": False, "locked": True,
                                 "points": 1, "schema_version": 3}
    source = _notebook(setup, demo, _answer("f", "def f(): return CONTEXT"), test)
    submission = _notebook(*(nbformat.from_dict(c) for c in source.cells))
    submission.cells[0].source = "import os\nCONTEXT = 'edited by the student'"
    submission.cells[2].source = "def f(): return CONTEXT * 2"
    for cell in submission.cells:
        cell["id"] = "renewed-" + cell["id"]  # as an editor that makes ids anew
    payload = verify.payload_for(submission, source)
    assert payload["cells"] == [(f"added cell {submission.cells[0]['id']}", "import os\nCONTEXT = 'edited by the student'"),
                                ("f", "def f(): return CONTEXT * 2"), ("test cell test_f", {verify.KEEP: ["cpu_info"]})]
    submission.cells[1].metadata["tags"] = []  # a demo the student untagged runs in the kernel: here too
    assert "slow_plot()" in [code for _, code in verify.payload_for(submission, source)["cells"]]


def test_the_checks_get_the_exercise_as_its_test_cell_saw_it(tmp_path):
    """A copy of the answer's stub left at the end of the notebook (or a variant tried there)
    redefines the function after its test cell ran: the kernel's test passed on the answer, and
    the checks, after the whole replay, met the stub. They now get what the test cell's place saw."""
    reference = notebooks.answer_cells(notebooks.read(course.source_notebook("01_processes_threads")))["cpu_info"]
    stub = "def cpu_info(cgroup_root='/sys/fs/cgroup'):\n    raise NotImplementedError()\n"
    exercises = [("01_processes_threads", "cpu_info")]
    cells = [("cpu_info", notebooks.solution_code(reference)), ("test cell test_cpu_info", {verify.KEEP: ["cpu_info"]}),
             ("added cell copy", stub)]
    passed, report, _ = verify.verify({"cells": cells, "exercises": exercises}, str(tmp_path))["cpu_info"]
    assert passed, report
    # ... and a stub above the test cell is what the test saw: it fails.
    passed, report, undecided = verify.verify({"cells": [cells[0], cells[2], cells[1]], "exercises": exercises},
                                              str(tmp_path))["cpu_info"]
    assert not passed and not undecided and "NotImplementedError" in report, report


def test_an_answer_under_time_that_displays_is_judged_as_the_kernel_ran_it(tmp_path):
    """The kernel defines an answer cell run under `%%time` and calls `display` without an import;
    the student's process did neither (the stand-in's magics did nothing, `display` was undefined),
    and every check of the exercise failed: 0/8 on 01 with either in each answer cell."""
    reference = notebooks.answer_cells(notebooks.read(course.source_notebook("01_processes_threads")))["cpu_info"]
    answer = "%%time\ndisplay('my answer below')\n" + notebooks.solution_code(reference)
    cells = [("cpu_info", answer), ("test cell test_cpu_info", {verify.KEEP: ["cpu_info"]})]
    passed, report, _ = verify.verify({"cells": cells, "exercises": [("01_processes_threads", "cpu_info")]},
                                      str(tmp_path))["cpu_info"]
    assert passed, report


def test_payload_takes_answers_and_added_cells_from_the_submission():
    a = "01_processes_threads"
    source = notebooks.read(course.source_notebook(a))
    submission = notebooks.read(course.source_notebook(a))  # test cells as restored for grading
    import nbformat
    submission.cells.insert(3, nbformat.v4.new_code_cell("HELPER = 1"))
    payload = verify.payload_for(submission, source)
    labels = [label for label, _ in payload["cells"]]
    assert any(label.startswith("added cell") for label in labels)
    assert set(course.contract()[a]) <= set(labels)
    assert {e for _, e in payload["exercises"]} == set(course.contract()[a])


def _run(script):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                         cwd=course.ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


def test_library_laziness_is_not_tampering_but_student_patches_are():
    lines = _run('''
        from autograder.sandbox import student as student_side
        import numpy as np, torch, sys
        before = student_side.snapshot()
        model = torch.nn.Linear(2, 2)
        torch.optim.SGD(model.parameters(), lr=0.1).step()   # torch wraps Optimizer.step lazily
        import torch._dynamo                                  # and re-wraps manual_seed
        print(student_side.changed(before))
        np.allclose = lambda *a, **k: True
        print(student_side.changed(before))
        np.allclose = before[("numpy", "allclose")]
        np.array_equal = np.isclose                            # a swap of two library functions
        print(student_side.changed(before))
        np.array_equal = before[("numpy", "array_equal")]
        sys.settrace(lambda *a: None)
        print(student_side.changed(before))
        sys.settrace(None)
        # A cell's code is named "<label>": from a trusted folder (a `%cd` into helpers/) it must
        # not pass for the course's own.
        import os, helpers
        os.chdir(os.path.dirname(helpers.__file__))
        exec(compile("import numpy as np\\nnp.allclose = lambda *a, **k: True", "<cpu_info>", "exec"), {})
        print(student_side.changed(before))
    ''')
    assert lines == ["[]", "['numpy.allclose']", "['numpy.array_equal']", "['sys.settrace/sys.setprofile']",
                     "['numpy.allclose']"]


def test_a_special_method_added_to_a_library_class_is_tampering():
    """A name the snapshot never saw is looked at too, where it matters: a __getattribute__ put on
    torch.Tensor answers every attribute read of every tensor (a check's own reads in the student's
    process too), sys.gettrace replaced or not; a method of the student's added under another
    name, and the special methods of classes a library makes after the snapshot, are not."""
    lines = _run('''
        from autograder.sandbox import student as student_side
        import sys, torch
        before = student_side.snapshot()
        torch.nn.Module.describe = lambda self: "a helper"         # a name of the student's: harmless
        import torch.distributed.fsdp                              # a library's new classes
        print(student_side.changed(before))
        torch.Tensor.__getattribute__ = lambda self, name: torch._C.TensorBase.__getattribute__(self, name)
        sys.gettrace = lambda: None
        print(student_side.changed(before))
    ''')
    assert lines == ["[]", "['torch.Tensor.__getattribute__']"]


def test_the_quick_look_finds_what_the_full_look_finds():
    """changed() passes over a module whose objects are all the same at C speed; for every kind
    of change it reports what looking at every object (a plain snapshot dict) reports."""
    lines = _run('''
        import sys, types
        import numpy as np, torch, helpers.workers
        from autograder.sandbox import student as student_side
        before = student_side.snapshot()
        full = dict(before)  # no fingerprints: every object looked at

        def both(modules=None):
            quick, slow = student_side.changed(before, modules), student_side.changed(full, modules)
            print(quick == slow, quick)

        both()
        torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1).step()  # library laziness
        import torch._dynamo
        both()
        np.allclose = lambda *a, **k: True                       # a function replaced
        both(); both(["numpy"]); both(["builtins", "torch"])
        np.allclose = before[("numpy", "allclose")]
        square = helpers.workers.square
        square.__code__ = (lambda x: 0).__code__                 # its code swapped in place
        both()
        square.__code__ = before[("helpers.workers", "square", "__code__")]
        call = torch.nn.Module.__call__
        torch.nn.Module.__call__ = lambda self, *a, **k: None     # a method of a class
        both()
        torch.nn.Module.__call__ = call
        helpers.workers.extra = lambda: None                     # a new name: not in the snapshot
        del helpers.workers.extra
        np.array_equal, np.isclose = np.isclose, np.array_equal   # two library functions swapped
        both()
        np.array_equal, np.isclose = np.isclose, np.array_equal
        real = sys.modules["helpers.workers"]
        fake = types.ModuleType("helpers.workers")
        fake.__dict__.update(vars(real))
        fake.square = lambda x: 0
        sys.modules["helpers.workers"] = fake                    # the module object replaced
        both()
        sys.modules["helpers.workers"] = real
        both()
    ''')
    assert lines == ["True []", "True []", "True ['numpy.allclose']", "True ['numpy.allclose']", "True []",
                     "True ['helpers.workers.square']",
                     "True " + lines[6].split(" ", 1)[1],
                     "True ['numpy.array_equal', 'numpy.isclose']",
                     "True ['helpers.workers.square']", "True []"], lines
    assert "torch.nn.Module.__call__" in lines[6]


def test_a_patch_made_while_checked_voids_every_verdict(tmp_path):
    """Between two exercises the judge looks only at what the checks use; once they are all
    done it looks at everything, and a replacement found then voids every verdict of the run."""
    from autograder.pipeline.judge import preload_for
    assignment = "05_multiprocessing_pools"
    assert "statistics" not in preload_for([assignment]), "pick a module the checks do not use"
    answer = notebooks.answer_cells(notebooks.read(course.source_notebook(assignment)))["amdahl_speedup"]
    patch = "import statistics\nstatistics.mean = lambda data: 0  # a library function, replaced\n"
    tampering = answer.replace("    ### BEGIN SOLUTION\n", "    ### BEGIN SOLUTION\n" + textwrap.indent(patch, "    "))
    payload = {"cells": [("amdahl_speedup", tampering)], "exercises": [(assignment, "amdahl_speedup")]}
    honest = verify.verify({**payload, "cells": [("amdahl_speedup", answer)]}, str(tmp_path))
    assert honest["amdahl_speedup"][0], honest["amdahl_speedup"][1]
    passed, report, _ = verify.verify(payload, str(tmp_path))["amdahl_speedup"]
    assert not passed and "statistics.mean" in report, report


def test_answer_using_a_teaching_cells_value_passes(tmp_path):
    """An answer that relies on what a course cell just above it defines passes in the
    clean re-run, as it does when the student runs the notebook top to bottom."""
    payload = {
        "cells": [("course cell a", "from helpers import workers\nCONTEXT = workers.mp_context()"),
                  ("run_in_child", "def run_in_child(fn, *args):\n"
                                   "    with CONTEXT.Pool(1) as pool:\n"
                                   "        out = pool.apply(workers.traced, (fn, *args))\n"
                                   "    return out['pid'], out['result']\n")],
        "exercises": [("01_processes_threads", "run_in_child")],
    }
    verdicts = verify.verify(payload, str(tmp_path))
    passed, report, undecided = verdicts["run_in_child"]
    assert passed, report


def test_copies_left_by_killed_grading_processes_are_removed(tmp_path, monkeypatch):
    """A grading process killed mid-submission (a Dask worker lost, SIGKILL) never cleans up
    its judge's copy of the submission, nor its kernel's connection file: the next grading
    process on the machine removes those whose process is gone, once they are old; a live
    process's, a fresh one, folders not named as the judge names them, and a link named as one
    stay."""
    import os
    import tempfile
    import time

    from autograder.pipeline import preprocessors as pre
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    old = time.time() - pre.ORPHAN_AGE - 60

    def copy(name, mtime=old):
        folder = tmp_path / name
        (folder / "work").mkdir(parents=True)
        (folder / "work" / "answers.ipynb").write_text("{}")
        os.utime(folder, (mtime, mtime))
        return folder

    orphan = copy(f"{pre.COPY_PREFIX}{gone.pid}-abc123")
    live = copy(f"{pre.COPY_PREFIX}{os.getpid()}-abc123")
    fresh = copy(f"{pre.COPY_PREFIX}{gone.pid}-def456", mtime=time.time())
    other = copy(f"{pre.COPY_PREFIX}test-abc123")
    target = copy("someone-elses")
    planted = tmp_path / f"{pre.COPY_PREFIX}{gone.pid}-link"
    planted.symlink_to(target)
    os.utime(planted, (old, old), follow_symlinks=False)

    def connection(pid, mtime=old):  # a kernel's connection file, with its key
        path = tmp_path / f"{pre.CONNECTION_PREFIX}{pid}-x1y2z3.json"
        path.write_text('{"key": "a kernel\'s key"}')
        os.utime(path, (mtime, mtime))
        return path

    orphaned_key, live_key = connection(gone.pid), connection(os.getpid())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(pre, "_SWEPT", [])
    made = pre.new_copy_folder()  # what each judge does before it copies a submission
    assert made.parent == tmp_path and made.name.startswith(f"{pre.COPY_PREFIX}{os.getpid()}-")
    assert not orphan.exists() and live.exists() and fresh.exists() and other.exists()
    assert not orphaned_key.exists() and live_key.exists()
    assert planted.is_symlink() and (target / "work" / "answers.ipynb").exists()
    assert pre.remove_orphaned_copies(tmp_path) == []  # the judge's own new copy is not an orphan


def test_no_copy_of_the_code_is_left_in_the_temp_folder(tmp_path):
    """The judge and its student's process get their specs (the submission's code) in memory, not
    as files: a student's process that died while loading the notebook (os._exit) once left its
    spec, readable by everyone, in the machine's temp folder, and so did a judge killed by the
    grader's clock or a grading process killed mid-submission."""
    import os
    import tempfile
    import uuid
    marker = f"# the marker of this test: {uuid.uuid4().hex}"
    # cpu_info: checks that time nothing, so that a busy machine cannot leave them undecided.
    answer = notebooks.answer_cells(notebooks.read(course.source_notebook("01_processes_threads")))["cpu_info"]
    payload = {"cells": [("course cell a", f"import os\n{marker}\nos._exit(1)"), ("cpu_info", answer)],
               "exercises": [("01_processes_threads", "cpu_info")]}
    verdicts = verify.verify(payload, str(tmp_path))
    assert verdicts["cpu_info"][0], verdicts  # graded without the cell that stopped the process
    left = []
    for entry in os.scandir(tempfile.gettempdir()):
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_size < 2**20:
                with open(entry.path, "rb") as f:
                    if marker.encode() in f.read():
                        left.append(entry.path)
        except OSError:
            continue
    assert not left, f"the submission's code was left in {left}"


def test_an_error_a_check_meets_on_an_answers_value_is_settled_on_the_reference(tmp_path, course_tools):
    """A cpu_info that answers with a list in a process pinned to one CPU: the affinity check's own
    code raises TypeError on that list, in the judge. The judge runs that check again on the
    reference solutions, which pass it: the answer fails, told that the check could not use its
    value (not that its code raised), and the reference's process and folder are gone afterwards."""
    import os
    import tempfile
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the affinity check needs at least 2 usable CPUs")
    reference = notebooks.answer_cells(notebooks.read(course.source_notebook("01_processes_threads")))["cpu_info"]
    answer = notebooks.solution_code(reference) + textwrap.dedent('''
        _counts = cpu_info

        def cpu_info(cgroup_root="/sys/fs/cgroup"):
            info = _counts(cgroup_root)
            return list(info.values()) if len(os.sched_getaffinity(0)) == 1 else info
    ''')
    log = tmp_path / "judge.log"
    verdicts = verify.verify({"cells": [("cpu_info", answer)], "exercises": [("01_processes_threads", "cpu_info")]},
                             str(tmp_path), log=str(log))
    passed, report, undecided = verdicts["cpu_info"]
    assert not passed and not undecided, report
    assert "could not use what your code returned or did (TypeError" in report, report
    assert "your code raised" not in report, report
    started = re.search(r"the reference solutions of 01_processes_threads settle it \(process (\d+), in (\S+)\)",
                        log.read_text())
    assert started, log.read_text()[-3000:]
    assert not course_tools.running(int(started[1]), within=10), "the reference's process outlived its judge"
    assert started[2].startswith(tempfile.gettempdir()) and not os.path.exists(started[2]), started[2]


def test_an_error_of_the_runners_own_is_undecided_not_failed(tmp_path):
    """An error the hidden-check runner itself raises in the judge (here: an exercise with no checks)
    is the grader's fault: the exercise goes to a person, and its log says why."""
    log = tmp_path / "judge.log"
    verdicts = verify.verify({"cells": [], "exercises": [("01_processes_threads", "no_such_exercise")]},
                             str(tmp_path), log=str(log))
    passed, report, undecided = verdicts["no_such_exercise"]
    assert not passed and undecided, report
    assert "the grader itself failed (LookupError" in report
    assert "Traceback" in log.read_text()


def test_the_replay_of_a_slow_notebook_stops_at_the_notebooks_limit(tmp_path):
    """Cells that each stay within the per-cell limit, but many of them (or replays started again
    and again), once held a grading worker for as long as they liked: the judge's replay has the
    kernel's limit for the whole notebook. Past it, the cells from the one loading on are left out,
    as the kernel leaves out those past its limit, and one last try checks what came before."""
    reference = notebooks.answer_cells(notebooks.read(course.source_notebook("01_processes_threads")))["cpu_info"]
    # 2 s each against a 3 s limit: the first try runs out in the second, the last loads one (1 s spare).
    slow = [(f"added cell slow{k}", "import time\ntime.sleep(2)\n") for k in range(6)]
    exercises = [("01_processes_threads", "cpu_info")]
    answer = ("cpu_info", notebooks.solution_code(reference))
    start = time.monotonic()
    verdicts = verify.verify({"cells": [answer, *slow], "exercises": exercises}, str(tmp_path),
                             cell_timeout=10, notebook_timeout=3)
    took = time.monotonic() - start
    passed, report, _ = verdicts["cpu_info"]
    assert passed, report  # the answer came before the limit: checked as the kernel would have run it
    assert took < 2 * 3 + 30, f"the replay ran {took:.0f} s with a 3 s limit (six cells of 2 s)"

    verdicts = verify.verify({"cells": [*slow, answer], "exercises": exercises}, str(tmp_path),
                             cell_timeout=10, notebook_timeout=3)
    passed, report, undecided = verdicts["cpu_info"]
    assert not passed and not undecided, report  # the answer came after it: never loaded


def test_a_replayed_cell_keeps_its_line_numbers():
    """IPython drops the blank lines at the top of a cell when it turns magics into calls: the
    student's process replayed a cell that starts with one a line short, and a hidden check said
    "line 6 of your robust_map cell" of the error on line 7 (seen grading 05's partly wrong sample)."""
    import traceback

    from autograder.sandbox import student as student_side

    namespace = {"get_ipython": lambda: student_side.QuietShell()}  # as the student's process has it
    student_side.run_cell(namespace, "robust_map", "\n\ndef robust_map():\n    %time x = 1\n    raise ValueError('here')\n")
    try:
        namespace["robust_map"]()
    except ValueError as err:
        frame = traceback.extract_tb(err.__traceback__)[-1]
    assert (frame.filename, frame.lineno) == ("<robust_map>", 5), frame


def test_magics_that_run_python_in_the_kernel_run_it_in_the_replay_too(tmp_path, monkeypatch):
    """The student's process stood in a QuietShell whose magics did nothing: an answer cell under
    `%%time` (or `%%capture`, `%%prun`, or an answer bound on a `%time` line) was defined in the
    kernel and not in the replay, and lost every check (0/8 on 01 for `%%time` on each answer);
    `lines = !cmd` was None there."""
    from autograder.sandbox import student as student_side

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as the student's process has the submission's folder
    monkeypatch.delenv("COURSE_TEST_VALUE", raising=False)
    (tmp_path / "script.py").write_text("import sys\nARGS = sys.argv[1:]\nY = 5\n")
    namespace = {"get_ipython": lambda: student_side.QuietShell()}  # as the student's process has it
    cells = {"time": "%%time\ndef f():\n    return 1\n",
             "capture": "%%capture out --no-stderr\nprint('hi')\ny = 2\n",
             "line": "%time z = f() + y\n",
             "prun": "%prun -s time q = 7\n",
             "in a function": "def g():\n    %time w = 5\n    return 'w' in globals()\nr = g()\n",
             "timeit": "%%timeit\nnot_bound = 1\n",
             "file": "%%file -a tasks.py\nA = 1\n",
             "writefile": "%%writefile 'more tasks.py'\nB = 1\n",
             # Shell lines, %run, %cd and %env do what they do in the kernel.
             "shell": "n = 3\nlines = !echo {n} $n\n!echo printed\n",
             "run": "%run script.py one two\nFIRST = ARGS\n",
             "run a module": "%run -m script three\n",
             "env": "%env COURSE_TEST_VALUE=7\nv = %env COURSE_TEST_VALUE\n",
             "cd": "%mkdir sub\n%cd sub\nhere = %pwd\n%cd ..\n",
             # What a review found the replay did otherwise than IPython:
             "time's value": "timed = %time f() + 41\n",
             "timeit -o": "t = %timeit -o -n1 -r1 f()\n",
             "run without .py, ending in exit": "%%writefile ends.py\nimport sys\nE = 1\nsys.exit(0)\n",
             "run it": "%run ends\n",
             "capture an error": "%%capture err_out\nC = 1\n{}['no such key']\n",
             "expanded": "d = 'sub'\n%cd -q {d}\nthere = %pwd\n%cd -q -\n",
             "user_ns": "get_ipython().user_ns['U'] = 1\n"}
    for label, source in cells.items():
        student_side.run_cell(namespace, label, source)
    assert namespace["f"]() == 1 and namespace["y"] == 2 and namespace["out"].stdout == "hi\n"
    assert namespace["z"] == 3 and namespace["q"] == 7
    assert namespace["r"] is False and "w" not in namespace  # a function's %time: its locals, as IPython
    assert "not_bound" not in namespace  # %%timeit runs its body in a function of its own, as IPython
    assert (tmp_path / "tasks.py").read_text() == "A = 1\n" and (tmp_path / "more tasks.py").read_text() == "B = 1\n"
    assert namespace["FIRST"] == ["one", "two"] and namespace["ARGS"] == ["three"] and namespace["Y"] == 5
    assert list(namespace["lines"]) == ["3 3"] and namespace["lines"].s == "3 3"  # an SList, as IPython's
    assert namespace["v"] == "7" and namespace["here"] == str(tmp_path / "sub") and Path.cwd() == tmp_path
    assert namespace["timed"] == 42 and type(namespace["t"]).__name__ == "TimeitResult" and namespace["E"] == 1
    assert namespace["C"] == 1 and "KeyError" in namespace["err_out"].stderr  # the kernel goes on, as here
    assert namespace["there"] == str(tmp_path / "sub") and namespace["U"] == 1
