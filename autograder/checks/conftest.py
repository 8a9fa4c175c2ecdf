"""pytest fixtures that hand the checks the reference solutions from source/.

`pytest autograder/checks/01_processes_threads.py` runs that assignment's hidden
checks against the solutions in source/01_processes_threads/, without running
the notebook. A fixture exists for every answer cell's grade_id.

With COURSE_CHECKS_JUDGED=1 the checks run as they do while grading: here, in
the judge's role, with the solutions in a student's process of their own
(autograder/pipeline/judge.py) and handed to the checks as handles.
"""
import os
from functools import lru_cache
from pathlib import Path

import pytest

from autograder import course, hidden, notebooks

JUDGED = os.environ.get("COURSE_CHECKS_JUDGED") == "1"


@lru_cache(maxsize=None)
def _reference(assignment):
    return notebooks.reference_module(assignment)


_sessions = {}


def _student(assignment):
    from autograder.pipeline.judge import StudentProcess
    session = _sessions.get(assignment)
    if session is None or session.broken or session.process.poll() is not None:
        if session is not None:
            session.stop()  # what is left of it: its temp folder
        session = _sessions[assignment] = StudentProcess.for_reference(assignment)
        session.ns = session.namespace()
    return session


@pytest.fixture(autouse=True)
def _judge_role(request):
    """In judged mode, `there()` and `observe()` reach this module's student's process; the check
    holds the test run's lease on the machine as in grading."""
    if not JUDGED or request.module.__name__.startswith("conftest"):
        yield
        return
    from autograder.pipeline import lease
    hidden.STUDENT = _student(Path(request.module.__file__).stem)
    try:
        with lease.hold():  # a timing check takes it alone for its measurement (_support.alone)
            yield
    finally:
        hidden.STUDENT = None


def pytest_collection_modifyitems(config, items):
    """Under another start method (COURSE_START_METHOD), leave out the assignments whose code starts
    no process by it (START_METHOD_FREE): their run would repeat grading's."""
    from autograder.checks import START_METHOD_FREE
    if not os.environ.get("COURSE_START_METHOD"):
        return
    free = [item for item in items if Path(item.fspath).stem in START_METHOD_FREE]
    if free:
        items[:] = [item for item in items if item not in free]
        config.hook.pytest_deselected(items=free)
        reporter = config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"{len(free)} checks left out: {', '.join(START_METHOD_FREE)} start no "
                                "process by COURSE_START_METHOD (autograder/checks/__init__.py)")


def pytest_sessionfinish(session):
    for student in _sessions.values():
        student.stop()


def _make_fixture(name):
    @pytest.fixture(name=name)
    def _fixture(request):
        assignment = Path(request.module.__file__).stem
        if JUDGED:
            return _student(assignment).ns[name]
        return getattr(_reference(assignment), name)
    return _fixture


for _assignment in course.assignments():
    for _name in notebooks.answer_cells(notebooks.read(course.source_notebook(_assignment))):
        globals().setdefault(f"_fixture_{_name}", _make_fixture(_name))
