"""Shared fixtures: the assignments present, and one graded temporary course."""
import os
from pathlib import Path

import pytest

from autograder import course

ASSIGNMENTS = course.assignments()


def pytest_generate_tests(metafunc):
    explicit = any("assignment" in m.args[0] for m in metafunc.definition.iter_markers("parametrize"))
    if "assignment" in metafunc.fixturenames and not explicit:
        metafunc.parametrize("assignment", ASSIGNMENTS)
