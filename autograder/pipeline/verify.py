"""The hidden checks' verdicts while grading: what to replay, and the judge that decides.

The kernel that nbgrader uses to execute a submission also runs the student's
code, so a determined student can make the test cells pass there without a
correct answer: an IPython input transformer that rewrites every later cell to
`pass`, a `set_custom_exc` hook that swallows errors, `np.allclose = lambda
*a, **k: True`, code that behaves differently when NBGRADER_EXECUTION is set.

So while grading, the hidden checks run only in the judge (judge.py), a
process that never runs student code, against a fresh student's process
(autograder/sandbox/student.py, sandboxed) that replays what the kernel runs,
as the kernel runs it: the submission's code cells in order and with its text,
but the test cells and the demos. The checks see each exercise as its test cell
did. A test cell scores only if its visible tests pass in the kernel and its
hidden checks pass in the judge.

This module is the grading worker's side: `payload_for()` says what to replay
and check; `verify()` starts judges until every exercise has a verdict.
"""
import json
import os
import re
import subprocess
import time
from functools import lru_cache

from ..sandbox import zygote
from . import lease, warm

UNDECIDED = "ManualReviewNeeded"  # error name of a test cell whose hidden checks could not decide
KEEP = "keep"  # a replayed "cell" that is a test cell's place: keep these names as they are there
HIDDEN_CALL = re.compile(r'^check\(\s*"([^"]+)"\s*\)', re.M)


# --- what to run -------------------------------------------------------------------------
def hidden_exercises(test_source):
    """[(assignment, exercise)] named by the hidden block of a test cell."""
    from .. import hidden
    block = re.search(r"### BEGIN HIDDEN TESTS(.*?)### END HIDDEN TESTS", test_source, re.S)
    return [(hidden.assignment_of(e), e) for e in HIDDEN_CALL.findall(block.group(1))] if block else []


def payload_for(nb, source_nb):
    """What the student's process replays and the judge checks, from a submission and its source notebook.

    The student's process runs what the kernel runs, as the kernel runs it: the submission's code
    cells in its order and with its text (a teaching cell the student edited, as their own Run
    All would run it), but the test cells (their hidden checks are the judge's) and the cells
    tagged demo without a grade_id, which the kernel skips (ResilientExecute; helpers.demos.skipped).
    The kernel and the judge then agree on every cell whatever the cells' ids: copies, cells moved or split,
    ids an editor renewed. A cell's label says whose it is, for the place an error is reported
    at: an answer's grade_id, a course cell (an id of the source's teaching cells) or an added cell.
    In the test cells' places, ("test cell <grade_id>", {KEEP: [exercises]}): the student's process
    keeps what those names are there, and the checks get that (a copy of the answer's stub left at
    the notebook's end, or a variant tried there, redefines the function after its test ran).
    """
    from helpers.demos import skipped

    from .. import notebooks

    course_ids = {c.get("id") for c in source_nb.cells if c.cell_type == "code" and not notebooks.nbgrader_meta(c)}
    cells = []
    for cell in nb.cells:
        if notebooks.is_test_cell(cell):
            # The kernel's test cell sees the exercise as the cells above it left it; the checks
            # are to see the same, not a stub or a variant the notebook defines further down.
            names = [exercise for _, exercise in hidden_exercises(cell.source)]
            if names:
                cells.append((f"test cell {notebooks.nbgrader_meta(cell)['grade_id']}", {KEEP: names}))
            continue
        if cell.cell_type != "code":
            continue
        meta = notebooks.nbgrader_meta(cell)
        if skipped(cell):  # as the kernel: RunNeededDemos has untagged the demos graded code needs
            continue
        if meta.get("grade_id"):
            cells.append((meta["grade_id"], cell.source))
        elif cell.get("id") in course_ids:
            cells.append((f"course cell {cell.get('id')}", cell.source))
        else:
            cells.append((f"added cell {cell.get('id')}", cell.source))
    checks = {}
    for cell in nb.cells:
        if notebooks.is_test_cell(cell):
            for assignment, exercise in hidden_exercises(cell.source):
                checks.setdefault(exercise, (assignment, []))[1].append(notebooks.nbgrader_meta(cell)["grade_id"])
    exercises = [(a, e) for e, (a, _) in checks.items()]
    return {"cells": cells, "exercises": exercises,
            "test_cells": {e: cells for e, (_, cells) in checks.items()}}


# --- parent side ---------------------------------------------------------------------------
def _time_budget(assignment, exercise):
    from .. import hidden
    return sum(getattr(fn, "timeout", hidden.DEFAULT_TIMEOUT) for fn in hidden.checks_for(assignment, exercise)) + 30


def verify(payload, workdir, env=None, log=None, cell_timeout=180, notebook_timeout=None):
    """Run judges until every exercise has a verdict.

    Returns {exercise: (passed, report, undecided)}. A child that crashes or overruns its
    time fails the exercise it was on, and a new child takes the rest. A student
    cell that kills or hangs the child while loading is left out of the next
    try, as a dead kernel would have left out every cell after it. Loading the notebook
    may take `notebook_timeout` seconds in all tries together (the kernel's limit for the
    whole notebook): every cell within its own limit, but so many of them, or a replay
    started again so often, would otherwise hold the grading worker for hours. Past it, the
    cell loading and every later one are left out, as the kernel leaves out the cells past
    its limit, and one last try (with the limit again) loads the rest and checks; should
    that try run out too, the exercises not yet checked fail, saying why.
    """
    verdicts, remaining, skipped = {}, list(payload["exercises"]), set()
    load_left = float("inf") if notebook_timeout is None else float(notebook_timeout)
    last_try = False  # the notebook's limit was reached once: its later cells are left out
    # Worked out here, once per assignment and worker: the judge then starts the student's
    # process at once and loads the checks while that process loads the notebook.
    preload = _preload(tuple(sorted({a for a, _ in payload["exercises"]})))
    while remaining:
        assignment_of = {e: a for a, e in remaining}
        cells = [(label, code) for label, code in payload["cells"] if label not in skipped]
        read_fd, write_fd = os.pipe()
        # In memory: a grading process killed meanwhile (a lost Dask worker) leaves no file behind.
        spec = zygote.spec_in_memory({**payload, "cells": cells, "exercises": remaining, "preload": preload})
        # Forked from the worker's judge zygote (warm.py), else a new interpreter; either way
        # with -P: the submission's folder (the working directory) never comes first on sys.path.
        out = open(log or os.devnull, "a")
        judge_env = dict(os.environ if env is None else env)
        sandbox_zygote = warm.socket_path("sandbox")
        if sandbox_zygote:
            judge_env[warm.SOCKET_VARIABLE] = sandbox_zygote  # where the judge has its student's process forked
        try:
            child = zygote.start(warm.socket_path("judge"), warm.JUDGE, [str(write_fd), zygote.spec_path_of(spec)],
                                 cwd=workdir, env=judge_env, pass_fds=(write_fd, spec), new_session=True,
                                 stdout=out.fileno(), stderr=subprocess.STDOUT)
        finally:
            os.close(write_fd)
            os.close(spec)
        current, loading, budget, judged_here, paused = None, None, cell_timeout, [], None
        deadline, buffer, timed_out, out_of_load_time = time.monotonic() + budget, b"", False, False
        # From the first cell to "loaded": the notebook's replay (starting the processes is the grader's).
        load_started, load_paused = None, 0.0
        with os.fdopen(read_fd, "rb", buffering=0) as pipe:
            os.set_blocking(pipe.fileno(), False)
            while True:
                now = time.monotonic()
                if load_started is not None and paused is None and now - load_started - load_paused > load_left:
                    timed_out = out_of_load_time = True
                    break
                if now > deadline:
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
                        if load_started is None:
                            load_started = time.monotonic()
                    elif "loaded" in message:
                        loading = None
                        if load_started is not None:
                            load_left -= time.monotonic() - load_started - load_paused
                            load_started = None
                    elif "start" in message:
                        loading, current = None, message["start"]
                        budget = _time_budget(assignment_of[current], current)
                    elif "waiting" in message:  # for the machine (lease.py): its clock stops meanwhile
                        paused, deadline = deadline, time.monotonic() + lease.MAX_WAIT + 60
                        continue
                    elif "waited" in message:
                        deadline = (paused or deadline) + float(message["waited"])
                        if load_started is not None:
                            load_paused += float(message["waited"])
                        paused = None
                        continue
                    elif "revoke" in message:  # tampering found at the end: this run's verdicts are void
                        for exercise in judged_here:
                            verdicts[exercise] = (False, f"{exercise}: {message['revoke']}", False)
                    else:
                        verdicts[message["exercise"]] = (message["passed"], message["report"],
                                                          bool(message.get("undecided")))
                        judged_here.append(message["exercise"])
                        current = None
                    deadline = time.monotonic() + budget
        _kill_session(child)
        code = child.wait()
        out.close()
        if load_started is not None:
            load_left -= time.monotonic() - load_started - load_paused
        labels = [label for label, _ in cells]
        # `loading` comes from the student's process: a label it made up ends the replay here.
        if out_of_load_time and loading in labels and not last_try:
            skipped.update(labels[labels.index(loading):])
            load_left, last_try = float(notebook_timeout), True
            continue
        if out_of_load_time or load_left <= 0:
            for _, e in remaining:
                verdicts.setdefault(e, (False, f"{e}: the notebook took longer than its {notebook_timeout} s limit "
                                           "to run in the grader, so its hidden checks did not run", False))
            break
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


@lru_cache(maxsize=None)
def _preload(assignments):
    from .judge import preload_for
    return preload_for(assignments)


def _kill_session(child):
    import signal
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
