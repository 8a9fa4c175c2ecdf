"""The pip path (requirements.txt) and the conda path (environment.yml) install the same set."""
import re

from autograder import course


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#")[0].strip().lstrip("- ").strip()
        match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)==([^\s]+)", line)
        if match:
            pins[match[1].lower()] = match[2]
    return pins


def test_requirements_are_all_pinned():
    lines = [l.split("#")[0].strip() for l in (course.ROOT / "requirements.txt").read_text().splitlines()]
    loose = [l for l in lines if l and "==" not in l]
    assert not loose, f"unpinned requirements: {loose}"


def test_pip_and_conda_paths_agree():
    pip = _pins((course.ROOT / "requirements.txt").read_text().splitlines())
    text = (course.ROOT / "environment.yml").read_text()
    conda = _pins(text.split("- pip:", 1)[1].splitlines())
    assert pip == conda
    assert "python=3.11" in text


def test_torch_is_the_pinned_cpu_friendly_release():
    pip = _pins((course.ROOT / "requirements.txt").read_text().splitlines())
    assert pip["torch"] == "2.13.0"


def test_libraries_have_their_bytecode_compiled():
    """The environment's libraries come with their bytecode (bin/env.sh compiles it at install
    time): a sandboxed grading process sees a read-only file system, cannot write __pycache__,
    and without it would compile torch's modules again on every import (measured: part 1 of
    bin/test 500 s instead of 274 s)."""
    import importlib.util
    import os

    import nbgrader
    import numpy
    import torch

    missing = [module.__name__ for module in (torch, numpy, nbgrader)
               if not os.path.exists(importlib.util.cache_from_source(module.__file__))]
    assert not missing, f"no compiled bytecode for {missing}: reinstall .venv with bin/env.sh"
