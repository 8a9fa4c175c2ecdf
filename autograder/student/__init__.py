"""`student`: build dist/student/, the folder students receive.

It holds the release notebooks (with their extra files) of every assignment in
source/, the `helpers` package, the pinned environment (requirements.txt,
constraints.txt and environment.yml), launchers that make `import helpers` work (bin/lab,
bin/validate for Linux and macOS; README.md says what to do on Windows), a
small nbgrader_config.py for self-checks with the list of the modules each assignment ships
(course_files.json), and a README on how to work.
Nothing from the grading side goes in: no solution, no hidden test, none of
this package.
"""
import hashlib
import json
import shutil
from pathlib import Path

from .. import course

DIST = course.ROOT / "dist" / "student"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")

# What the folder holds besides the assignments: README.md (its {first} becomes the first
# assignment), bin/lab, bin/validate, nbgrader_config.py.
BUNDLE = Path(__file__).resolve().parent / "bundle"

# The packages of the pinned set that students install: what the notebooks, their modules and
# helpers import (or what brings it: joblib requires the cloudpickle that 09 and 12 import),
# JupyterLab with nbgrader's Validate, and a kernel. The rest of requirements.txt serves the
# instructor (tests, the website, PostgreSQL, Dask, jupytext); tests/test_student_bundle.py checks
# that everything the students' files import comes with this set.
STUDENT_PACKAGES = ("torch", "numpy", "numba", "scipy", "matplotlib", "joblib", "threadpoolctl", "psutil",
                    "line_profiler", "tqdm", "nbgrader", "nbclient", "nbconvert", "ipykernel",
                    "jupyterlab", "notebook")


def _pins(path):
    """{package: its pinned line} of a requirements or constraints file."""
    return {line.split("==")[0].strip().lower(): line.strip() for line in path.read_text().splitlines()
            if "==" in line and not line.lstrip().startswith("#")}


def student_requirements():
    """The students' requirements.txt: STUDENT_PACKAGES, pinned as the course pins them."""
    course_pins = _pins(course.ROOT / "requirements.txt")
    lines = [course_pins[name] for name in STUDENT_PACKAGES]
    return ("# What the course's notebooks need, pinned (the course's instructors install more);\n"
            "# constraints.txt fixes the versions of everything these pull in.\n" + "\n".join(lines) + "\n")


def student_environment_yml():
    """The course's environment.yml with the students' packages only."""
    text = (course.ROOT / "environment.yml").read_text()
    head, _, _ = text.partition("      - -c constraints.txt\n")
    pins = student_requirements().splitlines()[2:]
    return head + "      - -c constraints.txt\n" + "".join(f"      - {line}\n" for line in pins)


def build(out=None, assignments=None):
    """Write the student folder afresh (what was there goes, a .venv set up in it too: the folder
    is what students receive, nothing more); return its path. Reads release/, so release first."""
    out = Path(out or DIST)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    assignments = list(assignments or course.assignments())
    for assignment in assignments:
        released = course.RELEASE / assignment
        if not course.release_notebook(assignment).is_file():
            raise SystemExit(f"student: {released} is missing; run `python -m autograder release` first")
        shutil.copytree(released, out / assignment, ignore=_IGNORE)  # with its figures, in img/
    _write_shipped_modules(out, assignments)
    shutil.copytree(course.ROOT / "helpers", out / "helpers", ignore=_IGNORE)
    shutil.copy2(course.ROOT / "constraints.txt", out / "constraints.txt")
    (out / "requirements.txt").write_text(student_requirements())
    (out / "environment.yml").write_text(student_environment_yml())
    shutil.copytree(BUNDLE, out, ignore=_IGNORE, dirs_exist_ok=True)
    # bin/env.sh is the course's own set-up script: the same for students.
    shutil.copy2(course.ROOT / "bin" / "env.sh", out / "bin" / "env.sh")
    readme = out / "README.md"
    readme.write_text(readme.read_text().format(first=assignments[0] if assignments else "01_processes_threads"))
    return out


SHIPPED_MODULES = "course_files.json"


def _write_shipped_modules(out, assignments):
    """{assignment: {module file: sha256}} of the modules each assignment ships: Validate fails on
    a module the notebook imports from beside it that is not one of them (not handed in: grading
    has none) or that differs from it (grading puts the course's copy back)."""
    shipped = {assignment: {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
                            for path in sorted((out / assignment).glob("*.py"))} for assignment in assignments}
    (out / SHIPPED_MODULES).write_text(json.dumps(shipped, indent=1, sort_keys=True) + "\n")


def main(args):
    had_environment = (DIST / ".venv").is_dir()
    out = build(assignments=args.assignments or None)
    files = sum(1 for p in out.rglob("*") if p.is_file())
    only = f" (built afresh with only {', '.join(args.assignments)})" if args.assignments else " (built afresh)"
    print(f"student: {files} files in {out}{only}")
    if had_environment:
        print(f"student: the environment set up in {DIST / '.venv'} went with the old folder "
              "(bin/validate or bin/lab there sets it up again)")
    return 0
