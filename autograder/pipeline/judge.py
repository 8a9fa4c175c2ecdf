"""The judge: the hidden checks' verdicts, made in a process that runs no student code.

While grading, each submission gets two processes besides nbgrader's kernel:

    grading worker ──spec──▶ judge (this module: the checks, the verdicts)
                               │  requests (pickles)      ▲ replies (plain data)
                               ▼                          │
                             student's process (autograder/sandbox/student.py, sandboxed):
                             the notebook's code, replayed; answers requests

A check receives the student's functions as `Remote` handles: calling one
sends the arguments across, runs the function in the student's process and
brings back its result as a value rebuilt here from plain data (wire.py), or
as another handle. The check's own code, its expected values, its clock and
its verdict stay here, where the student's code cannot reach: it never runs in
this process, and this process reads nothing from the student's side but data.
What a check must observe inside the student's process (a spy on
`Thread.start`, a function run in a child) travels there with `there()`
(autograder/checks/_support.py); what the kernel shows of that process from
outside (CPU time of its process tree, its child processes) is read here from
/proc (`ProcessTree`).
"""
import builtins
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from ..sandbox import wire, zygote
from ..sandbox.limits import for_student_code
from . import lease

# Values of these types always travel by value, and so do those of a subclass, as the builtin value
# they hold (wire.encode): a handle claiming to be one is an array or a tensor wire cannot carry
# (of objects, masked, a tensor subclass), or forged.
_VALUE_TYPES = {"builtins.int", "builtins.float", "builtins.bool", "builtins.str", "builtins.bytes",
                "builtins.list", "builtins.tuple", "builtins.dict", "builtins.set", "builtins.frozenset",
                "builtins.complex", "numpy.ndarray", "torch.Tensor", "torch.nn.parameter.Parameter"}
# Classes a handle may present itself as (for isinstance), when its class derives from them.
_TRUSTED_MODULES = ("torch", "numpy", "collections", "concurrent", "multiprocessing", "threading",
                    "queue", "asyncio", "random", "joblib", "helpers", "builtins", "types", "functools")


_BY_VALUE = set()


class StudentError(Exception):
    """An exception raised in the student's process whose class is not a builtin one."""


class StudentProcessGone(RuntimeError):
    """The student's process died or stopped answering."""


class Remote:
    """A handle on an object that lives in the student's process."""

    __slots__ = ("_session", "_number", "_mro", "_callable")

    def __init__(self, session, number, mro, is_callable):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_number", number)
        object.__setattr__(self, "_mro", tuple(mro))
        object.__setattr__(self, "_callable", bool(is_callable))

    def __reduce__(self):  # only through StudentProcess.request, which turns it into a persistent id
        raise TypeError("a handle on the student's process cannot be pickled here")

    def _ask(self, op, *args):
        return self._session.request((op, self, *args))

    @property
    def __class__(self):
        return _presented_class(self._mro)

    def __call__(self, *args, **kwargs):
        return self._session.request(("call", self, args, kwargs))

    def __getattr__(self, name):
        return self._ask("getattr", name)

    def __setattr__(self, name, value):
        self._ask("setattr", name, value)

    def __getitem__(self, key):
        return self._ask("getitem", key)

    def __setitem__(self, key, value):
        self._ask("setitem", key, value)

    def __len__(self):
        value = self._ask("len")
        if type(value) is not int:
            raise TypeError("len() of the student's object is not an int")
        return value

    def __iter__(self):
        return self._ask("iter")

    def __next__(self):
        return self._ask("next")

    def __bool__(self):
        value = self._ask("bool")
        if type(value) is not bool:
            raise TypeError("bool() of the student's object is not a bool")
        return value

    def __contains__(self, item):
        return self._ask("contains", item) is True

    def __enter__(self):
        return self._ask("enter")

    def __exit__(self, *exc):
        self._ask("exit")
        return False

    def __str__(self):
        value = self._ask("str")
        return value if type(value) is str else "<object>"

    def __repr__(self):
        try:
            value = self._ask("repr")
        except Exception:  # noqa: BLE001
            value = None
        return value if type(value) is str else f"<object of the student's {self._mro[0]}>"

    # Equality is by identity: the student's __eq__ is not asked. A handle has no hash: as a set's
    # member or a dict's key it would count as distinct from an equal one (six "different"
    # estimates, all of one value), so a check that counts distinct values must take plain ones
    # (exact_float and the like), and a check that did not fails rather than passes.
    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __hash__(self):
        raise TypeError("the value is an object of the student's own class, not a plain value: "
                        "return built-in numbers, strings, lists, tuples and dicts")


def _presented_class(mro):
    """The class a handle presents for isinstance(): the first trusted, non-value class it derives from."""
    for name in mro:
        if name in _VALUE_TYPES or name == "builtins.object":
            continue
        module, _, qualname = name.rpartition(".")
        while module and module.split(".")[0] in _TRUSTED_MODULES:
            loaded = sys.modules.get(module)
            if loaded is not None:
                target = loaded
                for part in qualname.split("."):
                    target = getattr(target, part, None)
                if isinstance(target, type):
                    return target
            break
    return Remote


def _builtin_exception_class(mro):
    """The class to rebuild a student's exception as: its builtin exception class, or, for a class
    of several (`class Undefined(ZeroDivisionError, ValueError)`), one made here of the most
    derived of them, so that `except ValueError` in a check catches it as it would in the
    student's own process (the first of them alone did not: a review). None: no builtin one."""
    found = []
    for name in mro:
        module, _, qualname = name.rpartition(".")
        cls = getattr(builtins, qualname, None) if module == "builtins" else None
        if isinstance(cls, type) and issubclass(cls, Exception) and cls is not StopAsyncIteration:
            found.append(cls)
    leaves = [cls for cls in found if not any(other is not cls and issubclass(other, cls) for other in found)]
    if len(leaves) > 1:
        try:
            return _combined_exception(mro[0].rpartition(".")[2], tuple(leaves))
        except TypeError:  # builtins whose layouts do not combine (OSError's and another's)
            pass
    return found[0] if found else None


@functools.lru_cache(maxsize=256)
def _combined_exception(name, bases):
    return type(name, bases, {"__module__": "student"})


def _exception_from(mro, message, trace):
    """The student's exception as one the checks can catch: its builtin class (_builtin_exception_class)."""
    cls = _builtin_exception_class(mro)
    if cls is not None:
        try:
            err = cls(message)
        except Exception:  # noqa: BLE001 (a builtin that wants other arguments)
            err = None
        if err is not None:
            err.student_traceback = trace
            err.student_class = mro[0]
            return err
    err = StudentError(f"{mro[0].rpartition('.')[2]}: {message}")
    err.student_traceback = trace
    err.student_class = mro[0]
    return err


def _process_cpu_clock(pid):
    """The clock id of another process's CPU time (glibc's clock_getcpuclockid, which Python does
    not wrap: the kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)). Linux lets any process
    read it."""
    return ((~pid) << 3) | 2


class ProcessTree:
    """CPU time and processes of a process and its descendants, read from /proc."""

    def __init__(self, pid):
        self.pid = pid
        self.ticks = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _stat(pid):
        try:
            text = _read_proc(f"/proc/{pid}/stat")
        except OSError:
            return None
        fields = text[text.rindex(")") + 2:].split()
        # fields[0] is field 3 (state): utime=14, stime=15, cutime=16, cstime=17, threads=20
        return {"ppid": int(fields[1]), "cpu": sum(int(fields[i]) for i in (11, 12, 13, 14)),
                "reaped": int(fields[13]) + int(fields[14]), "threads": int(fields[17])}

    def members(self):
        """{pid: stat} of the process and its live descendants."""
        found, todo = {}, [self.pid]
        while todo:
            pid = todo.pop()
            stat = self._stat(pid)
            if stat is None:
                continue
            found[pid] = stat
            for task in _tasks(pid):
                try:
                    children = _read_proc(f"/proc/{pid}/task/{task}/children").split()
                except OSError:
                    children = []
                todo.extend(int(c) for c in children if int(c) not in found)
        return found

    def cpu_seconds(self):
        """CPU time (user + system) used so far by the tree, reaped children included. The root's
        own time (its threads, ended ones included) comes from its CPU clock, in nanoseconds:
        /proc counts in ticks of 10 ms, and a single-threaded call of 0.4 s read that way showed
        up to 1.08 s of CPU per second."""
        members = self.members()
        seconds = sum(s["cpu"] for pid, s in members.items() if pid != self.pid) / self.ticks
        root = members.get(self.pid)
        if root is not None:
            try:
                own = time.clock_gettime(_process_cpu_clock(self.pid))
            except OSError:  # gone meanwhile
                own = (root["cpu"] - root["reaped"]) / self.ticks
            seconds += own + root["reaped"] / self.ticks
        return seconds

    def thread_runtimes(self):
        """{thread id: CPU nanoseconds} of the root process's live threads, from the kernel's
        scheduler statistics (/proc/<pid>/task/<tid>/schedstat); None where it keeps none."""
        runtimes = {}
        for task in _tasks(self.pid):
            try:
                runtimes[int(task)] = int(_read_proc(f"/proc/{self.pid}/task/{task}/schedstat").split()[0])
            except FileNotFoundError:
                continue  # the thread ended meanwhile
            except (OSError, ValueError, IndexError):
                return None
        return runtimes or None

    def thread_states(self, pid=None):
        """{thread id: state letter} of the live threads of the root process, or of member `pid`
        ("R": running or waiting for a core, "S": asleep, ...; /proc/<pid>/task/<tid>/stat)."""
        pid = self.pid if pid is None else pid
        states = {}
        for task in _tasks(pid):
            try:
                text = _read_proc(f"/proc/{pid}/task/{task}/stat")
            except OSError:
                continue
            states[int(task)] = text[text.rindex(")") + 2]
        return states


def kill_tree(pid):
    """SIGKILL a process and its descendants. All are stopped (SIGSTOP) first, the root before
    the rest, so that none can start another process or leave the tree (a child whose parent
    dies is adopted elsewhere) while the tree is read."""
    stopped = set()
    for _ in range(100):  # a process we may not stop (another user's) could go on forking
        members = set(ProcessTree(pid).members()) - stopped
        if not members:
            break
        for member in sorted(members, key=lambda m: m != pid):
            _signal(member, signal.SIGSTOP)
        stopped |= members
    for member in stopped:
        _signal(member, signal.SIGKILL)


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _read_proc(path):
    """A /proc file's text, read with plain system calls: the observer reads a few per process
    every 2-5 ms while a check runs, and pathlib's read_text took 3.3 times as much CPU (0.69
    against 0.21 ms for a tree of four processes). Raises OSError as open() does."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", "replace")


def _tasks(pid):
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


class Observation:
    """What `StudentProcess.observe()` saw: wall and CPU seconds, processes and most threads at once."""

    def __init__(self):
        self.wall = self.cpu = 0.0
        self.pids = set()
        self.max_processes = self.max_threads = 0

    @property
    def busy_cores(self):
        return self.cpu / self.wall if self.wall > 0 else 0.0


class _Observer:
    def __init__(self, tree, interval):
        self.tree, self.interval = tree, interval
        self.result = Observation()
        self._stop = threading.Event()

    def _poll(self):
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self):
        members = self.tree.members()
        result = self.result
        result.pids.update(p for p in members if p != self.tree.pid)
        result.max_processes = max(result.max_processes, len(members))
        result.max_threads = max(result.max_threads, sum(s["threads"] for s in members.values()))

    def __enter__(self):
        self._cpu0 = self.tree.cpu_seconds()
        self._t0 = time.perf_counter()
        self._sample()
        self._thread = threading.Thread(target=self._poll, name="observer", daemon=True)
        self._thread.start()
        return self.result

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()
        self.result.wall = time.perf_counter() - self._t0
        self.result.cpu = self.tree.cpu_seconds() - self._cpu0
        return False


class StudentProcess:
    """The judge's end of a student's process: requests, replies, handles, observation."""

    def __init__(self, process, requests_fd, replies_fd, on_progress=None):
        self.process = process
        self.requests_fd, self.replies_fd = requests_fd, replies_fd
        self.lock = threading.Lock()
        self.broken = None  # why no more requests can be made, once that happens
        self.failures, self.tampered = {}, []
        self.temp_folder = None  # removed when the process stops (for_reference)
        self._wait_loaded(on_progress)

    # --- start ---------------------------------------------------------------------------
    @classmethod
    def start(cls, entry, args=(), cwd=None, env=None, on_progress=None, stdout=None, meanwhile=None,
              pass_fds=()):
        """Start the student's process, `entry` ("module:function") with argv [module, requests fd,
        replies fd, *args]: forked from the sandbox zygote when the grader gave us one
        (autograder/pipeline/warm.py), else a new interpreter. `meanwhile()` runs here while it loads.
        `pass_fds`: more descriptors it inherits, with their numbers."""
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out = stdout.fileno() if hasattr(stdout, "fileno") else stdout
        process = zygote.start(os.environ.get("COURSE_ZYGOTE"), entry, [str(req_r), str(rep_w), *args],
                               cwd=cwd, env=env, pass_fds=(req_r, rep_w, *pass_fds), stdout=out,
                               stderr=subprocess.STDOUT if out is not None else None)
        os.close(req_r)
        os.close(rep_w)
        if meanwhile is not None:
            meanwhile()
        return cls(process, req_w, rep_r, on_progress)

    @classmethod
    def for_reference(cls, assignment, env=None):
        """A process that serves the reference solutions of `assignment` (the course's tests; the
        judge, to settle a check's own error). It is the instructor's code: no sandbox, and so no
        private /tmp. Its working directory and TMPDIR are a folder of its own, removed when it
        stops: a forkserver or pool it starts would otherwise leave its folder in the machine's
        temp folder, since the process ends with os._exit. The folder is named as the judges'
        copies are, so that one left by a killed process goes with them
        (preprocessors.remove_orphaned_copies)."""
        import shutil
        import tempfile
        # Short: the socket of a forkserver it starts goes in it, and AF_UNIX paths have 108 bytes.
        folder = tempfile.mkdtemp(prefix=f"course-judge-{os.getpid()}-r")
        try:
            process = cls.start("autograder.sandbox.student:serve_reference_main", [assignment], cwd=folder,
                                env={**(os.environ if env is None else env), "TMPDIR": folder})
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        process.temp_folder = folder
        return process

    def _wait_loaded(self, on_progress):
        while True:
            message = self._read()
            if message[0] == "loading":
                if on_progress:
                    on_progress(str(message[1]))
                continue
            if message[0] != "loaded":
                raise StudentProcessGone(f"unexpected message {message[0]!r} while loading")
            failures, tampered = message[1], message[2]
            self.failures = {str(k): str(v) for k, v in failures.items()} if type(failures) is dict else {}
            self.tampered = [str(t) for t in tampered] if type(tampered) is list else ["?"]
            return

    @property
    def pid(self):
        return self.process.pid

    def tree(self):
        return ProcessTree(self.pid)

    def observe(self, interval=0.005):
        """with session.observe() as seen: ... -> wall, CPU seconds and processes of the student's tree."""
        return _Observer(self.tree(), interval)

    # --- requests --------------------------------------------------------------------------
    def _read(self):
        try:
            data = wire.read_frame(self.replies_fd)
        except (EOFError, OSError) as err:
            code = self.process.poll()
            raise StudentProcessGone(
                f"the grading process of your code ended (exit code {code}): does your code exit, crash "
                "or use too much memory?") from err
        message = wire.load_untrusted(data)
        if type(message) is not tuple or not message or type(message[0]) is not str:
            raise StudentProcessGone("a malformed message from the student's process")
        return message

    def _dump(self, request):
        import io
        import cloudpickle
        # The checks' own functions travel as code: their module is not in the student's process.
        for name in [n for n in sys.modules if n.startswith("autograder.checks")]:
            if name not in _BY_VALUE:
                cloudpickle.register_pickle_by_value(sys.modules[name])
                _BY_VALUE.add(name)

        class Requests(cloudpickle.Pickler):
            def persistent_id(self, obj):
                if type(obj) is Remote:
                    if obj._session is not session:
                        raise ValueError("a handle from another student's process")
                    return ("ref", obj._number)
                return None
        session = self
        buffer = io.BytesIO()
        Requests(buffer, protocol=5).dump(request)
        return buffer.getvalue()

    def request(self, request):
        if self.broken:
            raise StudentProcessGone(self.broken)
        data = self._dump(request)
        with self.lock:
            try:
                wire.write_frame(self.requests_fd, data)
            except OSError as err:
                raise StudentProcessGone(f"the grading process of your code is gone ({err})") from err
            message = self._read()
        kind = message[0]
        if kind == "ok" and len(message) == 2:
            return wire.decode(message[1], self._remote)
        if kind == "raise" and len(message) == 4:
            mro, text, trace = message[1], message[2], message[3]
            if type(mro) is not list or not mro or not all(type(n) is str for n in mro):
                raise StudentProcessGone("a malformed error from the student's process")
            if mro[0] == "builtins.StopIteration":
                raise StopIteration
            raise _exception_from(mro, str(text), str(trace))
        raise StudentProcessGone("a malformed reply from the student's process")

    def _remote(self, data):
        if len(data) != 4 or type(data[1]) is not int or type(data[2]) is not list:
            raise ValueError("a malformed handle from the student's process")
        return Remote(self, data[1], [str(n) for n in data[2]], data[3] is True)

    def run(self, fn, *args, **kwargs):
        """fn(*args, **kwargs) run in the student's process (fn travels by value)."""
        return self.request(("run", fn, args, kwargs))

    def namespace(self):
        return RemoteNamespace(self)

    def changed(self, modules=None):
        """What the student's code replaced of what grading relies on (in `modules` only, if given)."""
        value = self.request(("changed",) if modules is None else ("changed", list(modules)))
        return [str(v) for v in value] if type(value) is list else ["?"]

    def stop(self, why="stopped"):
        self.broken = self.broken or why
        # What the student's code started goes too, sandbox or not; before the pipes close, at
        # which the process would exit by itself and its children leave its tree.
        if self.process.poll() is None:
            kill_tree(self.process.pid)
        for fd in (self.requests_fd, self.replies_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.requests_fd = self.replies_fd = -1
        try:
            self.process.kill()
        except ProcessLookupError:
            pass
        self.process.wait()
        if self.temp_folder:
            import shutil
            shutil.rmtree(self.temp_folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


class RemoteNamespace:
    """The notebook's globals in the student's process, read name by name."""

    def __init__(self, session):
        self.session = session
        self._names = set(session.request(("names",)))
        self._cache = {}

    def __contains__(self, name):
        return name in self._names

    def __getitem__(self, name):
        if name not in self._cache:
            self._cache[name] = self.session.request(("global", name))
        return self._cache[name]

    def get(self, name, default=None):
        return self[name] if name in self else default


# --- grading entry point ----------------------------------------------------------------------------
def preload_for(assignments):
    """The modules the checks of these assignments use, sorted: loaded in the student's process
    before its code runs, so that the snapshot there covers what the checks' requests use."""
    from .. import hidden
    from ..checks import _support
    names = {"numpy", "pickle", "cloudpickle"} | hidden.modules_used(_support)
    for assignment in assignments:
        names |= hidden.modules_used(hidden.load_checks(assignment))
    return sorted(names)


class _References:
    """references(assignment, exercise) -> (process, namespace) serving the reference solutions of
    `assignment`, started on first use (hidden.run settles there a check whose own code raised on an
    answer), with the student's environment and limits, in a folder of its own: nothing of the
    submission's folder reaches it."""

    def __init__(self, hold, on_start=None):
        self.hold, self.on_start, self.started = hold, on_start, {}

    def __call__(self, assignment, exercise):
        if self.on_start:  # a second run of a check: the grader's clock for the exercise starts again
            self.on_start(exercise)
        process = self.started.get(assignment)
        if process is None or process.broken:
            if process is not None:
                process.stop()
            with self.hold():
                process = self.started[assignment] = StudentProcess.for_reference(
                    assignment, env=for_student_code(os.environ))
            print(f"[judge] {exercise}: a check raised an error of its own; the reference solutions of "
                  f"{assignment} settle it (process {process.pid}, in {process.temp_folder})", flush=True)
        return process, process.namespace()

    def stop(self):
        for process in self.started.values():
            process.stop()


def main():
    """python -P -c "from autograder.pipeline.judge import main; main()" <fd to the grader> <spec>"""
    began = time.monotonic()
    write_fd, spec_path = int(sys.argv[1]), sys.argv[2]
    spec = zygote.read_spec(spec_path)
    channel = os.fdopen(write_fd, "w", buffering=1)

    def tell(message):
        channel.write(json.dumps(message) + "\n")

    def waited(seconds):
        if seconds > 0.05:
            tell({"waited": seconds})

    def hold():
        """The machine, shared, while we work (lease.py; a timing check takes it alone for its
        measurement). The grader's clock for us stops while we wait for it."""
        return lease.hold(on_wait=lambda: tell({"waiting": True}), on_waited=waited)

    from .. import hidden
    preload = spec.get("preload") or preload_for(sorted({a for a, _ in spec["exercises"]}))
    # In memory, not in a file: a judge killed while its student's process loads (a cell that
    # never ends, stopped by the grader's clock), or left by os._exit below, left the student's
    # code in the machine's temp folder, readable by everyone.
    student_spec = zygote.spec_in_memory({"cells": spec["cells"], "preload": preload})

    def load_checks():  # while the student's process starts and replays the notebook
        for assignment in {a for a, _ in spec["exercises"]}:
            hidden.load_checks(assignment)

    try:
        with hold():  # loading runs the notebook's cells: work like any other
            session = StudentProcess.start(
                "autograder.sandbox.student:main", [zygote.spec_path_of(student_spec)], env=for_student_code(os.environ),
                on_progress=lambda label: tell({"loading": label}), stdout=sys.stdout, meanwhile=load_checks,
                pass_fds=(student_spec,))
    except StudentProcessGone:
        channel.close()
        os._exit(0)  # the grader sees the cell that was loading, and tries again without it
    finally:
        os.close(student_spec)
    started = time.monotonic()
    print(f"[judge] the student's process loaded the notebook in {started - began:.2f} s", flush=True)
    tell({"loaded": True})
    hidden.STUDENT = session
    namespace = session.namespace()
    references = _References(hold, on_start=lambda exercise: tell({"start": exercise}))
    for assignment, exercise in spec["exercises"]:
        tell({"start": exercise})
        if exercise in session.failures:
            tell({"exercise": exercise, "passed": False,
                  "report": f"{exercise}: the answer cell raised {session.failures[exercise]}"})
            continue
        if session.tampered:
            tell({"exercise": exercise, "passed": False, "tampered": True,
                  "report": f"{exercise}: your code replaces functions or modules that grading relies on ("
                            + ", ".join(session.tampered[:5]) + "); no check can pass"})
            continue
        undecided = []
        try:
            outcomes = hidden.run(assignment, exercise, namespace, session=session, hold=hold,
                                  reference=references)
            passed = all(o.passed for o in outcomes)
            if all(o.passed or o.undecided for o in outcomes):
                undecided = [o.description for o in outcomes if o.undecided]
            text = hidden.passed_report(exercise, outcomes) if passed else hidden.report(exercise, outcomes)
        except Exception as err:  # noqa: BLE001 (the runner's own fault: never the student's)
            passed, text = False, f"{exercise}: the grader itself failed ({type(err).__name__}: {err})"
            undecided = [text]
            traceback.print_exc()  # into the judge's log, for the instructor
        if not session.broken:
            try:  # a quick look at what the checks use; all of it once the exercises are done
                tampered = session.changed(["builtins", *preload])
            except Exception:  # noqa: BLE001
                tampered = []
            if tampered:
                passed, undecided = False, []
                text = (f"{exercise}: your code replaced functions that grading relies on while it ran "
                        f"({', '.join(tampered[:5])})")
        print(f"[judge] {exercise}: {'passed' if passed else 'undecided' if undecided else 'failed'} "
              f"in {time.monotonic() - started:.2f} s", flush=True)
        started = time.monotonic()
        tell({"exercise": exercise, "passed": passed, "report": text, "undecided": undecided})
        if session.broken:
            break  # the grader starts a new judge and student's process for the rest
    if not session.broken:
        try:
            tampered = session.changed()
        except Exception:  # noqa: BLE001
            tampered = ["?"]
        if tampered:  # every verdict of this run is void
            tell({"revoke": "your code replaced functions that grading relies on while it was checked ("
                            + ", ".join(tampered[:5]) + "); no check can pass"})
    session.stop()
    references.stop()
    channel.close()
    sys.stdout.flush()
    os._exit(0)
