"""Run nbgrader on many submissions, several at a time, with a progress bar.

nbgrader handles one submission per call. The course keeps one long-lived
worker process per parallel job (autograder/pipeline/worker.py), each taking the next
submission from a shared queue, writes one log per submission, and caps the
thread pools inside so that parallel graders do not oversubscribe the cores.
"""
import contextlib
import glob
import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from helpers.notebook_form import MAX_NOTEBOOK_MB
from helpers.system import usable_cores

from .. import course
from . import lease, progress, warm

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


@dataclass
class JobResult:
    assignment: str
    student: str
    ok: bool
    seconds: float
    log: Path


_TRACEBACK = "Traceback (most recent call last):"
_RAISED = re.compile(r"((?:\w+\.)*\w+)(?:: (.*))?")  # a traceback's last line: the exception, its message


def failure_reason(log, room=240):
    """Why nbgrader failed a submission, on one line, from its log: the exception that ends the last
    traceback it logged (nbgrader's own closing "Please see the above traceback" left aside), its
    message if it has one, or None. Only the last traceback counts: one made up in text a submission
    put in the log comes before nbgrader's. The message may hold the submission's text: what a
    terminal would act on is shown escaped."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return None
    raised, i = [], 0
    while i < len(lines):
        if lines[i].strip() == _TRACEBACK:
            indent = len(lines[i]) - len(lines[i].lstrip())
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                i += 1  # the frames, indented deeper
            last = _RAISED.fullmatch(lines[i][indent:]) if i < len(lines) and not lines[i][:indent].strip() else None
            if last:
                raised.append((last.group(1).rsplit(".", 1)[-1], last.group(2) or ""))
        i += 1
    raised = [(name, message) for name, message in raised
              if not (name == "NbGraderException" and message.startswith("Please see the"))]
    if not raised:
        return None
    name, message = raised[-1]
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in (f"{name}: {message}" if message else name))
    return text[:room] + ("…" if len(text) > room else "")


def default_jobs():
    return max(1, usable_cores())


def job_environment(n_jobs, work=None):
    """The environment of a grading job: the course's work folder and gradebook, thread caps, safe paths."""
    env = (work or course.Course()).environment()
    threads = str(max(1, usable_cores() // max(1, n_jobs)))
    for name in THREAD_VARIABLES:
        env[name] = threads
    env["PYTHONPATH"] = course.python_path(env)
    # nbgrader runs `alembic` from PATH: put this interpreter's bin/ first.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("MPLBACKEND", "Agg")
    # No grading process puts its working directory first on sys.path (a student's
    # file named like a grader module would stand in for it there).
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONWARNINGS"] = env.get("PYTHONWARNINGS", "ignore::DeprecationWarning")
    return env


class _Worker:
    """One `python -m autograder.pipeline.worker` process, fed one submission at a time."""

    def __init__(self, verb, env, log_dir):
        self.command = [sys.executable, "-m", "autograder.pipeline.worker", verb, str(log_dir)]
        self.env, self.log = env, Path(log_dir) / f"{verb}-worker-{id(self)}.log"
        self.process, self.pids, self.stopped = None, [], False
        self._starting = threading.Lock()  # kill() and a start never cross

    def run(self, verb, assignment, student, log_dir):
        if self.process is None or self.process.poll() is not None:
            with self._starting, open(self.log, "a") as stderr:  # the child keeps its own copy of the handle
                if self.stopped:
                    raise InterruptedError("grading was interrupted")
                # A session of its own: a Ctrl-C in the instructor's terminal reaches `grade`, which
                # stops the workers itself (run_all), not each worker in the middle of nbgrader.
                self.process = subprocess.Popen(self.command, cwd=course.ROOT, env=self.env, stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=stderr, text=True,
                                                start_new_session=True)
                self.pids.append(self.process.pid)
        start = time.perf_counter()
        try:
            self.process.stdin.write(f"{assignment} {student}\n")
            self.process.stdin.flush()
            reply = self.process.stdout.readline()
        except (BrokenPipeError, OSError):
            reply = ""
        if not reply:  # the worker died: this submission failed, the next call starts a new one
            for pipe in (self.process.stdin, self.process.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
            self.process.kill()
            self.process.wait()
            self.process = None
            log = Path(log_dir) / f"{verb}-{student}-{assignment}.log"
            return JobResult(assignment, student, False, time.perf_counter() - start, log)
        answer = json.loads(reply)
        return JobResult(assignment, student, answer["ok"], answer["seconds"], Path(answer["log"]))

    def kill(self):
        """Stop it at once, and start no other (`grade` interrupted): its judge and kernel go with
        it (their zygote kills a child whose requester is gone; a kernel's stand-in ends with its
        parent)."""
        with self._starting:
            self.stopped = True
            process = self.process
            if process is not None and process.poll() is None:
                process.kill()

    def close(self):
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None:
            self.process.stdout.close()


def _stop(workers, stopping, finished, in_progress, verb, work):
    """`grade` interrupted: no next submission, the workers stopped (stop_workers; a second Ctrl-C
    meanwhile waits)."""
    import signal
    held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    main = threading.current_thread() is threading.main_thread()
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in held} if main else {}
    try:
        stopping.set()
        stop_workers(workers, finished, in_progress, verb, work)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stop_workers(workers, finished, in_progress, verb, work):
    """Kill `workers` (and start no other), wait for the `finished` events of the threads that
    drive them, and remove what the stopped submissions (`in_progress`) left: their half-made
    autograded/ folder (nbgrader copies the submission there first: it read as graded, with zeros,
    to `feedback` and `report`), an earlier grading's feedback, the kernels' connection files and
    the judges' copies of the students' files in the temp folder (kept 6 hours otherwise). Also
    run on each Dask worker when `grade` on a cluster is interrupted (cluster.stop_run)."""
    from .preprocessors import COPY_PREFIX
    for worker in workers:
        worker.kill()
    deadline = time.monotonic() + 60  # in all: a killed worker's answer comes at once
    for done in finished:
        done.wait(max(0.0, deadline - time.monotonic()))
    if verb == "autograde":
        for assignment, student in in_progress:  # as nbgrader does with a submission it failed
            shutil.rmtree(work.autograded / student / assignment, ignore_errors=True)
            shutil.rmtree(work.feedback / student / assignment, ignore_errors=True)  # an earlier grading's
    # A stopped kernel's connection file (its key), which its worker no longer removes.
    for path in connection_files([pid for worker in workers for pid in worker.pids]):
        path.unlink(missing_ok=True)
    import tempfile
    for worker in workers:
        for pid in worker.pids:
            for copy in Path(tempfile.gettempdir()).glob(f"{COPY_PREFIX}{pid}-*"):
                if not copy.is_symlink():
                    shutil.rmtree(copy, ignore_errors=True)


def connection_files(pids):
    """The kernels' connection files that the grading processes `pids` wrote in the temp folder
    (named after them: preprocessors.SandboxedKernelManager), each with its kernel's key."""
    import tempfile
    from .preprocessors import CONNECTION_PREFIX
    folder = Path(tempfile.gettempdir())
    return [path for pid in pids for path in folder.glob(f"{CONNECTION_PREFIX}{pid}-*.json") if not path.is_symlink()]


def run_all(verb, pairs, n_jobs=None, desc=None, log_dir=None, work=None, scheduler=None, alone=False):
    """Run nbgrader's `verb` (autograde, generate_feedback) on every (assignment, student).

    n_jobs workers, each a long-lived process, take submissions from one queue
    (a thread of this process drives each); returns JobResults sorted by assignment, student.
    Interrupted (Ctrl-C), it stops every worker at once, with the kernels and judges they ran,
    and raises KeyboardInterrupt: no result of a submission it stopped is kept.
    With a Dask scheduler address (`scheduler`, or COURSE_SCHEDULER) the same
    workers run on that cluster instead (autograder/pipeline/cluster.py).
    `alone`: one submission at a time with nothing beside it, its judge after
    its kernel (COURSE_GRADE_ALONE), for checks that could not decide in the batch;
    always on this machine, whatever the scheduler.
    """
    pairs, work = list(pairs), work or course.Course()
    if verb == "autograde" and pairs:
        from ..gradebook import add_students
        add_students({student for _, student in pairs}, work)
    # A regrade alone runs here, one submission at a time: a cluster grades several side by side.
    scheduler = None if alone else scheduler or os.environ.get("COURSE_SCHEDULER")
    if scheduler:
        from . import cluster
        return cluster.run_all(verb, pairs, scheduler, desc=desc, log_dir=log_dir, work=work)
    n_jobs = 1 if alone else max(1, min(n_jobs or default_jobs(), len(pairs) or 1))
    env = job_environment(n_jobs, work)
    if alone:
        env["COURSE_GRADE_ALONE"] = "1"
    log_dir = Path(log_dir or work.reports / "logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    todo = queue.SimpleQueue()
    for pair in pairs:
        todo.put(pair)
    bar = progress.bar(len(pairs), desc or verb)
    lock, stopping, workers, errors, in_progress = threading.Lock(), threading.Event(), [], [], set()

    def drain(worker, done, finished):
        try:
            while not stopping.is_set():
                try:
                    assignment, student = todo.get_nowait()
                except queue.Empty:
                    return
                with lock:
                    in_progress.add((assignment, student))
                result = worker.run(verb, assignment, student, log_dir)
                if stopping.is_set():
                    return  # killed on the way out: no result
                with lock:
                    in_progress.discard((assignment, student))
                done.append(result)
                with lock:
                    bar.update()
                    if not result.ok:
                        bar.write(f"  {verb} failed for {student}/{assignment}: see {result.log}")
        except BaseException as err:  # noqa: BLE001 (raised again in the main thread)
            if not stopping.is_set():
                errors.append(err)
        finally:
            worker.close()
            finished.set()

    batches = [[] for _ in range(n_jobs)]
    finished = [threading.Event() for _ in range(n_jobs)]
    try:
        with contextlib.ExitStack() as stack:
            worker_env = env
            if verb == "autograde":  # one pair of zygotes for all the workers, and a lease on the machine
                worker_env = stack.enter_context(warm.shared(worker_env))
                worker_env = stack.enter_context(lease.folder_for_run(worker_env))
            workers = [_Worker(verb, worker_env, log_dir) for _ in range(n_jobs)]
            try:
                for worker, batch, done in zip(workers, batches, finished):
                    threading.Thread(target=drain, args=(worker, batch, done), daemon=True).start()
                for done in finished:  # in steps, so that a Ctrl-C reaches this thread at once
                    while not done.wait(0.5):
                        pass
            except BaseException:
                _stop(workers, stopping, finished, in_progress, verb, work)
                raise
    finally:
        bar.close()
    if errors:
        raise errors[0]
    return sorted((r for batch in batches for r in batch), key=lambda r: (r.assignment, r.student))


class SubmissionsError(ValueError):
    """The submissions asked for cannot all be graded (named students without a folder, a
    folder name a worker cannot take): raised before anything is graded. `missing`: the named
    students without a folder, if that is why."""

    missing = ()


class ClusterUnreachable(RuntimeError):
    """No Dask scheduler answered at the address given (--scheduler, COURSE_SCHEDULER): raised
    before anything is graded there, its message naming the address and what to check."""


def _held(root, student):
    folder = Path(root) / student
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def lacking(pairs, assignments=None, students=None):
    """[(assignment, student)] that were asked for by name but are not among `pairs`: each named
    student without the named assignments (None for the assignment when none was named and the
    student has no submission at all). Empty when no student was named: an unnamed student
    who did not hand in an assignment is no mistake of the command's."""
    if not students:
        return []
    found = set(pairs)
    have = {student for _, student in pairs}
    if not assignments:
        return [(None, student) for student in students if student not in have]
    return [(assignment, student) for student in students for assignment in assignments
            if (assignment, student) not in found]


def lacking_text(missing, root):
    """`lacking`'s answer in words: "no 02_gil in ROOT for bob (who has 01_processes_threads only)"."""
    root = Path(root)
    by_assignment = {}
    for assignment, student in missing:
        by_assignment.setdefault(assignment, []).append(student)
    parts = []
    for assignment, students in by_assignment.items():
        who = ", ".join(f"{s} (who has {', '.join(_held(root, s))} only)" if _held(root, s) else f"{s} (who has none)"
                        for s in students)
        parts.append(f"no {assignment or 'assignment folder'} in {root} for {who}")
    return "; ".join(parts)


def empty_selection(assignments=None, students=None, root=None):
    """Why submitted_pairs(assignments, students, root) found nothing, in a few words: nothing
    in `root` at all, or which named students lack which named assignments."""
    root = Path(root or course.Course().submitted)
    if not (root.is_dir() and any(p.is_dir() for p in root.iterdir())):
        return f"nothing in {root}"
    if students:
        return lacking_text(lacking([], assignments, students), root)
    if assignments:
        return f"no student's folder in {root} holds {' or '.join(assignments)}"
    return f"no student's folder in {root} holds an assignment folder"


def misnamed(pairs, root=None):
    """{(assignment, student): [the notebooks in its folder]} of the submissions in `pairs` whose
    folder lacks <assignment>.ipynb: a notebook renamed on the way ("01_processes_threads (1).ipynb",
    as a browser names a second download), or none at all. nbgrader would fail them with "No
    notebooks found, did you forget to run 'nbgrader generate_assignment'?", which names the
    wrong cause; `grade` leaves them out and says what it found instead."""
    root = Path(root or course.Course().submitted)
    found = {}
    for assignment, student in pairs:
        folder = root / student / assignment
        if not (folder / f"{assignment}.ipynb").is_file():
            found[(assignment, student)] = sorted(p.name for p in folder.glob("*.ipynb"))
    return found


def shown(path):
    """A path as a shell would take it (quoted where needed); repr() where it holds characters a
    terminal would act on (a student names the files: an escape sequence could hide a line)."""
    text = str(path)
    return shlex.quote(text) if text.isprintable() else repr(text)


def stray_notebooks(assignments=None, students=None, root=None):
    """[(path, what to do, whether a submission is missing for it)] of the notebooks in root
    (default: submitted/) that no grading reads, for the assignments and students selected: one
    straight in a student's folder (or in a folder named after an assignment, no student's folder
    around it), and a second copy beside an assignment's own notebook (a browser names a second
    download "<assignment> (1).ipynb"). grade names each; it used to grade the others in silence."""
    root = Path(root or course.Course().submitted)
    known = set(course.assignments())
    found = []
    if not root.is_dir():
        return found
    for path in sorted(root.glob("*.ipynb")):
        if students is None and (not assignments or path.stem in assignments):
            found.append((path, "not in a student's folder: put it in submitted/<student id>/<assignment>/", True))
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if students is not None and folder.name not in students:
            continue
        for path in sorted(folder.glob("*.ipynb")):
            if assignments and path.stem not in assignments:
                continue
            if folder.name in known:
                hint = (f"{shown(folder.name)}/ is named after an assignment, not a student: move it to "
                        f"submitted/<student id>/{folder.name}/")
            elif path.stem in known and (folder / path.stem / path.name).is_file():
                found.append((path, f"beside {path.stem}/, whose {path.name} is the one graded: if this is the "
                                    f"newer, mv {shown(path)} {shown(folder / path.stem / path.name)}, "
                                    "then grade again", False))
                continue
            elif path.stem in known:
                target = folder / path.stem / path.name
                hint = ("not in its assignment's folder: "
                        f"mkdir -p {shown(target.parent)} && mv {shown(path)} "
                        f"{shown(target)}, then grade again")
            else:
                hint = "not in an assignment's folder: put it in submitted/<student id>/<assignment>/<assignment>.ipynb"
            found.append((path, hint, True))
        for assignment_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
            if (assignments and assignment_dir.name not in assignments) or assignment_dir.name not in known:
                continue
            own = assignment_dir / f"{assignment_dir.name}.ipynb"
            if not own.is_file():
                continue  # misnamed(): grade says what it found there
            # Another copy of the assignment's notebook (a scratch notebook beside it is no submission)
            for path in sorted(assignment_dir.glob(f"{glob.escape(assignment_dir.name)}*.ipynb")):
                if path != own:
                    found.append((path, f"beside {own.name}, which is the one graded: if it is the newer, "
                                        f"mv {shown(path)} {shown(own)}, then grade again",
                                  False))
    return found


# nbgrader reads a notebook whole in the grading worker, outside the sandbox, before any step of
# the course's runs: a 315 MB notebook (3 million lines of printed output) took the worker to 1.24 GB.
# The course's notebooks with every output in them are about 0.5 MB. MAX_NOTEBOOK_MB by default:
# students' Validate holds them to it too.


def notebook_limit_mb():
    return float(os.environ.get("COURSE_MAX_NOTEBOOK_MB") or MAX_NOTEBOOK_MB)


def too_large(size, path):
    """What to say of a notebook of `size` bytes over the limit, and what to do about it."""
    return (f"is {size / 2**20:.3g} MB, over the {notebook_limit_mb():g} MB a notebook may have "
            "(COURSE_MAX_NOTEBOOK_MB), most likely printed output: the student clears it (Edit > Clear Outputs "
            f"of All Cells) and hands it in again, or clear it here (jupyter nbconvert --clear-output --inplace "
            f"{shlex.quote(str(path))}) and grade again")


def oversized(pairs, root=None):
    """{(assignment, student): size in bytes} of the submissions whose notebook is larger than
    COURSE_MAX_NOTEBOOK_MB (MAX_NOTEBOOK_MB by default): `grade` leaves them out, saying why,
    rather than let one of them take the grading machine's memory from everyone's grading."""
    root = Path(root or course.Course().submitted)
    limit = notebook_limit_mb() * 2**20
    found = {}
    for assignment, student in pairs:
        try:
            size = os.stat(root / student / assignment / f"{assignment}.ipynb", follow_symlinks=False).st_size
        except OSError:
            continue
        if size > limit:
            found[(assignment, student)] = size
    return found


def _unworkable(name):
    """Why a student's or assignment's folder name cannot go to a worker, or None. A worker
    reads "ASSIGNMENT STUDENT" per line (autograder/pipeline/worker.py): a name with whitespace
    in it would fail on every try."""
    if not name or any(c.isspace() for c in name):
        return "has whitespace in its name"
    return None


def submitted_pairs(assignments=None, students=None, root=None, unworkable=None):
    """(assignment, student) for every submission in root (default: submitted/).

    `students`: None for every student there; else these names, each of which must have a
    folder in root (an empty list is refused: it would otherwise read as everyone). Raises
    SubmissionsError, naming them, for students named without a folder and for selected
    folders whose names a worker cannot take (whitespace in them), unless `unworkable`, a
    list, is given: it then receives those folders, which are left out.
    """
    root = Path(root or course.Course().submitted)
    if students is not None:
        students = list(students)
        if not students:
            raise SubmissionsError("no students named (an empty --students?): name at least one, "
                                   "or leave --students out for every student")
    pairs, bad = [], []
    present = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if students is not None:
        missing = sorted(set(students) - {p.name for p in present})
        if missing:
            error = SubmissionsError(f"no folder in {root} for student(s): {', '.join(map(repr, missing))}")
            error.missing = missing
            raise error
    for student_dir in present:
        if students is not None and student_dir.name not in students:
            continue
        if _unworkable(student_dir.name):
            bad.append(student_dir)
            continue
        for assignment_dir in sorted(p for p in student_dir.iterdir() if p.is_dir()):
            if assignments and assignment_dir.name not in assignments:
                continue
            if _unworkable(assignment_dir.name):
                bad.append(assignment_dir)
                continue
            pairs.append((assignment_dir.name, student_dir.name))
    if bad and unworkable is not None:
        unworkable.extend(bad)
    elif bad:
        raise SubmissionsError("cannot grade folder(s) with whitespace in the name (a student id or "
                               "assignment name must be one word): "
                               + ", ".join(repr(str(p)) for p in bad)
                               + "; rename them, or name the other students with --students")
    return pairs
