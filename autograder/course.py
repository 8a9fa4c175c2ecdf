"""Where things are in the course, and the nbgrader configuration that goes with them."""
import importlib.util
import json
import os
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "source"
RELEASE = ROOT / "release"
# Submissions, grades, feedback, reports and the gradebook: the course root
# unless COURSE_WORKDIR says otherwise (nbgrader_config.py reads it too).
WORKDIR = Path(os.environ.get("COURSE_WORKDIR", ROOT))
SUBMITTED = WORKDIR / "submitted"
AUTOGRADED = WORKDIR / "autograded"
FEEDBACK = WORKDIR / "feedback"
REPORTS = WORKDIR / "reports"
CONTRACT_FILE = Path(__file__).resolve().parent / "contract.json"


def assignments():
    """Names of the assignments present in source/, in course order."""
    return sorted(p.name for p in SOURCE.iterdir() if (p / f"{p.name}.ipynb").is_file())


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
    point goes through here. Overrides look like {"CourseDirectory": {"root": ...}}.
    """
    from traitlets.config.loader import Config, PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    config.merge(Config(overrides))
    return config


def db_url(env=None):
    """The gradebook URL that nbgrader_config.py gives under these COURSE_* variables
    (default: this process's), e.g. for the environment of a grading job."""
    keys = ("COURSE_WORKDIR", "COURSE_DB_URL")
    saved = {k: os.environ.get(k) for k in keys}
    try:
        for key in keys:
            if env is not None and env.get(key) is not None:
                os.environ[key] = env[key]
            elif env is not None:
                os.environ.pop(key, None)
        return load_config().CourseDirectory.db_url
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def api(**overrides):
    from nbgrader.apps import NbGraderAPI
    return NbGraderAPI(config=load_config(**overrides))


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
