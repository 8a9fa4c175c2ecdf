"""`student`: build dist/student/, the folder students receive.

It holds the release notebooks (with their extra files) of every assignment in
source/, the `helpers` package, the pinned environment (requirements.txt and
environment.yml), launchers that make `import helpers` work (bin/lab,
bin/validate for Linux and macOS; README.md says what to do on Windows), a
small nbgrader_config.py for self-checks, and a README on how to work.
Nothing from the grading side goes in: no solution, no hidden test, none of
this package.
"""
import shutil
from pathlib import Path

from . import course

DIST = course.ROOT / "dist" / "student"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")

LAB = r'''#!/usr/bin/env bash
# Opens the course in JupyterLab (the Validate button is in each notebook's toolbar).
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec jupyter lab --notebook-dir="$ROOT" "$@"
'''

VALIDATE = r'''#!/usr/bin/env bash
# Self-check from the terminal: runs a notebook and lists the test cells that fail.
#   bin/validate 01_processes_threads/01_processes_threads.ipynb
set -euo pipefail
source "$(dirname "$0")/env.sh"
[ "$#" -gt 0 ] || { echo "usage: bin/validate <assignment>/<assignment>.ipynb ..." >&2; exit 2; }
exec nbgrader validate "$@"
'''

NBGRADER_CONFIG = '''"""nbgrader settings for self-checks (bin/validate and the Validate button)."""
c = get_config()  # noqa: F821
# Cells of this course may take a while on a 2-core laptop: allow 3 minutes each.
c.Execute.timeout = 180
'''

README = """# Parallel Computing in Python and PyTorch: your course folder

One folder per assignment ({first}, ...). Each holds a notebook: read it from top
to bottom, run every cell, and fill in the exercises marked ✏️ (replace
`raise NotImplementedError()` with your code). No GPU is needed; cells that
need one say so and are skipped on a laptop.

## Set up and open the course (Linux, macOS)

```bash
bin/lab
```

The first run creates a Python environment in `.venv` from `requirements.txt`
(Python 3.11 or newer needed; a few minutes, about 1.5 GB, mostly PyTorch), then
opens JupyterLab in your browser. With conda instead:
`conda env create -f environment.yml`, `conda activate parallel-course`, then `bin/lab`.

`bin/lab` also puts this folder on `PYTHONPATH`, so that `import helpers`
works in the notebooks and in the worker processes they start.

## Windows

Use conda (or a virtual environment) from a terminal opened in this folder:

```
conda env create -f environment.yml
conda activate parallel-course
set PYTHONPATH=%CD%
jupyter lab
```

In PowerShell the third line is `$env:PYTHONPATH = (Get-Location).Path`.
Without it, `import helpers` fails. Note that Windows starts worker processes
with `spawn`: functions sent to workers must come from a `.py` file (the
notebooks explain this), never be defined in the notebook.

## Check your work before you hand it in

1. Run the test cell below each exercise. No error means the visible checks
   passed. The grader runs more checks of the same kind (other inputs,
   evidence that the work really ran in parallel), so read each exercise's
   wording carefully: passing the visible checks is necessary, not sufficient.
2. Click **Validate** in the notebook's toolbar. It saves the notebook, runs it
   from the top in a fresh kernel, and lists every test cell that fails (an
   unanswered exercise fails with `NotImplementedError`). From a terminal:
   `bin/validate {first}/{first}.ipynb`.
3. *Kernel → Restart Kernel and Run All Cells* must finish without errors
   (Run All stops at the first cell that raises).

Do not edit or delete the test cells: the grader puts them back.
Do not rename the notebook or the functions of the exercises.

## What is here

| Path | What |
|---|---|
| `{first}/` ... | the assignments: notebook plus any `.py` it needs |
| `helpers/` | small shared tools the notebooks use (timing, plots, worker functions) |
| `requirements.txt`, `environment.yml` | the pinned environment (pip or conda) |
| `bin/lab`, `bin/validate` | open JupyterLab; validate a notebook from the terminal |
| `nbgrader_config.py` | settings for validation (3 minutes per cell) |
"""


# The notebooks show the course's figures from course/img/, two folders up from
# release/<assignment>/; in the student folder the assignments sit one level higher.
IMAGES_IN_REPO, IMAGES_IN_BUNDLE = "](../../course/img/", "](../course/img/"


def build(out=None, assignments=None):
    """Write the student folder; return its path. Reads release/, so release first."""
    out = Path(out or DIST)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    assignments = list(assignments or course.assignments())
    for assignment in assignments:
        released = course.RELEASE / assignment
        if not course.release_notebook(assignment).is_file():
            raise SystemExit(f"student: {released} is missing; run `python -m autograder release` first")
        shutil.copytree(released, out / assignment, ignore=_IGNORE)
        for nb in (out / assignment).glob("*.ipynb"):  # figures: see IMAGES_IN_REPO
            nb.write_text(nb.read_text().replace(IMAGES_IN_REPO, IMAGES_IN_BUNDLE))
    shutil.copytree(course.ROOT / "course" / "img", out / "course" / "img",
                    ignore=shutil.ignore_patterns("*.py", "__pycache__", "jupyterlab.png", "site.png"))
    shutil.copytree(course.ROOT / "helpers", out / "helpers", ignore=_IGNORE)
    for name in ("requirements.txt", "environment.yml"):
        shutil.copy2(course.ROOT / name, out / name)
    (out / "bin").mkdir()
    # bin/env.sh is the course's own set-up script: the same for students.
    shutil.copy2(course.ROOT / "bin" / "env.sh", out / "bin" / "env.sh")
    for name, text, mode in (("lab", LAB, 0o755), ("validate", VALIDATE, 0o755)):
        path = out / "bin" / name
        path.write_text(text)
        path.chmod(mode)
    (out / "nbgrader_config.py").write_text(NBGRADER_CONFIG)
    (out / "README.md").write_text(README.format(first=assignments[0] if assignments else "01_processes_threads"))
    return out


def main(args):
    out = build(assignments=args.assignments or None)
    files = sum(1 for p in out.rglob("*") if p.is_file())
    print(f"student: {files} files in {out}")
    return 0
