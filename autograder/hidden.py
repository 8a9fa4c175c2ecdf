"""The runner behind the hidden tests.

Each assignment's hidden checks are pytest test functions in
`autograder/checks/<assignment>.py`. A check belongs to the exercise named by
its first parameter; every parameter is filled by name from the student's
namespace (the exercise itself, other exercises it needs).

Where they run:
- while grading, in the judge (autograder/pipeline/judge.py), a process that runs
  no student code; the namespace then holds handles on the student's process;
- under pytest against the reference solutions (`pytest autograder/checks`,
  see autograder/checks/conftest.py), beside the code they check, or judged as
  in grading with COURSE_CHECKS_JUDGED=1;
- in an instructor's kernel running a source notebook, beside the code.

The hidden block of a test cell names its exercise once:

    from autograder.hidden import check
    check("cpu_info")

The assignment is the checks file that holds the exercise's checks (exercise
names are unique in the course), and the namespace is the caller's globals
(the notebook's, in a kernel).

A failure raises an AssertionError whose message says, in plain words, which
checks failed and why, without showing the checks' code or inputs. An error
that the answer's code raised is the answer's ("your code raised ..."); one the
check's own code raised is settled on the reference solution (`run`), so that a
bug in a check never costs a correct answer its marks.
"""
import inspect
import re
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CHECKS_DIR = Path(__file__).resolve().parent / "checks"
DEFAULT_TIMEOUT = 60.0


@dataclass
class Outcome:
    check: str
    description: str
    passed: bool
    message: str = ""
    seconds: float = 0.0
    undecided: bool = False  # the check could not decide (a machine too busy to time): not a pass


def load_checks(assignment):
    """Import autograder/checks/<assignment>.py."""
    from .course import load_module
    try:
        return load_module(f"autograder.checks._{assignment}", CHECKS_DIR / f"{assignment}.py")
    except LookupError:
        raise LookupError(f"no hidden checks for assignment {assignment!r}") from None


def _first_parameters(path):
    """{first parameter of each module-level test_ function} of a checks file, read without importing it."""
    import ast
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.args.args[0].arg for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and node.args.args}


def exercise_index():
    """{exercise: assignment}: which checks file holds each exercise's checks."""
    return _index_of(str(CHECKS_DIR))


@lru_cache(maxsize=None)
def _index_of(folder):
    index = {}
    for path in sorted(Path(folder).glob("[0-9]*.py")):
        for exercise in _first_parameters(path):
            if index.setdefault(exercise, path.stem) != path.stem:
                raise LookupError(f"exercise {exercise!r} has checks in {index[exercise]} and {path.stem}")
    return index


def assignment_of(exercise):
    try:
        return exercise_index()[exercise]
    except KeyError:
        raise LookupError(f"no hidden checks for exercise {exercise!r} in {CHECKS_DIR}") from None


def checks_for(assignment, exercise):
    """The check functions of one exercise, in file order."""
    module = load_checks(assignment)
    found = []
    for name, fn in vars(module).items():
        if name.startswith("test_") and inspect.isfunction(fn) and fn.__module__ == module.__name__:
            params = list(inspect.signature(fn).parameters)
            if params and params[0] == exercise:
                found.append(fn)
    found.sort(key=lambda f: f.__code__.co_firstlineno)
    return found


def describe(fn):
    """What check `fn` looks at, as the student reads it: its docstring's first paragraph, its lines
    joined (a summary wrapped onto a second line was cut mid-sentence), or its name."""
    doc = inspect.getdoc(fn)
    if not doc:
        return fn.__name__.removeprefix("test_").replace("_", " ")
    return " ".join(line.strip() for line in doc.split("\n\n")[0].splitlines()).rstrip(".")


class MissingDefinition(NameError):
    """The notebook does not define what a check needs (not a NameError raised by any code)."""


def _arguments(fn, namespace):
    args = {}
    for name in inspect.signature(fn).parameters:
        if name in namespace:
            args[name] = namespace[name]
        else:
            raise MissingDefinition(f"the notebook does not define `{name}`; run its answer cell first")
    return args


class CheckTimeout(TimeoutError):
    """A check that overran its time (not a TimeoutError raised by the student's code)."""


def _seconds_waited():
    """Seconds this process has waited for the machine alone (autograder/pipeline/lease.py), read
    only where a check asked for it: this module also runs in the sandbox, which imports nothing
    from the grader's side."""
    lease = sys.modules.get("autograder.pipeline.lease")
    return lease.seconds_waited() if lease is not None else 0.0


def _call_with_timeout(fn, kwargs, timeout):
    """Run fn(**kwargs) in a daemon thread so that a hang fails one check, not the cell."""
    box = {}

    def target():
        try:
            box["value"] = fn(**kwargs)
        except BaseException as err:  # noqa: BLE001 (reported as the check's failure)
            box["error"] = err

    worker = threading.Thread(target=target, name=f"check:{fn.__name__}", daemon=True)
    waited_before = _seconds_waited()  # time spent waiting for the machine alone does not count
    deadline = time.monotonic() + timeout
    worker.start()
    while True:
        left = deadline + _seconds_waited() - waited_before - time.monotonic()
        worker.join(max(left, 0.05))
        if not worker.is_alive():
            break
        if deadline + _seconds_waited() - waited_before <= time.monotonic():
            raise CheckTimeout(f"did not finish within {timeout:g} s (a hang or a deadlock?)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _worded_by_us(err):
    """An AssertionError, pytest.fail(), the check's time limit, a missing definition or a lost
    student's process: a verdict the checks or the runner put in words."""
    return (isinstance(err, (AssertionError, CheckTimeout, MissingDefinition))
            or type(err).__name__ in ("Failed", "StudentProcessGone"))


def _failure_message(err):
    if isinstance(err, AssertionError):
        text = str(err).split("\nassert ")[0].strip()  # drop pytest's rewritten expression
        return text or "the result is not what the exercise asks for"
    if _worded_by_us(err):
        return str(err)  # our own wording, or pytest.fail()/pytest.raises()
    return f"your code raised {_error_text(err)}{_where_in_the_answer(err)}"


# A frame of the student's own cells, as the student's process names them: an answer cell by its
# exercise (grading: "<run_threads>"; the course's tests: "<answer cell run_threads>"), or a cell
# the student added. Only such names (an exercise's, not "<string>", which the standard library
# gives code it generates), and a line number, reach the message: what a forged trace could carry
# out through it is no more than the error's own text already can.
_STUDENT_CELL = re.compile(r"<(?:answer cell )?([A-Za-z_]\w{0,60})>|<(added cell) [\w-]{1,64}>")
_FRAME_IN = re.compile(r'^\s*File "(.*)", line (\d{1,5}), in ([A-Za-z_<][\w<>]{0,60})$', re.M)


def _where_in_the_answer(err):
    """ " (line 7 of your run_threads cell)": the innermost frame of the student's own cells that the
    error went through, where its process wrote a trace (the judge's); "" where it has none."""
    trace = getattr(err, "student_traceback", None)
    if not isinstance(trace, str):
        return ""
    for name, line, function in reversed(_FRAME_IN.findall(trace)):
        cell = _STUDENT_CELL.fullmatch(name)
        if cell is None or not (cell.group(2) or cell.group(1) in exercise_index()):
            continue
        where = "a cell you added" if cell.group(2) else f"your {cell.group(1)} cell"
        inside = "" if function in ("<module>", cell.group(1)) else f", in {function}"
        return f" (line {line} of {where}{inside})"
    return ""


ERROR_TEXT_LIMIT = 300  # characters of an error raised by the student's code, as its feedback shows it


def _error_text(err):
    """The student's error as the feedback shows it, cut short: enough to debug by, while what
    the student's code can reach in its process (the checks' helpers run there, and its code
    can read theirs) cannot be carried out through the feedback by the page."""
    text = str(err) if type(err).__name__ == "StudentError" else f"{type(err).__name__}: {err}"
    if len(text) > ERROR_TEXT_LIMIT:
        text = text[:ERROR_TEXT_LIMIT] + f" ... (cut at {ERROR_TEXT_LIMIT} characters)"
    return text


# --- whose code raised an error: the student's, or the check's own -----------------------------
_FRAME = re.compile(r'^\s*File "(.*)", line (\d+)', re.M)


def _frames_innermost_first(err):
    """(file name, line) of the frames an error went through, innermost first: as the student's
    process wrote them (judge.py keeps its trace on the error), else this process's own."""
    trace = getattr(err, "student_traceback", None)
    if isinstance(trace, str):
        return [(name, int(line)) for name, line in _FRAME.findall(trace)][::-1]
    return [(frame.f_code.co_filename, line) for frame, line in traceback.walk_tb(err.__traceback__)][::-1]


def _library_folders():
    import sysconfig
    from .course import ROOT
    # The library folders themselves, not sys.prefix: a course installed under the interpreter's
    # prefix (/usr/local/course beside /usr/local/bin/python) would otherwise count as a library.
    folders = {str(ROOT / "helpers"),
               *(sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib"))}
    return tuple(str(Path(f)) + "/" for f in folders if f)


def raised_by_the_check(err):
    """Whether the check's own code raised `err`, not the student's: its innermost frame that is
    no library's (the standard library, site-packages, the course's helpers) lies in the
    grader's code (autograder/, the checks), or it has no such frame.

    Errors raised in the judge are always the check's (no student code runs there); those from the
    student's process carry that process's trace, in which the checks' code sent there with
    `there()` keeps its file name. A student who forges that trace gains nothing: an error
    blamed on the check is settled on the reference solution (`run`), never passed."""
    return _innermost_own_frame(err)[0]


def _innermost_own_frame(err):
    """(raised by the check, where): the innermost frame that is no library's, and whether it is
    the grader's."""
    from .course import ROOT
    libraries, ours = _library_folders(), (str(ROOT / "autograder") + "/", str(Path(CHECKS_DIR)) + "/")
    for name, line in _frames_innermost_first(err):
        # The checks' functions reach the student's process by value, and cloudpickle names their
        # file "<dynamic-code>" there (an answer's own cells are "<answer cell ...>" and the like).
        if name.startswith(ours) or name == "<dynamic-code>":
            return True, f"{Path(name).name}, line {line}"
        if not (name.startswith("<frozen ") or name.startswith(libraries)):
            return False, f"{Path(name).name}, line {line}"
    return True, "no frame of its own"


def _settled_on_reference(fn, err, assignment, exercise, reference, hold):
    """The outcome of check `fn`, whose own code raised `err` on the answer, settled by running
    it on the reference solutions: passing there, it shows that what the answer gave it caused
    the error (a failure); not passing there, it shows a fault of the check or of the machine, not
    of the answer, and a person decides (undecided, never passed)."""
    global STUDENT
    raised = _error_text(err)
    why = None
    if isinstance(err, (OSError, MemoryError)):
        # The machine failed the check (out of memory, descriptors, processes): a rerun on the
        # reference could pass and blame the answer for a moment of load. Graded again alone.
        why = "it is the machine's error, not the answer's"
    elif reference is None:
        why = "no reference solution is at hand to show whether the check is at fault"
    else:
        try:
            judged_session, judged_namespace = reference(assignment, exercise)
        except Exception as ref_err:  # noqa: BLE001
            why = f"the reference solution could not be started to compare ({_error_text(ref_err)})"
        else:
            answers_session, STUDENT = STUDENT, judged_session
            try:
                kwargs = _arguments(fn, judged_namespace)
                with hold() if hold else _nothing():
                    _call_with_timeout(fn, kwargs, getattr(fn, "timeout", DEFAULT_TIMEOUT))
            except BaseException as ref_err:  # noqa: BLE001
                if isinstance(ref_err, CheckTimeout) and judged_session is not None:
                    judged_session.stop("a check did not finish in time on the reference solution")
                why = ("it could not decide on the reference solution either"
                       if type(ref_err).__name__ == "Skipped" else
                       f"it does not pass on the reference solution either ({_failure_message(ref_err)})")
            finally:
                STUDENT = answers_session
    if why is None:
        if _raised_on_a_rank_in(err, exercise):
            return Outcome(fn.__name__, describe(fn), False, f"your code raised {raised} on a rank, in {exercise}")
        return Outcome(fn.__name__, describe(fn), False,
                       f"the check could not use what your code returned or did ({raised}); "
                       "does it return what the exercise asks for?")
    where = _innermost_own_frame(err)[1]
    return Outcome(fn.__name__, describe(fn), False,
                   f"could not be decided: the check itself raised {raised} ({where}) on your answer, "
                   f"and {why}; this check goes to a person", undecided=True)


def _raised_on_a_rank_in(err, exercise):
    """Whether `err` came from a rank (helpers.ranks re-raises a rank's error in the launching
    process, with the rank's traceback as a note) inside the exercise's own function. Its last
    frames then are the launcher's, so whose code raised reads as the check's; the message says
    where it was raised. Only the wording: the verdict is settled on the reference as before."""
    trace = getattr(err, "student_traceback", None)
    if not isinstance(trace, str) or "\nraised on rank " not in trace:
        return False
    in_rank = trace.split("\nraised on rank ", 1)[1]
    return re.search(rf'^\s*File "[^"]*", line \d+, in {re.escape(exercise)}$', in_rank, re.M) is not None


# The student's process the checks are judging (autograder/pipeline/judge.py), or None when
# the checks run beside the code they check (the course's own tests, an instructor's kernel).
STUDENT = None


def modules_used(module):
    """Names of the modules a checks module imports (loaded in the student's process first)."""
    import types
    names = set()
    for value in vars(module).values():
        if isinstance(value, types.ModuleType):
            names.add(value.__name__)
        elif callable(value) and isinstance(getattr(value, "__module__", None), str):
            names.add(value.__module__)
    return {n for n in names if n in sys.modules and not n.startswith("autograder")}


def _nothing():
    import contextlib
    return contextlib.nullcontext()


def run(assignment, exercise, namespace, session=None, hold=None, until_failure=False, reference=None):
    """Run every hidden check of `exercise` against `namespace`; a list of Outcomes.

    With `session` (a judge.StudentProcess), `namespace` holds handles on the
    student's process, and a check that overruns its time stops that process.
    `hold()` (the judge's lease on the machine, shared) is entered around each
    check, outside its time limit; a check that judges a speed-up takes the machine
    alone for its timed part (`_support.alone()`), the wait not counted in its time.
    `until_failure`: stop at the first check that fails (enough to show that an
    answer is wrong); one that could not decide shows nothing, and the next ones run.
    `reference(assignment, exercise)`: (student's process or None, namespace) serving the reference
    solutions, started on first use. A check whose own code raised an error on the answer (not the
    answer's code, not a failed assertion: `raised_by_the_check`) runs there once: an error that
    only the answer's values cause fails the answer; one the reference solution meets too is the
    check's or the machine's fault, and a person decides. Without it, such a check is undecided.
    """
    checks = checks_for(assignment, exercise)
    if not checks:
        raise LookupError(f"no hidden checks for {assignment}/{exercise}")
    outcomes = []
    for fn in checks:
        start = time.perf_counter()
        if session is not None and session.broken:
            outcomes.append(Outcome(fn.__name__, describe(fn), False,
                                    f"not run: {session.broken}", 0.0))
            continue
        try:
            kwargs = _arguments(fn, namespace)
            try:
                with hold() if hold else _nothing():
                    start = time.perf_counter()
                    _call_with_timeout(fn, kwargs, getattr(fn, "timeout", DEFAULT_TIMEOUT))
            except CheckTimeout:
                if session is not None:
                    session.stop("an earlier check did not finish in time")
                raise
        except BaseException as err:  # noqa: BLE001
            if type(err).__name__ == "Skipped":  # pytest.skip(): the check cannot decide here
                outcomes.append(Outcome(fn.__name__, describe(fn), False,
                                        f"could not be decided ({err}); this check goes to a person",
                                        time.perf_counter() - start, undecided=True))
                continue
            if not _worded_by_us(err) and raised_by_the_check(err):
                settled = _settled_on_reference(fn, err, assignment, exercise, reference, hold)
                settled.seconds = time.perf_counter() - start
                outcomes.append(settled)
            else:
                outcomes.append(Outcome(fn.__name__, describe(fn), False, _failure_message(err),
                                        time.perf_counter() - start))
        else:
            outcomes.append(Outcome(fn.__name__, describe(fn), True, "", time.perf_counter() - start))
        if until_failure and not outcomes[-1].passed and not outcomes[-1].undecided:
            break
    return outcomes


REPORT_WIDTH = 90  # a feedback page shows an output's lines unwrapped: a longer one runs off its edge


def report(exercise, outcomes):
    """What the student reads of `exercise`'s failed checks: a count, then for each failed check what
    it looks at (its description) and, on the lines below, what it found, wrapped to REPORT_WIDTH."""
    import textwrap
    failed = [o for o in outcomes if not o.passed]
    # A check that could not decide is no failure of the answer's: counted apart, marked ⏳.
    undecided = sum(1 for o in failed if o.undecided)
    wrong = len(failed) - undecided
    if wrong and undecided:
        head = f"{wrong} of {len(outcomes)} hidden checks failed, {undecided} could not decide"
    elif wrong:
        head = f"{wrong} of {len(outcomes)} hidden checks failed"
    else:
        head = f"{undecided} of {len(outcomes)} hidden checks could not decide (a person will look at it)"
    lines = [f"{exercise}: {head}"]
    for o in failed:
        lines += textwrap.wrap(f"{'⏳' if o.undecided else '✗'} {o.description}", REPORT_WIDTH, initial_indent="  ",
                               subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)
        lines += textwrap.wrap(o.message or "(no message)", REPORT_WIDTH, initial_indent="    ",
                               subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def passed_report(exercise, outcomes):
    return f"{exercise}: all {len(outcomes)} hidden checks passed"


DEFERRED = "COURSE_CHECKS_OUTSIDE"  # set by the grader: the judge gives the verdict
# The kernel's line for a hidden block while grading; the grader puts the judge's verdict in its place.
PENDING = "{exercise}: the grader runs the hidden checks outside this notebook; any that fail are listed below"


def check(exercise, namespace=None):
    """The hidden block's entry point: raise AssertionError unless every check passes.

    `namespace` defaults to the caller's globals: in a kernel, the notebook's.

    While grading, the verdict comes from the judge, a process that runs no
    student code (autograder/pipeline/judge.py): the kernel then only says so, and
    each check runs once per grading.
    """
    __tracebackhide__ = True  # IPython and pytest hide this frame from the traceback
    import os
    if os.environ.get(DEFERRED) == "1" and os.environ.get("NBGRADER_EXECUTION") == "autograde":
        print(PENDING.format(exercise=exercise))
        return
    if namespace is None:
        namespace = sys._getframe(1).f_globals
    outcomes = run(assignment_of(exercise), exercise, namespace)
    if not all(o.passed for o in outcomes):
        raise AssertionError(report(exercise, outcomes)) from None
    print(passed_report(exercise, outcomes))
