"""nbgrader preprocessors used by `python -m autograder grade` (see nbgrader_config.py)."""
import os
import re
import shutil
import time
from functools import lru_cache
from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells
from nbgrader.utils import is_grade, is_solution
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, List
from traitlets.config import Configurable

from helpers.system import process_alive

from .. import hidden, notebooks
from ..sandbox.limits import ENV, Limits, for_student_code, without_secrets
from . import confine, lease, warm
from .mend import index_below
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
    max_file_mb = Integer(Limits.max_file_mb, help="Largest file a process may write, MiB").tag(config=True)
    network = Bool(False, help="Allow network access beyond loopback").tag(config=True)
    gpus = Bool(False, help="Let student code use the grader's GPUs (needs a memory cgroup: under an "
                            "address-space cap CUDA cannot start). Off: every grader judges as one "
                            "without a GPU").tag(config=True)
    protect_files = Bool(True, help="Hide the gradebook, solutions and other students' files").tag(config=True)

    def limits(self):
        return Limits(memory_mb=self.memory_mb, max_processes=self.max_processes, max_file_mb=self.max_file_mb,
                      network=self.network, protect_files=self.protect_files, gpus=self.gpus)

    def sandbox(self, own_folder):
        if not self.enabled:
            return None
        return confine.Sandbox(self.limits(), own_folder)


class SandboxedKernelManager(AsyncKernelManager):
    """Starts the kernel through autograder.sandbox.kernel instead of ipykernel_launcher,
    without the grader's secrets in its environment."""

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        kw["env"] = for_student_code(kw.get("env") or os.environ)
        return await super()._async_launch_kernel(kernel_cmd, **kw)

    def write_connection_file(self, **kw):
        # Named after this grading process, as the judges' copies are: what a stopped grading
        # leaves is found by its name (jobs.connection_files), never by reading a kernel's
        # command line, which a kernel running as the student could rewrite to name another file.
        if not self.connection_file:
            import tempfile
            fd, self.connection_file = tempfile.mkstemp(prefix=f"{CONNECTION_PREFIX}{os.getpid()}-", suffix=".json")
            os.close(fd)
        super().write_connection_file(**kw)

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        if "ipykernel_launcher" in cmd:
            at = cmd.index("ipykernel_launcher")
            socket = warm.socket_path("sandbox")
            if socket:  # a thin stand-in that has the kernel forked from the warm zygote
                return [cmd[0], "-S", "-P", "-m", "autograder.sandbox.zygote", socket, warm.KERNEL, *cmd[at + 1:]]
            cmd[at] = "autograder.sandbox.kernel"
            # -P: the submission's folder (the kernel's working directory) is not put
            # first on sys.path, so a file handed in there cannot stand in for the grader.
            cmd.insert(cmd.index("-m"), "-P")
        return cmd


# What the grading kernel, and every process it starts, inherits besides the sandbox's settings
# (an instructor's own value wins). In the sandbox, which has no network, every gloo connection of
# 09's and 12's ranks logged "[c10d] The hostname of the client socket cannot be retrieved" from
# C++: nine such lines stood in a perfect submission's feedback, read as failures.
GRADING_KERNEL_ENV = {"TORCH_CPP_LOG_LEVEL": "ERROR"}


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
        quieted = {name: value for name, value in GRADING_KERNEL_ENV.items() if name not in os.environ}
        os.environ.update(quieted)
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
            for name in quieted:
                os.environ.pop(name, None)
            if box is not None:
                box.close()  # whatever the submission left running goes too
            for path in confine.remove_links(own_folder):  # before the grader writes there
                self.log.warning("removed a link or special file the submission made: %r", str(path))

    kernel_start_tries = Integer(
        3, help="Kernel starts to try before the notebook fails: a kernel that dies before its first "
                "reply ran no student code (it lost a port to another process, see start_new_kernel_client)"
    ).tag(config=True)

    def start_new_kernel_client(self):
        """Start the kernel's client, starting a new kernel (new ports) when the first one died
        before it replied. jupyter_client picks the kernel's TCP ports, frees them and passes
        them on; when grading in parallel, another process (a kernel, a gloo rendezvous) can take
        one before the kernel binds it, and the kernel exits with "Address already in use"
        (jupyter/jupyter_client#154; measured here: 1 of 42 notebooks in one run of bin/test).
        Before kernel_info no cell has run, so nothing the student wrote can cause this."""
        for attempt in range(1, self.kernel_start_tries + 1):
            try:
                return super().start_new_kernel_client()
            except RuntimeError as err:
                if "died before replying" not in str(err) or attempt == self.kernel_start_tries:
                    raise
                self.log.warning("the kernel died while starting (%s): starting another one (%d of %d)",
                                 err, attempt + 1, self.kernel_start_tries)
                # nbclient has shut the dead kernel down and dropped its manager
                self.km = self.create_kernel_manager()
                self.start_new_kernel()

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        tags = cell.metadata.get("tags", [])
        if "nbgrader" in cell.metadata and self.skip_cells_with_tag in tags:
            # Only the course's teaching cells are skipped. A graded cell's tags are the
            # submission's (nbgrader restores its source and nbgrader metadata, not its tags):
            # a test cell the student tagged `demo` would be skipped, raise nothing, and score.
            cell.metadata["tags"] = [t for t in tags if t != self.skip_cells_with_tag]
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
            with lease.hold() as waited:  # a timing check elsewhere may need the machine alone (lease.py)
                started += waited
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


class OverwriteCellsAsReleased(OverwriteCells):
    """nbgrader's OverwriteCells, without its false alarm on every test cell with hidden tests.

    The gradebook keeps a test cell's checksum from before its hidden tests were cut, the release
    one from after, so nbgrader warned "Attribute 'checksum' ... has changed!" for every such cell
    of every submission (jupyter/nbgrader#1961): 192 lines per student for the course, which
    would bury the one line of a student who did edit a test cell. Here a cell that is just what
    the release handed out (the gradebook's source with its hidden tests cut, as the release
    cuts them) raises no alarm; an edited one still does, and both are overwritten as before.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        self._as_released = self._unchanged_from_release(cell)
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name, attr, old, new):
        if attr == "checksum" and self._as_released:
            return
        super().report_change(name, attr, old, new)

    def add_missing_grade_cells(self, nb, resources):
        """nbgrader puts a missing test cell back after the graded cell above it in the source, and
        failed the whole submission (KeyError) where that cell is missing too: an answer typed into a
        new cell and its test cell deleted, as an editor without nbgrader's locks lets one. Such a
        test cell goes here before the first cell below it in the release that the notebook still
        has (so after the answer typed in its place), or last; nbgrader places the others."""
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        names = [cell.name for cell in source_nb.source_cells]
        solutions = {cell.name for cell in source_nb.solution_cells}
        present = {cell.metadata.nbgrader["grade_id"] for cell in nb.cells if is_grade(cell) or is_solution(cell)}
        for grade_cell in source_nb.grade_cells:  # in the source's order, as nbgrader goes
            at = names.index(grade_cell.name)
            if grade_cell.name not in present and at > 0 and names[at - 1] not in present:
                cell = from_dict(self.missing_cell_transform(source_nb.source_cells[at], grade_cell.max_score,
                                                             is_solution=grade_cell.name in solutions))
                self.log.warning("Missing grade cell %s encountered, and the cell above it too: "
                                 "adding it before the next cell of the release", grade_cell.name)
                nb.cells.insert(index_below(nb, resources["nbgrader"], grade_cell.name), cell)
            present.add(grade_cell.name)
        return super().add_missing_grade_cells(nb, resources)

    def _unchanged_from_release(self, cell):
        import copy

        from nbgrader import utils
        from nbgrader.api import MissingEntry
        from nbgrader.preprocessors import ClearHiddenTests

        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is None or not utils.is_locked(cell):
            return False
        try:
            source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            released = copy.deepcopy(cell)
            released.source = source_cell.source
            if not ClearHiddenTests(parent=self)._remove_hidden_test_region(released):
                return False
            return utils.compute_checksum(cell) == utils.compute_checksum(released)
        except (MissingEntry, KeyError, ValueError, RuntimeError):
            return False


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
        info = resources.get("nbgrader", {})
        assignment = info.get("assignment")
        release = course.RELEASE / str(assignment)
        if not folder or not release.is_dir():
            return nb, resources
        handed_in = self._handed_in_links(course.Course().submitted / str(info.get("student")) / str(assignment),
                                          info.get("notebook"))
        expected = {p.relative_to(release) for p in release.rglob("*")} | set(map(Path, self.always_kept))
        # Bottom-up and never through a link: a handed-in link to / must not lead the grader there.
        for top, dirs, files in os.walk(folder, topdown=False, followlinks=False):
            for name in files + dirs:
                path = Path(top, name)
                rel = path.relative_to(folder)
                if rel not in handed_in and (rel in expected or path.suffix == ".ipynb" and len(rel.parts) == 1):
                    continue
                self.log.warning("not graded, %s: %r", "a link in the submission" if rel in handed_in
                                 else "not expected beside the notebook", str(rel))
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        return nb, resources

    @staticmethod
    def _handed_in_links(submitted, notebook):
        """Paths (relative) that are links in the submission, which nbgrader's copy followed: what
        they point to is the grader's to read, not the student's (a link to source/ would be
        graded as the student's answer). A linked notebook or folder is not graded at all."""
        if submitted.is_symlink() or submitted.parent.is_symlink() or (submitted / f"{notebook}.ipynb").is_symlink():
            raise ValueError(f"{submitted}: the submission (or its notebook) is a symbolic link; not graded")
        links = set()
        for top, dirs, files in os.walk(submitted, followlinks=False):
            for name in dirs + files:
                path = Path(top, name)
                if path.is_symlink():
                    links.add(path.relative_to(submitted))
        return links


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

    The judge (autograder/pipeline/verify.py and judge.py) needs nothing from the
    kernel: StartJudge starts it before the kernel runs, so that the two run side
    by side, and this step waits for its verdicts. Its student's process works in
    a private copy of the submission's folder, so that the two never see each
    other's files half written.
    """

    enabled = Bool(True, help="Verify hidden checks outside the kernel").tag(config=True)
    cell_timeout = Integer(180, help="Seconds one student cell may take to load in the judge's student process").tag(config=True)
    notebook_timeout = Integer(
        900, help="Seconds the whole notebook may take to load in the judge's student process, all tries together"
    ).tag(config=True)

    def start(self, nb, resources):
        """The judge of this submission, started in the background (None: nothing to check)."""
        from .. import course, notebooks
        from . import verify

        assignment = resources["nbgrader"]["assignment"]
        source_path = course.source_notebook(assignment)
        if not source_path.is_file():
            self.log.warning("no source notebook for %s: hidden checks not verified", assignment)
            return None
        payload = verify.payload_for(nb, notebooks.read(source_path))
        if not payload["exercises"]:
            return None
        folder = resources.get("metadata", {}).get("path") or "."
        logs = course.Course().reports / "logs"  # the grader's folder: nothing there is the student's
        logs.mkdir(parents=True, exist_ok=True)
        info = resources["nbgrader"]
        log = logs / f"judge-{info.get('student')}-{assignment}.log"  # a regrading adds to it
        with open(log, "a") as out:
            out.write(f"=== judged {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        return _JudgeRun(payload, folder, GradingLimits(parent=self), str(log), self.cell_timeout,
                         self.notebook_timeout)

    def preprocess(self, nb, resources):
        _disown_undecided(nb)
        if not self.enabled:
            return nb, resources
        from . import verify

        run = resources.pop("course_judge", None) or self.start(nb, resources)
        if run is None:
            return nb, resources
        waiting = time.monotonic()
        try:
            verdicts = run.verdicts()
        finally:
            # The judge works while the kernel runs: what grading waited for is only the rest.
            timings = resources.setdefault("course_timings", {})
            timings["hidden checks (judge)"] = run.seconds
            timings["judge, after the kernel"] = time.monotonic() - waiting
        for cell in nb.cells:
            if cell.cell_type != "code" or not is_grade(cell):
                continue
            failed, undecided, details = [], False, []
            for _, exercise in verify.hidden_exercises(cell.source):
                # No verdict at all is a failure too: a check that did not run never passes.
                passed, report, unsure = verdicts.get(
                    exercise, (False, f"{exercise}: the hidden checks gave no verdict", False))
                said = _say_verdict(cell, exercise, _verdict_line(exercise, passed, report, unsure))
                if not passed:
                    failed.append(report)
                    undecided |= unsure
                    # The count is in the verdict line above: below it, what each check found.
                    details.append(report.split("\n", 1)[1] if said and "\n" in report else report)
            if not failed:
                continue
            self.log.warning("hidden checks failed outside the kernel: %s", "; ".join(failed))
            kernel_error = next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)
            if undecided:  # regraded alone after the batch; still undecided -> a person looks
                cell.outputs.append(_error_output(
                    UNDECIDED, "a hidden check could not decide at grading time (a machine too busy to "
                    "measure a speedup, or an error of the check's own); it will be looked at by a person:\n"
                    + "\n".join(failed)))
            elif kernel_error is None:
                cell.outputs.append(_error_output("HiddenCheckFailed", ALL_OR_NOTHING + "\n" + "\n".join(details)))
            elif not _unanswered(exercise_errors=failed, kernel_error=kernel_error):
                # The visible asserts failed first: what the hidden checks found says more, often why.
                cell.outputs.append(_error_output(
                    "HiddenCheckFailed", "the hidden checks of this exercise also found:\n" + "\n".join(failed)))
        return nb, resources


ALL_OR_NOTHING = "a test cell earns its points only when every check in it passes:"


def _unanswered(exercise_errors, kernel_error):
    """Whether a failed test cell is one of an exercise not answered yet (its answer cell still
    raises NotImplementedError): then the hidden checks have nothing to add."""
    return kernel_error.get("ename") == "NotImplementedError" or all(
        re.match(r"\S+: the answer cell raised NotImplementedError", report) for report in exercise_errors)


def _verdict_line(exercise, passed, report, undecided):
    """One line for the test cell's output: the count of the report's first line, or what follows below."""
    first = report.split("\n", 1)[0]
    if passed:
        return first or f"{exercise}: the hidden checks passed"
    if undecided:
        return f"{exercise}: a hidden check could not decide (below)"
    return f"{first} (below)"


def _say_verdict(cell, exercise, verdict):
    """Put the judge's verdict in place of the kernel's line for the hidden block (hidden.PENDING),
    which promised the failures below: with none below, it could not be told from a lost list.
    Whether the line was there (the kernel ran the hidden block)."""
    from .. import hidden
    pending, said = hidden.PENDING.format(exercise=exercise), False
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and pending in output.get("text", ""):
            output["text"] = output["text"].replace(pending, verdict)
            said = True
    return said


def _disown_undecided(nb):
    """Only the grader marks a test cell undecided (an error named UNDECIDED, appended above): one
    that the notebook's own code raised under that name (a class called ManualReviewNeeded) is
    renamed, or it would send its submission to be graded again alone, then to a person."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" and output.get("ename") == UNDECIDED:
                output["ename"] = f"{UNDECIDED} (raised by the notebook's own code)"


class _JudgeRun:
    """One submission's judge, running in a thread of the grading worker (verify.verify).

    Its student's process gets a private copy of the submission's folder (links
    kept as links, never followed) in a sandbox of its own.
    """

    def __init__(self, payload, folder, limits, log, cell_timeout, notebook_timeout=None):
        import threading

        self.started, self.seconds = time.monotonic(), 0.0
        self.copy = new_copy_folder()
        _copy_plain_files(Path(folder), self.copy / "work")
        self.box = limits.sandbox(str(self.copy / "work"))
        # Taken now (the kernel's settings come later), without the grader's secrets.
        env = without_secrets(self.box.environment() if self.box else os.environ)
        self._result, self._error = None, None
        self._args = (payload, str(self.copy / "work"), env, log, cell_timeout, notebook_timeout)
        self._thread = threading.Thread(target=self._run, name="judge", daemon=True)
        self._thread.start()
        _RUNNING.add(self)

    def _run(self):
        from . import verify
        try:
            payload, folder, env, log, cell_timeout, notebook_timeout = self._args
            self._result = verify.verify(payload, folder, env=env, log=log, cell_timeout=cell_timeout,
                                         notebook_timeout=notebook_timeout)
        except BaseException as err:  # noqa: BLE001 (re-raised in the grading thread)
            self._error = err
        finally:
            self.seconds = time.monotonic() - self.started

    def verdicts(self):
        """{exercise: (passed, report, undecided)}, once the judge is done; cleans up."""
        self._thread.join()
        if self in _RUNNING:
            _RUNNING.discard(self)
            if self.box is not None:
                self.box.close()
            shutil.rmtree(self.copy, ignore_errors=True)
        if self._error is not None:
            raise self._error
        return self._result


_RUNNING = set()  # judges started and not yet collected
COPY_PREFIX = "course-judge-"  # then the grading process's pid
CONNECTION_PREFIX = "course-connection-"  # a kernel's connection file: then the grading process's pid
ORPHAN_AGE = 6 * 3600.0  # seconds: far longer than any submission's grading
_SWEPT = []  # whether this process has looked for orphaned copies


def new_copy_folder():
    """A root-only folder in the temp folder for a judge's copy of a submission, named after this
    process (after removing the copies that killed processes left, once per process)."""
    import tempfile
    if not _SWEPT:
        _SWEPT.append(True)
        remove_orphaned_copies(tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix=f"{COPY_PREFIX}{os.getpid()}-"))


def remove_orphaned_copies(folder):
    """Remove the judges' copies of submissions, and the kernels' connection files, left by
    grading processes that were killed (a Dask worker lost with its node, a worker stopped with
    SIGKILL): their clean-up never ran, and each left a student's files, or a kernel's key, in the
    machine's temp folder. One goes when its process is gone and it has not changed for
    ORPHAN_AGE, so that a process with its pid seen from another pid namespace, sharing the
    folder, never loses one it is using. Returns what was removed from `folder`."""
    removed = []
    try:
        entries = [(prefix, path) for prefix in (COPY_PREFIX, CONNECTION_PREFIX)
                   for path in Path(folder).glob(f"{prefix}*-*")]
    except OSError:
        return removed
    for prefix, copy in entries:
        pid = copy.name[len(prefix):].split("-", 1)[0]
        try:
            if (not pid.isdigit() or copy.is_symlink() or process_alive(int(pid))
                    or time.time() - copy.lstat().st_mtime < ORPHAN_AGE):
                continue  # a link (planted where students share the folder) is never followed
            if prefix == CONNECTION_PREFIX:
                copy.unlink()
            else:
                shutil.rmtree(copy, ignore_errors=True)
        except OSError:
            continue
        removed.append(copy)
    return removed


def finish_abandoned_judges():
    """Wait for, and clean up after, judges whose submission stopped before collecting them
    (nbgrader gave up on it): called by the grading worker after each submission, and at exit."""
    for run in list(_RUNNING):
        try:
            run.verdicts()
        except BaseException:  # noqa: BLE001 (the submission has already failed)
            pass


def _copy_plain_files(source, target):
    """Copy the folders and regular files under `source` (links, FIFOs and the like are left out)."""
    import stat
    target.mkdir(parents=True)
    for top, dirs, files in os.walk(source, followlinks=False):
        here = target / Path(top).relative_to(source)
        for name in dirs:
            if not os.path.islink(os.path.join(top, name)):
                (here / name).mkdir()
        for name in files:
            path = os.path.join(top, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                shutil.copy2(path, here / name, follow_symlinks=False)


class StartJudge(NbGraderPreprocessor):
    """Start the judge before the kernel runs (VerifyHiddenChecks collects its verdicts).

    Off (`c.StartJudge.enabled = False`, as for a submission graded again alone),
    the judge starts after the kernel, so the two never share the cores.
    """

    enabled = Bool(True, help="Run the judge side by side with the kernel").tag(config=True)

    def preprocess(self, nb, resources):
        verifier = VerifyHiddenChecks(parent=self)
        if self.enabled and verifier.enabled:
            run = verifier.start(nb, resources)
            if run is not None:
                resources["course_judge"] = run
        return nb, resources


class SanitizeStudentHTML(NbGraderPreprocessor):
    """What the student's notebook makes a browser run, made inert in the graded notebook.

    formgrader shows the graded notebook as HTML inside the instructor's Jupyter server, and
    `feedback` makes its pages from it: a `<script>` (or an `onerror=` attribute, an SVG) in an
    output the student's code displayed, or in a markdown cell the student wrote, would run
    there with the instructor's session, which can change any grade. nbconvert's SanitizeHTML
    (bleach) cleans every code cell's HTML and markdown outputs and drops other kinds that a
    browser runs (JavaScript, SVG); markdown and raw cells are cleaned unless they are the
    course's own, as the source notebook has them. Plots (PNG) and plain text pass unchanged.
    """

    enabled = Bool(True, help="Sanitize the HTML the student's notebook carries").tag(config=True)

    def preprocess(self, nb, resources):
        if not self.enabled:
            return nb, resources
        from nbconvert.preprocessors.sanitize import SanitizeHTML

        from .. import course, notebooks
        source_path = course.source_notebook(resources["nbgrader"]["assignment"])
        ours = {}
        if source_path.is_file():
            ours = {c.get("id"): c.source for c in notebooks.read(source_path).cells if c.cell_type != "code"}
        from bleach import ALLOWED_ATTRIBUTES, ALLOWED_TAGS
        tags = sorted(ALLOWED_TAGS) + [
            "p", "div", "span", "br", "hr", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "sub", "sup",
            "table", "thead", "tbody", "tr", "th", "td", "caption", "img"]
        # No class attribute: the notebook's HTML must not pass for formgrader's own elements.
        attributes = {**ALLOWED_ATTRIBUTES,
                      "img": ["src", "alt", "width", "height"], "td": ["colspan", "rowspan"],
                      "th": ["colspan", "rowspan"]}
        cleaner = SanitizeHTML(tags=tags, attributes=attributes, parent=self)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type in ("markdown", "raw") and ours.get(cell.get("id")) == cell.source:
                continue  # the course's own text, as source/ has it
            cleaner.preprocess_cell(cell, resources, index)
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

    Paths of the grading machine are shortened too ("helpers/workers.py",
    "<python>/multiprocessing/pool.py", "<site-packages>/torch/..."): shorter lines,
    and nothing of where the grader keeps its files. IPython's "[... skipping hidden 1
    frame]" (a frame of the course's helpers marked __tracebackhide__) is said in
    words that cannot be read as a hidden check.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [self._plain_paths(self._scrub(frame)) for frame in output.traceback
                                        if not self._is_grader_frame(frame)]
        return cell, resources

    @staticmethod
    def _plain_paths(frame):
        for long, short in _path_prefixes():
            frame = frame.replace(long, short)
        return _SKIPPED_FRAMES.sub(lambda m: f"[... {m.group(1)} frame{'s' if m.group(1) != '1' else ''} "
                                             "of the course's helpers left out]", frame)

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


_SKIPPED_FRAMES = re.compile(r"\[\.\.\. skipping hidden (\d+) frames?\]")


@lru_cache(maxsize=1)
def _path_prefixes():
    """(prefix, short name) of the grading machine's paths in a traceback, longest first: the
    installed packages, the standard library, the course folder."""
    import site
    import sysconfig

    from .. import course

    pairs = [(path, "<site-packages>") for path in {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}]
    pairs += [(sysconfig.get_paths()["stdlib"], "<python>"), (str(course.ROOT), "")]
    pairs = [(f"{path.rstrip(os.sep)}{os.sep}", f"{short}{os.sep}" if short else "") for path, short in pairs if path]
    return sorted(pairs, key=lambda pair: -len(pair[0]))
