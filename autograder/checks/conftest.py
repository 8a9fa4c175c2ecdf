"""pytest fixtures that hand the checks the reference solutions from source/.

`pytest autograder/checks/01_processes_threads.py` runs that assignment's hidden
checks against the solutions in source/01_processes_threads/, without running
the notebook. A fixture exists for every answer cell's grade_id.
"""
from functools import lru_cache
from pathlib import Path

import pytest

from autograder import course, notebooks


@lru_cache(maxsize=None)
def _reference(assignment):
    return notebooks.reference_module(assignment)


def _make_fixture(name):
    @pytest.fixture(name=name)
    def _fixture(request):
        assignment = Path(request.module.__file__).stem
        return getattr(_reference(assignment), name)
    return _fixture


for _assignment in course.assignments():
    for _name in notebooks.answer_cells(notebooks.read(course.source_notebook(_assignment))):
        globals().setdefault(f"_fixture_{_name}", _make_fixture(_name))
