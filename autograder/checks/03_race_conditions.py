"""Hidden checks of 03_race_conditions (races, bytecode, locks, shared memory).

Thread races are made near-certain rather than left to luck: while a check
runs, a trace function makes the threads that the answer starts pause after
every bytecode instruction of the answer's own code, and longer before each
store into shared state. Unlocked read-modify-writes then lose updates, and
locks taken in argument order deadlock (rates measured in each check). Locks the
answer creates can be aborted, and its threads are made daemons, so that a
deadlocked answer fails one check in bounded time and never hangs the kernel.
"""
import ctypes
import dis
import math
import multiprocessing.process
import numbers
import os
import random
import site
import sys
import sysconfig
import threading
import time
import types
from contextlib import contextmanager

import pytest

from autograder.checks._support import (capped, counted, created, count_starts_and_joins, counting, exact_float, exact_int, exact_list, observe,
                                        raises_value_error, reused_workers, student_pid, there, timeout)
from autograder.checks._support import how_many, works_under_spawn

_yield = time.sleep            # the real one, even if an answer patches time.sleep
# Pauses in answer code. time.sleep(0) hands the GIL over only when another
# thread has asked for it, which a waiting thread does after the 5 ms switch
# interval: most instructions then run unswitched, and threads that pause for
# the same time fall into lock-step, so an unlocked update was lost only now
# and then (a wrong answer passed that way). Here every instruction pauses a
# little (the thread blocks in the OS, so others run), and an instruction that
# stores into shared state (an item, attribute, global or closure variable)
# pauses 40 times longer first: every other thread runs on meanwhile, and a
# read-modify-write of the same account or counter without a lock is
# overwritten, on every run that has two threads on it at once.
_PAUSE, _BEFORE_STORE = 2e-5, 8e-4
_DEADLOCK_SECONDS = 5.0  # a cycle of blocked threads with no lock released for this long is a deadlock
_STORES = {"STORE_SUBSCR", "STORE_ATTR", "STORE_GLOBAL", "STORE_DEREF", "STORE_NAME"}
_CODE_INFO = {}  # code object -> (for each instruction's offset, the offsets that may run next; the stores
                 # and lock entries among them, {offset: (opname, arg, argval)})
_STORES_AT = {}  # (where, thread ident) -> [stores there, holding one answer lock or more, two or more,
                 # ids of the answer locks held at every one of those holding one]; where: what was stored
                 # into, as ids and names (see _where), or None where that cannot be read
_VALUES_AT = {}  # where -> [(thread ident, the number stored, or None), ...] in the order stored
_KEEP = {}       # id -> the object a `where` names, kept alive during the run so that its id stays its own
_HELD = {}              # thread ident -> {id of an answer lock it holds: how many times}
_HIDDEN = set()         # threads whose answer code entered or acquired a lock the harness did not make
_FRAMES = {}            # thread ident -> [[answer frame, offset of its last instruction seen or None], ...]
_UNSEEN = set()         # threads in which answer code ran with the forced switches off (see _settled)
_DEPTH = {}             # thread ident -> the answer's frames on its stack, under the harness
_INSIDE = set()         # the threads with an answer frame on their stack
_TOGETHER = []          # _INSIDE each time a thread entered the answer's code: who ran it at once
_STDLIB = os.path.dirname(threading.__file__)
# The folders third-party packages are installed in, as this interpreter names them (not any path
# that holds the words "site-packages": an answer can make such a folder of its own in /tmp).
_SITE_PACKAGES = tuple(sorted({os.path.join(form(p), "") for p in (
    *site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else []),
    sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]) if p
    for form in (os.path.abspath, os.path.realpath)}))
_THIS_FILE = os.path.abspath(__file__)
# The code objects of this module's own functions, as loaded where the harness runs. In the
# student's process they arrive by value, and cloudpickle names their file "<dynamic-code>":
# a file-name test alone would take the harness's locks and trace functions for answer code
# and pause inside them too (a correct try-lock answer then took up to 57 s a run, not 1 s).
_OWN_CODES = set()


def _own_codes(namespace, *codes):
    """Every code object of `codes` and of the functions and classes in `namespace` (decorated
    ones unwrapped), nested ones included."""
    todo, functions = list(codes), []
    for value in list(namespace.values()):
        functions += list(vars(value).values()) if isinstance(value, type) else [value]
    for function in functions:
        while hasattr(function, "__wrapped__"):
            todo.append(getattr(function, "__code__", None))
            function = function.__wrapped__
        todo.append(getattr(function, "__code__", None))
    todo = [code for code in todo if isinstance(code, types.CodeType)]
    codes = set()
    while todo:
        code = todo.pop()
        if code not in codes:
            codes.add(code)
            todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return codes


def _is_answer_frame(frame):
    """Whether `frame` runs the answer's code rather than the harness's or a library's. A file name
    alone does not tell: an answer can compile its code under the name of a file of the standard
    library to pass for it (and run without switches and with the real locks). Library code runs
    with the globals of the module loaded from its file; code compiled by the answer under a
    library file's name runs with the globals it was given, and counts as the answer's. Run in
    that module's own globals too (exec in vars(threading)), it is still not the library's own:
    only code that the module's source compiles to is (_is_library_code)."""
    code = frame.f_code
    if code in _OWN_CODES:
        return False
    name = code.co_filename
    if not (name.startswith(_STDLIB) or name.startswith(_SITE_PACKAGES) or name.startswith("<frozen")):
        return os.path.abspath(name) != _THIS_FILE
    module = sys.modules.get(frame.f_globals.get("__name__"))
    if module is None or getattr(module, "__dict__", None) is not frame.f_globals:
        return True
    if name.startswith("<frozen"):
        return name != f"<frozen {module.__name__}>" or not _is_library_code(code, name, module)
    loaded_from = getattr(module, "__file__", None)
    if not (type(loaded_from) is str and os.path.abspath(loaded_from) == os.path.abspath(name)):
        return True
    return not _is_library_code(code, name, module)


_LIBRARY_CODES = {}  # a library file's name -> the code objects its source compiles to (None: unreadable)
_VERDICTS = {}       # id(code) -> (code, whether it is its library's own): hashing a code object is slow


def _is_library_code(code, name, module):
    """Whether `code` is one that the source of `module` (its file `name`, or its frozen code)
    compiles to: code objects compare equal when their bytecode, constants, names and line table
    are, so a library's own functions are found, and code an answer compiled under the library's
    name is not (its bytecode or its lines differ), whatever globals it runs with. Where the source
    cannot be read, the file name and the globals stand alone, as they did before; but code that
    claims a frozen module with no frozen code, or a file that is not Python source (an extension
    module's), is no library's own: none such exists."""
    seen = _VERDICTS.get(id(code))
    if seen is not None and seen[0] is code:
        return seen[1]
    if name not in _LIBRARY_CODES:
        _LIBRARY_CODES[name] = _compiled_codes(name, module)
    known = _LIBRARY_CODES[name]
    if known is None:
        verdict = not (name.startswith("<frozen") or not name.endswith(".py"))
    else:
        verdict = code in known
    _VERDICTS[id(code)] = (code, verdict)
    return verdict


def _compiled_codes(name, module):
    """Every code object (nested ones included) of the library file `name` as Python compiles it
    from its source, or of the frozen module; None where neither can be had."""
    try:
        if name.startswith("<frozen"):
            import _imp
            state = getattr(getattr(module, "__spec__", None), "loader_state", None)
            top = _imp.get_frozen_object(getattr(state, "origname", None) or module.__name__)
        else:
            with open(name, "rb") as source:
                top = compile(source.read(), name, "exec", dont_inherit=True)
    except Exception:  # noqa: BLE001 (no source to compare with: the older test stands)
        return None
    codes, todo = set(), [top]
    while todo:
        code = todo.pop()
        codes.add(code)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return codes


def _code_info(code):
    """(successors, special) of `code`, as _CODE_INFO holds them. An instruction's successors are the
    next one and its jump's target (a re-raise: any handler); EXTENDED_ARG runs the instruction after
    it with no event of its own."""
    info = _CODE_INFO.get(code)
    if info is None:
        instructions = list(dis.get_instructions(code))
        handlers = {entry.target for entry in dis._parse_exception_table(code)}
        jumps = set(dis.hasjrel) | set(dis.hasjabs)
        successors, special = {}, {}
        for i, ins in enumerate(instructions):
            after = {instructions[i + 1].offset} if i + 1 < len(instructions) else set()
            if ins.opcode in jumps:
                after.add(ins.argval)
            if ins.opname in ("RERAISE", "RAISE_VARARGS"):
                after |= handlers
            successors[ins.offset] = after
            if ins.opname in _STORES or ins.opname == "BEFORE_WITH" or (
                    ins.opname in ("LOAD_METHOD", "LOAD_ATTR") and ins.argval == "acquire"):
                special[ins.offset] = (ins.opname, ins.arg, ins.argval)
        for ins in reversed(instructions):
            if ins.opname == "EXTENDED_ARG":
                for target in list(successors[ins.offset]):
                    successors[ins.offset] |= successors.get(target, set())
        info = _CODE_INFO[code] = ({k: frozenset(v) for k, v in successors.items()}, special)
    return info


_WORD = ctypes.sizeof(ctypes.c_void_p)
# Which instruction may follow which, as _code_info reads them, holds for CPython 3.11's per-instruction
# events (checked on the test suites of contextlib, generators, exceptions, with, coroutines, json,
# threading and asyncgen: no false gap); elsewhere only frames that end unseen are looked for.
_GAPS_SEEN = sys.version_info[:2] == (3, 11)


def _stack(frame, depth, cell=None):
    """The top `depth` objects of the value stack of `frame` (paused in a trace call), top first, or
    with `cell` its localsplus[cell]; None where the frame is not laid out as CPython 3.11 lays it
    out (its code and frame pointers are checked first: nothing is read from a wrong address)."""
    if sys.version_info[:2] != (3, 11):
        return None
    inner = ctypes.c_void_p.from_address(id(frame) + 3 * _WORD).value  # PyFrameObject.f_frame
    if not inner:
        return None
    words = (ctypes.c_void_p * 6).from_address(inner)  # f_func, f_globals, f_builtins, f_locals, f_code, frame_obj
    code = frame.f_code
    if words[4] != id(code) or words[5] != id(frame):
        return None
    top = ctypes.c_int.from_address(inner + 8 * _WORD).value  # stacktop, counted from localsplus
    limit = len(code.co_varnames) + len(code.co_cellvars) + len(code.co_freevars) + code.co_stacksize
    slots = [cell] if cell is not None else [top - 1 - i for i in range(depth)]
    if not (depth <= top <= limit and all(0 <= i < limit for i in slots)):
        return None
    out = []
    for i in slots:
        address = ctypes.c_void_p.from_address(inner + (9 + i) * _WORD).value  # localsplus[i]
        if not address:
            return None
        out.append(ctypes.cast(address, ctypes.py_object).value)
    return out


def _kept(value):
    """A key that names `value` for the run: itself when a plain number or string, else its id (the
    object kept alive meanwhile, so that no other object takes that id)."""
    if type(value) in (int, str, bool, float):
        return value
    _KEEP[id(value)] = value
    return ("id", id(value))


def _where(frame, opname, arg, argval):
    """(what the store about to run in `frame` writes into: (container, key), (object, attribute),
    (globals, name) or the closure cell, the value it writes); (None, None) where the stack cannot
    be read."""
    if opname == "STORE_DEREF":
        cell, top = _stack(frame, 0, cell=arg), _stack(frame, 1)
        return (None, None) if cell is None or top is None else ((_kept(cell[0]),), top[0])
    if opname in ("STORE_GLOBAL", "STORE_NAME"):
        top = _stack(frame, 1)
        space = frame.f_globals if opname == "STORE_GLOBAL" else frame.f_locals
        return (None, None) if top is None else ((_kept(space), argval), top[0])
    if opname == "STORE_ATTR":
        top = _stack(frame, 2)  # the object, the value
        return (None, None) if top is None else ((_kept(top[0]), argval), top[1])
    top = _stack(frame, 3)  # STORE_SUBSCR: key, container, value
    return (None, None) if top is None else ((_kept(top[1]), _slot(top[0])), top[2])


def _slot(key):
    """The item a store by `key` writes, as a place: a plain number or string, or a tuple of them
    (a NumPy index), as itself; a key for several items at once (a slice, a list or array of
    indices, a mask) as all of the container; any other key by identity (see _kept)."""
    plain = (int, str, bool, float)
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return int(key)
    if type(key) in plain or (type(key) is tuple and all(type(k) in plain for k in key)):
        return key
    parts = key if type(key) is tuple else (key,)
    if any(type(k) in (slice, list) or type(k).__module__ == "numpy" for k in parts):
        return "[several]"
    return _kept(key)


def _settled(frame, ident, push=True):
    """The record of `frame` on the thread's stack of answer frames, after taking off the frames above
    it that are no longer running. Each answer frame is put there at its call event and taken off at
    its return event, which the trace function gets whenever the switches are on; one that ended
    without it ended with them off (sys.settrace(None), then back on: the thread's tracer alone, read
    as it ends, does not show that). So does a frame whose next instruction seen is not one that can
    follow the last one seen: the ones between ran unswitched."""
    stack = _FRAMES.setdefault(ident, [])
    if stack and stack[-1][0] is frame:
        return stack[-1]
    running, f = set(), frame
    while f is not None:
        running.add(id(f))
        f = f.f_back
    while stack and id(stack[-1][0]) not in running:
        stack.pop()
        _UNSEEN.add(ident)
    if stack and stack[-1][0] is frame:
        return stack[-1]
    if push:  # a generator resumed by throw() gets no call event
        stack.append([frame, None])
        return stack[-1]
    return None


def _switch_everywhere(frame, event, arg):
    """Global trace function: in answer code, let other threads run after every instruction."""
    if event != "call" or not _is_answer_frame(frame):
        return None
    frame.f_trace_opcodes = True
    frame.f_trace_lines = False
    ident = threading.get_ident()
    if frame.f_back is not None:
        _settled(frame.f_back, ident, push=False)
    _FRAMES.setdefault(ident, []).append([frame, None])
    depth = _DEPTH[ident] = _DEPTH.get(ident, 0) + 1
    if depth == 1:
        _INSIDE.add(ident)
        _TOGETHER.append(frozenset(_INSIDE))
    return _switch_local


def _switch_local(frame, event, arg):
    ident = threading.get_ident()
    record = _settled(frame, ident)
    if event == "return":  # also when an exception ends the frame
        _FRAMES[ident].pop()
        depth = _DEPTH[ident] = _DEPTH.get(ident, 1) - 1
        if depth <= 0:
            _INSIDE.discard(ident)
        return None
    if event == "exception":  # the next instruction is a handler's
        record[1] = None
    elif event == "opcode":
        successors, special = _code_info(frame.f_code)
        here = frame.f_lasti
        if _GAPS_SEEN and record[1] is not None and here not in successors.get(record[1], ()):
            _UNSEEN.add(ident)
        record[1] = here
        what = special.get(here)
        if what is None:
            _yield(_PAUSE)
        elif what[0] in _STORES:
            held = _HELD.get(ident)
            where, value = _where(frame, *what)
            number = isinstance(value, numbers.Real) and not isinstance(value, bool)  # NumPy's too
            _VALUES_AT.setdefault(where, []).append((ident, value if number else None))
            counts = _STORES_AT.setdefault((where, ident), [0, 0, 0, None])
            counts[0] += 1
            if held:
                counts[1] += 1
                counts[2] += len(held) >= 2
                counts[3] = set(held) if counts[3] is None else counts[3] & set(held)
            _yield(_BEFORE_STORE)
        else:  # a with statement or an acquire: on a lock the harness did not make, it cannot see it held
            top = _stack(frame, 1)
            if top is not None and not isinstance(top[0], _AbortableLock) and all(
                    hasattr(type(top[0]), name) for name in ("acquire", "release")):
                _HIDDEN.add(ident)
            _yield(_PAUSE)
    return _switch_local


class _Aborted(SystemExit):
    """Raised in an answer's threads to unwind a deadlock (SystemExit: threads end quietly)."""


class _Harness:
    """Forced switches, abortable locks and daemon threads while an answer runs."""

    def __init__(self):
        _OWN_CODES.update(_own_codes(globals(), sys._getframe(1).f_code))  # and the function that runs it
        self.abort = threading.Event()
        self.deadlocked = threading.Event()
        self.threads = []
        self.waiting = {}   # thread ident -> the answer's lock it is blocked on
        self.releases = 0   # answer locks released so far
        self.untraced = []  # threads that ended with the forced switches turned off

    def _lock_factory(self, real_factory):
        harness = self

        def factory(*args, **kwargs):
            real = real_factory(*args, **kwargs)
            return _AbortableLock(real, harness) if _is_answer_frame(sys._getframe(1)) else real
        return factory

    def in_cycle(self, me):
        """Whether `me` waits for a lock held by a thread that waits ... for a lock `me` holds."""
        thread, seen = me, set()
        while thread not in seen:
            seen.add(thread)
            lock = self.waiting.get(thread)
            owner = getattr(lock, "_owner", None)
            if owner is None:
                return False
            if owner == me:
                return True
            thread = owner
        return False

    @contextmanager
    def active(self, namespace=None):
        """The harness on for the block; `namespace` (the answer's globals) has its names for
        threading's Lock and RLock (`from threading import Lock`) point at the harness's too."""
        saved = threading.Lock, threading.RLock, threading.Thread.start
        harness = self
        namespace = namespace if type(namespace) is dict else {}
        bound = {name: value for name, value in namespace.items() if value is saved[0] or value is saved[1]}

        def start(thread, *args, **kwargs):
            if not thread.daemon:
                thread.daemon = True          # a stuck thread must never block interpreter exit
            harness.threads.append(thread)
            run = thread.run

            def watched_run():
                try:
                    run()
                finally:
                    # A thread that turned the switches off (sys.settrace(None), another
                    # trace function) ran unswitched: its count proves nothing. So did one whose
                    # answer frames ended unseen or skipped instructions (_settled).
                    left = _FRAMES.pop(threading.get_ident(), None)
                    if sys.gettrace() is not _switch_everywhere or left or threading.get_ident() in _UNSEEN:
                        harness.untraced.append(thread.name)
            thread.run = watched_run
            return saved[2](thread, *args, **kwargs)

        threading.Lock = self._lock_factory(saved[0])
        threading.RLock = self._lock_factory(saved[1])
        namespace.update({name: threading.Lock if value is saved[0] else threading.RLock for name, value in bound.items()})
        threading.Thread.start = start
        threading.settrace(_switch_everywhere)
        try:
            yield self
        finally:
            threading.settrace(None)
            threading.Lock, threading.RLock, threading.Thread.start = saved
            namespace.update(bound)

    def release_stuck_threads(self):
        """Abort the answer's locks; forget its pool threads so that exit does not join them."""
        self.abort.set()
        deadline = time.monotonic() + 5
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        try:
            from concurrent.futures import thread as futures_thread
            for thread in self.threads:
                futures_thread._threads_queues.pop(thread, None)
        except (ImportError, AttributeError):
            pass


class _AbortableLock:
    """A Lock/RLock look-alike whose blocking acquire gives up once `abort` is set.

    It also notices a deadlock: a cycle of threads, each blocked on an answer lock
    that the next one holds, with no answer lock released anywhere for
    _DEADLOCK_SECONDS. Such threads can only wait forever (a lock released by a
    thread other than its owner would count as a release), so the run ends there
    instead of at the time limit.
    """

    def __init__(self, real, harness):
        self._real, self._harness, self._owner = real, harness, None
        self._holders = []  # the threads that hold it, most recent last (an RLock may be held twice)

    def acquire(self, blocking=True, timeout=-1):
        if not blocking or timeout >= 0:
            got = self._real.acquire(blocking, timeout)
        else:
            harness, me = self._harness, threading.get_ident()
            since = None
            while not self._real.acquire(timeout=0.05):
                if harness.abort.is_set():
                    harness.waiting.pop(me, None)
                    raise _Aborted("deadlock aborted by the grader")
                harness.waiting[me] = self
                if not harness.in_cycle(me):
                    since = None
                elif since is None or since[1] != harness.releases:
                    since = (time.monotonic(), harness.releases)
                elif time.monotonic() - since[0] > _DEADLOCK_SECONDS:
                    harness.deadlocked.set()
                    harness.abort.set()
            harness.waiting.pop(me, None)
            got = True
        if got:
            self._owner = threading.get_ident()
            self._holders.append(self._owner)
            held = _HELD.setdefault(self._owner, {})
            held[id(self)] = held.get(id(self), 0) + 1
        return got

    def release(self):
        self._owner = None
        self._harness.releases += 1
        if self._holders:
            held = _HELD.get(self._holders.pop(), {})
            held[id(self)] = held.get(id(self), 1) - 1
            if held[id(self)] <= 0:
                del held[id(self)]
        self._real.release()

    def locked(self):
        return self._real.locked()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()

    def _is_owned(self):  # used by threading.Condition with an RLock
        return self._real._is_owned() if hasattr(self._real, "_is_owned") else self._real.locked()

    def __getattr__(self, name):
        return getattr(self._real, name)


TOGETHER = ("the threads never ran the {what} at the same time: each was started and joined (or given its "
            "work and waited for) before the next began, so nothing ran in parallel and no lock was put to "
            "the test. Start all the threads, then join them all")
UNTRACED = ("your threads switched off the grader's thread switching (sys.settrace): "
            "the result proves nothing, so the check fails")


def _run_bounded(fn, args, seconds):
    """fn(*args) under the harness, in the student's process; ("ok", value, stores, locked,
    together, counted), ("error", text, 0, None, 0, 0), ("hung", None, 0, None, 0, 0) or ("untraced",
    thread names, 0, None, 0, 0) when a thread ran with the switches turned off. `together`: the most threads other
    than the calling one that were inside the answer's code at one time (a thread waiting for one
    of the answer's locks is: its frame is on its stack); workers started and joined one after
    another, or given one task at a time and waited for, never make 2. `stores`: how many times the answer's code stored
    into shared state (an item, attribute, global or closure variable) in threads other than the
    one that called it, into what two of those threads or more wrote (shared state: a thread's own
    slot is not); `locked`: how many of those it made holding one of its own locks or more,
    how many holding two or more, whether one of its locks was held at every one of them
    (locks it made with threading.Lock or RLock while the harness ran, also through a name its
    globals bound to them, `from threading import Lock`; one made before, or bound in another
    module, is not seen), and whether a worker thread's answer code entered or
    acquired a lock the harness did not make; `counted` (last): the longest run 1, 2, ..., m of
    numbers that the worker threads wrote, in that order and nothing else, into one place two of
    them or more wrote (None where the stack could not be read). "untraced" also when an answer
    frame ended unseen, or skipped instructions, in any thread (_settled).

    The harness must run beside the answer (a trace function and patched locks
    in the judge would do nothing to it): the whole run travels with there().
    """
    return there(_bounded_here, fn, args, seconds)


def _bounded_here(fn, args, seconds):
    """(in the student's process) fn(*args) under the harness, in a daemon thread, as plain data:
    (state, value, the stores into shared state that the answer's code made in threads other than
    the one that called it, in all)."""
    harness = _Harness()
    box = {}
    for record in (_STORES_AT, _VALUES_AT, _KEEP, _HELD, _HIDDEN, _FRAMES, _UNSEEN, _DEPTH, _INSIDE, _TOGETHER):
        record.clear()

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001
            box["error"] = err

    deadline = time.monotonic() + seconds
    with harness.active(getattr(fn, "__globals__", None)):
        runner = threading.Thread(target=target, daemon=True)
        runner.start()
        while runner.is_alive() and time.monotonic() < deadline and not harness.deadlocked.is_set():
            runner.join(0.05)
    if runner.is_alive() or harness.deadlocked.is_set():
        harness.release_stuck_threads()
        return "hung", None, 0, None, 0, 0
    if harness.untraced or _UNSEEN:
        return "untraced", harness.untraced[:3], 0, None, 0, 0
    if "error" in box:
        err = box["error"]
        return "error", f"{type(err).__name__}: {err}", 0, None, 0, 0
    # Only stores into what two worker threads or more wrote count: shared state (a thread's own slot,
    # local to it, is not). Where the stack could not be read (`where` None), every store counts.
    writers = {}
    for where, ident in _STORES_AT:
        if ident != runner.ident:
            writers.setdefault(where, set()).add(ident)
    shared = {key: n for key, n in _STORES_AT.items()
              if key[1] != runner.ident and (key[0] is None or len(writers[key[0]]) >= 2)}
    in_workers = sum(n[0] for n in shared.values())
    locked = [sum(n[i] for n in shared.values()) for i in (1, 2)]
    always = {}
    for (_, ident), n in shared.items():
        if n[3] is not None:
            always[ident] = n[3] if ident not in always else always[ident] & n[3]
    sets = list(always.values())
    locked.append(bool(sets) and bool(set.intersection(*sets)))  # one lock held at every locked store
    locked.append(bool(_HIDDEN - {runner.ident}))  # locks the harness did not make were taken
    together = max((len(inside - {runner.ident}) for inside in _TOGETHER), default=0)
    # The longest count 1, 2, ..., m that the workers wrote, in that order and nothing else, into
    # one place two of them or more wrote: a counter's history under a lock.
    counted = 0
    for where, stored in _VALUES_AT.items():
        values = [value for ident, value in stored if ident != runner.ident]
        if where is not None and len(writers.get(where, ())) >= 2 and values == list(range(1, len(values) + 1)):
            counted = max(counted, len(values))
    if None in _VALUES_AT:  # stores whose stack could not be read: no count to compare
        counted = None
    _KEEP.clear()
    _VALUES_AT.clear()
    return "ok", box["value"], in_workers, locked, together, counted


def _watched(fn, *args):
    """there(fn, *args) while the judge watches the student's process tree from /proc.

    Returns (fn's result, the pids of the processes that appeared in the tree
    during the call): the processes are seen by the kernel, not reported by the
    answer.
    """
    from autograder.pipeline.judge import ProcessTree
    before = set(ProcessTree(student_pid()).members())
    with observe(0.002) as seen:
        result = there(fn, *args)
    return result, seen.pids - before


def _watched_counting(fn, *args):
    """_watched(counting, fn, *args), the spy's starts backed by the kernel (capped)."""
    with created() as made:
        (result, counts), fresh = _watched(counting, fn, *args)
    return (result, capped(counts, made)), fresh


# --- safe_increment ---------------------------------------------------------------
def test_safe_increment_errors(safe_increment):
    """n_threads < 1 or n < 0 raises ValueError"""
    for bad in ((0, 10), (-1, 10), (2, -5)):
        with raises_value_error(f"safe_increment{bad}"):
            safe_increment(*bad)


@timeout(60)
def test_safe_increment_exact(safe_increment):
    """the count is exactly n_threads * n, with one thread and with many

    False failure of a correct answer: 0 (random sizes, exact count and spy).
    """
    for n_threads in (1, random.randint(3, 6)):
        n = random.randint(150, 300)
        got, counts = counted(safe_increment, n_threads, n)
        got = exact_int(got, "the count")
        assert got == n_threads * n, f"{n_threads} threads x {n} increments gave {got}, not {n_threads * n}"
        assert counts["thread start"] >= n_threads, f"{how_many(n_threads, 'thread')} should have been started"


@timeout(90)
def test_safe_increment_under_forced_switches(safe_increment):
    """the count stays exact when threads switch between any two bytecode instructions

    False failure of a correct answer: 0 while the machine makes progress. The
    switches are forced (no luck involved) and the count is exact; the only
    clock is the 60 s allowed, about 30 times what the reference needs on a
    loaded 2-core machine. The threads must also have written the counter
    n_threads * n times in all (counted by the trace: stores into an item,
    attribute, global or closure variable in the answer's code, outside the
    calling thread, into one that two threads or more wrote: the stack is read
    to tell what each store writes into): a correct answer's threads each write
    the one counter once per increment, with an assignment, as the spec's
    read-modify-write does (an answer that wrote it only through setattr or
    another C function would be missed). A count returned beside threads that
    do nothing, or that write slots of their own, fails; and the counter must have
    been written 1, 2, ..., n_threads * n in that order (the values read off the
    stack at each store), which a counter's read-modify-write under one lock
    always writes (the store of each count is made holding the lock, so no other
    store comes between its record and itself), and stores into one place beside
    a count worked out never do. Threads that turn the
    switches off fail at any time, not only at their end: an answer frame that
    ends without its return event, or runs instructions between two events that
    cannot follow each other, ran unswitched (_settled; no false signal on 812
    tests of the standard library's own suites traced so). At least two worker threads
    must have been inside the answer's code at one time: a correct answer starts the next thread
    while the first is still at its increments (each store waits 0.8 ms, so n of them take 80 ms
    or more, and the starting thread needs a few instructions); threads started and joined one
    after another, or one task at a time on a pool, never are.
    """
    n_threads, n = random.randint(3, 4), random.randint(100, 150)
    state, value, stores, _, together, counted = _run_bounded(safe_increment, (n_threads, n), 60)
    assert state != "hung", "safe_increment did not finish (a deadlock?)"
    assert state != "untraced", UNTRACED
    assert state != "error", f"with thread switches forced between instructions, safe_increment raised {value}"
    got = exact_int(value, "the count")
    assert got == n_threads * n, (
        f"with thread switches forced between instructions, {n_threads} x {n} increments gave {got}: "
        "is the read-modify-write protected by a lock?")
    assert stores >= n_threads * n, (
        f"the threads wrote the shared counter {stores} times, not {n_threads} x {n}: each thread must "
        "add 1 n times itself to the one counter they share (the count returned is not to be worked out, "
        "nor kept in a slot of each thread's own)")
    assert counted is None or counted == got, (
        f"the threads never wrote the counts 1, 2, ..., {got} one after another into the counter they share: "
        "the count returned must be the one their increments made (each reads the counter and writes it "
        "back plus 1, under the lock)")
    assert together >= 2, TOGETHER.format(what="increments")


# --- bytecode_ops -------------------------------------------------------------------
def _sample_functions():
    a, b = random.randint(2, 9), random.randint(10, 99)
    source = f'''
def f0(x):
    x = x + {a}
    return x
def f1(items):
    total = 0
    for item in items:
        if item % {a}:
            total += item * {b}
    return total
def f2():
    global g
    g = g - {b}
def f3(s, k={a}):
    return [c.upper() for c in s][:k]
'''
    namespace = {}
    exec(compile(source, "<check>", "exec"), namespace)
    return [namespace[f"f{i}"] for i in range(4)] + [_plain_helper]


def _plain_helper(values):
    try:
        return max(values) / len(values)
    except ZeroDivisionError:
        return None


def _expected(fn):
    return [ins.opname for ins in dis.get_instructions(fn)]


_SAMPLE_ARGUMENTS = [(5,), ([1, 2, 3, 4, 5, 6],), (), ("abcdef",), ([1, 2, 3],)]  # f0 to f3, _plain_helper


def _ops_of_a_warm_function(bytecode_ops, fn, args):
    """(in the student's process) bytecode_ops(fn) after fn has run a thousand times: the
    interpreter has then specialised its instructions (BINARY_OP_ADD_INT for BINARY_OP, from
    Python 3.11), which dis shows only when asked to (adaptive=True), as the notebook's own
    function, run in a loop before its test, is."""
    fn.__globals__.setdefault("g", 0)  # f2's global
    for _ in range(1000):
        fn(*args)
    return bytecode_ops(fn)


def test_bytecode_ops_matches_dis(bytecode_ops):
    """returns the opnames dis reports, in order, as a list of strings, also for a function that has run

    False failure of a correct answer: 0 (random constants, exact comparison).
    """
    for fn, args in zip(_sample_functions(), _SAMPLE_ARGUMENTS):
        got = exact_list(there(_ops_of_a_warm_function, bytecode_ops, fn, args), "the result")
        assert all(type(op) is str for op in got), "every element must be an opname string"
        got = [op for op in got if op != "CACHE"]   # cache entries are not instructions
        assert got == _expected(fn), (
            f"the opnames differ from what dis reports for the same function: {len(got)} given, "
            f"{len(_expected(fn))} expected, the first difference at position "
            f"{next((i for i, (a, b) in enumerate(zip(got, _expected(fn))) if a != b), min(len(got), len(_expected(fn))))}")


def test_bytecode_ops_read_modify_write(bytecode_ops):
    """shows the read, the modify and the write of a global increment in that order"""
    namespace = {}
    exec("def bump():\n    global n\n    n = n + 1\n", namespace)
    ops = [op for op in bytecode_ops(namespace["bump"]) if op != "CACHE"]
    assert "LOAD_GLOBAL" in ops and "STORE_GLOBAL" in ops, "the read (LOAD_GLOBAL) or write (STORE_GLOBAL) is missing"
    read, write = ops.index("LOAD_GLOBAL"), ops.index("STORE_GLOBAL")
    assert read < write and any(op.startswith("BINARY") for op in ops[read:write]), (
        "the read, the addition and the write of n = n + 1 are not all there, in that order")


# --- process_safe_counter --------------------------------------------------------------
def test_process_safe_counter_errors(process_safe_counter):
    """n_procs < 1 or n < 0 raises ValueError"""
    for bad in ((0, 10), (-2, 10), (2, -1)):
        with raises_value_error(f"process_safe_counter{bad}"):
            process_safe_counter(*bad)


@timeout(150)
def test_process_safe_counter_exact(process_safe_counter):
    """processes add to one shared Value and the count is exact

    False failure of a correct answer: 0 while the machine makes progress (a
    random n, exact count and spy; Process objects started and not yet joined counted exactly,
    at least 2 at once, which workers started and joined one after another never are). That the
    increments ran in other processes is also seen from outside: the judge, reading /proc every
    2 ms, must see n_procs new processes in the student's process tree during the call; each
    lives at least as long as its thousands of locked increments (tens of ms
    idle, longer under load). A call in which it sees fewer is tried again,
    up to 3 times, then the check is undecided (never passed; regraded alone,
    then a person).
    """
    n_procs = 3
    for _ in range(3):
        n = random.randint(4_000, 5_000)
        (got, counts), fresh = _watched_counting(process_safe_counter, n_procs, n)
        got = exact_int(got, "the count")
        assert counts["process start"] >= n_procs, f"{n_procs} processes should have been started"
        if counts["process objects"] >= n_procs:  # Process objects (bare forks are not followed)
            assert counts["processes at once"] >= 2, (
                "each process was started and joined before the next one began: nothing ran at the same "
                "time, so no lock was put to the test. Start all the processes, then join them all")
        assert got == n_procs * n, (
            f"{n_procs} processes x {n} increments gave {got}, not {n_procs * n}: "
            "is each read-modify-write done under the Value's lock?")
        if len(fresh) >= n_procs:
            break
    else:  # the answer's own evidence held; only the judge's view missed: undecided
        pytest.skip(f"{n_procs} processes should have done the increments, but only {len(fresh)} "
                             "new process(es) appeared while the function ran")
    got, counts = counted(process_safe_counter, 1, 7)
    assert got == 7, "one process adding 7 times should give 7"
    assert counts["process start"] >= 1, "the work must run in a process"


@timeout(120)
def test_process_safe_counter_counts_in_the_value(process_safe_counter):
    """the count returned is the one the processes made in the shared Value, not a number worked out

    False failure of a correct answer: 0. When the call starts its first process, every Value of a
    number (4 bytes or more) that the call made and that still holds 0 is given a head start K, a
    random number the answer cannot know (multiprocessing's RawValue, which Value and every context's
    Value call, is watched in the student's process for the call). The processes then add to K, under
    every start method (the Value is shared memory), and a correct answer returns what its Value
    holds: K + n_procs * n. A count worked out, or kept anywhere else, is n_procs * n: it fails. A
    Value used for something else (a flag, a count of processes done) may be thrown off by the head
    start: any other result, an error, or none within 60 s leaves the check undecided (never passed);
    so does a call that made no such Value before its first process.
    """
    n_procs, n, head = 3, random.randint(200, 400), random.randint(100_000, 1_000_000)
    how, got, given = there(_head_started, process_safe_counter, (n_procs, n), head, 60)
    if how != "returned" or type(got) is not int or not given:
        pytest.skip(f"the call with a head start in its Value could not be judged ({how}; "
                    f"{how_many(given, 'Value')} given the head start)")
    assert got != n_procs * n, (
        f"the count returned, {got}, is not what the shared Value holds: the processes must add 1 to the "
        "multiprocessing.Value n times each, and the count returned is read from that Value (not worked out)")
    if got != head + n_procs * n:
        pytest.skip("the count returned is not the Value's count after a head start: the Value may serve "
                    "something other than the count")


def _head_started(fn, args, head, seconds):
    """(in the student's process) fn(*args), every Value of a number it made that still holds 0 when its
    first process starts given the head start `head` (see test_process_safe_counter_counts_in_the_value):
    (how, value, how many were given it), how being "returned", "raised" or "waiting" (no return after
    `seconds`)."""
    import ctypes
    import multiprocessing.sharedctypes as sharedctypes
    made, given, box = [], [], {}
    real_raw, real_start = sharedctypes.RawValue, multiprocessing.process.BaseProcess.start

    def raw_value(*a, **k):
        obj = real_raw(*a, **k)
        made.append(obj)
        return obj

    def start(self, *a, **k):
        if not box.get("started"):
            box["started"] = True
            for obj in made:  # integers and floats of 4 bytes or more hold K + n_procs * n exactly
                if (getattr(type(obj), "_type_", "") in tuple("ilqILQfd") and ctypes.sizeof(obj) >= 4
                        and obj.value == 0):
                    obj.value = head
                    given.append(obj)
        return real_start(self, *a, **k)

    def call():
        try:
            box["returned"] = fn(*args)
        except Exception as err:  # noqa: BLE001 (the head start may throw a Value of a flag off)
            box["raised"] = f"{type(err).__name__}"

    sharedctypes.RawValue, multiprocessing.process.BaseProcess.start = raw_value, start
    try:
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        caller.join(seconds)
    finally:
        sharedctypes.RawValue, multiprocessing.process.BaseProcess.start = real_raw, real_start
    if caller.is_alive():
        return "waiting", None, len(given)
    how = "returned" if "returned" in box else "raised"
    return how, box.get(how) if how == "returned" else None, len(given)


@timeout(120)
def test_process_safe_counter_under_spawn(process_safe_counter):
    """works under the spawn start method too (macOS, Windows): the processes run nothing defined in the notebook

    False failure of a correct answer: 0 (see _support.works_under_spawn).
    """
    n = random.randint(100, 300)
    assert exact_int(works_under_spawn(process_safe_counter, 2, n), "the count") == 2 * n, (
        "under the spawn start method the count is not n_procs * n")



# --- transfer_many ---------------------------------------------------------------------
def _serial_transfers(balances, transfers):
    out = list(balances)
    for src, dst, amount in transfers:
        out[src] -= amount
        out[dst] += amount
    return out


def _opposing_transfers(n_accounts, count):
    transfers = []
    for _ in range(count // 2):
        a, b = random.sample(range(n_accounts), 2)
        transfers += [(a, b, random.randint(1, 50)), (b, a, random.randint(1, 50))]
    random.shuffle(transfers)
    return transfers


def test_transfer_many_errors(transfer_many):
    """n_threads < 1 raises ValueError; no transfers leave the balances as they were

    False failure of a correct answer: 0 (random balances, exact comparison).
    """
    with raises_value_error("transfer_many([1, 2], [(0, 1, 1)], 0)"):
        transfer_many([1, 2], [(0, 1, 1)], 0)
    balances = [random.randint(0, 500) for _ in range(3)]
    got = exact_list(transfer_many(balances, [], random.randint(2, 4)), "transfer_many(balances, [], n_threads)", 3)
    assert got == balances, "with no transfers the balances must come back as they were"


@timeout(60)
def test_transfer_many_result(transfer_many):
    """the final balances equal applying every transfer, the total is conserved, the input is untouched; at most n_threads threads

    False failure of a correct answer: 0 (random transfers, integer arithmetic
    is exact whatever the order; thread starts counted exactly, and n_threads
    threads, or none with one, start at most n_threads).
    """
    for n_threads in (1, random.randint(3, 8)):
        balances = [random.randint(0, 500) for _ in range(random.randint(3, 6))]
        transfers = _opposing_transfers(len(balances), 60) + [(0, 1, 1)]  # 61: no n_threads from 2 to 8 divides it
        before = list(balances)
        with created() as made:
            got, counts, after, workers = there(_transfercounting, transfer_many, balances, transfers, n_threads)
        counts = capped(counts, made)
        got = exact_list(got, "the result", len(balances))
        # Quoted only when plain ints: what the answer returns is the student's, and a message must not
        # carry out of the student's process what its code could read there (hidden._error_text).
        shown = got if all(type(x) is int for x in got) else "not a list of ints"
        assert got == _serial_transfers(before, transfers), (
            f"the final balances are wrong: {shown}, where applying every transfer once gives "
            f"{_serial_transfers(before, transfers)} (is every transfer applied, the last ones too?)")
        assert sum(got) == sum(before), "money was created or destroyed"
        assert after == before, "the balances passed in must not be changed: return a new list"
        if n_threads > 1:
            assert counts["thread start"] >= 2, f"with n_threads={n_threads} the transfers should run on several threads"
        assert workers <= n_threads, (
            f"with n_threads={n_threads} the call started {workers} threads: is n_threads given to "
            "the pool (ThreadPoolExecutor(max_workers=n_threads))?")


# The threads a multiprocessing(.dummy) Pool starts to run itself: they run none of the tasks.
_POOL_OWN_THREADS = {"Pool._handle_workers", "Pool._handle_tasks", "Pool._handle_results"}


def _transfercounting(transfer_many, balances, transfers, n_threads):
    """(in the student's process) the result, the spy's counts, the list passed in after the call, and
    how many threads the call started that could run transfers (a pool's own handler threads left out)."""
    import threading
    targets = []

    with count_starts_and_joins() as counts:
        real_start = threading.Thread.start  # the spy's own, which counts the start

        def start(thread, *args, **kwargs):
            targets.append(getattr(getattr(thread, "_target", None), "__qualname__", ""))
            return real_start(thread, *args, **kwargs)

        threading.Thread.start = start
        try:
            result = transfer_many(balances, transfers, n_threads)
        finally:
            threading.Thread.start = real_start
    return result, counts, list(balances), sum(1 for t in targets if t not in _POOL_OWN_THREADS)


@timeout(150)
def test_transfer_many_no_deadlock(transfer_many):
    """never deadlocks, even with opposite transfers and thread switches at every instruction

    False failure of a correct answer: 0 while the machine makes progress.
    Switches are forced, so a correct answer never deadlocks and its balances are
    exact; the only clock is the 60 s allowed, about 30 times what the reference
    needs on a loaded 2-core machine, and a deadlock found only where threads
    wait for each other's locks in a cycle with no lock released for 5 s (a
    lock released by the thread that took it, as `with` does, cannot be in such
    a cycle and still make progress). Wrong answers: locks taken in argument
    order deadlock on the first run (found in about 5 s); without locks, one run of 160 transfers
    loses an update 19 times in 20 (measured), so three independent runs miss
    with probability about 1e-4. The threads must also have written the balances at
    least once per transfer (stores in the answer's code outside the calling thread,
    counted by the trace; a transfer writes two balances with assignments): transfers
    applied by the calling thread beside threads that do nothing fail. And where the
    threads made their writes holding the answer's own locks (two writes per transfer or
    more), at least one write must hold two of them at once: one lock for every account,
    or an account's lock released before the other's is taken, never does; and no one lock
    may be held at all of them (a lock around every transfer serialises them, whatever
    account locks it takes inside). A correct answer holds both accounts' locks for each
    transfer, and an account's lock is held at every write only if all 80 random pairs of
    4 accounts share that account: false failure below 4 * 2**-80 per run. Locks the
    harness cannot see, made before it ran, bound in another module or made by a Semaphore,
    leave this part out.
    But some lock must be held: where no write of the balances held one of the answer's
    locks, a thread must have entered or acquired a lock the harness did not make
    (`with lock:`, `lock.acquire()`, seen in the answer's code); else no lock was
    taken at all, which a correct answer never does. Only writes into what two
    threads or more wrote count (the stack is read at each store to tell what it
    writes into): 160 random transfers share each of the 4 accounts among the
    threads (a thread's slice misses an account with chance 2**-40; a pool's
    threads take transfers from one queue), so a correct answer's writes count;
    writes into a slot of each thread's own do not.
    At least two worker threads must have been inside the answer's code at one time (160
    transfers of two 0.8 ms stores each on 4 threads: a correct answer's threads overlap for
    the whole run); transfers applied one after another never are.
    """
    for _ in range(3):
        balances = [random.randint(0, 200) for _ in range(4)]
        transfers = _opposing_transfers(4, 160)
        state, value, stores, locked, together, _ = _run_bounded(transfer_many, (list(balances), transfers, 4), 60)
        assert state != "hung", ("transfer_many deadlocked with opposite transfers: "
                                 "are the two locks always taken in the same global order?")
        assert state != "untraced", UNTRACED
        assert state != "error", f"with thread switches forced between instructions, transfer_many raised {value}"
        got = exact_list(value, "the result", len(balances))
        assert got == _serial_transfers(balances, transfers), (
            "with thread switches forced between instructions the balances came out wrong: "
            "does each transfer hold both accounts' locks while it updates them?")
        assert stores >= len(transfers), (
            f"the threads wrote the balances {stores} times for {len(transfers)} transfers: the transfers "
            "must be applied by the threads, not by the calling thread, to the one list of balances they share")
        assert together >= 2, TOGETHER.format(what="transfers")
        assert locked[0] or locked[3], (
            "the threads wrote the balances without holding any lock: each transfer must hold the locks "
            "of both its accounts while it updates them")
        if locked[0] >= 2 * len(transfers):  # the balances written holding the answer's own locks
            assert locked[1], (
                "the threads wrote the balances holding one lock at a time, never two: each transfer must hold "
                "the locks of both its accounts while it updates them (one lock per account; one lock for all "
                "of them would let only one transfer run at a time)")
            assert not locked[2], (
                "one lock was held at every write of the balances, by every thread: the transfers ran one at a "
                "time. Take only the two accounts' locks (one lock per account), in one global order")


# --- parallel_sum ----------------------------------------------------------------------------
def test_parallel_sum_errors(parallel_sum):
    """n_workers < 1 raises ValueError; an empty list of chunks sums to 0"""
    with raises_value_error("parallel_sum([[1.0]], 0)"):
        parallel_sum([[1.0]], 0)
    assert exact_float(parallel_sum([], 2), "parallel_sum([], 2)") == 0.0, "an empty list of chunks sums to 0.0"


@timeout(120)
def test_parallel_sum_value(parallel_sum):
    """equals the sum of all numbers, for lists and arrays, with 1 worker and with more than the cores

    False failure of a correct answer: 0 while the machine makes progress.
    Summing <= 3,600 doubles in any order errs by at most
    3600 * 1.1e-16 * sum|x| = 4e-13 * sum|x|, under the 1e-9 * sum|x| allowed;
    process starts are counted exactly. That the partial sums ran in other
    processes is also seen from outside: the judge, reading /proc every 2 ms,
    must see min(n_workers, 2) new processes in the student's process tree
    during a call (a call in which it sees fewer is tried again, up to 3 times,
    with the same chunks, then the check is undecided: never passed), or as many
    idle workers of a pool the answer keeps between calls (the notebook's visible
    test may have started it) run during the call (reused_workers).
    """
    import numpy as np
    for n_workers in (1, 2, 2 * (os.cpu_count() or 1) + 1):
        chunks = [[random.uniform(-100, 100) for _ in range(random.randint(0, 400))]
                  for _ in range(random.randint(4, 9))]
        chunks[1] = np.array(chunks[1])
        expected = math.fsum(float(x) for chunk in chunks for x in chunk)
        wanted = min(n_workers, 2)
        for _ in range(3):
            with reused_workers() as woken:  # a pool of the answer's own, kept from an earlier call
                (got, counts), fresh = _watched_counting(parallel_sum, chunks, n_workers)
            got = exact_float(got, "the sum")
            assert abs(got - expected) <= 1e-9 * max(1.0, sum(abs(float(x)) for c in chunks for x in c)), (
                f"the sum is wrong: {got!r}, expected {expected!r} (is every chunk summed, once?)")
            assert counts["process start"] >= wanted or len(woken.pids) >= wanted, (
                f"with n_workers={n_workers}, the partial sums should be computed in worker processes")
            if len(fresh) >= wanted or len(woken.pids) >= wanted:
                break
        else:  # the answer's own evidence held; only the judge's view missed: undecided
            pytest.skip(f"with n_workers={n_workers}, the partial sums should be computed in "
                                 f"{wanted} worker process(es), but only {len(fresh)} new process(es) "
                                 "appeared while the function ran")


@timeout(120)
def test_parallel_sum_summed_in_the_workers(parallel_sum):
    """the partial sums are computed in the worker processes, from the numbers sent to them

    False failure of a correct answer: 0. While the call runs, every number of the chunks on its way
    from the calling process to a worker gets a shift h, a random number the answer cannot know (see
    _shifted_call): in multiprocessing's messages (pool and executor tasks, queues, pipes, managers),
    in joblib's loky queues, in the attributes of each Process started (its arguments: a forked child
    sees them shifted, a spawned one receives them so), and in the chunks a forked child inherits.
    However the numbers travel, each is summed once, in a worker: a correct answer returns
    S + h * N (S the sum of the chunks, N how many numbers they hold), within the 1e-9 * sum|x + h|
    allowed (the order of summation errs by far less). A sum made in the calling process, whatever
    the workers did meanwhile, is S: it fails. Any other result (numbers sent by a way not watched,
    or a float of the answer's own shifted too) is undecided, never passed. (Numbers handed over
    through shared memory, which the exercise rules out, or packed into bytes first, would reach
    the workers unshifted and fail too: no answer in the catalogue or the notebook does either.)
    """
    import numpy as np
    chunks = [[random.uniform(-100, 100) for _ in range(random.randint(50, 200))] for _ in range(random.randint(4, 7))]
    chunks[1] = np.array(chunks[1])
    shift = float(random.randint(1_000, 100_000))
    numbers = [float(x) for chunk in chunks for x in chunk]
    plain, shifted = math.fsum(numbers), math.fsum(x + shift for x in numbers)
    allowed = 1e-9 * math.fsum(abs(x + shift) for x in numbers)
    how, got = there(_shifted_call, parallel_sum, chunks, 2, shift, 60)
    if isinstance(got, (np.floating, np.integer)):  # NumPy's float64 too (np.sum)
        got = float(got)
    if how == "returned" and type(got) in (float, int) and abs(got - plain) <= allowed:
        raise AssertionError(
            "the sum returned is not made of partial sums that worker processes computed from the chunks "
            "sent to them (was it made in the calling process?): send each chunk to a worker, which sums "
            "it, and add up the partial sums that come back")
    if not (how == "returned" and type(got) in (float, int) and abs(got - shifted) <= allowed):
        pytest.skip(f"with the numbers sent to the workers shifted, the call could not be judged ({how})")


def _shift(value, shift, depth=0):
    """A copy of `value` with `shift` added to every number of the runs of numbers in it (lists and
    tuples of 2 numbers or more, at least one a float; float arrays, NumPy's or array's, of 2 or
    more: an answer may cut the chunks into pieces as small as it likes), which it holds
    in lists, tuples, dicts, partials, and the objects that concurrent.futures and joblib wrap calls
    in; `value` itself where it holds none. A number on its own (a time to wait, say) is left as it
    is: the check's chunks hold 50 numbers or more."""
    import functools
    import numpy as np
    import array
    kind = type(value)
    if depth > 8:
        return value
    if kind is np.ndarray:
        return value + shift if value.dtype.kind == "f" and value.size >= 2 else value
    if kind is array.array:
        return array.array(value.typecode, (x + shift for x in value)) if value.typecode in "fd" and len(value) >= 2 else value
    if kind in (list, tuple):
        if len(value) >= 2 and all(type(x) in (int, float) or isinstance(x, np.floating) for x in value) and any(
                isinstance(x, float) for x in value):
            return kind(x + shift for x in value)
        items = [_shift(item, shift, depth + 1) for item in value]
        return value if all(a is b for a, b in zip(items, value)) else kind(items)
    if kind is dict:
        items = {key: _shift(item, shift, depth + 1) for key, item in value.items()}
        return value if all(items[key] is item for key, item in value.items()) else items
    if kind is functools.partial:
        args, keywords = _shift(value.args, shift, depth + 1), _shift(value.keywords, shift, depth + 1)
        if args is value.args and keywords is value.keywords:
            return value
        return functools.partial(value.func, *args, **keywords)
    if kind.__module__.split(".")[0] in ("concurrent", "joblib") and type(getattr(value, "__dict__", None)) is dict:
        fields = _shift(vars(value), shift, depth + 1)
        if fields is vars(value):
            return value
        copy = object.__new__(kind)
        copy.__dict__.update(fields)
        return copy
    return value


# The parts of a Process object that multiprocessing itself keeps; the rest (the target, its arguments,
# a subclass's attributes) is what the child runs on.
_PROCESS_OWN = {"_config", "_parent_pid", "_parent_name", "_popen", "_closed", "_identity", "_name"}


def _shifted_call(fn, chunks, n_workers, shift, seconds):
    """(in the student's process) fn(chunks, n_workers) with every float on its way to a worker process
    shifted by `shift` (test_parallel_sum_summed_in_the_workers): ("returned", value), ("raised",
    None) or ("waiting", None) after `seconds`."""
    import pickle
    from multiprocessing import reduction

    import numpy as np
    caller, box = os.getpid(), {}
    real_dumps, real_start = reduction.ForkingPickler.__dict__["dumps"], multiprocessing.process.BaseProcess.start
    loky = sys.modules.get("joblib.externals.loky.backend.queues")
    loky_dumps = getattr(loky, "dumps", None)
    joblib_pickler = getattr(sys.modules.get("joblib.pool"), "CustomizablePickler", None)  # its multiprocessing backend

    def dumps(cls, obj, protocol=None):  # in the calling process only: a worker's results go back as they are
        return real_dumps.__func__(cls, _shift(obj, shift) if os.getpid() == caller else obj, protocol)

    def loky_shifted(obj, *a, **k):
        return loky_dumps(_shift(obj, shift) if os.getpid() == caller else obj, *a, **k)

    def pickler_dump(self, obj):
        return pickle.Pickler.dump(self, _shift(obj, shift) if os.getpid() == caller else obj)

    def start(self, *a, **k):
        saved = {name: v for name, v in vars(self).items() if name not in _PROCESS_OWN}
        vars(self).update({name: _shift(v, shift) for name, v in saved.items()})
        try:
            return real_start(self, *a, **k)
        finally:
            vars(self).update(saved)

    def in_child():  # a forked child (a bare fork too) inherits the chunks themselves: shift them there
        for chunk in chunks:
            if type(chunk) is np.ndarray:
                chunk += shift
            elif type(chunk) is list:
                chunk[:] = [x + shift for x in chunk]

    def call():
        try:
            box["returned"] = fn(chunks, n_workers)
        except Exception:  # noqa: BLE001 (judged by the other checks)
            box["raised"] = None

    forks = getattr(os, "_course_in_forked_child", None)
    if forks is None:  # one hook for the process's life (a fork hook cannot be removed), switched per call
        forks = os._course_in_forked_child = {"active": None}
        os.register_at_fork(after_in_child=lambda: forks["active"] and forks["active"]())
    reduction.ForkingPickler.dumps, multiprocessing.process.BaseProcess.start = classmethod(dumps), start
    if loky_dumps is not None:
        loky.dumps = loky_shifted
    if joblib_pickler is not None:
        joblib_pickler.dump = pickler_dump
    forks["active"] = in_child
    try:
        caller_thread = threading.Thread(target=call, daemon=True)
        caller_thread.start()
        caller_thread.join(seconds)
    finally:
        forks["active"] = None
        reduction.ForkingPickler.dumps, multiprocessing.process.BaseProcess.start = real_dumps, real_start
        if loky_dumps is not None:
            loky.dumps = loky_dumps
        if joblib_pickler is not None:
            del joblib_pickler.dump
    if caller_thread.is_alive():
        return "waiting", None
    return ("returned", box["returned"]) if "returned" in box else ("raised", None)


@timeout(120)
def test_parallel_sum_under_spawn(parallel_sum):
    """works under the spawn start method too (macOS, Windows): the workers run nothing defined in the notebook

    False failure of a correct answer: 0 (see _support.works_under_spawn).
    """
    chunks = [[random.randint(-1000, 1000) for _ in range(20)] for _ in range(3)]
    got = exact_float(works_under_spawn(parallel_sum, chunks, 2), "the sum")
    assert got == sum(map(sum, chunks)), "under the spawn start method the sum is wrong"
