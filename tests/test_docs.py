"""Every command in the docs' ```bash blocks (README.md, course/*.md) refers to real things.

Each command line is checked: `bin/...` scripts exist and are executable,
`python -m autograder <verb>` verbs exist (`--help` works), `nbgrader <sub>` and
`jupyter <sub>` subcommands exist, other programs are on PATH, every path it
names exists (or is made by the course: dist/student/ is built and looked in),
every variable it sets is read by the course. Cheap commands are run for real.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from autograder import course, student

DOCS = [course.ROOT / "README.md", *sorted((course.ROOT / "course").glob("*.md"))]
# Folders the course writes (bin/main, the grading steps) rather than ships.
GENERATED = ("submitted/", "autograded/", "feedback/", "reports/", "dist/", ".venv/")
# Commands cheap enough to run for real (prefix match on the normalised line).
RUN_FOR_REAL = ("python -m autograder student", "python -m autograder author export", "python -c ",
                "jupyter labextension list", "jupyter server extension list")


def bash_commands(path):
    """(line number, command) for every command line of the ```bash blocks of a markdown file."""
    commands, block, pending = [], False, ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = re.match(r"\s*```(\w*)\s*$", line)
        if fence and not block:
            block = fence[1] == "bash" and "bash"
            block = block or "other"
            continue
        if fence and block:
            block = False
            continue
        if block != "bash":
            continue
        text = pending + line.strip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        if text and not text.startswith("#"):
            commands.append((number, text))
    return commands


ALL = [(doc, number, cmd) for doc in DOCS for number, cmd in bash_commands(doc)]


def test_docs_exist_and_have_commands():
    names = {d.relative_to(course.ROOT).as_posix() for d in DOCS}
    assert {"README.md", "course/syllabus.md", "course/instructor_guide.md"} <= names
    assert len(ALL) >= 15, "expected the README and the guide to show their commands"
    assert (course.ROOT / "course" / "img" / "jupyterlab.png").is_file()
    assert "course/img/jupyterlab.png" in (course.ROOT / "README.md").read_text()


def _env():
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(course.ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MPLBACKEND", "Agg")
    return env


@lru_cache(maxsize=None)
def _help_ok(*argv):
    done = subprocess.run([*argv, "--help"], cwd=course.ROOT, env=_env(), capture_output=True,
                          text=True, timeout=180)
    return done.returncode == 0


def _autograder_help_ok(verb):
    """`python -m autograder <verb> --help` exits 0 (the CLI's own parser, in this process)."""
    import contextlib
    import io

    from autograder import cli

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.parser().parse_args([verb, "--help"])
        except SystemExit as exit_:
            return exit_.code == 0
    return False


@lru_cache(maxsize=None)
def _nbgrader_subcommands():
    from nbgrader.apps.nbgraderapp import NbGraderApp
    return set(NbGraderApp.subcommands)


def test_module_entry_points_answer():
    assert _help_ok(sys.executable, "-m", "autograder")
    assert _help_ok(sys.executable, "-m", "nbgrader")


@lru_cache(maxsize=None)
def _student_bundle():
    import tempfile
    return student.build(Path(tempfile.mkdtemp(prefix="docs-student-")) / "student")


def _referenced_variable(name):
    places = [course.ROOT / "nbgrader_config.py", *course.ROOT.joinpath("bin").iterdir(),
              *course.ROOT.joinpath("autograder").rglob("*.py"), *course.ROOT.joinpath("helpers").rglob("*.py")]
    return any(name in p.read_text(errors="replace") for p in places if p.is_file())


def _check_path(token):
    token = token.strip("'\"")
    if token.startswith(("http:", "https:", "/", "-")) or "<" in token or "$" in token:
        return None
    if "/" not in token or "=" in token or not re.match(r"^[\w.][\w./-]*$", token):
        return None
    if token.startswith("dist/student/"):
        rel = token[len("dist/student/"):]
        return None if (_student_bundle() / rel).exists() else f"{token} is not in the student folder"
    if token.startswith(GENERATED):
        return None
    match = re.match(r"^(source|release)/(\d\d_\w+)/", token)
    if match and match[2] in course.contract() and match[2] not in course.assignments():
        return None   # an assignment of the course spec still being written in another branch
    return None if (course.ROOT / token).exists() else f"{token} does not exist"


def _split(cmd):
    words = shlex.split(cmd)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):   # VAR=value prefixes
        name = words.pop(0).split("=", 1)[0]
        assert _referenced_variable(name), f"{name} is set but the course never reads it"
    return words


@pytest.mark.parametrize("doc,number,cmd", ALL, ids=[f"{d.name}:{n}" for d, n, _ in ALL])
def test_command_refers_to_real_things(doc, number, cmd):
    words = _split(cmd)
    assert words, cmd
    where = f"{doc.name}:{number}: {cmd}"
    if words[0] == "export":
        name = words[1].split("=", 1)[0]
        assert _referenced_variable(name), f"{where}: {name} is set but the course never reads it"
        return
    if words[0] == "source":
        assert (course.ROOT / words[1]).is_file(), where
        return
    if words[0].startswith("bin/"):
        script = course.ROOT / words[0]
        assert script.is_file() and os.access(script, os.X_OK), f"{where}: {words[0]} is not an executable script"
    elif words[:3] == ["python", "-m", "autograder"]:
        assert _autograder_help_ok(words[3]), f"{where}: no verb {words[3]!r}"
    elif words[0] == "nbgrader":
        assert words[1] in _nbgrader_subcommands(), f"{where}: no nbgrader {words[1]!r}"
    elif words[0] == "jupyter":
        jupyter = str(Path(sys.executable).parent / "jupyter")
        sub = [words[1]] + ([words[2]] if words[1] == "server" and len(words) > 2 else [])
        assert _help_ok(jupyter, *sub), f"{where}: no jupyter {' '.join(sub)!r}"
    elif words[0] != "python":
        assert shutil.which(words[0]), f"{where}: {words[0]} is not installed"
    for token in words[1:]:
        problem = _check_path(token)
        assert problem is None, f"{where}: {problem}"
    new = words[5] if words[:5] == ["python", "-m", "autograder", "author", "new"] and len(words) > 5 else None
    for name in re.findall(r"\b\d\d_[a-z_]+\b", cmd):
        if name == new:  # `author new` names an assignment the course has yet to have
            assert name not in course.assignments(), f"{where}: {name} exists already"
            continue
        assert name in course.contract(), f"{where}: {name} is not an assignment of the course"


CHEAP = [(d, n, c) for d, n, c in ALL if " ".join(shlex.split(c)).startswith(RUN_FOR_REAL)]


@pytest.mark.parametrize("doc,number,cmd", CHEAP, ids=[f"{d.name}:{n}" for d, n, _ in CHEAP])
def test_cheap_command_runs(doc, number, cmd, tmp_path):
    words = _split(cmd)
    words = [sys.executable if w == "python" else w for w in words]
    if words[0] == "jupyter":
        words[0] = str(Path(sys.executable).parent / "jupyter")
    env = _env()
    env["JUPYTER_CONFIG_PATH"] = str(course.ROOT / "jupyter_config")
    done = subprocess.run(words, cwd=course.ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{doc.name}:{number}: {cmd}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    if words[1:3] == ["labextension", "list"]:
        assert "@jupyter/nbgrader" in done.stdout + done.stderr


def test_every_cli_verb_is_documented():
    from autograder import cli

    verbs = cli.parser()._subparsers._group_actions[0].choices
    guide = (course.ROOT / "course" / "instructor_guide.md").read_text()
    missing = [v for v in verbs if v not in ("all", "author") and f"python -m autograder {v}" not in guide]
    assert not missing, f"verbs missing from the instructor guide: {missing}"


def test_the_pages_count_the_assignments_the_course_has():
    """Every "<number> (Jupyter) notebooks" or "<number> notebook assignments" that the README,
    the syllabus and the site's home page say of the course is the number of assignments in
    source/ (the syllabus once said "ten" when there were twelve), and the site's home page is
    built with that number."""
    from autograder import site

    count = len(course.assignments())
    words = "|".join(course.NUMBER_WORDS[1:]) + r"|\d+"
    claim = re.compile(rf"\b({words})\s+(?:jupyter\s+)?(?:notebooks|notebook\s+assignments)\b", re.I)
    pages = {"README.md": (course.ROOT / "README.md").read_text(),
             "course/syllabus.md": (course.ROOT / "course" / "syllabus.md").read_text(),
             "the site's home page": site.INDEX.replace("{count}", course.number_word(count))}
    found = [(page, m[0]) for page, text in pages.items() for m in claim.finditer(text)]
    assert found, "the pages no longer say how many assignments the course has"
    wrong = [(page, said) for page, said in found
             if said.split()[0].lower() not in (course.number_word(count), str(count))]
    assert not wrong, f"the course has {count} assignments, but: {wrong}"


def test_each_notebook_says_which_assignment_of_how_many_it_is():
    """The first cell of every source notebook (and so of its release) says "assignment N of M"
    with N its own number and M the course's count (01-10 said "of 10" once 11 and 12 existed)."""
    from autograder import notebooks

    total = len(course.assignments())
    wrong = {}
    for number, assignment in enumerate(course.assignments(), 1):
        for path in (course.source_notebook(assignment), course.release_notebook(assignment)):
            said = re.findall(r"assignment (\d+)(?: of (\d+))?\.", notebooks.read(path).cells[0].source)
            if said[:1] != [(str(number), str(total))]:
                wrong[path.relative_to(course.ROOT).as_posix()] = said
    assert not wrong, f"the course has {total} assignments; first cells say: {wrong}"


def test_every_notebook_follows_the_course_template():
    """One template for every notebook (autograder/template.py): the title cell with "assignment N
    of M" and what the student will learn, the set-up cell showing the machine, a heading at the
    start of its own cell (80 cells ran on from one section into the next until they were split),
    each answer cell after its exercise's heading and before its test cell (the visible asserts,
    a line saying they passed, the hidden block),
    and the summary with the way to the next assignment (10's had none)."""
    from autograder import notebooks, template

    total = len(course.assignments())
    found = {assignment: template.problems(notebooks.read(course.source_notebook(assignment)), number, total)
             for number, assignment in enumerate(course.assignments(), 1)}
    assert not any(found.values()), f"notebooks that depart from the template: { {a: p for a, p in found.items() if p} }"


def test_the_template_check_finds_what_departs_from_it():
    import nbformat

    from autograder import notebooks, template

    nb = notebooks.read(course.source_notebook(course.assignments()[0]))
    total = len(course.assignments())
    assert template.problems(nb, 1, total) == []
    broken = nbformat.from_dict(nb)
    broken.cells[2].source += "\n\n## 9. Another section, run on"
    broken.cells[-1].source = broken.cells[-1].source.split("**Next:**")[0]
    answer = next(i for i, c in enumerate(broken.cells) if notebooks.is_answer_cell(c))
    broken.cells[answer - 1], broken.cells[answer - 2] = broken.cells[answer - 2], broken.cells[answer - 1]
    del broken.cells[answer + 1]
    tested = next(i for i, c in enumerate(broken.cells) if notebooks.is_answer_cell(c)
                  and notebooks.nbgrader_meta(broken.cells[i + 1]).get("grade_id", "").startswith("test_"))
    broken.cells[tested + 1].source = "assert 1 + 1 == 2\n" + broken.cells[tested + 1].source
    last_test = max(i for i, c in enumerate(broken.cells) if notebooks.is_test_cell(c))
    silent = broken.cells[last_test].source.split("\n")
    broken.cells[last_test].source = "\n".join(line for line in silent if not line.startswith('print("✓ '))
    second_test = [i for i, c in enumerate(broken.cells) if notebooks.is_test_cell(c)][1]
    broken.cells[second_test].source = "try:\n    pass\nfinally:\n    pass\n" + broken.cells[second_test].source
    said = " | ".join(template.problems(broken, 1, total))
    for expected in ("headings in the middle of a cell", "**Next:** *02 · ", "must come right after the",
                     "must be followed by its test cell", "asserts without a message saying what is wrong (lines [1])",
                     "must end with the line that says they passed", "top-level try/finally in a test cell"):
        assert expected in said, said
    assert "assignment 2 of" in " ".join(template.problems(nb, 2, total))
    assert template.headings_inside("## 1. Title\n\n```bash\n## a comment\n```") == []


def _heading_anchors(text):
    """The anchors GitHub and MyST give a markdown file's headings ("## Beyond one machine" ->
    "beyond-one-machine")."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_every_link_between_the_docs_leads_somewhere():
    """Each relative link of the README, the course pages and the student folder's README names a
    file of the repository, and its #anchor, if any, a heading of that file (the guide's
    measurements were moved to a page of their own and linked from it)."""
    docs = [*DOCS, course.ROOT / "autograder" / "student" / "bundle" / "README.md"]
    links, broken = 0, []
    for doc in docs:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(#[^)\s]*)?\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            links += 1
            where = (doc.parent / target) if target else doc
            if not where.exists():
                broken.append(f"{doc.name}: {target}")
            elif anchor and (not where.is_file() or anchor[1:] not in _heading_anchors(where.read_text())):
                broken.append(f"{doc.name}: {target}{anchor}")
    assert links >= 5, "the docs link to each other less than they did: is the pattern still right?"
    assert not broken, f"links that lead nowhere: {broken}"


def test_the_syllabus_lists_each_assignments_exercises_in_notebook_order():
    """The schedule's "Graded exercises" column names every graded exercise of its assignment,
    in the order the notebook asks for them (it once listed 01, 03, 05 and 07 out of order)."""
    contract = course.contract()
    rows = re.findall(r"^\| \d+ \| `(\w+)` \| .*? \| (.*?) \| [^|]* \|$",
                      (course.ROOT / "course" / "syllabus.md").read_text(), re.M)
    assert {a for a, _ in rows} == set(contract), "the schedule should have a row per assignment"
    wrong = {a: re.findall(r"`(\w+)`", listed) for a, listed in rows
             if re.findall(r"`(\w+)`", listed) != contract[a]}
    assert not wrong, f"listed otherwise than the notebooks ask for them: {wrong}"


def test_the_syllabus_gives_each_assignments_points_as_the_notebooks_do():
    """The syllabus's "Points per assignment" line (what an adopting instructor weighs in the LMS)
    says what the notebooks' test cells carry, and their sum."""
    from autograder import notebooks

    text = " ".join((course.ROOT / "course" / "syllabus.md").read_text().split())
    said = re.search(r"Points per assignment: (.*?) \((\d+) in all", text)
    assert said, "the syllabus no longer lists the points per assignment"
    listed = dict(re.findall(r"(\d\d) (\d+)", said[1]))
    actual = {a[:2]: sum(float(notebooks.nbgrader_meta(c).get("points", 0))
                         for c in notebooks.read(course.source_notebook(a)).cells if notebooks.nbgrader_meta(c).get("grade"))
              for a in course.assignments()}
    assert {k: float(v) for k, v in listed.items()} == actual, (listed, actual)
    assert float(said[2]) == sum(actual.values())
