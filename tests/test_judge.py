"""The judge's boundary: what crosses from the student's process, and how it is read.

Each test plays the student's side as an adversary would (it controls everything
in that process, the server included) and shows that the judge reads only data.
"""
import collections
import contextlib
import itertools
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder import hidden
from autograder.checks._support import exact_float, exact_int, observe, plain_array, there
from autograder.sandbox import wire
from autograder.pipeline.judge import Remote, StudentError, StudentProcess, StudentProcessGone

SERVE = "from autograder.sandbox.student import Server; import sys, os\n"


_MODULES = []  # the folder of the students' modules, made on first use (not when pytest collects)
_made = itertools.count()


def _modules():
    if not _MODULES:
        _MODULES.append(tempfile.mkdtemp(prefix="course-judge-test-"))
    return _MODULES[0]


@pytest.fixture(scope="module", autouse=True)
def _remove_modules():
    yield
    while _MODULES:
        shutil.rmtree(_MODULES.pop(), ignore_errors=True)


def _student(body=""):
    """A student's process whose namespace is what `body` defines (run before serving)."""
    code = (SERVE + "def main():\n    ns = {}\n" + f"    exec({textwrap.dedent(body)!r}, ns)\n"
            "    s = Server(int(sys.argv[1]), int(sys.argv[2]), ns)\n"
            "    s.send(('loaded', {}, []))\n    s.serve()\n    os._exit(0)\n")
    name = f"judge_test_student_{next(_made)}"
    Path(_modules(), f"{name}.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_modules(), os.environ.get("PYTHONPATH", "")])}
    return StudentProcess.start(f"{name}:main", env=env)


VALUES = [None, True, 3, -2**70, 2.5, float("inf"), "text", b"\x00bytes", 1 + 2j, [1, [2, (3,)]], (4, 5),
          {"a": 1, 2: [3]}, {1, 2}, frozenset({3}), collections.OrderedDict(a=1), collections.Counter("aab"),
          range(2, 9, 3), slice(1, None, 2), Ellipsis,
          np.arange(12, dtype=np.int32).reshape(3, 4), np.float32(1.5), np.int64(7), np.dtype("<f8"),
          np.array(["ab", "c"]), np.zeros((0, 3)),
          torch.arange(6.0).reshape(2, 3), torch.tensor(3.5, dtype=torch.bfloat16), torch.zeros(0, 2),
          torch.nn.Parameter(torch.ones(2)), torch.float16, torch.device("cpu"), torch.Size([2, 3])]


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_values_round_trip_as_the_same_type(value):
    data = wire.load_untrusted(wire.dump_plain(wire.encode(value, keep=lambda obj: pytest.fail(f"kept {obj!r}"))))
    assert _same(value, wire.decode(data, remote=lambda d: pytest.fail("a handle")))


def test_gradients_travel_with_their_tensor():
    w = torch.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    back = wire.decode(wire.load_untrusted(wire.dump_plain(wire.encode(w, keep=None))), remote=None)
    assert back.requires_grad and torch.equal(back.grad, torch.full((3,), 2.0))


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/course-judge-owned",))


def test_a_frame_naming_any_global_is_refused():
    for payload in (pickle.dumps(_Evil()), pickle.dumps(collections.OrderedDict()), pickle.dumps(np.int64(1))):
        with pytest.raises(pickle.UnpicklingError):
            wire.load_untrusted(payload)
    assert not os.path.exists("/tmp/course-judge-owned")


@pytest.mark.parametrize("data", [("ndarray", "|O", [1], b"\x00" * 8), ("ndarray", "V8", [1], b"\x00" * 8),
                                  ("tensor", "qint8", [1], b"\x00", False, "cpu", False, None),
                                  ("tensor", "float32", [4], b"\x00" * 4, False, "cpu", False, None),
                                  ("bogus", 1), [1, 2], ("ref",)])
def test_malformed_or_unsafe_values_are_refused(data):
    with pytest.raises((ValueError, TypeError, RuntimeError)):
        wire.decode(data, remote=lambda d: Remote(None, d[1], d[2], d[3]))


def test_a_huge_frame_is_refused_before_it_is_read():
    r, w = os.pipe()
    os.write(w, struct.pack("!Q", wire.MAX_FRAME + 1))
    with pytest.raises(ValueError, match="larger"):
        wire.read_frame(r)
    os.close(r)
    os.close(w)


def test_calls_values_handles_and_errors():
    with _student('''
        import numpy as np, torch
        def add(a, b): return a + b
        class Counter:
            def __init__(self): self.n = 0
            def bump(self, k=1): self.n += k; return self.n
            def __len__(self): return self.n
        class AlwaysEqual(int):
            def __eq__(self, other): return True
        def sneaky(): return AlwaysEqual(5)
        import enum, fractions, typing
        class Kind(enum.StrEnum):
            IO = "io"
        class Mixed(str, enum.Enum):  # str() gives "Mixed.IO"; it holds "io"
            IO = "io"
        class Level(enum.IntEnum):
            HIGH = 3
        class Liar(str):
            def __eq__(self, other): return True
            def __hash__(self): return 0
            def __str__(self): return "io"
        class Heavy(float):
            def __float__(self): return 1e9
        def kinds(): return {"a": Kind.IO, "b": Mixed.IO, Liar("k"): Liar("x"), "n": Level.HIGH, "f": Heavy(0.5)}
        def fraction(): return fractions.Fraction(1, 2)
        import collections
        class Lazy(collections.OrderedDict):  # holds a decoy; its methods work the answer out when asked
            def __getitem__(self, key): return 4
            def values(self): return [4]
            def get(self, key, default=None): return 4
            def __iter__(self): return iter(["n"])
        class Listed(list):
            def __iter__(self): return iter([4, 4])
        class Pair(typing.NamedTuple):
            a: int
            b: str
        def containers(): return Lazy(n="decoy"), Listed([1, 2]), Pair(1, "x"), collections.Counter("aab")
        def mapped():  # an np.memmap the answer wrote into (its file's name gone, the mapping kept)
            import tempfile, os
            with tempfile.TemporaryDirectory() as folder:
                out = np.memmap(os.path.join(folder, "m"), dtype=float, shape=(2, 3), mode="w+")
                out[:] = np.arange(6).reshape(2, 3)
            return out
        class Lying(np.ndarray):
            def astype(self, *args, **kwargs): return np.zeros(self.shape)
        def lying(): return np.arange(3.0).view(Lying)
        def masked(): return np.ma.masked_array([1.0, 2.0], mask=[False, True])
        def model(): return torch.nn.Linear(2, 3)
        def fails(): raise KeyError("nope")
        def custom():
            class MyError(ValueError): pass
            raise MyError("custom")
        def undefined():
            class Undefined(ZeroDivisionError, ValueError): pass  # a ValueError second
            raise Undefined("no speedup")
        def skips():
            import pytest; pytest.skip("busy")
        def gen(n): yield from range(n)
    ''') as student:
        ns = student.namespace()
        assert ns["add"](2, 3) == 5 and type(ns["add"](2, 3)) is int
        assert np.array_equal(ns["add"](np.ones(2), 1), np.full(2, 2.0))
        counter = ns["Counter"]()
        assert counter.bump(4) == 4 and len(counter) == 4 and counter.n == 4
        # A str, int or float of the student's class travels as the value it holds (a StrEnum
        # member is a correct "io"), read without asking any of its methods.
        five = ns["sneaky"]()
        assert type(five) is int and five == 5 and five != 6
        assert ns["kinds"]() == {"a": "io", "b": "io", "k": "x", "n": 3, "f": 0.5}
        assert all(type(k) is str and type(v) in (str, int, float) for k, v in ns["kinds"]().items())
        # So does a list, tuple, set or dict of a subclass: its items, read by the builtin's own
        # methods (a dict subclass read through its methods after the call could work the answer out
        # only then, outside every check's watch).
        lazy, listed, pair, counter = ns["containers"]()
        assert type(lazy) is dict and lazy == {"n": "decoy"}
        assert type(listed) is list and listed == [1, 2] and type(pair) is tuple and pair == (1, "x")
        assert type(counter) is collections.Counter and counter == {"a": 2, "b": 1}
        half = ns["fraction"]()  # any other class stays there, and is no number here
        assert type(half) is Remote and half != 0.5
        with pytest.raises(AssertionError, match="got Fraction"):
            exact_int(half, "half")
        # An array of a subclass travels as the array it holds (ndarray's view: no method of its
        # own runs); a masked array does not, as its data alone is not its value.
        assert type(ns["mapped"]()) is np.ndarray and np.array_equal(ns["mapped"](), np.arange(6).reshape(2, 3))
        assert type(ns["lying"]()) is np.ndarray and np.array_equal(ns["lying"]().astype(float), [0, 1, 2])
        assert type(ns["masked"]()) is Remote
        with pytest.raises(AssertionError, match="got MaskedArray"):
            plain_array(ns["masked"](), "the result")
        linear = ns["model"]()
        assert isinstance(linear, torch.nn.Module) and type(linear) is Remote
        assert linear.weight.shape == (3, 2)
        with pytest.raises(KeyError):
            ns["fails"]()
        with pytest.raises(ValueError, match="custom"):
            ns["custom"]()
        # An exception of several builtin classes is each of them, as in the student's process
        # (it was rebuilt as the first alone: `except ValueError` missed it; a review).
        with pytest.raises(ValueError, match="no speedup") as raised:
            ns["undefined"]()
        assert isinstance(raised.value, ZeroDivisionError)
        with pytest.raises(StudentError, match="Skipped"):  # a student's skip is a failure, not "undecided"
            ns["skips"]()
        assert list(ns["gen"](4)) == [0, 1, 2, 3]
        with pytest.raises(NameError):
            ns["missing"]


def test_reading_a_result_runs_none_of_the_students_code():
    """What the student's process sends back is read after the answer's call, where no check
    watches: a class's metaclass (its __eq__, which `kind in (...)` would ask, its
    __getattribute__) and a class that says it is numpy's are asked nothing (a review's answers
    worked out their result there, with the helper the check forbade during the call)."""
    from autograder.sandbox.student import _class_names
    ran = []

    class Meta(type):
        def __eq__(cls, other):
            ran.append("__eq__")
            return type.__eq__(cls, other)
        __hash__ = type.__hash__

        def __getattribute__(cls, name):
            ran.append(name)
            return type.__getattribute__(cls, name)

    class Odd(metaclass=Meta):
        pass

    class Claims(np.int64):
        __module__ = "numpy"

        def tobytes(self, *args, **kwargs):
            ran.append("tobytes")
            return np.int64(5).tobytes()

    kept = []
    encoded = wire.encode({"odd": Odd(), "number": Claims(3), "nested": [Odd(), 2]},
                          keep=lambda obj: kept.append(obj) or ("ref", len(kept)))
    names = _class_names(Meta("Made", (), {}))
    assert ran == [], ran
    assert len(kept) == 3 and names[0].endswith(".Made") and names[1:] == ["builtins.object"]
    assert dict(encoded[1])["number"] == ("ref", 2)  # kept there, not read as numpy's


def test_a_numpy_of_the_students_own_in_sys_modules_reads_nothing(monkeypatch):
    """The student's process reads results with the numpy and torch it loaded before the answer's
    code ran: a module the answer put in sys.modules under numpy's name, whose ndarray is a class
    of its own, would otherwise have its array's `dtype` and `tobytes` asked after the call."""
    import types
    ran = []

    class Fake:
        @property
        def dtype(self):
            ran.append("dtype")
            return np.dtype(float)

        def tobytes(self):
            ran.append("tobytes")
            return b""

    monkeypatch.setattr(wire, "_TRUSTED", None)
    wire.remember_libraries()  # as the student's process does before the answer's code
    fake = types.ModuleType("numpy")
    fake.ndarray, fake.dtype, fake.sctypeDict = Fake, np.dtype, {}
    monkeypatch.setitem(sys.modules, "numpy", fake)
    kept = []
    encoded = wire.encode([Fake(), np.arange(2.0)], keep=lambda obj: kept.append(obj) or ("ref", len(kept)))
    assert ran == [] and encoded[1][0] == ("ref", 1) and encoded[1][1][0] == "ndarray", (ran, encoded)


def test_a_torch_mode_left_on_reads_no_tensor(monkeypatch):
    """A TorchFunctionMode the answer enters and leaves on sees every read of a tensor's attributes
    and methods, and can change what they say (a tensor "on the meta device" that never moved):
    the student's process refuses to send a tensor, or any result of code it ran, under one.
    torch.set_default_device's own mode, which only places new tensors, is no reason to refuse, as
    torch made it (an instance given a hook of its own lies as well as any mode)."""
    import types

    from torch.overrides import TorchFunctionMode

    from autograder.sandbox import student as student_side

    class OnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__self__", None) is torch._C.TensorBase.__dict__["device"]:
                return torch.device("meta")
            return func(*args, **(kwargs or {}))

    monkeypatch.setattr(wire, "_TRUSTED", None)
    wire.remember_libraries()
    sent = []
    server = student_side.Server(None, None, {})
    monkeypatch.setattr(server, "send", sent.append)
    torch.set_default_device("cpu")
    try:
        assert wire.lingering_modes() == []
        assert wire.encode(torch.ones(2), keep=None)[5] == "cpu"
        with OnMeta():
            assert torch.ones(1).device.type == "meta"  # the lie the reads would see
            assert wire.lingering_modes() == ["test_a_torch_mode_left_on_reads_no_tensor.<locals>.OnMeta"]
            with pytest.raises(wire.ModeLeftOn, match=r"left on what would see the grader read its results \(test_a_torch.*OnMeta\)"):
                wire.encode([torch.ones(2)], keep=None)
            with pytest.raises(wire.ModeLeftOn, match="left on"):
                server.reply("cpu", "run")  # what a check's code read in this process
            server.reply(["x"], "names")  # a name looked up: nothing read under the mode
        server.reply("cpu", "run")
        # set_default_device's own mode, given a lying hook of the answer's on the instance
        default = torch._C._get_function_stack_at(0)
        default.__torch_function__ = types.MethodType(OnMeta.__torch_function__, default)
        assert torch.ones(1).device.type == "meta" and wire.lingering_modes() == ["DeviceContext"]
    finally:
        torch.set_default_device(None)
    assert sent == [("ok", ("list", ["x"])), ("ok", "cpu")]


def test_a_patch_of_the_tensor_class_is_not_asked(monkeypatch):
    """A tensor is read through TensorBase's own C descriptors, taken before the answer's code ran:
    a property put on torch.Tensor (one that takes itself off once read leaves no trace for the
    tampering record) is not asked, by the wire or by a check's own reads in the student's process."""
    asked = []

    def on_meta(self):
        asked.append("device")
        return torch.device("meta")

    monkeypatch.setattr(wire, "_TRUSTED", None)
    wire.remember_libraries()
    monkeypatch.setattr(torch.Tensor, "device", property(on_meta), raising=False)
    assert torch.ones(1).device.type == "meta" and asked == ["device"]
    encoded = wire.encode(torch.ones(2), keep=None)
    assert encoded[0] == "tensor" and encoded[5] == "cpu"
    assert wire.tensor_attributes(torch.ones(2), "device")[0].type == "cpu"
    assert asked == ["device"]


def test_what_torch_would_ask_python_is_not_asked_when_a_tensor_is_read(monkeypatch):
    """A tensor is read with torch functions off, and its elements from its storage by address: a
    subclass whose __torch_function__ lies about the device (returned, or made by assigning
    __class__), a hook put on set_default_device's mode through its classes' __getattribute__,
    and a trace function left on (with sys.gettrace replaced) are not asked or are refused."""
    monkeypatch.setattr(wire, "_TRUSTED", None)
    wire.remember_libraries()

    class OnMeta(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if getattr(func, "__self__", None) is torch._C.TensorBase.__dict__["device"]:
                return torch.device("meta")
            return super().__torch_function__(func, types, args, kwargs or {})

    lying = torch.ones(2).as_subclass(OnMeta)
    assert lying.device.type == "meta"
    assert wire.tensor_attributes(lying, "device")[0].type == "cpu"
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import DeviceContext
    torch.set_default_device("cpu")
    try:
        for kind in (DeviceContext, TorchFunctionMode):
            monkeypatch.setattr(kind, "__getattribute__", object.__getattribute__, raising=False)
            assert wire.lingering_modes() == ["DeviceContext"], kind
            monkeypatch.delattr(kind, "__getattribute__")
            assert wire.lingering_modes() == []
    finally:
        torch.set_default_device(None)
    monkeypatch.setattr(sys, "gettrace", lambda: None)
    previous = sys.gettrace  # the replacement: the real one was taken when the wire was loaded
    sys.settrace(lambda *args: None)
    try:
        found = wire.lingering_modes()
    finally:
        sys.settrace(None)
    assert found == ["sys.settrace"] and previous() is None


def test_a_kernel_registered_for_an_operator_does_not_change_what_is_sent():
    """The elements' bytes come from the tensor's storage, not through torch's operators: a Python
    kernel an answer registers for aten::detach on the CPU (torch.library) is not called."""
    code = textwrap.dedent('''
        import torch
        from autograder.sandbox import wire
        wire.remember_libraries()
        called = []
        def lying_detach(t):
            called.append(1)
            return torch.full(t.shape, 7.0)
        library = torch.library.Library("aten", "IMPL")
        library.impl("detach", lying_detach, "CPU")
        assert float(torch.ones(2).detach()[0]) == 7.0 and called
        called.clear()
        sent = wire.decode(wire.encode(torch.ones(3), keep=None), None)
        print(sent.tolist(), len(called))
    ''')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "[1.0, 1.0, 1.0] 0", done.stdout


def test_values_refused_beside_the_answers_say_what_they_are():
    """Where the checks run beside the answers (the notebooks' hidden blocks), an array subclass is
    read through ndarray's view, a masked array refused, and a one-element array named as such."""
    class Lying(np.ndarray):
        def astype(self, *args, **kwargs):
            return np.zeros(self.shape)
    got = plain_array(np.arange(3.0).view(Lying), "the result")
    assert type(got) is np.ndarray and np.array_equal(got.astype(float), [0, 1, 2])
    with pytest.raises(AssertionError, match="got MaskedArray"):
        plain_array(np.ma.masked_array([1.0]), "the result")
    with pytest.raises(AssertionError, match=r"got ndarray \(a one-element array: return float\(x\) instead\)"):
        exact_float(np.array(0.5), "the fraction")


def test_functions_sent_over_run_there():
    with _student("def call(fn, x): return fn(x)") as student:
        hidden.STUDENT = student
        try:
            assert there(os.getpid) == student.pid != os.getpid()
            assert student.namespace()["call"](lambda x: (x * 2, os.getpid()), 21) == (42, student.pid)
        finally:
            hidden.STUDENT = None


def test_whose_code_raised_is_read_from_the_student_process_trace():
    """hidden.raised_by_the_check on errors from a real student's process. The answer's own code
    is the student's, also where the error comes from a library it called; the checks' code sent
    there by value (cloudpickle names its file "<dynamic-code>"), a library the check called there,
    and a call with arguments the answer's function does not take are the check's, and hidden.run
    settles those on the reference solution."""
    import json

    def whose(fn, *args):
        with pytest.raises(Exception) as raised:
            fn(*args)
        return "check" if hidden.raised_by_the_check(raised.value) else "student"

    with _student("import json\ndef parse(text): return json.loads(text)\ndef fails(): raise KeyError(1)") as student:
        hidden.STUDENT = student
        try:
            ns = student.namespace()
            assert whose(ns["fails"]) == "student"
            assert whose(ns["parse"], "{not json") == "student"
            pinned_child = hidden.load_checks("01_processes_threads")._pinned_child  # goes by value
            assert whose(there, pinned_child, None, None, None) == "check"
            assert whose(there, json.loads, "{not json") == "check"
            assert whose(ns["fails"], "an argument it does not take") == "check"
        finally:
            hidden.STUDENT = None


def test_the_reference_works_in_a_temp_folder_of_its_own_removed_when_it_stops():
    """The reference solutions run unsandboxed, so with the machine's /tmp: what their pools and
    forkservers leave there (a `pymp-*` folder each, since the process ends with os._exit) goes
    into a folder of the process's own, removed when it stops, as is one left by a process that died."""
    import tempfile
    from autograder.pipeline.judge import StudentProcess
    for ending in ("stop", "die"):
        session = StudentProcess.for_reference("01_processes_threads")
        hidden.STUDENT = session
        try:
            folder = session.temp_folder
            assert there(tempfile.gettempdir) == there(os.getcwd) == folder != tempfile.gettempdir()
            left = there(_start_a_forkserver)
            assert left.startswith(folder + os.sep), left
        finally:
            hidden.STUDENT = None
        if ending == "die":
            session.process.kill()
            session.process.wait()
        session.stop()
        assert not os.path.exists(folder), f"{folder} outlived its process ({ending})"


def _start_a_forkserver():
    """(in the reference's process) start its forkserver; the folder of its listening socket."""
    import multiprocessing.forkserver
    multiprocessing.forkserver.ensure_running()
    return os.path.dirname(multiprocessing.forkserver._forkserver._forkserver_address)


def test_a_student_process_that_lies_or_dies_fails_the_request():
    # The student's code patches its own server to reply with a pickle that runs a command.
    with _student('''
        import gc, os, pickle
        from autograder.sandbox import student as student_side, wire
        class Evil:
            def __reduce__(self): return (os.system, ("touch /tmp/course-judge-owned",))
        def evil():
            for obj in gc.get_objects():
                if isinstance(obj, student_side.Server):
                    obj.send = lambda message, server=obj: wire.write_frame(
                        server.replies_fd, pickle.dumps(("ok", Evil())))
            return 0
        def die(): os._exit(3)
    ''') as student:
        ns = student.namespace()
        with pytest.raises(pickle.UnpicklingError):
            ns["evil"]()
        assert not os.path.exists("/tmp/course-judge-owned")
    with _student("import os\ndef die(): os._exit(3)") as student:
        with pytest.raises(StudentProcessGone, match="exit code"):
            student.namespace()["die"]()


def test_a_check_that_overruns_stops_the_student_process(monkeypatch):
    with _student("import time\ndef hang(): time.sleep(60)") as student:
        def test_hang(hang):
            hang()
        test_hang.timeout = 1
        monkeypatch.setattr(hidden, "checks_for", lambda a, e: [test_hang, test_hang])
        outcomes = hidden.run("any", "hang", student.namespace(), session=student)
        assert [o.passed for o in outcomes] == [False, False]
        assert "did not finish" in outcomes[0].message and "not run" in outcomes[1].message
        assert student.broken and student.process.poll() is not None


# A spinner's own name, as it may set it (prctl PR_SET_NAME): bytes that are not UTF-8 once made
# the judge's reading of the tree raise, and the stop with it, before anything was killed.
SPINNERS = {"plain": "while True: pass",
            "named with bytes that are not UTF-8":
                "import ctypes; ctypes.CDLL(None).prctl(15, bytes([0xff, 0x29, 0xfe]), 0, 0, 0); any(iter(int, 1))"}


@pytest.mark.parametrize("spinner", SPINNERS)
def test_stopping_the_student_process_ends_what_it_started(spinner):
    # A spinning child and grandchild (as a forged answer starts at import): outside a sandbox
    # nothing else would end them, and they would take a core for the rest of the test run.
    with _student(f'''
        import os, subprocess, sys
        def family():
            child = subprocess.Popen([sys.executable, "-c",
                "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {SPINNERS[spinner]!r}]); "
                "time.sleep(600)"])
            return child.pid
    ''') as student:
        child = student.namespace()["family"]()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(_descendants(student.pid)) < 2:
            time.sleep(0.05)
        family = _descendants(student.pid)
        assert child in family and len(family) == 2
        while time.monotonic() < deadline and spinner != "plain" and not any(
                _name(pid).startswith(b"\xff") for pid in family):
            time.sleep(0.05)  # the stop is to meet the name, not the interpreter still starting
        assert spinner == "plain" or any(_name(pid).startswith(b"\xff") for pid in family)
    deadline = time.monotonic() + 10  # SIGKILL ends a process soon after it is sent, not at once
    while time.monotonic() < deadline and any(_alive(pid) for pid in family):
        time.sleep(0.05)
    for pid in family:
        assert not _alive(pid), f"process {pid} outlived the student's process"


def _descendants(pid):
    from autograder.pipeline.judge import ProcessTree
    return set(ProcessTree(pid).members()) - {pid}


def _name(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_bytes()
    except OSError:
        return b""


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state != b"Z"


def test_cpu_spent_in_children_is_seen_from_outside():
    """observe() reads /proc: CPU burnt in a child of the student's process is charged to its tree."""
    with _student('''
        import multiprocessing
        from helpers import workers
        def in_child(seconds):
            p = multiprocessing.get_context("fork").Process(target=workers.spin, args=(seconds,))
            p.start(); p.join()
        def here(seconds): workers.spin(seconds)
    ''') as student:
        hidden.STUDENT = student
        try:
            ns = student.namespace()
            with observe() as seen:
                ns["in_child"](0.4)
            assert seen.cpu >= 0.35 and seen.pids, (seen.cpu, seen.pids)
            with observe() as seen:
                time.sleep(0.3)
            assert seen.cpu < 0.1
        finally:
            hidden.STUDENT = None


def test_the_tree_is_read_whatever_a_process_calls_itself():
    """A process may name itself with any 15 bytes (prctl PR_SET_NAME): bytes that are not UTF-8,
    and a ')' that could end the name early for a careless parser. The judge still reads it, its
    CPU and its threads (pathlib's read_text raised UnicodeDecodeError on such a name)."""
    import subprocess
    from autograder.pipeline.judge import ProcessTree
    named = subprocess.Popen([sys.executable, "-c", textwrap.dedent('''
        import ctypes, threading, time
        ctypes.CDLL(None).prctl(15, b"\\xff) 9 R \\xfe(", 0, 0, 0)
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        print("named", flush=True)
        time.sleep(30)
    ''')], stdout=subprocess.PIPE, text=True)
    try:
        assert named.stdout.readline().strip() == "named"
        with open(f"/proc/{named.pid}/comm", "rb") as comm:
            assert comm.read().startswith(b"\xff) 9 R \xfe("), "the name was not set"
        members = ProcessTree(os.getpid()).members()
        assert members[named.pid]["ppid"] == os.getpid() and members[named.pid]["threads"] == 2, members
        assert ProcessTree(named.pid).cpu_seconds() > 0
        assert set(ProcessTree(named.pid).thread_states().values()) <= set("RSD"), "a state misread"
    finally:
        named.kill()
        named.wait()


def test_cpu_of_a_single_threaded_call_is_never_more_than_its_wall_time():
    """observe() reads the student's process's own CPU time from its CPU clock, not from /proc's
    ticks of 10 ms: a single thread that spins 50 ms was charged up to 1.2 s of CPU per second
    that way, and 02's check of two NumPy threads at once (CPU > 1.03 x wall) let a serial answer
    through. Holds under any load: one thread cannot run more than the wall time (the 5 % spare
    is for the request's own handling; /proc's ticks read up to 1.17)."""
    with _student('''
        from helpers import workers
        def here(seconds): workers.spin(seconds)
    ''') as student:
        hidden.STUDENT = student
        try:
            ns = student.namespace()
            ratios = []
            for _ in range(20):
                with observe() as seen:
                    ns["here"](0.05)
                ratios.append(seen.cpu / seen.wall)
            assert max(ratios) <= 1.05, [round(r, 3) for r in ratios]
        finally:
            hidden.STUDENT = None


def test_machine_use_sees_a_process_outside_the_student_and_the_judge():
    """machine_use() (02's quiet test) charges a process that is neither the student's nor the
    judge's to `others`, as busy as the machine may be: the outsider spins until it has used 0.5 s
    of CPU, and /proc/stat's ticks of 10 ms on 2 CPUs err by 0.04 s at most."""
    import subprocess

    from autograder.checks._support import machine_use
    spin = "import time\nwhile time.process_time() < 0.5: pass"
    with _student("") as student:
        hidden.STUDENT = student
        try:
            with machine_use() as use:
                subprocess.run([sys.executable, "-c", spin], check=True, timeout=120)
        finally:
            hidden.STUDENT = None
    assert use.others >= 0.45, use.others


def test_a_try_timed_while_others_ran_does_not_count(judge, monkeypatch):
    """02's check of two NumPy threads counts a try that shows no gain against the answer only when
    the machine was quiet meanwhile: with other processes busy (as machine_use() reports them),
    the answer is undecided, never failed; with a quiet machine it fails."""
    from autograder.checks import _support

    checks = hidden.load_checks("02_gil")
    # Threads that do nothing, and no gain: as a lock-serialised answer looks to the check, in no time.
    code = textwrap.dedent('''
        import threading
        def numpy_threads_speedup(n, n_threads):
            if n < 1 or n_threads < 1:
                raise ValueError("n and n_threads must be at least 1")
            threads = [threading.Thread(target=sum, args=([n],)) for _ in range(n_threads)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return 1.0
    ''')

    def verdict(others_per_second):
        @contextlib.contextmanager
        def machine_use():
            start = time.perf_counter()
            use = _support.MachineUse()
            yield use
            use.others = others_per_second * (time.perf_counter() - start)
        monkeypatch.setattr(checks, "machine_use", machine_use)
        monkeypatch.setattr(checks, "_own_numpy_speedup", lambda n: 2.0)  # our own threads always gain
        monkeypatch.setattr(checks, "usable_cores", lambda: 2)
        monkeypatch.setattr(checks, "there", lambda fn, *args: fn(*args))
        outcomes = judge("02_gil", "numpy_threads_speedup", code)
        gains = next(o for o in outcomes if o.check == "test_numpy_threads_speedup_gains")
        return "passed" if gains.passed else "undecided" if gains.undecided else "failed"

    assert verdict(1.5) == "undecided"
    assert verdict(0.0) == "failed"
    # Threads seen on two cores at once, with no gain (a job that memory limits, on a machine
    # whose cores share it): a try does not count, and the answer is undecided, never failed.
    monkeypatch.setattr(checks._BusyWatch, "cpu_side_by_side", lambda self, share=0.75: 1.0)
    assert verdict(0.0) == "undecided"


def test_a_speedup_beyond_our_own_threads_gain_does_not_pass(judge, monkeypatch):
    """02's check of two NumPy threads holds the reported speedup to what our own two threads gain
    right after, in the same process. The catalogued answer that reports the serial time of all 3
    repeats over the best threaded one (3 times its true gain) passed a quiet try in a fresh
    clone's part 3, where its threads gained little and it reported under 4.0, then the only
    ceiling. Here the answer runs a real serial and threaded job and reports a number chosen for
    our own gain, fixed at 1.1 or 1.2: 3.6 (3 times 1.2) fails as "beyond"; 2.4, under the
    ceiling of 2.5 but over twice our own 1.1, never passes (undecided); the old check passed
    both whenever the process ran its threads at once."""
    from autograder.checks import _support

    checks = hidden.load_checks("02_gil")
    code = textwrap.dedent('''
        import time
        from concurrent.futures import ThreadPoolExecutor
        import numpy as np
        from helpers.gil import numpy_chunk
        REPORT = {report}
        def numpy_threads_speedup(n, n_threads):
            if n < 1 or n_threads < 1:
                raise ValueError("n and n_threads must be at least 1")
            parts = np.array_split(np.random.default_rng(0).random(min(n, 1_000_000)), n_threads)
            for _ in range(3):
                [numpy_chunk(p) for p in parts]
            with ThreadPoolExecutor(n_threads) as pool:
                for _ in range(3):
                    list(pool.map(numpy_chunk, parts))
            return REPORT
    ''')

    @contextlib.contextmanager
    def quiet():
        yield _support.MachineUse()  # others' CPU: none

    def verdict(report, own):
        monkeypatch.setattr(checks, "machine_use", quiet)
        monkeypatch.setattr(checks, "_own_numpy_speedup", lambda n: own)
        monkeypatch.setattr(checks, "usable_cores", lambda: 2)
        monkeypatch.setattr(checks, "there", lambda fn, *args: fn(*args))
        outcomes = judge("02_gil", "numpy_threads_speedup", code.format(report=report))
        gains = next(o for o in outcomes if o.check == "test_numpy_threads_speedup_gains")
        return ("passed" if gains.passed else "undecided" if gains.undecided else "failed"), gains.message

    outcome, message = verdict(3.6, 1.2)
    assert outcome == "failed" and "far beyond what 2 threads can give" in message, (outcome, message)
    assert "gained 1.20" in message, message
    assert verdict(2.4, 1.1)[0] == "undecided"


_SMALL_TASKS = """
import numpy as np
from concurrent.futures import ProcessPoolExecutor
from helpers.pools import count_inside
from helpers.workers import mp_context
def monte_carlo_pi(n_samples, n_workers, seed):
    if n_samples < 1 or n_workers < 1:
        raise ValueError("n_samples and n_workers must be at least 1")
    sizes = [5_000] * (n_samples // 5_000) + ([n_samples % 5_000] if n_samples % 5_000 else [])
    seeds = np.random.SeedSequence(seed).spawn(len(sizes))
    with ProcessPoolExecutor(max_workers=n_workers, mp_context=mp_context()) as pool:
        {body}
    return 4 * hits / n_samples
"""


def test_a_caller_busy_handing_out_small_tasks_is_not_failed(judge):
    """05's checks read the calling process's CPU: an answer that counts its samples there spends
    the serial cost, twice the limit. A review's correct answer sent tasks of 5,000 samples through
    ProcessPoolExecutor.map, one message each, and its caller spent as much (0.37 to 0.54 s against
    0.40 to 0.54 s): it failed 5 gradings of 5. Where the workers spent 3/4 of the serial cost or
    more, it is undecided now. The same design whose caller also counts every sample itself (the
    workers' results thrown away) still never passes."""
    honest = _SMALL_TASKS.format(body="hits = sum(pool.map(count_inside, sizes, seeds))")
    both = _SMALL_TASKS.format(body="list(pool.map(count_inside, sizes, seeds))\n"
                                    "        hits = sum(count_inside(k, s) for k, s in zip(sizes, seeds))")

    def outcome(code):
        outcomes = judge("05_multiprocessing_pools", "monte_carlo_pi", code)
        check = next(o for o in outcomes if o.check == "test_monte_carlo_pi_in_workers")
        return ("passed" if check.passed else "undecided" if check.undecided else "failed"), check.message

    verdict, message = outcome(honest)
    assert verdict != "failed", message
    verdict, message = outcome(both)
    assert verdict != "passed", message


def test_work_that_cannot_be_attributed_does_not_hide_the_kernels_record():
    """06's evidence that joblib's tasks ran in workers: where a thread of the student's process
    ended during the call, its CPU time cannot be told apart and the call is undecided; but the
    kernel's record of the workers is still read, and an answer whose tasks ran in no thread
    started for the call fails (before, the check gave up at once, and a wrong answer went to a
    person in part 1 of a test run)."""
    import types

    checks = hidden.load_checks("06_joblib_vectorization")
    caller = os.getpid()  # no judge here: the student's process is this one
    work = types.SimpleNamespace(
        threads_cpu=types.SimpleNamespace(ended=True, seconds=0.0),
        process_cpu=types.SimpleNamespace(ended=False, seconds=5.0), allowance=0.2,
        puzzles=[], answers={}, decided=True,
        made=types.SimpleNamespace(thread_owners={}),  # the kernel saw no thread started
        notes=[(caller, threading.get_ident(), None)])  # every task noted the calling thread
    try:
        checks._ran_elsewhere(work, "cdist_joblib(..., n_jobs=3, prefer='threads')", "threads")
    except pytest.skip.Exception as undecided:
        pytest.fail(f"undecided, although the kernel's record fails the answer: {undecided}")
    except AssertionError as failed:
        assert "no task ran in a thread started for the call" in str(failed), failed
    else:
        pytest.fail("an answer whose tasks ran in the calling thread passed")
    work.made.thread_owners = {12345: (caller,)}
    work.notes = [(caller, 12345, None)]
    with pytest.raises(pytest.skip.Exception, match="cannot tell whose CPU time was whose"):
        checks._ran_elsewhere(work, "cdist_joblib(..., n_jobs=3, prefer='threads')", "threads")


def test_thread_runtimes_tell_the_working_thread_from_the_sleeping_one():
    """ProcessTree.thread_runtimes (06's evidence of which BLAS threads work): a thread that
    spins gains CPU time, one that sleeps gains next to none, each under its own id."""
    import threading

    from autograder.pipeline.judge import ProcessTree

    tree = ProcessTree(os.getpid())
    ids, stop = {}, threading.Event()

    def spin():
        ids["spinner"] = threading.get_native_id()
        while not stop.is_set():
            pass

    def sleep():
        ids["sleeper"] = threading.get_native_id()
        stop.wait()

    threads = [threading.Thread(target=spin), threading.Thread(target=sleep)]
    for thread in threads:
        thread.start()
    while len(ids) < 2:
        time.sleep(0.01)
    before = tree.thread_runtimes()
    if before is None:
        pytest.skip("this kernel keeps no per-thread scheduler statistics")
    deadline = time.monotonic() + 30  # a busy machine gives the spinner less of each second
    while True:
        time.sleep(0.05)
        after = tree.thread_runtimes()
        gained = {name: after[tid] - before[tid] for name, tid in ids.items()}
        if gained["spinner"] >= 100_000_000 or time.monotonic() > deadline:
            break
    stop.set()
    for thread in threads:
        thread.join()
    assert gained["spinner"] >= 100_000_000, gained
    assert gained["sleeper"] < 1_000_000, gained


def _in_a_child(body):
    """Run body() in a forked child; its exit status (a test's assertion in it: 1)."""
    import os
    pid = os.fork()
    if pid == 0:
        try:
            body()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.skipif(os.geteuid() != 0, reason="the grader as root")
def test_a_root_grader_without_a_pids_cgroup_still_caps_the_students_processes():
    """Without a pids cgroup, RLIMIT_NPROC is set even by root when the process will drop to a
    student's uid, where it counts (it was left unset: a fork bomb ran unbounded)."""
    import resource

    from autograder.sandbox import enter
    from autograder.sandbox.limits import Limits

    limits = Limits(uid=64000, cgroups={})

    def capped():
        enter._rlimits(limits)
        assert resource.getrlimit(resource.RLIMIT_NPROC)[1] == limits.max_processes + 512

    assert _in_a_child(capped) == 0


def test_student_code_sees_the_graders_gpus_only_when_asked_and_memory_is_in_a_cgroup():
    """By default student code sees no GPU (CUDA_VISIBLE_DEVICES empty), as on a grader without one:
    every grader judges alike, and no submission takes GPU memory from another. A grader that asks
    (GradingLimits.gpus) gets them only where a memory cgroup caps memory: under the address-space
    cap CUDA cannot start (on an H200 machine: no GPU seen under 8 GiB; one seen under 16 GiB, then
    "CUDA error: out of memory" at the first kernel, which failed correct GPU code)."""
    from autograder.sandbox import enter
    from autograder.sandbox.limits import Limits

    def entered(limits, hidden):
        def body():
            os.environ["CUDA_VISIBLE_DEVICES"] = "0"
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
            enter._rlimits(limits)
            assert (os.environ["CUDA_VISIBLE_DEVICES"] == "") is hidden
            assert (os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == "1") is hidden
        return body

    cgroup = {"memory": "/sys/fs/cgroup/course/s1"}
    assert _in_a_child(entered(Limits(cgroups=cgroup), True)) == 0
    assert _in_a_child(entered(Limits(cgroups={}), True)) == 0
    assert _in_a_child(entered(Limits(gpus=True, cgroups={}), True)) == 0
    assert _in_a_child(entered(Limits(gpus=True, memory_mb=16384, cgroups={}), True)) == 0
    assert _in_a_child(entered(Limits(gpus=True, cgroups=cgroup), False)) == 0


@pytest.mark.parametrize("value,gpus", [(None, False), ("0", False), ("1", True)])
def test_the_grading_configuration_passes_the_gpu_choice_to_the_sandbox(monkeypatch, value, gpus):
    """COURSE_GRADING_GPUS=1 in nbgrader_config.py (c.GradingLimits.gpus) reaches the limits each
    sandboxed process reads; unset, student code sees no GPU."""
    from traitlets.config.loader import PyFileConfigLoader

    from autograder import course
    from autograder.pipeline.preprocessors import GradingLimits
    from autograder.sandbox.limits import Limits
    if value is None:
        monkeypatch.delenv("COURSE_GRADING_GPUS", raising=False)
    else:
        monkeypatch.setenv("COURSE_GRADING_GPUS", value)
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.ROOT)).load_config()
    limits = GradingLimits(config=config).limits()
    assert limits.gpus is gpus
    assert Limits(**json.loads(limits.to_env())).gpus is gpus


def test_a_grader_that_cannot_cut_the_network_stops_before_student_code(monkeypatch):
    """A grader that drops to a student's uid (root, so it could) and cannot cut the network stops
    (it went on online); one that keeps its uid (not root) goes on, as the log says."""
    from autograder.sandbox import enter
    from autograder.sandbox.limits import Limits

    def refused():
        raise PermissionError("unshare refused")

    monkeypatch.setattr(enter, "cut_network", refused)
    assert _in_a_child(lambda: enter.isolate_network(Limits(uid=64000))) == 72
    assert _in_a_child(lambda: enter.isolate_network(Limits(uid=-1))) == 0
    assert _in_a_child(lambda: enter.isolate_network(Limits(uid=64000, network=True))) == 0


def test_the_pretended_gpu_is_seen_by_every_idiom_and_leaves_nothing_behind():
    """07's pretend() makes torch report CUDA and MPS to the calls the exercise names and to those
    PyTorch's documentation adds (the backends' is_built, torch.version.cuda, torch.accelerator):
    on this CPU-only build an `is_available() and is_built()` answer never saw the pretended
    device. Afterwards torch is as it was, for the next check in the same process."""
    checks = hidden.load_checks("07_pytorch_devices")
    names = [(torch.cuda, "is_available"), (torch.cuda, "device_count"), (torch.version, "cuda"),
             (torch.backends.cuda, "is_built"), (torch.backends.mps, "is_built"),
             (torch.backends.mps, "is_available"), (torch.accelerator, "is_available"),
             (torch.accelerator, "current_accelerator"), (torch.accelerator, "device_count"),
             (torch.cuda, "get_device_properties"), (torch.cuda, "get_device_name"),
             (torch.cuda, "get_device_capability")]
    before = [getattr(owner, name) for owner, name in names]
    with checks.pretend(cuda=True, count=2):
        assert torch.cuda.is_available() and torch.backends.cuda.is_built() and torch.version.cuda
        assert torch.cuda.device_count() == 2 and torch.accelerator.device_count() == 2
        assert torch.cuda.get_device_properties("cuda:1").total_memory > 0 and torch.cuda.get_device_name(0)
        with pytest.raises(AssertionError):
            torch.cuda.get_device_properties(torch.device("cuda", 2))
        assert torch.accelerator.current_accelerator() == torch.device("cuda")
        assert not (torch.backends.mps.is_available() or torch.backends.mps.is_built())
    with checks.pretend(mps=True):
        assert torch.backends.mps.is_available() and torch.backends.mps.is_built()
        assert not torch.cuda.is_available() and torch.accelerator.current_accelerator() == torch.device("mps")
    with checks.pretend():
        assert not torch.accelerator.is_available() and torch.accelerator.current_accelerator() is None
    assert [getattr(owner, name) for owner, name in names] == before


CHANNELS_LAST_FORGERIES = {
    # a plain contiguous copy; torch.Tensor's is_contiguous and stride lie once each, then put
    # themselves back (the tampering record, which looks afterwards, sees torch as it was)
    "self-undoing-patch": '''
        import torch
        def _once(name, lie):
            real = torch.Tensor.__dict__.get(name)
            def lying(self, *args, **kwargs):
                if real is None:
                    delattr(torch.Tensor, name)
                else:
                    setattr(torch.Tensor, name, real)
                return lie(self)
            setattr(torch.Tensor, name, lying)
        def to_channels_last(x):
            if not isinstance(x, torch.Tensor) or x.dim() != 4:
                raise ValueError("a 4-D tensor")
            n, c, h, w = x.shape
            _once("is_contiguous", lambda self: True)
            _once("stride", lambda self: (c * h * w, 1, w * c, c))
            return x.clone()
    ''',
    # a subclass whose __torch_function__ says it is stored channels last
    "lying-subclass": '''
        import torch
        class Claims(torch.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                name = getattr(func, "__name__", "")
                if name == "is_contiguous":
                    return True
                if name == "stride":
                    n, c, h, w = args[0].as_subclass(torch.Tensor).shape
                    return (c * h * w, 1, w * c, c)
                return super().__torch_function__(func, types, args, kwargs or {})
        def to_channels_last(x):
            if not isinstance(x, torch.Tensor) or x.dim() != 4:
                raise ValueError("a 4-D tensor")
            return x.clone().as_subclass(Claims)
    ''',
}


@pytest.mark.parametrize("forgery", sorted(CHANNELS_LAST_FORGERIES))
def test_a_layout_read_in_the_student_process_asks_nothing_of_the_answer(forgery):
    """07 to_channels_last's layout is read in the student's process after the call: through
    TensorBase's own methods with torch functions off and torch's channels-last format as loaded,
    and only of a plain tensor. A patch of torch.Tensor that lies once and undoes itself, and a
    subclass that lies, store nothing channels last and fail; a correct answer passes the same way."""
    checks = hidden.load_checks("07_pytorch_devices")
    prefix = "import torch\nfrom autograder.sandbox import wire\nwire.remember_libraries()\n"
    correct = '''
        import torch
        def to_channels_last(x):
            if not isinstance(x, torch.Tensor) or x.dim() != 4:
                raise ValueError("a 4-D tensor")
            return x.contiguous(memory_format=torch.channels_last)
    '''
    for body, passes in ((CHANNELS_LAST_FORGERIES[forgery], False), (correct, True)):
        with _student(prefix + textwrap.dedent(body)) as student:
            hidden.STUDENT = student
            try:
                answer = student.namespace()["to_channels_last"]
                if passes:
                    checks.test_to_channels_last_layout(answer)
                else:
                    with pytest.raises(AssertionError, match="must return a tensor|not stored channels last"):
                        checks.test_to_channels_last_layout(answer)
            finally:
                hidden.STUDENT = None


_CLAIMS_ROWS = '''
    import numpy as np
    import torch
    class Rows(torch.Tensor):
        """Says it has `claimed` rows; every operation runs on all of them."""
        claimed = None
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.Tensor.__len__:
                return cls.claimed
            return super().__torch_function__(func, types, args, kwargs or {})
    def shard_sizes(n, k):
        return [len(part) for part in np.array_split(np.arange(n), k)]
'''
ROW_FORGERIES = {
    # 09: one full pass per "shard", each saying it holds the shard's rows; the first one's gradient
    "09_data_parallel": ("sharded_gradient", "test_sharded_gradient_really_shards", _CLAIMS_ROWS + '''
    def sharded_gradient(model, loss_fn, X, y, n_shards):
        grads = None
        for size in shard_sizes(len(X), n_shards):
            Rows.claimed = size
            model.zero_grad()
            loss_fn(model(X.as_subclass(Rows)), y).backward()
            grads = grads or [p.grad.detach().clone().as_subclass(torch.Tensor) for p in model.parameters()]
        return grads
    '''),
    # 10: each stage runs the whole batch once per "micro-batch"; the last pass is the output
    "10_model_pipeline_parallel": ("pipeline_forward", "test_pipeline_forward_microbatches", _CLAIMS_ROWS + '''
    def pipeline_forward(stages, x, m):
        for size in shard_sizes(len(x), m):
            Rows.claimed = size
            h = x.as_subclass(Rows)
            for stage in stages:
                h = stage(h)
        return h.as_subclass(torch.Tensor)
    '''),
}


@pytest.mark.parametrize("assignment", sorted(ROW_FORGERIES))
def test_the_rows_a_hook_counts_are_not_asked_of_the_answer(assignment):
    """09 sharded_gradient's and 10 pipeline_forward's hooks count the rows each pass is given as
    torch keeps them (helpers.workers.plain_size): a tensor subclass that says it holds a shard's
    rows while every pass runs the whole batch fails, in words that say why."""
    exercise, check, body = ROW_FORGERIES[assignment]
    checks = hidden.load_checks(assignment)
    with _student("import torch\nfrom autograder.sandbox import wire\nwire.remember_libraries()\n"
                  + textwrap.dedent(body)) as student:
        hidden.STUDENT = student
        try:
            with pytest.raises(AssertionError, match="a tensor of a class of its own"):
                getattr(checks, check)(student.namespace()[exercise])
        finally:
            hidden.STUDENT = None
