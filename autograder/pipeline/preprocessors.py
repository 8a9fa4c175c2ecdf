"""nbgrader preprocessors used by `python -m autograder grade` (see nbgrader_config.py)."""
import os
import re
import shutil
import time
from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, List
from traitlets.config import Configurable

from .. import hidden, notebooks
from ..sandbox.limits import ENV, Limits
from . import confine
from .verify import UNDECIDED


def _error_output(ename, evalue):
    return NotebookNode(output_type="error", ename=ename, evalue=evalue,
                        traceback=[f"{ename}: {evalue}"])


class GradingLimits(Configurable):
    """Limits for each submission's processes (see autograder/sandbox/)."""

    enabled = Bool(True, help="Run kernels and the students' processes of the judge inside the sandbox").tag(config=True)
    # The defaults are Limits' own (one place for each).
    memory_mb = Integer(Limits.memory_mb, help="Memory cap per process tree, MiB").tag(config=True)
    max_processes = Integer(Limits.max_processes,
                            help="Processes and threads at once, per process tree").tag(config=True)
    network = Bool(False, help="Allow network access beyond loopback").tag(config=True)
    protect_files = Bool(True, help="Hide the gradebook, solutions and other students' files").tag(config=True)

    def sandbox(self, own_folder):
        if not self.enabled:
            return None
        limits = Limits(memory_mb=self.memory_mb, max_processes=self.max_processes,
                                network=self.network, protect_files=self.protect_files)
        return confine.Sandbox(limits, own_folder)


class SandboxedKernelManager(AsyncKernelManager):
    """Starts the kernel through autograder.sandbox.kernel instead of ipykernel_launcher."""

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        if "ipykernel_launcher" in cmd:
            cmd[cmd.index("ipykernel_launcher")] = "autograder.sandbox.kernel"
            # -P: the submission's folder (the kernel's working directory) is not put
            # first on sys.path, so a file handed in there cannot stand in for the grader.
            cmd.insert(cmd.index("-m"), "-P")
        return cmd


class ResilientExecute(Execute):
    """Execute that survives a dead or unresponsive kernel and bounds the whole notebook.

    Plain nbgrader errors the entire submission (0 points) when the kernel dies
    (`os._exit`, a segfault, out of memory) or ignores an interrupt. Here the
    cells that ran keep their outputs, hence their scores; every later cell gets
    an error output that says what happened, so it scores zero and the feedback
    explains why.
    """

    notebook_timeout = Integer(
        900, help="Wall-clock limit in seconds for a whole notebook; later cells are not run."
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)

    def preprocess(self, nb, resources=None, km=None):
        self._stopped_because = None
        self._started = time.monotonic()
        self._timings = {"kernel start": 0.0, "answer cells": 0.0, "test cells": 0.0,
                         "course cells": 0.0, "demo cells (skipped)": 0.0}
        self._first_cell = None
        if resources is not None:
            resources["course_timings"] = self._timings  # read by RecordTimings
        own_folder = (resources or {}).get("metadata", {}).get("path") or os.getcwd()
        box = GradingLimits(parent=self).sandbox(own_folder)
        if box is not None:
            os.environ[ENV] = box.limits.to_env()  # the kernel inherits it
        if VerifyHiddenChecks(parent=self).enabled:
            os.environ[hidden.DEFERRED] = "1"  # hidden checks: once, outside the kernel
        try:
            return super().preprocess(nb, resources, km)
        except (DeadKernelError, RuntimeError) as err:
            # Raised while shutting down a kernel that already died: the cells
            # have been processed, so the notebook is complete as it is.
            if self._stopped_because is None:
                raise
            self.log.warning("kernel could not be shut down cleanly: %s", err)
            return self.nb, self.resources
        finally:
            os.environ.pop(ENV, None)
            os.environ.pop(hidden.DEFERRED, None)
            if box is not None:
                box.close()  # whatever the submission left running goes too

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        if self._stopped_because is None and time.monotonic() - self._started > self.notebook_timeout:
            self._stopped_because = (
                f"the notebook ran longer than its {self.notebook_timeout} s limit")
        if self._stopped_because is not None:
            cell.outputs = [_error_output("NotRun", f"not run: {self._stopped_because}")]
            return cell, resources
        if self._first_cell is None:  # nbclient starts the kernel before the first cell
            self._first_cell = time.monotonic()
            self._timings["kernel start"] = self._first_cell - self._started
        kind = ("demo cells (skipped)" if notebooks.is_demo(cell) else "answer cells" if is_solution(cell)
                else "test cells" if is_grade(cell) else "course cells")
        started = time.monotonic()
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError as err:
            self._stopped_because = f"the kernel died while running cell {index} ({err})"
        except CellTimeoutError:
            self._stopped_because = (
                f"cell {index} did not stop within {self.timeout} s, even when interrupted")
        finally:
            self._timings[kind] += time.monotonic() - started
        self.log.warning("grading stops early: %s", self._stopped_because)
        cell.outputs = list(cell.get("outputs", [])) + [
            _error_output("KernelStopped", self._stopped_because)]
        return cell, resources


class KeepExpectedFiles(NbGraderPreprocessor):
    """Grade only what the assignment expects beside the notebook.

    A student can hand in anything beside the notebook; in the folder that is
    graded, whatever the release of the assignment does not have goes away
    before any code runs (the submitted/ copy keeps it). A module named like a
    grader or library module therefore never reaches a grading process.
    """

    always_kept = List(["timestamp.txt", "submission_secret.txt"],
                       help="Files nbgrader's own exchange keeps beside a submission").tag(config=True)

    def preprocess(self, nb, resources):
        from .. import course
        folder = resources.get("metadata", {}).get("path")
        assignment = resources.get("nbgrader", {}).get("assignment")
        release = course.RELEASE / str(assignment)
        if not folder or not release.is_dir():
            return nb, resources
        expected = {p.relative_to(release) for p in release.rglob("*")} | set(map(Path, self.always_kept))
        # Bottom-up and never through a link: a handed-in link to / must not lead the grader there.
        for top, dirs, files in os.walk(folder, topdown=False, followlinks=False):
            for name in files + dirs:
                path = Path(top, name)
                rel = path.relative_to(folder)
                if rel in expected or path.suffix == ".ipynb" and len(rel.parts) == 1:
                    continue
                self.log.warning("not graded, not expected beside the notebook: %s", rel)
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        return nb, resources


class StderrToStdout(NbGraderPreprocessor):
    """Turn stderr in test cells into stdout, so that only errors cost points.

    nbgrader gives zero to a test cell with any stderr output; a warning from a
    worker process or a progress bar would then fail a correct answer. The text
    stays visible in the feedback.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and is_grade(cell):
            for output in cell.outputs:
                if output.output_type == "stream" and output.name == "stderr":
                    output.name = "stdout"
        return cell, resources


class VerifyHiddenChecks(NbGraderPreprocessor):
    """Give every hidden check its verdict from the judge; a test cell scores only if both pass.

    See autograder/pipeline/verify.py and judge.py for what runs where and why.
    """

    enabled = Bool(True, help="Verify hidden checks outside the kernel").tag(config=True)
    cell_timeout = Integer(180, help="Seconds one student cell may take to load in the judge's student process").tag(config=True)

    def preprocess(self, nb, resources):
        if not self.enabled:
            return nb, resources
        from .. import course, notebooks
        from . import verify

        assignment = resources["nbgrader"]["assignment"]
        source_path = course.source_notebook(assignment)
        if not source_path.is_file():
            self.log.warning("no source notebook for %s: hidden checks not verified", assignment)
            return nb, resources
        payload = verify.payload_for(nb, notebooks.read(source_path))
        if not payload["exercises"]:
            return nb, resources
        workdir = resources.get("metadata", {}).get("path") or "."
        started = time.monotonic()
        box = GradingLimits(parent=self).sandbox(workdir)
        try:
            verdicts = verify.verify(payload, workdir, env=box.environment() if box else None,
                                     log=os.path.join(workdir, ".verify.log"), cell_timeout=self.cell_timeout)
        finally:
            if box is not None:
                box.close()
            resources.setdefault("course_timings", {})["hidden checks (judge)"] = time.monotonic() - started
        for cell in nb.cells:
            if cell.cell_type != "code" or not is_grade(cell):
                continue
            failed, undecided = [], False
            for _, exercise in verify.hidden_exercises(cell.source):
                # No verdict at all is a failure too: a check that did not run never passes.
                passed, report, unsure = verdicts.get(
                    exercise, (False, f"{exercise}: the hidden checks gave no verdict", False))
                if not passed:
                    failed.append(report)
                    undecided |= unsure
            if not failed:
                continue
            self.log.warning("hidden checks failed outside the kernel: %s", "; ".join(failed))
            if undecided:  # regraded alone after the batch; still undecided -> a person looks
                cell.outputs.append(_error_output(
                    UNDECIDED, "a hidden check could not decide on this machine at grading time "
                    "(too busy to measure a speedup); it will be looked at by a person:\n" + "\n".join(failed)))
            elif not any(o.output_type == "error" for o in cell.get("outputs", [])):
                cell.outputs.append(_error_output(
                    "HiddenCheckFailed", "checked by the judge, outside your notebook:\n" + "\n".join(failed)))
        return nb, resources


class RecordTimings(NbGraderPreprocessor):
    """Write where a submission's grading time went to reports/timings/ (for `benchmark`)."""

    def preprocess(self, nb, resources):
        import json
        from .. import course
        timings = resources.get("course_timings")
        if timings:
            folder = course.Course().reports / "timings"
            folder.mkdir(parents=True, exist_ok=True)
            info = resources.get("nbgrader", {})
            path = folder / f"{info.get('student')}__{info.get('assignment')}.json"
            path.write_text(json.dumps({k: round(v, 3) for k, v in timings.items()}))
        return nb, resources


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class HideHiddenTraceback(NbGraderPreprocessor):
    """Cut hidden-test lines out of the tracebacks shown in feedback.

    nbgrader's ClearHiddenTests removes the hidden block from a cell's source,
    but IPython's traceback of a failing test cell quotes the lines around the
    failure, hidden ones included. The failure message itself stays.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [self._scrub(frame) for frame in output.traceback
                                        if not self._is_grader_frame(frame)]
        return cell, resources

    @staticmethod
    def _is_grader_frame(frame):
        """A traceback entry inside the course's grading code (the hidden-check runner)."""
        plain = _ANSI.sub("", frame).lstrip()
        return plain.startswith("File ") and f"{os.sep}autograder{os.sep}" in plain.split("\n", 1)[0]

    @staticmethod
    def _scrub(frame):
        kept, hiding = [], False
        for line in frame.split("\n"):
            plain = _ANSI.sub("", line)
            if "### BEGIN HIDDEN TESTS" in plain:
                hiding = True
            if not hiding:
                kept.append(line)
            if "### END HIDDEN TESTS" in plain:
                hiding = False
        return "\n".join(kept)
