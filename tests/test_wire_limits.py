"""What a reply from the student's process may expand to in the judge (autograder/sandbox/wire.py).

The judge runs as root outside the sandbox, with no memory cap, and the student's process writes
its replies itself. A frame is at most wire.MAX_FRAME bytes, but pickle's memo lets it name one
value any number of times, and an index in it sizes the memo's table: each test builds such a
frame as an adversary would (red team, exp2: one 50 MiB array named 40 times made the judge
resident at 2272 MiB) and shows that it is refused before the judge allocates what it asks for,
that the refusal fails the answer, and that the largest honest replies still travel.
"""
import collections
import gc
import os
import pickle
import struct
import tempfile
import textwrap
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder import hidden
from autograder.sandbox import wire

MiB = 1 << 20


@contextmanager
def _allocated():
    """The most memory (bytes, traced by tracemalloc: Python's and NumPy's allocators, the memo's
    table of the C unpickler) that the block allocated at once beyond what it started with."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    box = {}
    try:
        yield box
    finally:
        box["peak"] = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()


def _frame(value):
    """The frame the student's process writes for the reply `("ok", value)`."""
    return pickle.dumps(("ok", value), protocol=5)


def _never(data):
    pytest.fail("a handle")


def _refused_by_the_reply(err):
    """The refusal is the answer's: hidden.run takes it for the student's process's error."""
    assert not hidden.raised_by_the_check(err)
    assert hidden._failure_message(err).startswith("your code raised ")
    return True


# --- the bomb: one buffer named many times ---------------------------------------------------------
def test_one_array_named_many_times_is_refused_before_anything_is_built():
    """exp2's frame, scaled down: an 8 MiB array named 160 times asks 1.25 GiB of a 8 MiB frame."""
    big = bytes(8 * MiB)
    leaf = ("ndarray", "|u1", [len(big)], big)
    data = _frame(("list", [leaf] * 160))
    assert len(data) < 9 * MiB
    message = wire.load_untrusted(data)
    with _allocated() as seen, pytest.raises(ValueError, match="more than 1024 MiB") as refused:
        wire.decode(message[1], _never)
    assert seen["peak"] < MiB, f"decode allocated {seen['peak'] / MiB:.1f} MiB before it refused"
    assert _refused_by_the_reply(refused.value)


def test_every_reference_counts_against_the_limit_including_tensors_and_gradients():
    raw = bytes(16 * MiB)
    tensor = ("tensor", "float32", [len(raw) // 4], raw, True, "cpu", False, None)
    with_grad = ("tensor", "float32", [len(raw) // 4], raw, True, "cpu", True, tensor)
    state = ("OrderedDict", [(f"layer{i}.weight", with_grad) for i in range(40)])  # 40 x 2 x 16 MiB
    message = wire.load_untrusted(_frame(state))
    with _allocated() as seen, pytest.raises(ValueError, match="refused"):
        wire.decode(message[1], _never)
    assert seen["peak"] < MiB
    # Under the limit, shared references are rebuilt as values of their own, as before.
    small = wire.decode(wire.load_untrusted(_frame(("list", [with_grad] * 3)))[1], _never)
    assert len(small) == 3 and small[0] is not small[1] and torch.equal(small[2].grad, small[0])


def test_data_that_is_a_number_is_not_a_size_to_allocate():
    """bytes(n) of an int is n zero bytes: an array's or a tensor's data must be bytes."""
    for value in (("ndarray", "|u1", [1 << 34], 1 << 34), ("npscalar", "<f8", 1 << 34),
                  ("tensor", "uint8", [1 << 34], 1 << 34, False, "cpu", False, None),
                  ("ndarray", "|S0", [1 << 40], b""), ("tensor", "uint8", [0, 1 << 62, 1 << 62], b"",
                                                         False, "cpu", False, None)):
        with _allocated() as seen, pytest.raises(ValueError, match="refused"):
            wire.decode(wire.load_untrusted(_frame(value))[1], _never)
        assert seen["peak"] < MiB


def test_a_memo_index_the_frame_chooses_is_refused_before_unpickling():
    """A 12-byte frame with LONG_BINPUT 2**27 made the C unpickler size its memo for 2 GiB."""
    data = b"\x80\x05N" + b"r" + struct.pack("<I", 1 << 27) + b"."
    with _allocated() as seen, pytest.raises(pickle.UnpicklingError, match="opcode") as refused:
        wire.load_untrusted(data)
    assert seen["peak"] < MiB
    assert _refused_by_the_reply(refused.value)
    # Text opcodes that no protocol-5 pickle of plain data holds, and globals, are refused too.
    for data in (b"\x80\x05I" + b"9" * 5000 + b"\n.", pickle.dumps(collections.OrderedDict(), protocol=5),
                 b"\x80\x05c" + b"os\nsystem\n."):
        with pytest.raises(pickle.UnpicklingError):
            wire.load_untrusted(data)


def test_a_frame_of_too_many_opcodes_is_refused_before_unpickling(monkeypatch):
    """Each opcode builds an object of up to a few hundred bytes: their number is bounded."""
    def many(n):
        return b"\x80\x05]" + b"(" + b"}" * n + b"e."  # a list of n empty dicts: 64 bytes a byte
    start = time.monotonic()
    with pytest.raises(pickle.UnpicklingError, match="opcodes"):
        wire.load_untrusted(many(wire.MAX_OPCODES))
    assert time.monotonic() - start < 20  # the walk is bounded (under a second on a quiet core)
    monkeypatch.setattr(wire, "MAX_OPCODES", 100_000)  # the same, smaller, measured (tracemalloc is slow)
    with _allocated() as seen, pytest.raises(pickle.UnpicklingError, match="opcodes"):
        wire.load_untrusted(many(100_000))
    assert seen["peak"] < MiB
    assert len(wire.load_untrusted(many(100_000 - 5))) == 100_000 - 5
    with pytest.raises(pickle.UnpicklingError):  # a truncated frame, a missing memo entry
        wire.load_untrusted(_frame([1, 2, 3])[:-4])
    with pytest.raises(pickle.UnpicklingError):
        wire.load_untrusted(b"\x80\x05h\x07.")


# --- nesting and counts ----------------------------------------------------------------------------
def _nested(depth, tag="list"):
    value = 0
    for _ in range(depth):
        value = (tag, [("k", value)]) if tag == "dict" else (tag, [value])
    return value


@pytest.mark.parametrize("tag", ["list", "dict", "tuple"])
def test_deep_nesting_is_refused_without_recursing(tag):
    # A frame builds any depth without recursion (the unpickler is iterative); decode is refused
    # at wire.MAX_DECODED_DEPTH before its recursive rebuilding starts, whatever the depth.
    assert wire.decode(_nested(wire.MAX_DECODED_DEPTH - 1, tag), _never) is not None
    for depth in (wire.MAX_DECODED_DEPTH + 1, 200_000):
        with pytest.raises(ValueError, match="nested more than"):
            wire.decode(_nested(depth, tag), _never)
    tensor = ("tensor", "float32", [1], b"\x00" * 4, True, "cpu", False, None)
    for _ in range(wire.MAX_DECODED_DEPTH + 1):  # a gradient's gradient's gradient...
        tensor = tensor[:7] + (tensor,)
    with pytest.raises(ValueError, match="nested more than"):
        wire.decode(tensor, _never)


def test_shared_containers_cannot_multiply_values(monkeypatch):
    """A list that names a list ten times, twelve levels deep, stands for 10**12 values: the walk
    that counts them stops at the limit, in bounded time and memory. The list is walked to the
    real limit; the other kinds, which take the same path, to a limit of 10,000 (a second each
    under tracemalloc otherwise)."""
    value = ("list", [0] * 10)
    for _ in range(12):
        value = ("list", [value] * 10)
    for tag in ("list", "dict", "set", "slice"):
        if tag != "list":
            monkeypatch.setattr(wire, "MAX_DECODED_VALUES", 10_000)
        level = {"list": value, "dict": ("dict", [(i, value) for i in range(10)]),
                 "set": ("set", [value] * 10), "slice": ("slice", value, value, value)}[tag]
        message = wire.load_untrusted(_frame(level))
        start = time.monotonic()
        too_many = f"more than {wire.MAX_DECODED_VALUES} values"
        with _allocated() as seen, pytest.raises(ValueError, match=too_many):
            wire.decode(message[1], _never)
        assert time.monotonic() - start < 30
        assert seen["peak"] < 4 * MiB


def test_a_list_too_long_is_refused_before_it_is_walked():
    """Measured on 2 cores: the refusal costs 0.1 ms of this thread's CPU; decoding a list just
    under the limit, 0.18 s (1 s under tracemalloc, which is why the time is taken apart). CPU
    time, not wall time: a loaded machine stretched the wall time of the refusal past a second."""
    message = wire.load_untrusted(_frame(("list", [None] * (wire.MAX_DECODED_VALUES + 1))))
    start = time.thread_time()
    with pytest.raises(ValueError, match="values in one reply"):
        wire.decode(message[1], _never)
    assert time.thread_time() - start < 0.05
    with _allocated() as seen, pytest.raises(ValueError, match="values in one reply"):
        wire.decode(message[1], _never)
    assert seen["peak"] < MiB


def test_malformed_parts_are_refused_as_the_replys_fault():
    for value in (("list", "a string to iterate"), ("dict", [(1, 2, 3)]), ("set", [("list", [])]),
                  ("ndarray", "<f8", [2], b"\x00" * 8), ("ndarray", "<f8", [-1], b""),
                  ("ndarray", "O", [1], b"\x00" * 8), ("npdtype", "(1000000,)u1"),
                  ("tensor", "float32", [1], b"\x00" * 4, False, "no such device", False, None),
                  ("tensor", "float32", [1], b"\x00" * 4, False, "cpu", False, ("list", [])),
                  ("complex", "1", 2.0), ("range", 0, 2.5, 1), ("ref", 1, [object], True), ("bogus",), ()):
        with pytest.raises(ValueError, match="refused") as refused:
            wire.decode(value, lambda d: pytest.fail("a handle"))
        assert _refused_by_the_reply(refused.value)


# --- honest replies ----------------------------------------------------------------------------------
def _round_trip(value):
    data = wire.dump_plain(("ok", wire.encode(value, keep=lambda obj: pytest.fail(f"kept {obj!r}"))))
    return wire.decode(wire.load_untrusted(data)[1], remote=_never)


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
                and a.requires_grad == b.requires_grad)
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_the_largest_honest_replies_still_travel():
    """What the checks send back, far larger: model state dicts (09, 12), matrices (06), results
    named twice, long lists; the checks' own largest reply, measured, is 1.5 MB, 363 values."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512),
                                torch.nn.BatchNorm1d(512))
    model(torch.randn(4, 512)).sum().backward()
    params = list(model.parameters())
    matrix = np.random.default_rng(0).standard_normal((2000, 2000))  # 32 MB
    shared = np.arange(1 << 20, dtype=np.float32)
    values = [model.state_dict(), {name: p.grad for name, p in model.named_parameters()}, params[0],
              matrix, {"blocks": [matrix[:1000], matrix[1000:]], "same": [shared, shared, shared]},
              list(range(200_000)), {i: float(i) for i in range(50_000)},
              collections.Counter("mississippi" * 99),
              np.zeros((0, 3)), torch.zeros(0, 2), np.array(["ab", "c"]), np.datetime64("2026-01-01"),
              torch.tensor(1.5, dtype=torch.bfloat16), torch.Size([2, 3]), torch.device("cpu"), 1 + 2j,
              (np.float32(1.5), np.int64(7), np.dtype("<M8[ns]")), range(3), slice(1, None), Ellipsis]
    for value in values:
        assert _same(value, _round_trip(value)), type(value)
    back = _round_trip(params[0])
    assert type(back) is torch.nn.Parameter and torch.equal(back.grad, params[0].grad)
    # Far past any check's reply, named once: a 128 MiB array decodes.
    big = np.ones(128 * MiB // 8)
    assert np.array_equal(_round_trip([big, "and a label"])[0], big)


# --- end to end: a student's process that writes the bomb itself ----------------------------------
def _student(body):
    from autograder.pipeline.judge import StudentProcess
    folder = Path(tempfile.mkdtemp(prefix="course-judge-test-"))
    code = ("from autograder.sandbox.student import Server; import sys, os\n"
            "def main():\n    ns = {}\n" + f"    exec({textwrap.dedent(body)!r}, ns)\n"
            "    s = Server(int(sys.argv[1]), int(sys.argv[2]), ns)\n"
            "    s.send(('loaded', {}, []))\n    s.serve()\n    os._exit(0)\n")
    (folder / "wire_bomb_student.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}
    return folder, StudentProcess.start("wire_bomb_student:main", env=env)


def test_a_student_process_that_writes_the_bomb_fails_the_answer(monkeypatch):
    """The answer's own process writes the frame (as exp2 does): the check fails the answer, as
    an error of the answer's (no reference solution is asked to settle it), and the judge never
    holds what the frame asks for."""
    folder, student = _student('''
        import gc, pickle
        from autograder.sandbox import student as student_side, wire
        def cpu_info():
            for obj in gc.get_objects():
                if isinstance(obj, student_side.Server):
                    big = bytes(8 << 20)
                    leaf = ("ndarray", "|u1", [len(big)], big)
                    wire.write_frame(obj.replies_fd, pickle.dumps(("ok", ("list", [leaf] * 200)), protocol=5))
                    obj.send = lambda message: None  # the reply is written already
            return 0
    ''')
    called = []

    def test_cpu_info(cpu_info):
        assert cpu_info() == 0

    monkeypatch.setattr(hidden, "checks_for", lambda a, e: [test_cpu_info])
    try:
        with student:
            with _allocated() as seen:
                [outcome] = hidden.run("any", "cpu_info", student.namespace(), session=student,
                                       reference=lambda a, e: called.append(e))
        assert not outcome.passed and not outcome.undecided and not called
        assert "refused" in outcome.message and "1024 MiB" in outcome.message
        # The 8 MiB frame, read and unpickled, is all the judge holds.
        assert seen["peak"] < 48 * MiB, f"the judge allocated {seen['peak'] / MiB:.0f} MiB"
    finally:
        import shutil
        shutil.rmtree(folder, ignore_errors=True)
