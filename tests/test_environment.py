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


def _canonical(pins):
    """Names as packaging compares them; versions without a local label (torch's "+cpu": the lock
    pins 2.13.0, which the CPU build here and PyPI's build elsewhere both satisfy)."""
    return {re.sub(r"[-_.]+", "-", name): version.split("+")[0] for name, version in pins.items()}


# What installs the environment rather than belongs to it.
INSTALLERS = {"pip", "setuptools", "wheel", "distribute", "uv"}


def test_the_lock_holds_the_environment_the_tests_run_in():
    """constraints.txt pins every package installed here (the installers aside) at the version
    installed, and each of requirements.txt's pins the same: a package an upgrade pulled in, or a
    version changed by hand, fails here until the lock is written again; and both install paths
    use it (before it, nbgrader's SQLAlchemy, Jupyter's pyzmq and 140 more floated)."""
    import sysconfig
    from importlib import metadata

    lock = _canonical(_pins((course.ROOT / "constraints.txt").read_text().splitlines()))
    # The environment's own folders: not sys.path, to which an imported setuptools adds the
    # packages it vendors.
    folders = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = _canonical({d.metadata["Name"].lower(): d.version
                            for d in metadata.distributions(path=folders)})
    installed = {name: version for name, version in installed.items() if name not in INSTALLERS}
    assert len(lock) > 100, "constraints.txt should pin the whole environment"
    missing = {n: v for n, v in installed.items() if lock.get(n) != v}
    extra = {n: v for n, v in lock.items() if n not in installed}
    assert not missing and not extra, (
        f"constraints.txt is not this environment: installed but not pinned so {missing}; "
        f"pinned but not installed {extra}")
    wanted = _canonical(_pins((course.ROOT / "requirements.txt").read_text().splitlines()))
    assert {n: lock.get(n) for n in wanted} == wanted, "requirements.txt and constraints.txt disagree"
    assert '-c "$ROOT/constraints.txt"' in (course.ROOT / "bin" / "env.sh").read_text()
    assert "- -c constraints.txt" in (course.ROOT / "environment.yml").read_text()


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


def test_a_failed_set_up_leaves_the_shell_that_sourced_it_open(tmp_path):
    """`source bin/env.sh` in an instructor's terminal ran `exit 1` when set-up failed (no Python
    3.11 here): the terminal closed with the message. Sourced, it returns 1; the bin/ scripts
    that source it still stop (set -e, or `|| exit 1`)."""
    import shutil
    import subprocess

    (tmp_path / "bin").mkdir()
    shutil.copy(course.ROOT / "bin" / "env.sh", tmp_path / "bin" / "env.sh")
    for name in ("requirements.txt", "constraints.txt"):
        (tmp_path / name).write_text("")
    tools = tmp_path / "tools"  # a PATH with the shell's tools and no Python at all
    tools.mkdir()
    for tool in ("dirname", "cat", "sha256sum", "cut"):
        (tools / tool).symlink_to(shutil.which(tool))
    env = {"PATH": str(tools), "HOME": str(tmp_path)}
    done = subprocess.run(["/bin/bash", "-c", f'source "{tmp_path}/bin/env.sh"; echo "still here $?"'],
                          env=env, capture_output=True, text=True, timeout=60)
    assert "the course needs Python >= 3.11" in done.stderr, done.stderr
    assert done.stdout.strip() == "still here 1", (done.stdout, done.stderr)
