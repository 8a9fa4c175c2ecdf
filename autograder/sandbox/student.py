"""The student's process while grading: run the submission, then answer the judge.

Started by the judge (autograder/pipeline/judge.py) as

    python -P -c "from autograder.sandbox.student import main; main()" <requests fd> <replies fd> <spec>

It enters the submission's sandbox (limits, read-only course, no network, an
unprivileged uid), replays what the grading kernel runs (the submission's code
cells in order, but the test cells and the demos; at a test cell's place it keeps
that cell's exercises as they are there, for the checks), and then serves the
judge's requests: look up a name, call a
function, read an attribute, iterate, run a function the judge sent. Replies
are plain data (autograder/sandbox/wire.py); the verdicts are not made here.

Nothing in this process can be trusted by the judge, and nothing here needs to
be: a student's code may rewrite any of it. What it cannot do is change what
the judge computes from the values it returns and from what the kernel shows
of this process from outside (its CPU time, its child processes).
"""
import ast
import itertools
import json
import os
import pickle
import sys
import traceback
from itertools import repeat
from operator import is_

from .. import course
from . import wire
from .enter import enter
from .zygote import read_spec

WATCHED_PREFIXES = ("builtins", "numpy", "math", "random", "os", "time", "threading", "multiprocessing",
                    "concurrent", "asyncio", "dis", "inspect", "pickle", "copy", "functools",
                    "statistics", "scipy", "joblib", "threadpoolctl", "psutil", "torch", "helpers",
                    "autograder", "queue", "contextlib", "operator", "json", "subprocess", "signal")


# --- running the submission ----------------------------------------------------------------------
def to_python(source):
    """Cell source as plain Python: IPython magics become get_ipython() calls. The blank lines IPython
    drops from the top of a cell are put back, so that a line number in a traceback (and in what a
    hidden check says of an error: "line 7 of your robust_map cell") is the line of the cell."""
    from IPython.core.inputtransformer2 import TransformerManager
    code = TransformerManager().transform_cell(source)
    blank = 0
    for line in source.splitlines():
        if line.strip():
            break
        blank += 1
    return "\n" * blank + code


class QuietShell:
    """Stands in for get_ipython() in student code. The magics that run Python in the kernel's
    namespace (`%%time`, `%%prun`, `%%capture`, `%time`, `%prun`) run it here too, so that what they
    define is defined here as in the kernel (an answer cell under `%%time` lost every exercise it
    defined, 0/8 on 01); `%%writefile`/`%%file` write their file; `%run`, `%cd`, `%env`, `!cmd` and
    `lines = !cmd` do what they do there; the others do nothing."""

    RUN_BODY = ("time", "prun")  # cell magics whose body runs in the namespace as it is

    def run_line_magic(self, name, line, *args, **kwargs):
        caller = sys._getframe(1)  # the student's code: module level, or a function's body
        if name not in ("time", "prun", "timeit"):  # IPython expands {expr} and $name in the others
            line = _expanded(line, caller)
        if name in ("run", "cd", "env"):
            return getattr(self, f"_{name}")(line, caller.f_globals)
        if name == "pwd":
            return os.getcwd()
        if name in ("mkdir", "rmdir", "mv", "rm", "cp", "cat", "ls"):  # IPython's shell aliases
            sys.stdout.write(_shell(f"{name} {line}", caller, expand=False))  # expanded above
            return None
        if name == "timeit":
            return _timeit(line, caller) if "-o" in line.split() else None
        statement = {"time": line.strip(), "prun": _without_options(line)}.get(name, "")
        if statement:
            # IPython runs it with a function's locals, whose changes do not last; an expression's value
            # is what `x = %time f()` binds.
            local = None if caller.f_locals is caller.f_globals else dict(caller.f_locals)
            code = to_python(statement)
            try:
                expression = compile(code, f"<%{name} line>", "eval")
            except SyntaxError:
                exec(compile(code, f"<%{name} line>", "exec"), caller.f_globals, local)
            else:
                return eval(expression, caller.f_globals, local)
        return None

    def run_cell_magic(self, name, line, cell):
        import contextlib
        import io
        import shlex

        if name in ("writefile", "file"):
            words = shlex.split(line)
            with open(words[-1], "a" if "-a" in words or "--append" in words else "w") as f:
                f.write(cell)
        elif name in self.RUN_BODY:
            run_cell(sys._getframe(1).f_globals, f"%%{name} cell", cell)
        elif name == "capture":
            namespace, out, err = sys._getframe(1).f_globals, io.StringIO(), io.StringIO()
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    try:
                        run_cell(namespace, "%%capture cell", cell)
                    except Exception:  # noqa: BLE001 (the kernel shows it in the captured output, and goes on)
                        traceback.print_exc()
            finally:
                names = [word for word in line.split() if not word.startswith("-")]
                if names:
                    namespace[names[0]] = Captured(out.getvalue(), err.getvalue())
        return None

    def system(self, cmd, *args, **kwargs):
        """`!cmd`: run in a shell, as the kernel runs it, its output printed."""
        sys.stdout.write(_shell(cmd, sys._getframe(1)))

    def getoutput(self, cmd, *args, **kwargs):
        """`lines = !cmd`: its output as IPython gives it, a list of lines (an SList)."""
        lines = _shell(cmd, sys._getframe(1)).splitlines()
        try:
            from IPython.utils.text import SList
            return SList(lines)
        except ImportError:
            return lines

    def _run(self, line, namespace):
        """`%run [-i] script[.py] args` or `%run -m module`, as IPython runs it: the script as __main__
        in a namespace of its own (with -i, the notebook's), its names then the notebook's even where
        it ended in sys.exit() or an error (shown, the cell going on)."""
        import runpy
        import shlex

        words = shlex.split(line)
        inside, module = "-i" in words, "-m" in words
        words = [word for word in words if word not in ("-i", "-m", "-e", "-t", "-p", "-n", "-d", "-G", "-q")]
        if not words:
            return None
        argv, sys.argv = sys.argv, words
        try:
            if module:
                ran = runpy.run_module(words[0], run_name="__main__")
                namespace.update({k: v for k, v in ran.items() if not k.startswith("__")})
                return None
            path = words[0] if os.path.isfile(words[0]) or not os.path.isfile(words[0] + ".py") else words[0] + ".py"
            with open(path, encoding="utf-8") as script:
                code = compile(script.read(), os.path.abspath(path), "exec")
            scope = namespace if inside else {"__name__": "__main__", "__builtins__": __builtins__}
            kept_file, scope["__file__"] = scope.get("__file__"), path
            try:
                exec(code, scope)
            except SystemExit:
                pass
            except Exception:  # noqa: BLE001 (IPython shows it; what the script defined stays)
                traceback.print_exc()
            finally:
                if inside:
                    if kept_file is None:
                        scope.pop("__file__", None)
                    else:
                        scope["__file__"] = kept_file
            if not inside:
                namespace.update({k: v for k, v in scope.items() if not k.startswith("__")})
        finally:
            sys.argv = argv
        return None

    def _cd(self, line, namespace):
        words = [word for word in line.split() if word != "-q"]
        target = " ".join(words).strip("'\"")
        if target == "-":
            target = QuietShell._last_dir
        QuietShell._last_dir = os.getcwd()  # get_ipython() makes a new QuietShell each call
        os.chdir(os.path.expanduser(target or "~"))
        return None

    _last_dir = "."

    def _env(self, line, namespace):
        name, _, value = line.strip().replace("=", " ", 1).partition(" ")
        if not name:
            return dict(os.environ)
        if not value:
            return os.environ.get(name)
        os.environ[name] = value.strip()
        return None

    @property
    def user_ns(self):
        return sys._getframe(1).f_globals  # the notebook's namespace, where the student's code runs

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _expanded(text, caller):
    """IPython's expansion of {expr} and $name in a magic's line or a shell command, from the caller's
    names (what it cannot expand it leaves as it is)."""
    try:
        from IPython.utils.text import DollarFormatter
        return DollarFormatter().vformat(text, args=[], kwargs={**caller.f_globals, **caller.f_locals})
    except Exception:  # noqa: BLE001
        return text


def _timeit(line, caller):
    """`t = %timeit -o stmt`: the statement timed once, as the TimeitResult IPython returns (the
    replay needs the object, not a careful timing)."""
    import time
    from IPython.core.magics.execution import TimeitResult

    statement = _without_options(line, valued=("-n", "-r", "-p"))
    code = compile(to_python(statement), "<%timeit line>", "exec")
    local = None if caller.f_locals is caller.f_globals else dict(caller.f_locals)
    start = time.perf_counter()
    exec(code, caller.f_globals, local)
    took = time.perf_counter() - start
    return TimeitResult(1, 1, took, took, [took], 0.0, 3)


def _shell(cmd, caller, expand=True):
    """A shell command's output (stderr with it), after IPython's expansion of {expr} and $name
    from the caller's names."""
    import subprocess
    return subprocess.run(_expanded(cmd, caller) if expand else cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace").stdout


class Captured:
    """What `%%capture name` binds, as far as code reads it back: IPython's CapturedIO."""

    def __init__(self, stdout, stderr):
        self.stdout, self.stderr, self.outputs = stdout, stderr, []

    def show(self):
        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)

    __call__ = show


def _without_options(line, valued=("-l", "-s", "-T", "-D")):
    """The statement of a `%prun -s time f()` line: its options dropped (`valued` take a value)."""
    words = line.strip().split(" ")
    while words and words[0].startswith("-"):
        words = words[2:] if words[0] in valued and len(words) > 1 else words[1:]
    return " ".join(words).strip()


def run_cell(namespace, label, source):
    import asyncio
    code = compile(to_python(source), f"<{label}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)


# --- tampering: a second line of defence (the first is that verdicts are not made here) ---------
def _watched(modules=None, skip=()):
    """(key, object) for every module, function, class and method that grading relies on
    (only in the modules named, when `modules` is given; none of those in `skip`)."""
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in WATCHED_PREFIXES or name in skip:
            continue
        if modules is not None and name not in modules:
            continue
        yield from _watched_in(name, module)


def _watched_in(name, module):
    yield ("module", name), module
    try:
        items = list(vars(module).items())
    except TypeError:
        return
    for attr, value in items:
        if not callable(value):
            continue
        yield (name, attr), value
        code = getattr(value, "__code__", None)
        if code is not None:
            yield (name, attr, "__code__"), code
        if _watched_class(value):
            for method, impl in list(vars(value).items()):
                if callable(impl):
                    yield (name, attr, method), impl


def _watched_class(value):
    return isinstance(value, type) and str(getattr(value, "__module__", "")).split(".")[0] in WATCHED_PREFIXES


class Snapshot(dict):
    """{key: object} of _watched(), and for each module what shows at C speed that nothing in it
    changed since: the same module object, its namespace's values (and those of its watched
    classes) the same objects in the same order, its functions' code the same. changed() reads
    such a module no further: with numpy, torch, scipy and matplotlib loaded, a look at all
    177,000 objects took 0.17-0.27 s of CPU, this one 0.023 s (grading looks twice per notebook,
    the tests' catalogue after every answer)."""

    def __init__(self):
        super().__init__()
        self.keys_of, self.unchanged_if = {}, {}


def _fingerprint(module):
    """What _untouched() compares: the namespace's values, the functions and their code, the
    watched classes and their namespaces' values."""
    values = tuple(vars(module).values())
    functions = tuple(v for v in values if callable(v) and getattr(v, "__code__", None) is not None)
    classes = tuple(v for v in values if callable(v) and _watched_class(v))
    return (module, values, functions, tuple(getattr(f, "__code__", None) for f in functions),
            classes, tuple(tuple(vars(c).values()) for c in classes))


def _same_objects(now, then):
    return len(now) == len(then) and all(map(is_, now, then))


def _untouched(name, fingerprint):
    module, values, functions, codes, classes, class_values = fingerprint
    try:
        return (sys.modules.get(name) is module
                and _same_objects(tuple(vars(module).values()), values)
                and all(map(is_, map(getattr, functions, repeat("__code__"), repeat(None)), codes))
                and all(_same_objects(tuple(vars(c).values()), v) for c, v in zip(classes, class_values)))
    except Exception:  # noqa: BLE001 (anything odd: the full look decides)
        return False


def snapshot():
    shot = Snapshot()
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in WATCHED_PREFIXES:
            continue
        try:  # first: whatever changes after it sends changed() to the full look
            shot.unchanged_if[name] = _fingerprint(module)
        except TypeError:  # no namespace: always looked at in full
            pass
        entries = dict(_watched_in(name, module))
        shot.update(entries)
        shot.keys_of[name] = list(entries)
    return shot


_IDENTITIES = {}


def _identities(before):
    """{id(object): key} of a snapshot, worked out once per snapshot."""
    if _IDENTITIES.get("of") is not before:
        _IDENTITIES.update({"of": before, "ids": {id(obj): key for key, obj in before.items()}})
    return _IDENTITIES["ids"]


def _trusted_dirs():
    import sysconfig
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["stdlib"],
            sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
            str(course.ROOT / "helpers"), str(course.ROOT / "autograder")}
    return tuple(os.path.realpath(d) + os.sep for d in dirs)


def _code_of(obj):
    for path in ("__code__", "__func__.__code__", "func.__code__", "__wrapped__.__code__"):
        target = obj
        for part in path.split("."):
            target = getattr(target, part, None)
        if target is not None:
            return target
    return None


def _from_trusted_code(obj, trusted):
    """Was this object made by the libraries or the course, rather than by the student's cells?"""
    import types
    if isinstance(obj, types.ModuleType):
        file = getattr(obj, "__file__", None)
        return file is None and obj.__name__ in sys.builtin_module_names or bool(
            file and os.path.realpath(file).startswith(trusted))
    code = obj if isinstance(obj, types.CodeType) else _code_of(obj)
    if code is not None:
        name = code.co_filename
        # A cell's code is named "<label>": relative, so after a %cd into a trusted folder realpath would
        # have put it there. Only an absolute file name can be a library's or the course's.
        return name.startswith("<frozen") or os.path.isabs(name) and os.path.realpath(name).startswith(trusted)
    module = str(getattr(obj, "__module__", "") or "")
    return module.split(".")[0] in WATCHED_PREFIXES


def _looked_at(before, modules, skip):
    """(key, object) of the snapshot in the modules to look at (all, or those named), less `skip`."""
    keys_of = getattr(before, "keys_of", None)
    if keys_of is None:
        for key, obj in before.items():  # a plain dict: every key, filtered one by one
            name = key[0 if key[0] != "module" else 1]
            if (modules is None or name in modules) and name not in skip:
                yield key, obj
        return
    for name, keys in keys_of.items():
        if (modules is None or name in modules) and name not in skip:
            for key in keys:
                yield key, before[key]


def changed(before, modules=None):
    """Watched names now bound to something the student's code made, or swapped for another watched object
    (in the modules named, when `modules` is given: a quick look between two exercises).

    Libraries patch themselves lazily (torch wraps an optimizer's `step` the
    first time one is built); a replacement made by library or course code is
    therefore accepted, unless it is one watched object put in another's place.
    """
    modules = None if modules is None else set(modules)
    skip = {name for name, fingerprint in getattr(before, "unchanged_if", {}).items()
            if (modules is None or name in modules) and _untouched(name, fingerprint)}
    now = dict(_watched(modules, skip))
    trusted = _trusted_dirs()
    known = _identities(before)
    found = set()
    for key, obj in _looked_at(before, modules, skip):
        new = now.get(key)
        if new is obj or new is None:
            continue
        # Code objects are shared by every function a library wraps the same way.
        swapped = key[-1] != "__code__" and id(new) in known and known[id(new)] != key
        if swapped or not _from_trusted_code(new, trusted):
            found.add(".".join(key[1:] if key[0] == "module" else key[:3]).replace(".__code__", ""))
    # A special method added by the student's code to a watched class it already had: a
    # __getattribute__ put on torch.Tensor answers every attribute read of every tensor.
    added = {}  # (class, name) -> its shortest path (a class is reached from every module that imports it)
    for key, new in now.items():
        if len(key) == 3 and key[2][:2] == key[2][-2:] == "__" and key not in before:
            owner = before.get(key[:2])
            if owner is not None and now.get(key[:2]) is owner and not _from_trusted_code(new, trusted):
                path = ".".join(key)
                added[id(owner), key[2]] = min(added.get((id(owner), key[2]), path), path, key=len)
    result = sorted(found | set(added.values()))
    if wire._GETTRACE() is not None or wire._GETPROFILE() is not None:  # sys's own, as loaded before the student's code
        result.append("sys.settrace/sys.setprofile")
    return result


# --- serving the judge ----------------------------------------------------------------------------

# A class's names read through type's own descriptors: a metaclass of the student's is asked
# nothing (its __getattribute__ could run code after the call, where no check watches).
_MRO, _MODULE, _QUALNAME = (type.__dict__[name] for name in ("__mro__", "__module__", "__qualname__"))


def _class_names(kind):
    """['module.QualName', ...] of kind's MRO, as the judge presents a handle (judge.Remote)."""
    names = []
    for c in _MRO.__get__(kind, type):
        module, qualname = _MODULE.__get__(c, type), _QUALNAME.__get__(c, type)
        names.append(f"{module if type(module) is str else '?'}.{qualname if type(qualname) is str else '?'}")
    return names

class Server:
    """Answers the judge's requests against a namespace (the notebook's globals)."""

    def __init__(self, requests_fd, replies_fd, namespace, before=None):
        self.requests_fd, self.replies_fd = requests_fd, replies_fd
        self.namespace = namespace
        self.before = before
        self.handles = {}
        self.numbers = itertools.count(1)

    # objects the judge holds by number
    def keep(self, obj):
        number = next(self.numbers)
        self.handles[number] = obj
        return ("ref", number, _class_names(type(obj)), callable(obj))

    def send(self, message):
        wire.write_frame(self.replies_fd, wire.dump_plain(message))

    # The requests that run code here (the student's or a check's): a torch mode, a trace or a profile
    # function the student's code left on would see, and could change, what that code read. Those that
    # only look up a name or a process are answered as before (a tensor is never read under one:
    # wire._encode_torch).
    COMPUTING = frozenset({"call", "run", "getattr", "getitem", "len", "iter", "next", "bool", "contains",
                           "str", "repr", "enter", "exit"})

    def reply(self, value, op=None):
        if op in self.COMPUTING:
            wire.refuse_lingering_modes()
        self.send(("ok", wire.encode(value, self.keep)))

    def _unpickler(self, data):
        import io
        server = self

        class Requests(pickle.Unpickler):
            def persistent_load(self, pid):
                return server.handles[pid[1]]
        return Requests(io.BytesIO(data))

    def handle(self, request):
        op, *args = request
        if op == "global":
            if args[0] not in self.namespace:
                raise NameError(f"the notebook does not define `{args[0]}`; run its answer cell first")
            return self.namespace[args[0]]
        if op == "names":
            return sorted(k for k in self.namespace if isinstance(k, str))
        if op == "call":
            target, positional, keywords = args
            return target(*positional, **keywords)
        if op == "run":  # a function the judge sent, run here
            fn, positional, keywords = args
            return fn(*positional, **keywords)
        if op == "getattr":
            return getattr(args[0], args[1])
        if op == "setattr":
            setattr(args[0], args[1], args[2])
            return None
        if op == "getitem":
            return args[0][args[1]]
        if op == "setitem":
            args[0][args[1]] = args[2]
            return None
        if op == "len":
            return len(args[0])
        if op == "iter":
            return iter(args[0])
        if op == "next":
            return next(args[0])
        if op == "bool":
            return bool(args[0])
        if op == "contains":
            return args[1] in args[0]
        if op == "str":
            return str(args[0])
        if op == "repr":
            return repr(args[0])
        if op == "enter":
            return args[0].__enter__()
        if op == "exit":
            return args[0].__exit__(None, None, None)
        if op == "release":
            for number in args[0]:
                self.handles.pop(number, None)
            return None
        if op == "changed":
            return changed(self.before, *args) if self.before is not None else []
        if op == "pid":
            return os.getpid()
        raise ValueError(f"unknown request {op!r}")

    def serve(self):
        while True:
            try:
                data = wire.read_frame(self.requests_fd)
            except EOFError:
                return
            try:
                request = self._unpickler(data).load()
                result = self.handle(request)
            except BaseException as err:  # noqa: BLE001 (every error goes back to the judge)
                if isinstance(err, KeyboardInterrupt):
                    raise
                self.send(("raise", [f"{c.__module__}.{c.__qualname__}" for c in type(err).__mro__],
                           _safe_str(err), "".join(traceback.format_exception(err))[-4000:]))
                continue
            try:
                self.reply(result, request[0])
            except wire.ModeLeftOn as err:  # the check fails, saying why
                self.send(("raise", ["builtins.AssertionError", "builtins.Exception", "builtins.BaseException",
                                     "builtins.object"], str(err), ""))
            except BaseException as err:  # noqa: BLE001 (a value that cannot be sent)
                self.send(("raise", ["builtins.TypeError", "builtins.Exception"],
                           f"the result could not be sent to the grader ({type(err).__name__}: {err})", ""))


def _safe_str(err):
    try:
        return str(err)[:4000]
    except BaseException:  # noqa: BLE001
        return f"<{type(err).__name__}>"


# --- grading entry point ----------------------------------------------------------------------------
def main():
    requests_fd, replies_fd, spec_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    spec = read_spec(spec_path)  # before the sandbox (inherited from the judge, in memory)
    # Still one thread here: limits, private files, no network, then the unprivileged uid.
    enter()
    os.environ.pop("NBGRADER_EXECUTION", None)  # graded as the student would run it
    for name in spec["preload"]:  # what the judge's requests will use, loaded before student code
        try:
            __import__(name)
        except ImportError:
            pass
    if "torch" in sys.modules:
        # torch.profiler (and torch.compile) import torch._dynamo on first use, which
        # re-wraps torch.manual_seed: done here, before the snapshot, it is not tampering.
        import torch._dynamo  # noqa: F401
    wire.remember_libraries()  # results are read with these, not with modules the student's code puts in sys.modules
    # The student's own modules (a `%%writefile defs.py`) import from the submission's
    # folder, which comes last: it cannot stand in for a library or the course.
    sys.path.append(os.getcwd())
    namespace = sys.modules["__main__"].__dict__
    namespace["get_ipython"] = lambda: QuietShell()
    # The kernel's namespace has `display` without an import: a cell that calls it must not stop here.
    from IPython.display import display
    namespace["display"] = display
    before = snapshot()
    server = Server(requests_fd, replies_fd, namespace, before)
    failures, kept = {}, {}
    for label, source in spec["cells"]:
        if isinstance(source, dict):  # a test cell's place: its exercises as the kernel's test saw them
            kept.update({name: namespace[name] for name in source.get("keep", ()) if name in namespace})
            continue
        server.send(("loading", label))
        try:
            run_cell(namespace, label, source)
        except BaseException as err:  # noqa: BLE001 (a cell that raises: the next ones still run)
            failures[label] = f"{type(err).__name__}: {_safe_str(err)}"
    namespace.update(kept)
    server.send(("loaded", failures, changed(before)))
    server.serve()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: student threads or pools must not hang it


def serve_reference_main():
    """For the course's own tests: serve the reference solutions of an assignment (no sandbox).

    python -c "from autograder.sandbox.student import serve_reference_main; ..." <req> <rep> <assignment>
    """
    requests_fd, replies_fd, assignment = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    from .. import notebooks
    module = notebooks.reference_module(assignment)
    wire.remember_libraries()
    # The snapshot lets the tests see an answer that replaces what grading relies on.
    server = _REFERENCE_SERVER[:] = [Server(requests_fd, replies_fd, vars(module), snapshot())]
    server = server[0]
    server.send(("loaded", {}, []))
    server.serve()
    sys.stdout.flush()
    os._exit(0)


_REFERENCE_SERVER = []  # serve_reference_main's Server, whose namespace use_candidate replaces


def use_candidate(assignment, exercise, code):
    """For the course's tests, in a process that serves the reference solutions: serve them with
    one exercise's answer replaced by `code` (None: the reference's own), read name by name, as
    grading reads a notebook's (a whole namespace sent at once would carry values that grading
    never reads, and fail on one it cannot send: a dict keyed by classes, say). The answer runs
    where the other answer cells' names are defined, as in a notebook, where it may call them
    (not the names of the reference's own cell for this exercise, which a notebook would not have)."""
    from .. import notebooks
    reference = notebooks.reference_module(assignment)
    namespace = dict(vars(reference))
    if code is not None:
        others = vars(notebooks.reference_module(assignment, leave_out=exercise))
        module = notebooks.exec_answers({exercise: code}, f"candidate_{assignment}_{exercise}",
                                        workdir=course.SOURCE / assignment, names=others)
        namespace.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    _REFERENCE_SERVER[0].namespace = {k: v for k, v in namespace.items() if not k.startswith("__")}
