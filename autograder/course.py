"""Where things are in the course, and the nbgrader configuration that goes with them."""
import importlib.util
import json
import os
import sys
from functools import lru_cache
from pathlib import Path

TITLE = "Parallel Computing in Python and PyTorch"  # the notebooks' first cells, the website
ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "source"
RELEASE = ROOT / "release"
CONTRACT_FILE = Path(__file__).resolve().parent / "contract.json"


class Course:
    """Where one course's work goes: submissions, grades, feedback, reports, the gradebook.

    The course itself (source/, release/, the checks) is this checkout, `ROOT`. The
    work folder is `workdir` (default: COURSE_WORKDIR, else the course root) and the
    gradebook `db_url` (default: COURSE_DB_URL, else gradebook.db in the work
    folder), both read when the object is made, never at import. Processes that
    grade (nbgrader's workers, which read nbgrader_config.py) learn both from
    `environment()`.
    """

    def __init__(self, workdir=None, db_url=None):
        self.root = ROOT
        self.workdir = Path(workdir or os.environ.get("COURSE_WORKDIR") or ROOT)
        self.db_url = db_url or os.environ.get("COURSE_DB_URL") or f"sqlite:///{self.workdir / 'gradebook.db'}"

    def __repr__(self):
        return f"Course(workdir={str(self.workdir)!r}, db_url={self.db_url!r})"

    @property
    def submitted(self):
        return self.workdir / "submitted"

    @property
    def autograded(self):
        return self.workdir / "autograded"

    @property
    def feedback(self):
        return self.workdir / "feedback"

    @property
    def reports(self):
        return self.workdir / "reports"

    def environment(self, base=None):
        """`base` (default: this process's environment) with this course's work folder and gradebook."""
        env = dict(os.environ if base is None else base)
        env.update(COURSE_WORKDIR=str(self.workdir), COURSE_DB_URL=self.db_url)
        return env

    def config(self, **overrides):
        """The course's nbgrader configuration for this work folder and gradebook, plus overrides."""
        here = {"CourseDirectory": {"root": str(self.workdir), "db_url": self.db_url}}
        for section, values in overrides.items():
            here.setdefault(section, {}).update(values)
        return load_config(**here)

    def api(self, **overrides):
        from nbgrader.apps import NbGraderAPI

        from . import gradebook
        self.workdir.mkdir(parents=True, exist_ok=True)  # a new COURSE_WORKDIR: nbgrader starts in it
        gradebook.create(self.db_url)
        return NbGraderAPI(config=self.config(**overrides))


def python_path(env):
    """PYTHONPATH for a process of the course: the repository first (`autograder`, `helpers`),
    whatever the caller's environment had (bin/env.sh sets it; a shell that did not source it
    may not), then the rest of `env`'s."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    return os.pathsep.join([str(ROOT), *rest])


def assignments():
    """Names of the assignments present in source/, in course order."""
    return sorted(p.name for p in SOURCE.iterdir() if (p / f"{p.name}.ipynb").is_file())


NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                "fifteen sixteen seventeen eighteen nineteen twenty").split()


def number_word(n):
    """How the course's pages spell a count ("twelve"), digits past twenty."""
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def source_notebook(assignment):
    return SOURCE / assignment / f"{assignment}.ipynb"


def release_notebook(assignment):
    return RELEASE / assignment / f"{assignment}.ipynb"


@lru_cache(maxsize=None)
def contract():
    """{assignment: [graded exercise names]}, read from the answer cells of source/ (notebook order).

    The notebooks are the one place an exercise is declared; tests/test_contract.py
    holds them to the course spec (`spec_contract()`, a copy of ../shared/contract.json).
    """
    from . import notebooks
    return {a: list(notebooks.answer_cells(notebooks.read(source_notebook(a)))) for a in assignments()}


@lru_cache(maxsize=None)
def spec_contract():
    """{assignment: [exercise names]} that the course spec requires (autograder/contract.json)."""
    return json.loads(CONTRACT_FILE.read_text())


def load_config(**overrides):
    """The course's nbgrader_config.py as a traitlets Config, plus overrides.

    NbGraderAPI() does not read nbgrader_config.py by itself, so every entry
    point goes through here (mostly as `Course().config()`). Overrides look like
    {"CourseDirectory": {"root": ...}}.
    """
    from traitlets.config.loader import Config, PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    config.merge(Config(overrides))
    return config


def load_module(name, path):
    """Import a file as module `name` once (course files are named like `01_x.py`,
    which `import` cannot spell)."""
    if name not in sys.modules:
        path = Path(path)
        if not path.is_file():
            raise LookupError(f"{path} is missing")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
