"""dist/student/ (`python -m autograder student`) gives students the release and nothing more."""
import copy
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import course, notebooks, student


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return student.build(tmp_path_factory.mktemp("dist") / "student")


def _files(folder):
    return sorted(p.relative_to(folder) for p in Path(folder).rglob("*") if p.is_file())


def test_bundle_has_what_students_need(bundle):
    for name in ("README.md", "requirements.txt", "constraints.txt", "environment.yml", "nbgrader_config.py",
                 "bin/lab", "bin/validate", "bin/env.sh", "helpers/__init__.py"):
        assert (bundle / name).is_file(), f"the student folder lacks {name}"
    for name in ("bin/lab", "bin/validate"):
        assert os.access(bundle / name, os.X_OK), f"{name} is not executable"
    # The same constraints; the students' requirements and environment.yml are the course's for
    # STUDENT_PACKAGES (test_students_install_what_their_files_import_and_not_the_instructors_tools).
    assert (bundle / "constraints.txt").read_text() == (course.ROOT / "constraints.txt").read_text()
    assert (bundle / "requirements.txt").read_text() == student.student_requirements()
    assert (bundle / "environment.yml").read_text() == student.student_environment_yml()
    assert sorted(p.name for p in bundle.iterdir() if p.is_dir()) == sorted(
        [*course.assignments(), "bin", "helpers"])


def test_notebooks_are_the_release_ones(bundle, assignment):
    released = course.RELEASE / assignment
    files = [f for f in _files(released) if "__pycache__" not in f.parts]
    assert _files(bundle / assignment) == files
    for rel in files:
        assert filecmp.cmp(bundle / assignment / rel, released / rel, shallow=False), rel


def test_every_figure_a_notebook_shows_is_in_the_bundle(bundle, assignment):
    """In the assignment's own folder, which is all that nbgrader's exchange moves to a student."""
    for nb in (bundle / assignment).glob("*.ipynb"):
        for link in re.findall(r"\]\(([^)\s]+\.(?:png|svg))\)", nb.read_text()):
            if "://" not in link:
                assert (nb.parent / link).is_file(), f"{nb.name} shows {link}, which the student folder lacks"
                assert (nb.parent / link).resolve().is_relative_to((bundle / assignment).resolve()), (
                    f"{nb.name} shows {link}, outside its assignment's folder (a student who fetches the "
                    "assignment on a JupyterHub does not get it)")


def test_helpers_are_the_course_helpers(bundle):
    ours = [f for f in _files(course.ROOT / "helpers") if "__pycache__" not in f.parts and f.suffix != ".pyc"]
    assert _files(bundle / "helpers") == ours
    for rel in ours:
        assert filecmp.cmp(bundle / "helpers" / rel, course.ROOT / "helpers" / rel, shallow=False)


def test_no_solution_no_hidden_test_no_grader_code(bundle):
    assert not (bundle / "autograder").exists() and not (bundle / "source").exists()
    solutions = []
    for assignment in course.assignments():
        for src in notebooks.answer_cells(notebooks.read(course.source_notebook(assignment))).values():
            solutions += [_squash(body) for body in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", src, re.S)
                          if len(_squash(body)) > 40]
    assert solutions, "found no solution in source/ to look for"
    for path in bundle.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
            assert marker not in text, f"{path.relative_to(bundle)} contains {marker!r}"
        assert "autograder" not in text.lower(), f"{path.relative_to(bundle)} mentions the grader"
        if path.suffix == ".ipynb":   # a notebook's source lines sit in JSON strings
            text = "\n".join(c.source for c in notebooks.read(path).cells)
        squashed = _squash(text)
        leaked = [body[:60] for body in solutions if body in squashed]
        assert not leaked, f"{path.relative_to(bundle)} holds a solution: {leaked[:3]}"


def _squash(text):
    """Code with all whitespace removed, so that indentation or line breaks do not hide a copy."""
    return re.sub(r"\s+", "", text)


def test_helpers_define_no_graded_exercise(bundle):
    names = {name for names in course.contract().values() for name in names}
    for path in (bundle / "helpers").rglob("*.py"):
        defined = set(re.findall(r"^(?:async\s+)?def\s+(\w+)|^(\w+)\s*=", path.read_text(), re.M))
        defined = {a or b for a, b in defined}
        assert not names & defined, f"{path.name} defines graded exercise(s) {names & defined}"


def test_helpers_import_from_the_bundle_alone(bundle):
    """What bin/lab sets up: the student folder on PYTHONPATH, nothing of the instructor's."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(bundle)
    code = ("import sys, helpers, helpers.plots, helpers.timing, helpers.workers, helpers.system; "
            "assert helpers.__file__.startswith(sys.argv[1]), helpers.__file__; "
            "assert not any(m.startswith('autograder') for m in sys.modules); "
            "print(helpers.system.usable_cores())")
    done = subprocess.run([sys.executable, "-c", code, str(bundle)], cwd=bundle, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) >= 1


def test_launchers_are_valid_bash(bundle):
    for name in ("lab", "validate", "env.sh"):
        done = subprocess.run(["bash", "-n", str(bundle / "bin" / name)], capture_output=True, text=True)
        assert done.returncode == 0, f"bin/{name}: {done.stderr}"
    done = subprocess.run(["bash", str(bundle / "bin" / "validate")], capture_output=True, text=True,
                          env={**os.environ, "CONDA_DEFAULT_ENV": "parallel-course"}, timeout=60)
    assert done.returncode == 2 and "usage" in done.stderr


def _graded_cell(source, grade_id):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "locked": True, "points": 1,
                                 "solution": False, "schema_version": 3}
    return cell


def test_validate_skips_the_demos_as_grading_does(bundle, tmp_path):
    """bin/validate (and the Validate button, which reads the same nbgrader_config.py) runs the
    notebook as grading does: cells tagged demo do not run, the test cells do."""
    folder = shutil.copytree(bundle, tmp_path / "student")
    demo = nbformat.v4.new_code_cell("open('demo-ran.txt', 'w').close()\nDEMO_VALUE = 1")
    demo.metadata["tags"] = ["demo"]
    nb = nbformat.v4.new_notebook(cells=[
        demo,
        _graded_cell("assert 'DEMO_VALUE' not in globals(), 'a demo cell ran while validating'", "test_no_demo"),
        _graded_cell("raise ValueError('a failing test cell 1729, with a message as long as a good hint is: '"
                     " + 'what went wrong ' * 8 + 'and what to look at END4217')", "test_fails")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (folder / "00_check").mkdir()
    nbformat.write(nb, str(folder / "00_check" / "check.ipynb"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(folder)
    # bin/validate from another folder, with a path relative to it (the set-up moves to the
    # course folder, where the path meant nothing); this environment stands in for the student's.
    env["CONDA_DEFAULT_ENV"] = "parallel-course"
    done = subprocess.run(["bash", str(folder / "bin" / "validate"), "check.ipynb"], cwd=folder / "00_check",
                          env=env, capture_output=True, text=True, timeout=300)
    report = done.stdout + done.stderr
    assert "1729" in report, f"the failing test cell was not reported:\n{report[-3000:]}"
    # nbgrader validate cuts every line of its report at 87 characters; bin/validate wraps them.
    assert "END4217" in "".join(line.strip() for line in report.splitlines()), report[-3000:]
    assert any("END4217" in line for line in report.splitlines()), "a word was split where the line wrapped"
    assert "a demo cell ran" not in report, report[-3000:]
    assert not (folder / "00_check" / "demo-ran.txt").exists(), "the demo cell ran while validating"
    assert done.returncode == 1, f"a failed validation exited {done.returncode}:\n{report[-2000:]}"
    assert "only a demo cell defines" not in report, "the demo hint without a NameError"
    # An answer that reads a name only a demo binds: the demo runs, as grading runs it (mend.py), and
    # validate says so.
    needs = nbformat.from_dict(copy.deepcopy(nb))
    needs.cells = [needs.cells[0], _graded_cell("print(DEMO_VALUE + 1)", "test_uses_demo")]
    nbformat.write(needs, str(folder / "00_check" / "needs.ipynb"))
    done = subprocess.run(["bash", str(folder / "bin" / "validate"), "needs.ipynb"], cwd=folder / "00_check",
                          env=env, capture_output=True, text=True, timeout=300)
    report = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0 and "NameError" not in report, report[-2000:]
    assert "a cell tagged demo binds 'DEMO_VALUE', which your graded code uses" in report, report[-2000:]
    assert (folder / "00_check" / "demo-ran.txt").exists(), "the demo that the test cell needs did not run"
    (folder / "00_check" / "demo-ran.txt").unlink()
    # A name read in a way no reading of the code can see: a NameError, and the hint about demos.
    nb.cells[2] = _graded_cell("print(eval('DEMO_VALUE'))", "test_uses_demo")
    nbformat.write(nb, str(folder / "00_check" / "check.ipynb"))
    done = subprocess.run(["bash", str(folder / "bin" / "validate"), "check.ipynb"], cwd=folder / "00_check",
                          env=env, capture_output=True, text=True, timeout=300)
    assert "NameError" in done.stdout and "only a demo cell defines" in done.stdout, done.stdout[-2000:]
    assert not (folder / "00_check" / "demo-ran.txt").exists(), "the demo cell ran while validating"
    nb.cells = nb.cells[:2]  # without the failing cell: it passes, and says so with its status
    nbformat.write(nb, str(folder / "00_check" / "check.ipynb"))
    done = subprocess.run(["bash", str(folder / "bin" / "validate"), "00_check/check.ipynb"], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "without encryption" not in done.stdout + done.stderr, "ipykernel's transport warning reaches the student"
    # A copied test cell (its grade_id too): stock validate stopped on "the nbgrader metadata may be
    # corrupted"; here it runs as grading does (the last copy graded) and says so.
    nb.cells.append(nbformat.from_dict(copy.deepcopy(nb.cells[1])))
    nb.cells[-1]["id"] = "copied-below"
    nbformat.write(nb, str(folder / "00_check" / "check.ipynb"))
    done = subprocess.run(["bash", str(folder / "bin" / "validate"), "00_check/check.ipynb"], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)
    report = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0 and "corrupted" not in report, report[-2000:]
    assert "'test_no_demo' is in 2 cells (a copied or split cell)" in report, report[-2000:]


def test_validate_warns_of_modules_that_are_not_handed_in(bundle, tmp_path):
    """Only the notebook is handed in, and grading puts an assignment's own modules back as shipped:
    a module of the student's beside the notebook, or their edit of pool_tasks.py, passes Validate
    and fails when graded. Validate says so (the bundle's course_files.json lists what ships)."""
    folder = shutil.copytree(bundle, tmp_path / "student") / "05_multiprocessing_pools"
    (folder / "my_tasks.py").write_text("def square(x):\n    return x * x\n")
    uses = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import numpy\nimport pool_tasks\nimport my_tasks\nprint(my_tasks.square(3))"),
        _graded_cell("assert True", "test_any")])
    uses.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(uses, str(folder / "check.ipynb"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"], env["CONDA_DEFAULT_ENV"] = str(folder.parent), "parallel-course"

    def validate():
        done = subprocess.run(["bash", str(folder.parent / "bin" / "validate"), "check.ipynb"], cwd=folder,
                              env=env, capture_output=True, text=True, timeout=300)
        return done.returncode, " ".join((done.stdout + done.stderr).split())

    # A failed check, which the Validate button shows (it shows no log), and a failed exit status.
    status, report = validate()
    assert status == 1 and "my_tasks.py, beside the notebook, is not graded (only the notebook is)" in report, report[-2000:]
    assert "(%%writefile my_tasks.py)" in report and "pool_tasks.py is not as" not in report, report[-2000:]
    with open(folder / "pool_tasks.py", "a") as shipped:
        shipped.write("\ndef cube(x):\n    return x ** 3\n")
    status, report = validate()
    assert "pool_tasks.py is not as the course shipped it: grading uses the course's copy" in report, report[-2000:]
    # Written from a cell of the notebook, as grading runs it too: nothing to say.
    (folder / "pool_tasks.py").write_bytes((bundle / "05_multiprocessing_pools" / "pool_tasks.py").read_bytes())
    uses.cells.insert(0, nbformat.v4.new_code_cell("%%writefile my_tasks.py\ndef square(x):\n    return x * x\n"))
    nbformat.write(uses, str(folder / "check.ipynb"))
    status, report = validate()
    assert status == 0 and "not graded" not in report and "shipped" not in report, report[-2000:]


def test_validate_reads_a_notebook_out_of_form_as_grading_does(bundle, tmp_path):
    """A notebook another tool saved slightly out of Jupyter's form (here: a byte-order mark, a
    kernelspec without display_name, a cell id too long) is graded as meant
    (helpers/notebook_form.py); nbgrader's own reader made Validate fail on it with a traceback."""
    folder = shutil.copytree(bundle, tmp_path / "student")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("VALUE = 41"),
                                         _graded_cell("assert VALUE + 1 == 42", "test_value")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (folder / "00_check").mkdir()
    path = folder / "00_check" / "check.ipynb"
    nbformat.write(nb, str(path))
    data = json.loads(path.read_text())
    del data["metadata"]["kernelspec"]["display_name"]
    data["cells"][0]["id"] = "x" * 65
    path.write_text("\ufeff" + json.dumps(data), encoding="utf-8")
    with pytest.raises(Exception):
        nbformat.read(str(path), 4)  # as nbgrader's Validator read it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"], env["CONDA_DEFAULT_ENV"] = str(folder), "parallel-course"
    done = subprocess.run(["bash", str(folder / "bin" / "validate"), "check.ipynb"], cwd=folder / "00_check",
                          env=env, capture_output=True, text=True, timeout=300)
    report = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0 and "Traceback" not in report and "Success!" in report, report[-3000:]
    for words in ("byte-order mark", "display name", "a cell's id was read as a new one", "grading reads it the same"):
        assert words in report, (words, report[-3000:])
    # The student's file is theirs: Validate reads it, never writes it.
    assert path.read_text(encoding="utf-8") == "\ufeff" + json.dumps(data)
    # A notebook grading would refuse for its size (nbgrader reads it whole, outside the sandbox)
    # is refused here too, with what to do; before, Validate read it and said Success.
    big = folder / "00_check" / "big.ipynb"
    with open(big, "wb") as sparse:
        sparse.truncate(101 * 2**20)  # its size alone is read
    done = subprocess.run(["bash", str(folder / "bin" / "validate"), "big.ipynb"], cwd=folder / "00_check",
                          env=env, capture_output=True, text=True, timeout=300)
    report = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0 and "Success" not in report, report[-2000:]
    assert "is 101 MB, over the 100 MB a notebook may have to be graded" in report, report[-2000:]
    assert "Edit > Clear Outputs of All Cells" in report, report[-2000:]


def test_cli_verb_builds_dist_student():
    done = subprocess.run([sys.executable, "-m", "autograder", "student", "--help"], cwd=course.ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "dist/student" in done.stdout


# How the course's own history could slip into what students read: the tutorials it grew from
# were called "the seeds" while it was written ("the seeds' race", "keep the seed's widths"), which
# means nothing to a student. (Seeds of random generators are another matter: "spawns the seeds".)
SOURCE_MATERIAL = re.compile(r"\bseeds'|\bseed's\b|\bseed (?:tutorials?|widths?|code)\b|\bthe seeds (?:use|draw|say)\b", re.I)


def test_students_read_nothing_about_the_courses_source_material(bundle):
    """No text a student reads (the bundle's notebooks, helpers and README) or gets back in
    feedback (the hidden checks' messages) speaks of the material the course was written from."""
    found = []
    readable = [p for p in bundle.rglob("*") if p.is_file() and p.suffix in (".ipynb", ".py", ".md")]
    for path in [*readable, *sorted((course.ROOT / "autograder" / "checks").glob("*.py"))]:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if SOURCE_MATERIAL.search(line):
                found.append(f"{path.name}:{number}: {SOURCE_MATERIAL.search(line)[0]}")
    assert len(readable) > 20, "the bundle holds fewer files than it should: is the fixture right?"
    assert not found, f"words about the course's source material: {found[:10]}"


# What students install: the packages their files need, not the instructor's whole set.

# Imported only under a guard that says how to get it (07's TPU cells: torch_xla on a TPU machine).
GUARDED_IMPORTS = {"torch_xla"}


def _third_party_imports(folder):
    """Top-level modules the notebooks and Python files of `folder` import, less the standard
    library and the folder's own modules (helpers, a notebook's pool_tasks.py)."""
    import ast

    own = {p.stem for p in Path(folder).rglob("*.py")} | {p.name for p in Path(folder).iterdir() if p.is_dir()}
    sources = [p.read_text() for p in Path(folder).rglob("*.py")]
    for path in Path(folder).rglob("*.ipynb"):
        sources += [c.source for c in notebooks.read(path).cells if c.cell_type == "code"]
    # A module a notebook writes itself (`%%writefile defs.py`, 05's lesson on importable workers).
    own |= {Path(s.split()[1]).stem for s in sources if s.startswith("%%writefile")}
    found = set()
    for source in sources:
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:  # a cell with top-level await or a shell escape inside a block
            tree = ast.parse("\n".join(l for l in lines if "await" not in l), mode="exec")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - own - {"__future__"}


def _installed_closure(names):
    """The distributions `names` install, with everything they require (markers of this machine)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    def norm(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    seen, todo = set(), [norm(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or ():
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(norm(req.name))
    return seen


def test_students_install_what_their_files_import_and_not_the_instructors_tools(bundle):
    """The student folder's requirements.txt (and environment.yml) hold STUDENT_PACKAGES, pinned as
    the course pins them: everything the notebooks, their modules and helpers import comes with them
    (cloudpickle through joblib), and the instructor's tools do not
    (students installed playwright, dask, sphinx, psycopg and pytest: 2.0 GB in all)."""
    from importlib import metadata

    wanted = [line.split("==")[0] for line in (bundle / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")]
    assert wanted == list(student.STUDENT_PACKAGES)
    yml = (bundle / "environment.yml").read_text()
    assert all(f"      - {line}\n" in yml for line in (bundle / "requirements.txt").read_text().splitlines()
               if "==" in line), yml
    closure = _installed_closure(wanted)
    providers = metadata.packages_distributions()
    imports = _third_party_imports(bundle) - GUARDED_IMPORTS
    assert {"torch", "numpy", "cloudpickle", "line_profiler"} <= imports, imports
    missing = {m: providers.get(m) for m in imports
               if not any(re.sub(r"[-_.]+", "-", d).lower() in closure for d in providers.get(m, []))}
    assert not missing, f"the students' files import these, which their requirements do not bring: {missing}"
    for tool in ("playwright", "dask", "distributed", "sphinx", "psycopg", "pytest", "jupytext"):
        assert tool not in closure, f"students would install {tool}, an instructor's tool"
    pins = dict(line.split("==") for line in (course.ROOT / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for line in (bundle / "requirements.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            assert pins.get(name) == version, f"{line}: the course pins {name}=={pins.get(name)}"
