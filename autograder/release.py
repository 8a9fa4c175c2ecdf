"""`release`: generate the student notebooks in release/ from source/ with nbgrader."""
import shutil
from pathlib import Path

from . import course


def generate(assignments=None, release_dir=None, work=None, quiet=True):
    """Run nbgrader's generate_assignment for each assignment; return the release folder.

    With `release_dir` (and `work`, a course.Course whose gradebook records it) the
    release goes elsewhere (used by the test that proves release/ is what this
    step makes from source/ now).
    """
    overrides = {}
    if release_dir is not None:
        overrides.setdefault("CourseDirectory", {})["release_directory"] = str(release_dir)
    if quiet:
        overrides["Application"] = {"log_level": "WARN"}
    api = (work or course.Course()).api(**overrides)
    for assignment in assignments or course.assignments():
        _refuse_other_notebooks(assignment)
        result = api.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise RuntimeError(f"release of {assignment} failed:\n{result.get('log') or ''}\n{result.get('error') or ''}")
        _drop_build_leftovers(Path(api.coursedir.format_path(api.coursedir.release_directory, ".", assignment)))
    return Path(release_dir) if release_dir else course.RELEASE


def _refuse_other_notebooks(assignment):
    """An assignment is its one notebook, source/<a>/<a>.ipynb. Another notebook beside it (an
    `author build` to a mistyped path) made nbgrader refuse the release with a long traceback
    that did not name it, and take the assignment's release/ folder away."""
    folder = course.SOURCE / assignment
    others = sorted(p.name for p in folder.glob("*.ipynb") if p.name != f"{assignment}.ipynb")
    if others:
        raise SystemExit(f"release: {folder} holds {', '.join(others)} beside {assignment}.ipynb: an assignment is "
                         "its one notebook, and nbgrader would release every notebook there. Move or delete "
                         "the other(s) (a mistyped `author build` target?), then release again")


def _drop_build_leftovers(folder):
    for junk in list(folder.rglob("__pycache__")) + list(folder.rglob(".ipynb_checkpoints")):
        shutil.rmtree(junk, ignore_errors=True)


def main(args):
    out = generate(args.assignments or None)
    print(f"release: {out}")
    return 0
