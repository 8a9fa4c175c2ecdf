"""Give the hidden checks' verdict from a clean process, on code taken out of the submission.

The kernel that nbgrader uses to execute a submission also runs the student's
code, so a determined student can make the test cells pass there without a
correct answer: an IPython input transformer that rewrites every later cell to
`pass`, a `set_custom_exc` hook that swallows errors, `np.allclose = lambda
*a, **k: True`, code that behaves differently when NBGRADER_EXECUTION is set.

So while grading, the hidden checks run here and only here: in a fresh
interpreter that never saw the kernel, inside the submission's sandbox (as an
unprivileged uid that cannot see the checks' files: the grader sends their
source), replaying the notebook as a student's Run All would: the course's
non-demo teaching cells as source/ has them, the student's answer cells and the
cells they added, in order, as plain Python. Before the student's code runs,
the verifier records the functions and classes that grading relies on
(builtins, numpy, threading, multiprocessing, torch, helpers, autograder...);
if the student's code replaced any of them, every check of the submission
fails. A test cell scores only if its visible tests pass in the kernel and its
hidden checks pass here.

Known limit: the checks still run in the interpreter that runs the student's
code, so that code can forge this process's report (tests/test_grading_trust.py,
`forge_verdict`); see course/instructor_guide.md, threat model.

Parent side: `payload_for()` and `verify()`. Child side: `main()`, started as
`python -P -c "from autograder.grade.verify import main; main()" <fd> <payload>`
so that the student's code lives in a bare `__main__`, as in a kernel.
"""
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HIDDEN_CALL = re.compile(r'check\(\s*"([^"]+)"\s*,\s*"([^"]+)"\s*,\s*globals\(\)\s*\)')
WATCHED_PREFIXES = ("builtins", "numpy", "math", "random", "os", "time", "threading", "multiprocessing",
                    "concurrent", "asyncio", "dis", "inspect", "pickle", "copy", "functools",
                    "statistics", "scipy", "joblib", "threadpoolctl", "psutil", "torch", "helpers",
                    "autograder", "queue", "contextlib", "operator", "json", "subprocess", "signal")


# --- what to run -------------------------------------------------------------------------
def to_python(source):
    """Cell source as plain Python: IPython magics become get_ipython() calls."""
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(source)


def hidden_exercises(test_source):
    """[(assignment, exercise)] named by the hidden block of a test cell."""
    block = re.search(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", test_source, re.S)
    return HIDDEN_CALL.findall(block.group(1)) if block else []


def check_sources(assignments):
    """[(module name, file, source)] of the checks, read here by the grader: the
    sandboxed child cannot see autograder/checks/ at all."""
    from .. import hidden
    modules = [("autograder.checks", hidden.CHECKS_DIR / "__init__.py"),
               ("autograder.checks._support", hidden.CHECKS_DIR / "_support.py")]
    modules += [(f"autograder.checks._{a}", hidden.CHECKS_DIR / f"{a}.py") for a in sorted(assignments)]
    return [(name, str(path), path.read_text()) for name, path in modules]


def payload_for(nb, source_nb):
    """What the verifier executes and checks, from a submission and its source notebook.

    The code cells run in the submission's order, as a student's Run All would:
    the course's teaching cells (as the source has them, demos left out), the
    student's answer cells and any cell the student added.
    """
    from .. import notebooks

    course_cells = {c.get("id"): c for c in source_nb.cells
                    if c.cell_type == "code" and not notebooks.nbgrader_meta(c)}
    source_ids = {c.get("id") for c in source_nb.cells}
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = notebooks.nbgrader_meta(cell)
        if notebooks.is_answer_cell(cell):
            cells.append((meta["grade_id"], cell.source))
        elif not meta and cell.get("id") in course_cells:
            taught = course_cells[cell.get("id")]
            if not notebooks.is_demo(taught):
                cells.append((f"course cell {cell.get('id')}", taught.source))
        elif not meta and cell.get("id") not in source_ids:
            cells.append((f"added cell {cell.get('id')}", cell.source))
    checks = {}
    for cell in nb.cells:
        if notebooks.is_test_cell(cell):
            for assignment, exercise in hidden_exercises(cell.source):
                checks.setdefault(exercise, (assignment, []))[1].append(notebooks.nbgrader_meta(cell)["grade_id"])
    exercises = [(a, e) for e, (a, _) in checks.items()]
    return {"cells": cells, "exercises": exercises,
            "modules": check_sources({a for a, _ in exercises}),
            "test_cells": {e: cells for e, (_, cells) in checks.items()}}


# --- parent side ---------------------------------------------------------------------------
def _time_budget(assignment, exercise):
    from .. import hidden
    return sum(getattr(fn, "timeout", hidden.DEFAULT_TIMEOUT) for fn in hidden.checks_for(assignment, exercise)) + 30


def verify(payload, workdir, env=None, log=None, cell_timeout=180):
    """Run verifier children until every exercise has a verdict.

    Returns {exercise: (passed, report, undecided)}. A child that crashes or overruns its
    time fails the exercise it was on, and a new child takes the rest. A student
    cell that kills or hangs the child while loading is left out of the next
    try, as a dead kernel would have left out every cell after it.
    """
    verdicts, remaining, skipped = {}, list(payload["exercises"]), set()
    while remaining:
        assignment_of = {e: a for a, e in remaining}
        cells = [(label, code) for label, code in payload["cells"] if label not in skipped]
        read_fd, write_fd = os.pipe()
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as spec:
            json.dump({**payload, "cells": cells, "exercises": remaining}, spec)
        # -P: the submission's folder (the working directory) does not come first on sys.path.
        cmd = [sys.executable, "-P", "-c", "from autograder.grade.verify import main; main()",
               str(write_fd), spec.name]
        out = open(log, "a") if log else subprocess.DEVNULL
        child = subprocess.Popen(cmd, cwd=workdir, env=env, pass_fds=(write_fd,), stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        os.close(write_fd)
        current, loading, budget = None, None, cell_timeout
        deadline, buffer, timed_out = time.monotonic() + budget, b"", False
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            os.set_blocking(pipe.fileno(), False)
            while True:
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                try:
                    chunk = pipe.read()
                except BlockingIOError:
                    chunk = None
                if chunk == b"":  # the child closed the pipe: finished or died
                    break
                if not chunk:
                    time.sleep(0.05)
                    continue
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    message = json.loads(line)
                    if "loading" in message:
                        loading, budget = message["loading"], cell_timeout
                    elif "loaded" in message:
                        loading = None
                    elif "start" in message:
                        loading, current = None, message["start"]
                        budget = _time_budget(assignment_of[current], current)
                    else:
                        verdicts[message["exercise"]] = (message["passed"], message["report"],
                                                          bool(message.get("undecided")))
                        current = None
                    deadline = time.monotonic() + budget
        _kill_session(child)
        code = child.wait()
        os.unlink(spec.name)
        if out is not subprocess.DEVNULL:
            out.close()
        if loading is not None and current is None:
            skipped.add(loading)  # that cell stopped the process: try again without it
            continue
        if current is not None and current not in verdicts:
            verdicts[current] = (False, f"{current}: the checks did not finish within {budget:.0f} s"
                                 if timed_out else
                                 f"{current}: the grading process ended while checking it (exit code "
                                 f"{code}): does your code exit, crash or use too much memory?", False)
        left = [(a, e) for a, e in remaining if e not in verdicts]
        if left == remaining:  # no progress at all: give up rather than loop
            for _, e in left:
                verdicts[e] = (False, f"{e}: the grading process stopped before checking it (exit code {code})",
                               False)
            left = []
        remaining = left
    return verdicts


def _kill_session(child):
    import signal
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# --- child side -----------------------------------------------------------------------------
def _watched():
    """(key, object) for every module, function, class and method that grading relies on."""
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in WATCHED_PREFIXES:
            continue
        yield ("module", name), module
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            if not callable(value):
                continue
            yield (name, attr), value
            code = getattr(value, "__code__", None)
            if code is not None:
                yield (name, attr, "__code__"), code
            if isinstance(value, type) and str(getattr(value, "__module__", "")).split(".")[0] in WATCHED_PREFIXES:
                for method, impl in list(vars(value).items()):
                    if callable(impl):
                        yield (name, attr, method), impl


def _snapshot():
    return dict(_watched())


def _trusted_dirs():
    import sysconfig
    from .. import course
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["stdlib"],
            sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
            str(course.ROOT / "helpers"), str(course.ROOT / "autograder")}
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


def _code_of(obj):
    for path in ("__code__", "__func__.__code__", "func.__code__", "__wrapped__.__code__"):
        target = obj
        for part in path.split("."):
            target = getattr(target, part, None)
        if target is not None:
            return target
    return None


def _from_trusted_code(obj, trusted):
    """Was this object made by the libraries or the course, rather than by the student's cells?"""
    import types
    if isinstance(obj, types.ModuleType):
        file = getattr(obj, "__file__", None)
        return file is None and obj.__name__ in sys.builtin_module_names or bool(
            file and os.path.realpath(file).startswith(trusted))
    code = obj if isinstance(obj, types.CodeType) else _code_of(obj)
    if code is not None:
        name = code.co_filename
        return name.startswith("<frozen") or os.path.realpath(name).startswith(trusted)
    module = str(getattr(obj, "__module__", "") or "")
    return module.split(".")[0] in WATCHED_PREFIXES


def _changed(before):
    """Watched names now bound to something the student's code made, or swapped for another watched object.

    Libraries patch themselves lazily (torch wraps an optimizer's `step` the
    first time one is built); a replacement made by library or course code is
    therefore accepted, unless it is one watched object put in another's place.
    """
    now = dict(_watched())
    trusted = _trusted_dirs()
    known = {id(obj): key for key, obj in before.items()}
    changed = set()
    for key, obj in before.items():
        new = now.get(key)
        if new is obj or new is None:
            continue
        # Code objects are shared by every function a library wraps the same way.
        swapped = key[-1] != "__code__" and id(new) in known and known[id(new)] != key
        if swapped or not _from_trusted_code(new, trusted):
            changed.add(".".join(key[1:] if key[0] == "module" else key[:3]).replace(".__code__", ""))
    result = sorted(changed)
    if sys.gettrace() is not None or sys.getprofile() is not None:
        result.append("sys.settrace/sys.setprofile")
    return result


class _QuietShell:
    """Stands in for get_ipython() in student code: magics do nothing, except %%writefile."""

    def run_line_magic(self, *args, **kwargs):
        return None

    def run_cell_magic(self, name, line, cell):
        if name == "writefile":
            path = line.split()[-1]
            mode = "a" if "-a" in line.split() else "w"
            with open(path, mode) as f:
                f.write(cell)
        return None

    def system(self, *args, **kwargs):
        return None

    getoutput = system

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _run_student_code(namespace, label, source):
    import asyncio
    code = compile(to_python(source), f"<{label}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)


def _install_checks(modules):
    """Make the checks importable from the sources the grader sent (their files are
    not visible in the sandbox)."""
    import types
    for name, filename, source in modules:
        module = types.ModuleType(name)
        module.__file__ = filename
        if name == "autograder.checks":
            module.__path__ = []
        sys.modules[name] = module
        exec(compile(source, filename, "exec"), module.__dict__)


def main():
    write_fd, spec_path = int(sys.argv[1]), sys.argv[2]
    spec = json.loads(Path(spec_path).read_text())  # before the sandbox hides /tmp
    from . import sandbox
    # Still one thread here: limits, private files, no network, then the unprivileged uid.
    sandbox.enter()
    channel = os.fdopen(write_fd, "w", buffering=1)

    def send(message):
        channel.write(json.dumps(message) + "\n")

    _install_checks(spec["modules"])
    from .. import hidden
    os.environ.pop("NBGRADER_EXECUTION", None)  # graded as the student would run it
    for assignment in {a for a, _ in spec["exercises"]}:
        hidden.load_checks(assignment)  # imports everything the checks use, before student code
    if "torch" in sys.modules:
        # torch.profiler (and torch.compile) import torch._dynamo on first use, which
        # re-wraps torch.manual_seed: done here, before the snapshot, it is not tampering.
        import torch._dynamo  # noqa: F401
    # The student's own modules (a `%%writefile defs.py`) import from the submission's
    # folder, which comes last: it cannot stand in for a library or the course.
    sys.path.append(os.getcwd())
    import builtins
    main_module = sys.modules["__main__"]
    namespace = main_module.__dict__
    namespace["get_ipython"] = lambda: _QuietShell()
    before = _snapshot()
    failures = {}
    for label, source in spec["cells"]:
        send({"loading": label})
        try:
            _run_student_code(namespace, label, source)
        except BaseException as err:  # noqa: BLE001 (a cell that raises: the next ones still run)
            failures[label] = f"{type(err).__name__}: {err}"
    send({"loaded": True})
    run, report, check_names = hidden.run, hidden.report, builtins.all
    tampered = _changed(before)
    if tampered:
        message = ("your code replaces functions or modules that grading relies on ("
                   + ", ".join(tampered[:5]) + ("..." if len(tampered) > 5 else "") + "); no check can pass")
        for _, exercise in spec["exercises"]:
            send({"exercise": exercise, "passed": False, "report": f"{exercise}: {message}", "tampered": True})
        channel.close()
        os._exit(0)
    for assignment, exercise in spec["exercises"]:
        send({"start": exercise})
        if exercise in failures:
            send({"exercise": exercise, "passed": False,
                  "report": f"{exercise}: the answer cell raised {failures[exercise]}"})
            continue
        undecided = []
        try:
            outcomes = run(assignment, exercise, namespace)
            passed = check_names(o.passed for o in outcomes)
            # Undecided only when nothing else failed: a check that failed outright decides.
            if all(o.passed or o.undecided for o in outcomes):
                undecided = [o.description for o in outcomes if o.undecided]
            text = "" if passed else report(exercise, outcomes)
        except BaseException as err:  # noqa: BLE001
            passed, text = False, f"{exercise}: {type(err).__name__}: {err}"
        tampered = _changed(before)
        if tampered:
            passed, text, undecided = False, (f"{exercise}: your code replaced functions that grading "
                                              f"relies on while it ran ({', '.join(tampered[:5])})"), []
        send({"exercise": exercise, "passed": passed, "report": text, "undecided": undecided})
    channel.close()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: student threads or pools must not hang it
