"""A kernel that dies while it starts is started again (autograder/pipeline/preprocessors.py).

jupyter_client picks a kernel's TCP ports, frees them and hands them to the kernel;
when another process binds one first, the kernel exits with "Address already in
use" before it replies, and nbgrader would fail the whole submission. These tests
take a port from the kernel on purpose, as a busy grading machine does by chance.
"""
import socket

import nbformat
import pytest
from traitlets.config import Config

from autograder.pipeline.preprocessors import ResilientExecute, SandboxedKernelManager


def _notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("print(6 * 7)"))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _port_thief(steal_from_first):
    """A kernel manager whose first `steal_from_first` kernels find their control port taken."""
    taken = []

    class PortTakenFirst(SandboxedKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            if len(taken) < steal_from_first:
                thief = socket.socket()
                thief.bind((self.ip, self.control_port))
                thief.listen()
                taken.append(thief)
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return PortTakenFirst, taken


def _execute(tmp_path, manager, tries=3):
    config = Config({"GradingLimits": {"enabled": False}, "VerifyHiddenChecks": {"enabled": False}})
    step = ResilientExecute(config=config, kernel_manager_class=manager, kernel_start_tries=tries, timeout=60)
    return step.preprocess(_notebook(), {"metadata": {"path": str(tmp_path)}})[0]


@pytest.fixture(autouse=True)
def _new_interpreters(monkeypatch):
    monkeypatch.setenv("COURSE_WARM_START", "0")  # the retry is the same with or without a zygote


def test_a_kernel_that_lost_its_port_is_started_again(tmp_path):
    manager, taken = _port_thief(steal_from_first=1)
    try:
        nb = _execute(tmp_path, manager)
    finally:
        for thief in taken:
            thief.close()
    assert len(taken) == 1  # the first kernel really lost its port
    assert nb.cells[0].outputs[0]["text"] == "42\n"


def test_kernel_starts_are_bounded(tmp_path):
    manager, taken = _port_thief(steal_from_first=5)
    try:
        with pytest.raises(RuntimeError, match="died before replying"):
            _execute(tmp_path, manager, tries=2)
    finally:
        for thief in taken:
            thief.close()
    assert len(taken) == 2


def test_a_sandboxed_kernel_leaves_no_connection_file_behind(tmp_path, monkeypatch):
    """The sandboxed kernel copies its connection file (it holds the key that signs every
    message to the kernel) into a root-only folder of its own; with no private /tmp there
    (file protection off, or unavailable), that folder was in the machine's /tmp and stayed
    there after the kernel ended, one per notebook graded."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    config = Config({"GradingLimits": {"protect_files": False}, "VerifyHiddenChecks": {"enabled": False}})
    step = ResilientExecute(config=config, kernel_manager_class=SandboxedKernelManager, timeout=60)
    nb = step.preprocess(_notebook(), {"metadata": {"path": str(tmp_path)}})[0]
    assert nb.cells[0].outputs[0]["text"] == "42\n"  # the kernel ran, in the sandbox
    assert not list(temp.glob("course-kernel-*"))


def test_magics_that_keep_state_in_ipythons_profile_work_in_the_sandbox(tmp_path):
    """IPython picks its profile folder when the kernel starts, as the grader; the student's uid could
    not write there, and `%cd` (which keeps its history in the profile's db) raised PermissionError:
    an answer cell that began with `%cd -q .` lost its exercise (6/8 on 01)."""
    config = Config({"VerifyHiddenChecks": {"enabled": False}})
    step = ResilientExecute(config=config, kernel_manager_class=SandboxedKernelManager, timeout=60)
    nb = _notebook()
    nb.cells[0].source = "%cd -q .\n%bookmark here\nprint(6 * 7)"
    nb = step.preprocess(nb, {"metadata": {"path": str(tmp_path)}})[0]
    assert [o.get("text") for o in nb.cells[0].outputs] == ["42\n"], nb.cells[0].outputs
