"""python -m autograder <verb>: the instructor's commands, one module per verb."""
import argparse
import ast
import importlib
import os
import signal
import sys
import time
from pathlib import Path

from . import course
from .deferred_imports import defer_iri_parser

defer_iri_parser()  # before a verb imports nbformat or nbgrader


# Each verb's module is imported only when that verb runs: some import heavy libraries
# (jupytext, nbformat, Sphinx), about a second and a half that every other command would pay.
def _verb(module, function="main"):
    """A verb's entry point, `autograder.<module>.<function>(args)`, imported when called."""
    def run(args):
        return getattr(importlib.import_module(run.module), function)(args)
    run.module, run.function = f"{__package__}.{module}", function
    return run


def _docstring(module):
    """A verb module's docstring, read without importing it."""
    return ast.get_docstring(ast.parse((Path(__file__).parent / f"{module}.py").read_text()))


def _all(args):
    """release -> samples -> grade -> feedback -> report, timing each step. It grades the sample
    students only (unless --students names others): on a live course, submitted/ holds the class,
    whose grades and feedback this must not redo."""
    if not args.students:
        from .samples import STUDENTS
        args.students = list(STUDENTS)
    steps = [(name, _verb(name)) for name in ("release", "samples", "grade", "feedback", "report")]
    status = 0
    for name, step in steps:
        start = time.perf_counter()
        print(f"== {name}")
        status |= step(args)
        print(f"   ({name} took {time.perf_counter() - start:.1f} s)")
    print("\nDone. " + "   ".join(f"{what}: {where}" for what, where in _outputs().items()))
    return status


def _outputs():
    """{what: folder} that `all` wrote, as the closing line shows them: relative to the repository
    when the work folder is the repository, else absolute (COURSE_WORKDIR: the work folder's)."""
    work = course.Course()
    folders = {"Release": course.RELEASE, "Graded": work.autograded, "Feedback": work.feedback,
               "Reports": work.reports}
    at_root = Path(os.path.abspath(work.workdir)) == course.ROOT
    return {what: (f"{folder.relative_to(course.ROOT)}/" if at_root else f"{os.path.abspath(folder)}/")
            for what, folder in folders.items()}


class _Students(argparse.Action):
    """--students NAME...: at least one name, none blank. Without names (an empty shell
    variable) it would read as no filter, every student: a whole class graded again by accident."""

    def __call__(self, parser, namespace, values, option_string=None):
        if not values:
            parser.error(f"{option_string} needs at least one student name (was a variable empty?); "
                         "leave it out to mean every student")
        blank = [v for v in values if not v.strip()]
        if blank:
            parser.error(f"{option_string}: an empty student name in {values!r} (was a variable empty?)")
        setattr(namespace, self.dest, list(values))


# What each verb works on when no assignment is named (named ones must be in source/).
ASSIGNMENTS_HELP = {
    "release": "default: every assignment in source/",
    "samples": "default: every assignment in source/ (each must be released first)",
    "grade": "default: every assignment folder found under submitted/<student>/",
    "feedback": "default: every assignment folder found under autograded/<student>/ (the graded ones)",
    "report": "default: every assignment in the gradebook (each one released or graded into it)",
    "student": "default: every assignment in source/ (named ones: dist/student/ is rebuilt with only those)",
    "all": "default: every assignment in source/ is released and gets samples; grade and feedback then take "
           "every assignment folder of the students, report every assignment in the gradebook",
}


def parser():
    top = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    verbs = top.add_subparsers(dest="verb", required=True)
    helps = {
        "release": (_verb("release"), "generate the student notebooks in release/ from source/"),
        "samples": (_verb("samples"), "write the sample submissions into submitted/"),
        "grade": (_verb("grade"), "autograde every submission in submitted/, in parallel"),
        "feedback": (_verb("feedback"), "write HTML feedback for every graded submission"),
        "report": (_verb("report"), "write grade CSVs and plots into reports/"),
        "student": (_verb("student"), "build dist/student/, the folder students receive"),
        "all": (_all, "the main job: release, samples, grade, feedback, report (of the sample students)"),
    }
    graded_verbs = {"grade", "feedback", "all"}  # the verbs that work on submissions
    for verb, (fn, text) in helps.items():
        sub = verbs.add_parser(verb, help=text, description=text)
        sub.add_argument("assignments", nargs="*", help=ASSIGNMENTS_HELP[verb])
        sub.set_defaults(fn=fn)
        if verb == "report":
            sub.add_argument("--with-samples", action="store_true",
                             help="keep the sample students in the tables (left out once the gradebook "
                                  "holds anyone else, so that they never reach an LMS)")
        if verb not in graded_verbs:
            continue
        sub.add_argument("--students", nargs="*", action=_Students, metavar="STUDENT",
                         help="default: the sample students" if verb == "all"
                         else f"default: every student in {'autograded' if verb == 'feedback' else 'submitted'}/")
        sub.add_argument("--jobs", type=int, default=None,
                         help="submissions at a time (default: the usable cores)")
        sub.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                         help="grade and write feedback on the workers of this Dask cluster "
                              "(default: COURSE_SCHEDULER, else this machine)")
    bench = verbs.add_parser("benchmark", help="time parallel grading against plain nbgrader; "
                             "check that grading is steady", description=_docstring("benchmark"),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("assignments", nargs="*", help="the assignments to use (default: all)")
    bench.add_argument("--copies", type=int, default=2, help="students handing in every assignment (default 2)")
    bench.add_argument("--jobs", type=int, default=None)
    bench.add_argument("--repeat", type=int, default=0, help="grade the reference answers N times instead")
    bench.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    bench.add_argument("--pace", action="store_true", help="print only the machine's pace (CPU-s of import torch)")
    bench.set_defaults(fn=_verb("benchmark"))
    web = verbs.add_parser("site", help="build the course website (Sphinx + MyST-NB) from the release "
                           "notebooks, executed here", description=_docstring("site"),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    web.add_argument("assignments", nargs="*", help="default: every assignment in source/")
    web.add_argument("--out", default=None, help="output folder (default: dist/site); the pages go to OUT/html")
    web.set_defaults(fn=_verb("site"))
    auth = verbs.add_parser("author", help="a notebook as text and back; a new assignment from the template; "
                            "every cell of the notebooks run",
                            description=_docstring("author"), formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = auth.add_subparsers(dest="step", required=True)
    export = steps.add_parser("export", help="write a notebook's text form (jupytext's percent format)")
    export.add_argument("notebook", help="e.g. source/01_processes_threads/01_processes_threads.ipynb")
    export.add_argument("text", nargs="?", help="the file to write (default: standard output)")
    build = steps.add_parser("build", help="build a notebook from its text form, keeping the cell ids it had")
    build.add_argument("text", help="the text form, e.g. draft.py")
    build.add_argument("notebook", help="the notebook to write (its cell ids are kept)")
    new = steps.add_parser("new", help="start an assignment from the course's notebook template")
    new.add_argument("assignment", help="NN_words, e.g. 13_gpu_kernels")
    new.add_argument("title", help='its title, e.g. "GPU kernels"')
    new.add_argument("exercise", help="the function name of its first exercise")
    running = steps.add_parser("run", help="run every cell of the source notebooks, as before a term starts")
    running.add_argument("assignments", nargs="*", help="default: every assignment in source/")
    running.add_argument("--start-method", choices=("fork", "spawn", "forkserver"), default=None,
                         help="every process's default start method (default: the platform's)")
    running.add_argument("--out", default=None, help="write the executed notebooks into this folder")
    auth.set_defaults(fn=_verb("author", "command"))
    return top


def _environment():
    """nbgrader calls `alembic` from PATH, and kernels import helpers/autograder:
    make both work even when the environment was not activated."""
    bin_dir = os.path.dirname(sys.executable)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(course.ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(course.ROOT), *filter(None, paths)])
    os.environ.setdefault("MPLBACKEND", "Agg")


INTERRUPTED = {
    "grade": ("; the submissions graded before it keep their scores; those in progress were stopped, "
              "their kernels and judges with them: run the same command again to grade them"),
}


def _outside_the_environment(verb, missing):
    """A package missing where the course's environment is not the one running (a new shell
    without `source bin/env.sh`): one line saying so, not the import's traceback."""
    venv = course.ROOT / ".venv"
    if Path(sys.prefix).resolve() != venv.resolve():
        raise SystemExit(f"{verb}: this Python ({sys.executable}) has no `{missing.name}`: the course's commands "
                         f"run in its own environment. Run `source bin/env.sh` first (it sets up {venv} if "
                         "needed and activates it; with conda instead, `conda env update -f environment.yml` "
                         "and `conda activate parallel-course`), then the command again.")


def main(argv=None):
    _environment()
    args = parser().parse_args(argv)
    unknown = [a for a in getattr(args, "assignments", []) or [] if a not in course.assignments()]
    if unknown:
        raise SystemExit(f"unknown assignment(s): {', '.join(unknown)}; "
                         f"known: {', '.join(course.assignments())}")
    stopped_by = []

    def stop(signum, frame):  # a scheduler's or service manager's SIGTERM (a job's time limit): as Ctrl-C
        stopped_by.append(signum)
        raise KeyboardInterrupt
    # SIGHUP: the terminal or ssh session closed. The handlers are put back on the way out: a
    # caller in the same process (a test, a notebook) whose children fork would otherwise give
    # them a Python handler, and a SIGTERM that reaches a child before it has set itself up after
    # the fork is then lost (multiprocessing's Pool.terminate() waited for such a worker forever).
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return args.fn(args)
    except ModuleNotFoundError as missing:
        _outside_the_environment(args.verb, missing)
        raise
    except KeyboardInterrupt as stopped:  # Ctrl-C: what was done stays done; no traceback for it
        # On a Dask cluster, a stop the workers did not all confirm says so (cluster.py).
        said = getattr(stopped, "course_said", None) or INTERRUPTED.get(args.verb, "")
        try:
            print(f"\n{args.verb}: interrupted{said}", file=sys.stderr, flush=True)
        except OSError:  # the terminal is gone (SIGHUP)
            pass
        return 128 + (stopped_by[0] if stopped_by else signal.SIGINT)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
