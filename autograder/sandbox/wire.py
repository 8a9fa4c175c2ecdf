"""What crosses the boundary between the judge and the student's process.

The judge (autograder/pipeline/judge.py) runs the hidden checks; the student's
process (autograder/sandbox/student.py) runs the student's code and answers
the judge's requests. Everything the student's process sends is data from an
adversary, so it travels in a form that cannot run code when it is read:

- Values the checks compare (numbers, strings, containers, numpy arrays, torch
  tensors, dtypes, devices) are *encoded* by the student's side into builtin
  containers, strings, bytes and numbers, and rebuilt here by the judge from
  that data with the judge's own constructors (`decode`).
- Anything else stays in the student's process; the judge holds a numbered
  handle to it (a `Remote`, see judge.py).
- Frames are pickles read with an unpickler that resolves no global at all:
  a frame can only hold builtin containers, strings, bytes and numbers.

The judge's requests go the other way as ordinary (cloud)pickles: the student's
process may read whatever the judge sends.
"""
import collections
import io
import os
import pickle
import struct
import sys

MAX_FRAME = 1 << 30  # 1 GiB: a frame larger than this is refused, not allocated
_HEADER = struct.Struct("!Q")

# Exact types that travel as themselves.
PLAIN = (type(None), bool, int, float, str, bytes)
# numpy dtype kinds that are plain data (no Python objects, no structured records).
NUMPY_KINDS = set("biufcSUmM?")
TORCH_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                "bool", "complex64", "complex128")


# --- frames ------------------------------------------------------------------------------------
def write_frame(fd, data):
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd, n):
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd):
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    if size > MAX_FRAME:
        raise ValueError(f"a message of {size} bytes is larger than the {MAX_FRAME} allowed")
    return _read_exactly(fd, size)


class _DataOnly(pickle.Unpickler):
    """An unpickler for untrusted frames: no class, no function, no persistent id."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"a message from the student's process named {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("a message from the student's process used a persistent id")


# --- what a frame from the student's process may expand to ----------------------------------------
# A frame is at most MAX_FRAME bytes, but what it stands for can be far larger. Pickle's memo lets a
# frame name one value again and again for 2 to 5 bytes a time, and `decode` used to rebuild every
# such reference as a value of its own: one 50 MiB array named 40 times made the judge (root, no
# memory cap) allocate 2 GiB, and named 1000 times it would ask 50 GiB. Unpickling itself can be
# made to allocate too: a memo index of 2**27 in a 12-byte frame asks 2 GiB for the memo's table.
# So the judge checks, before it allocates anything, what a frame will become:
#
# - `load_untrusted` walks the frame's opcodes first: only those `dump_plain` writes (protocol 5:
#   the memo is filled by MEMOIZE, never by an index that the frame chooses), and at most
#   MAX_OPCODES of them. An opcode builds at most one object of a few hundred bytes besides the
#   bytes and strings that the frame itself carries, so unpickling costs at most a few times
#   MAX_FRAME.
# - `decode` walks the unpickled message before it builds anything and counts what each reference
#   will become, every time it is named (no sharing is trusted): the bytes of the arrays and tensors
#   and an estimate of the containers, at most MAX_DECODED_BYTES; the values, at most
#   MAX_DECODED_VALUES, which also bounds the time a hostile reply costs (the walk stops there); and
#   containers nested at most MAX_DECODED_DEPTH deep (the rebuilding is recursive).
#
# MAX_DECODED_BYTES is MAX_FRAME: an honest reply, which names every array once, rebuilds into
# about as much as its frame carries, so any frame the channel accepts unshared still decodes, and
# a hostile one costs the judge no more than the largest honest one. The checks' own replies are
# far below every limit (measured over every check's run on the reference solutions, judged: at
# most 1.5 MB of array data, 363 values, 11 levels deep in one reply).
MAX_DECODED_BYTES = MAX_FRAME
MAX_DECODED_VALUES = 1 << 20
MAX_DECODED_DEPTH = 100
# An honest reply writes 2 to 5 opcodes a value (an array, about 10): 4M opcodes still carry
# 10**4 times the checks' largest reply, and walking them takes about a second.
MAX_OPCODES = 4 * MAX_DECODED_VALUES

# Errors for a frame or a value refused here carry the trace of where they come from, as judge.py
# gives the errors raised in the student's process: hidden.raised_by_the_check reads it and fails
# the answer (it wrote the reply), instead of taking the error for the check's own (which would be
# settled on the reference solution) or the machine's (undecided).
_REPLY_TRACE = '  File "<a reply from the student\'s process>", line 1, in decode\n'


def _from_the_reply(err):
    err.student_traceback = _REPLY_TRACE
    return err


def _refused(why):
    return _from_the_reply(ValueError(f"the grader refused what your code's process sent back: {why}"))


def _opcode_table():
    import pickletools
    allowed = {"PROTO", "FRAME", "STOP", "MARK", "MEMOIZE", "BINGET", "LONG_BINGET",
               "NONE", "NEWTRUE", "NEWFALSE", "BININT", "BININT1", "BININT2", "LONG1", "LONG4", "BINFLOAT",
               "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8",
               "EMPTY_LIST", "APPEND", "APPENDS", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
               "EMPTY_DICT", "SETITEM", "SETITEMS"}
    # What follows each allowed opcode: a fixed count of bytes, or (size, signed) of a length that
    # precedes as many bytes.
    table = [None] * 256
    for op in pickletools.opcodes:
        if op.name in allowed:
            n = 0 if op.arg is None else op.arg.n
            table[ord(op.code)] = {pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
                                   pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
                                   pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
                                   pickletools.TAKEN_FROM_ARGUMENT8U: (8, False)}.get(n, n)
    return table


_OPCODES = _opcode_table()
_STOP = ord(pickle.STOP)


def _check_opcodes(data):
    """Refuse a frame with an opcode `dump_plain` does not write, or more than MAX_OPCODES."""
    pos, end, count, table = 0, len(data), 0, _OPCODES
    while pos < end:
        code = data[pos]
        follows = table[code]
        if follows is None:
            raise _from_the_reply(pickle.UnpicklingError(
                f"a message from the student's process used the pickle opcode {bytes([code])!r}, "
                "which plain data does not need"))
        count += 1
        if count > MAX_OPCODES:
            raise _from_the_reply(pickle.UnpicklingError(
                f"a message from the student's process of more than {MAX_OPCODES} pickle opcodes"))
        pos += 1
        if code == _STOP:
            return
        if type(follows) is tuple:
            size, signed = follows
            length = int.from_bytes(data[pos:pos + size], "little", signed=signed)
            if length < 0:
                raise _from_the_reply(pickle.UnpicklingError("a negative length in a message"))
            pos += size + length
        else:
            pos += follows


def load_untrusted(data):
    _check_opcodes(data)
    try:
        return _DataOnly(io.BytesIO(data)).load()
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 (a malformed frame: truncated, a missing memo entry...)
        if isinstance(err, pickle.UnpicklingError):
            raise _from_the_reply(err)
        raise _from_the_reply(pickle.UnpicklingError(
            f"a malformed message from the student's process ({type(err).__name__}: {err})")) from err


def dump_plain(obj):
    """Pickle a tree of builtin containers and plain values (the student's side's replies)."""
    return pickle.dumps(obj, protocol=5)


# --- the student's side: encode ----------------------------------------------------------------
# Encoding runs after the call it reports on, where no check watches: it must run none of the
# student's code (a lazy value could otherwise do then what the check forbids during the call).
# So a value's class is only compared by identity (`in` would ask a metaclass's __eq__), asked
# nothing by attribute (a metaclass's __getattribute__), and a value is read only by the methods
# of builtin, numpy or torch types that its class is exactly, or by a builtin base's own methods.
_TRUSTED = None  # {"numpy": module, "torch": module}: as loaded before the student's code ran


def remember_libraries():
    """Keep numpy and torch as loaded now, before the student's code runs: encode asks these, not
    sys.modules, whose entries that code could replace with modules of its own (an `ndarray` that is
    its class would then be read by its methods). A library not loaded now has no values here: what
    it makes stays in the student's process (its checks do not use it). torch's readers are taken
    now too (_TorchKit)."""
    global _TRUSTED
    _TRUSTED = {name: sys.modules[name] for name in ("numpy", "torch") if name in sys.modules}
    if "torch" in _TRUSTED:
        _torch_kit(_TRUSTED["torch"])


def _library(name):
    return sys.modules.get(name) if _TRUSTED is None else _TRUSTED.get(name)


class _TorchKit:
    """How the student's process reads a tensor, all taken before the student's code runs:
    torch's classes; the C descriptors and methods of `TensorBase` and `StorageBase` (types Python
    cannot change), called with torch functions off (`DisableTorchFunction`: neither a mode nor a
    subclass's `__torch_function__` is asked); and the elements' bytes read from the storage
    itself (ctypes), not through torch's operators, whose kernels Python code can replace
    (`torch.library`). A patch of `torch.Tensor`'s attributes, even one that undoes itself once
    read, is never asked either."""

    def __init__(self, torch):
        import ctypes

        import numpy
        from torch.overrides import TorchFunctionMode
        from torch.utils._device import DeviceContext
        base, storage = torch._C.TensorBase.__dict__, torch._C.StorageBase.__dict__
        self.numpy = numpy
        self.Tensor, self.Parameter, self.strided = torch.Tensor, torch.nn.Parameter, torch.strided
        self.dtype_type, self.device_type, self.size_type = torch.dtype, torch.device, torch.Size
        self.no_torch_function = torch._C.DisableTorchFunction
        self.get = {name: base[name].__get__ for name in
                    ("layout", "dtype", "is_meta", "shape", "requires_grad", "device", "grad", "is_leaf")}
        self.call = {name: base[name] for name in ("detach", "to", "contiguous", "stride", "storage_offset",
                                                   "element_size", "untyped_storage", "is_conj", "is_neg",
                                                   "is_contiguous")}
        self.channels_last = torch.channels_last
        self.storage = {name: storage[name] for name in ("data_ptr", "nbytes")}
        self.string_at = ctypes._string_at  # C; ctypes.string_at looks it up in ctypes' namespace
        self.function_modes = (torch._C._len_torch_function_stack, torch._C._get_function_stack_at)
        self.dispatch_modes = (torch._C._len_torch_dispatch_stack, torch._C._get_dispatch_stack_at)
        # The mode torch.set_default_device leaves on (it only places new tensors), as torch made
        # it: its class and its base's namespaces as they are now (torch asks the mode for its hook
        # by attribute: a __getattribute__ added to either would answer).
        self.default_device = DeviceContext
        self.default_device_classes = {kind: tuple(vars(kind).items()) for kind in (DeviceContext, TorchFunctionMode)}


_KITS = {}  # id(torch module) -> (module, _TorchKit)
_QUALNAME = type.__dict__["__qualname__"]
_GETTRACE, _GETPROFILE = sys.gettrace, sys.getprofile  # as this module was loaded: before the student's code


def _torch_kit(torch):
    held = _KITS.get(id(torch))
    if held is None or held[0] is not torch:
        held = _KITS[id(torch)] = (torch, _TorchKit(torch))
    return held[1]


def tensor_attributes(tensor, *names, during_call=False):
    """The attributes `names` (device, shape, dtype, ...) of a tensor, read through TensorBase's own
    descriptors with torch functions off: for checks that read a tensor in the student's process.
    After the answer's call nothing may be left on that would see the read (refuse_lingering_modes);
    during it (a hook of the check's that the answer's code runs), what the answer has on is its own
    business, and is not asked either."""
    if not during_call:
        refuse_lingering_modes()
    kit = _torch_kit(_library("torch"))
    with kit.no_torch_function():
        return tuple(kit.get[name](tensor) for name in names)


def tensor_layout(tensor):
    """(its strides, whether it is stored channels last) of a tensor returned by the answer, read
    as tensor_attributes reads (after the call: nothing may be left on), with torch's own
    channels-last format as it was loaded; None for a tensor of a class of its own."""
    refuse_lingering_modes()
    kit = _torch_kit(_library("torch"))
    if type(tensor) is not kit.Tensor and type(tensor) is not kit.Parameter:
        return None
    with kit.no_torch_function():
        return ([int(n) for n in kit.call["stride"](tensor)],
                bool(kit.call["is_contiguous"](tensor, memory_format=kit.channels_last)))


def lingering_modes():
    """What is on now that would see (and could change) what this process reads: torch modes, by
    class name, besides torch.set_default_device's as torch made it, and a trace or profile
    function (sys.settrace, sys.setprofile). None is, when a check reads a result, unless the
    student's code left it on."""
    found = [name for name, on in (("sys.settrace", _GETTRACE()), ("sys.setprofile", _GETPROFILE())) if on is not None]
    torch = _library("torch")
    if torch is None:
        return found
    kit = _torch_kit(torch)
    for (count, at), allowed in ((kit.function_modes, _default_device_mode), (kit.dispatch_modes, None)):
        for i in range(count()):
            mode = at(i)
            if allowed is None or not allowed(mode, kit):
                found.append(_QUALNAME.__get__(type(mode), type))
    return found


def _default_device_mode(mode, kit):
    """Whether `mode` is torch.set_default_device's, its classes and instance as torch made them."""
    if type(mode) is not kit.default_device:
        return False
    for kind, items in kit.default_device_classes.items():
        now = tuple(vars(kind).items())
        if len(now) != len(items) or any(a is not c or b is not d for (a, b), (c, d) in zip(now, items)):
            return False
    return set(object.__getattribute__(mode, "__dict__")) <= {"device", "prev_mode", "old_device"}


LEFT_ON = "your code left on what would see the grader read its results"


class ModeLeftOn(AssertionError):
    """A result refused because a torch mode (or a trace function) is left on: the check fails, in
    these words."""


def refuse_lingering_modes():
    """Raise ModeLeftOn if something is left on that would see the reads (lingering_modes)."""
    found = lingering_modes()
    if found:
        raise ModeLeftOn(f"{LEFT_ON} ({', '.join(map(str, found))}): "
                         "leave it before returning (a torch mode: enter it in a `with` block; sys.settrace or "
                         "sys.setprofile: set it back to None); the grader reads no result under it")


def _element_bytes(kit, tensor):
    """The bytes of a CPU tensor's elements, in row-major order, copied from its storage by
    address: no torch operator runs (torch's dispatcher would call a kernel the student's code
    registered for it). Strides that reach beyond the storage are refused."""
    call, np = kit.call, kit.numpy
    shape, strides = tuple(kit.get["shape"](tensor)), tuple(call["stride"](tensor))
    size, offset = call["element_size"](tensor), call["storage_offset"](tensor)
    if 0 in shape:
        return b""
    if call["is_conj"](tensor) or call["is_neg"](tensor) or offset < 0 or any(s < 0 for s in strides):
        raise TypeError("a tensor with a lazy conjugate, negation or negative strides cannot be sent; "
                        "return tensor.resolve_conj() or .clone()")
    last = offset + sum((n - 1) * s for n, s in zip(shape, strides))  # the last element's index
    storage = call["untyped_storage"](tensor)
    if (last + 1) * size > kit.storage["nbytes"](storage):
        raise TypeError("a tensor whose strides reach beyond its storage cannot be sent")
    raw = kit.string_at(kit.storage["data_ptr"](storage) + offset * size, (last - offset + 1) * size)
    elements = np.ndarray(shape, dtype=f"V{size}", buffer=raw, strides=tuple(s * size for s in strides))
    return np.ascontiguousarray(elements).tobytes()


def one_of(kind, types):
    """Whether kind is one of types, by identity (asks no metaclass)."""
    for each in types:
        if kind is each:
            return True
    return False


def encode(value, keep):
    """`value` as plain data; objects that are not values are kept by `keep(obj) -> handle`."""
    kind = type(value)
    if one_of(kind, PLAIN):
        return value
    if kind is complex:
        return ("complex", value.real, value.imag)
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        return (kind.__name__, [encode(v, keep) for v in value])
    # Items read by dict's own method: Counter's are Python code a student could have replaced.
    if kind is dict or kind is collections.OrderedDict or kind is collections.Counter:
        return (kind.__name__, [(encode(k, keep), encode(v, keep)) for k, v in dict.items(value)])
    if kind is collections.defaultdict:
        return ("defaultdict", [(encode(k, keep), encode(v, keep)) for k, v in dict.items(value)])
    if kind is range:
        return ("range", value.start, value.stop, value.step)
    if kind is slice:
        return ("slice", encode(value.start, keep), encode(value.stop, keep), encode(value.step, keep))
    if value is Ellipsis:
        return ("ellipsis",)
    numpy = _library("numpy")
    if numpy is not None:
        encoded = _encode_numpy(value, kind, numpy)
        if encoded is not None:
            return encoded
    torch = _library("torch")
    if torch is not None:
        encoded = _encode_torch(value, torch)
        if encoded is not None:
            return encoded
    # A value of a class of the student's that derives from a builtin one (a StrEnum or IntEnum
    # member, a NamedTuple, a dict subclass) is a correct answer where that type is asked: it
    # travels as the characters, the number or the items it holds, read by the builtin type's own
    # methods, so that none of the student's (an __eq__ that is always True, a __getitem__ that
    # works out the answer only when the check reads it, after the call) is ever asked.
    for base, held in _HELD_VALUE:
        if issubclass(kind, base):
            return held(value)
    for base in (list, tuple, set, frozenset):
        if issubclass(kind, base):
            return (base.__name__, [encode(v, keep) for v in base.__iter__(value)])
    if issubclass(kind, dict):
        return ("dict", [(encode(k, keep), encode(v, keep)) for k, v in dict.items(value)])
    # Likewise an array of a subclass (an np.memmap the answer wrote its result into): the array it
    # holds, seen through ndarray's own view. Not a masked array: its data alone is not its value.
    if numpy is not None and issubclass(kind, numpy.ndarray) and not issubclass(kind, numpy.ma.MaskedArray):
        encoded = _encode_numpy(numpy.ndarray.view(value, numpy.ndarray), numpy.ndarray, numpy)
        if encoded is not None:
            return encoded
    return keep(value)


_HELD_VALUE = ((str, str.__str__), (int, int.__int__), (float, float.__float__))
_NUMPY_SCALARS = []


def numpy_scalar_classes(np):
    """numpy's own scalar classes (np.float64, np.str_, ...): a class of the student's may say
    `__module__ = "numpy"`, and only these are read by their own methods."""
    if not _NUMPY_SCALARS:
        _NUMPY_SCALARS.extend(set(np.sctypeDict.values()))
    return _NUMPY_SCALARS


def _encode_numpy(value, kind, np):
    if kind is np.ndarray and value.dtype.kind in NUMPY_KINDS and value.dtype.fields is None:
        return ("ndarray", value.dtype.str, list(value.shape), np.ascontiguousarray(value).tobytes())
    if one_of(kind, numpy_scalar_classes(np)) and value.dtype.kind in NUMPY_KINDS:
        return ("npscalar", value.dtype.str, value.tobytes())
    if issubclass(kind, np.dtype) and value.kind in NUMPY_KINDS and value.fields is None:  # numpy's alone
        return ("npdtype", value.str)
    return None


def _encode_torch(value, torch):
    kit = _torch_kit(torch)
    kind = type(value)
    if kind is kit.dtype_type:
        return ("torch.dtype", str(value).removeprefix("torch."))
    if kind is kit.device_type:
        return ("torch.device", str(value))
    if kind is kit.size_type:
        return ("torch.Size", [int(v) for v in value])
    if kind is kit.Tensor or kind is kit.Parameter:
        refuse_lingering_modes()
        with kit.no_torch_function():
            return _encode_tensor(value, kind, kit, torch)
    return None


def _encode_tensor(value, kind, kit, torch):
    get, call = kit.get, kit.call
    if get["layout"](value) != kit.strided:
        return None
    name = str(get["dtype"](value)).removeprefix("torch.")
    if name not in TORCH_DTYPES or get["is_meta"](value):
        return None
    device = get["device"](value)
    # A tensor off the CPU is copied there by torch's operators (a GPU's memory cannot be read by
    # address from here): only a grader that lets student code use a GPU sends such tensors.
    on_cpu = value if device.type == "cpu" else call["contiguous"](call["to"](call["detach"](value), "cpu"))
    grad = get["grad"](value) if get["is_leaf"](value) else None
    return ("tensor", name, list(get["shape"](value)), _element_bytes(kit, on_cpu), bool(get["requires_grad"](value)),
            str(device), kind is kit.Parameter, None if grad is None else _encode_torch(grad, torch))


# --- the judge's side: decode ------------------------------------------------------------------
_SEQUENCES = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}
_MAPPINGS = ("dict", "OrderedDict", "Counter", "defaultdict")
_MAX_DIMS = 64  # NumPy's own limit; torch's is lower
# Estimated bytes the judge allocates for what decode builds, besides the array data: a value kept
# as it came (a number, a string) costs only its slot in a container; a list's or tuple's slot is a
# pointer; a set's or mapping's entry (hash table, an OrderedDict's links, Counter's two dicts, the
# pairs list) stays under 128 bytes; any other object under 256.
_OBJECT, _SLOT, _ENTRY = 256, 8, 128


def decode(data, remote):
    """Rebuild a value from what `encode` produced; handles become `remote(handle_tuple)`.

    What `data` would become is measured first (`_measure`): a value that would exceed the limits
    above is refused before anything is built."""
    _measure(data)
    try:
        return _build(data, remote)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError) as err:
        if getattr(err, "student_traceback", None) == _REPLY_TRACE:
            raise
        raise _refused(f"a malformed value ({type(err).__name__}: {err})") from err


def _measure(data):
    """Check the shape of every part of `data` and count, every time each is named, what decode
    would build of it; raise `_refused` past a limit. Builds nothing: it walks iterators."""
    size = values = 0
    stack = [iter((data,))]
    while stack:
        value = next(stack[-1], stack)
        if value is stack:
            stack.pop()
            continue
        values += 1
        if type(value) in PLAIN:
            continue
        if type(value) is not tuple or not value or type(value[0]) is not str:
            raise _refused("a malformed value")
        if len(stack) > MAX_DECODED_DEPTH:
            raise _refused(f"values nested more than {MAX_DECODED_DEPTH} deep")
        tag, parts = value[0], None
        size += _OBJECT
        if tag in _SEQUENCES or tag in _MAPPINGS:
            _expect(value, 2)
            items = value[1]
            if type(items) is not list:
                raise _refused(f"a malformed {tag}")
            if values + len(items) > MAX_DECODED_VALUES:  # before walking a list a frame made huge
                raise _refused(f"more than {MAX_DECODED_VALUES} values in one reply")
            if tag in _MAPPINGS:
                if not all(type(p) is tuple and len(p) == 2 for p in items):
                    raise _refused(f"a malformed {tag}")
                size += _ENTRY * len(items)
                parts = (v for pair in items for v in pair)
            else:
                size += (_SLOT if tag in ("list", "tuple") else _ENTRY) * len(items)
                parts = iter(items)
        elif tag == "ref":
            _expect(value, 4)
            if type(value[1]) is not int or type(value[2]) is not list or len(value[2]) > 1000 or not all(
                    type(n) is str for n in value[2]):
                raise _refused("a malformed handle")
        elif tag in ("complex", "range"):
            _expect(value, 3 if tag == "complex" else 4)
            if not all(type(v) in ((int, float) if tag == "complex" else (int,)) for v in value[1:]):
                raise _refused(f"a malformed {tag}")
        elif tag == "slice":
            _expect(value, 4)
            parts = iter(value[1:])
        elif tag == "ellipsis":
            _expect(value, 1)
        elif tag in ("ndarray", "npscalar", "npdtype"):
            size += _measure_numpy(value)
        elif tag.startswith("torch.") or tag == "tensor":
            size += _measure_torch(value)
            if tag == "tensor" and value[7] is not None:
                if type(value[7]) is not tuple or not value[7] or value[7][0] != "tensor":
                    raise _refused("a malformed gradient")
                parts = iter((value[7],))
        else:
            raise _refused(f"an unknown kind of value ({tag[:40]!r})")
        if size > MAX_DECODED_BYTES:
            raise _refused(f"it would rebuild into more than {MAX_DECODED_BYTES >> 20} MiB in the grader "
                           "(the same value sent many times over?)")
        if values > MAX_DECODED_VALUES:
            raise _refused(f"more than {MAX_DECODED_VALUES} values in one reply")
        if parts is not None:
            stack.append(parts)


def _expect(value, length):
    if len(value) != length:
        raise _refused(f"a malformed {value[0][:40]}")


def _shape(shape):
    if type(shape) is not list or len(shape) > _MAX_DIMS or not all(type(n) is int and n >= 0 for n in shape):
        raise _refused("a malformed shape")
    count = extent = 1
    for n in shape:
        count, extent = count * n, extent * max(n, 1)
    if extent > 1 << 62:  # an empty array's other dimensions too: its strides must fit
        raise _refused("a malformed shape")
    return count


def _measure_numpy(value):
    """Bytes decode allocates for a numpy value; its shape, dtype and data checked."""
    tag = value[0]
    _expect(value, {"npdtype": 2, "npscalar": 3, "ndarray": 4}[tag])
    if type(value[1]) is not str or len(value[1]) > 40:
        raise _refused("a malformed dtype")
    try:
        dtype = _numpy_dtype(value[1])
    except (TypeError, ValueError) as err:
        raise _refused(f"a dtype that is not plain data ({err})") from err
    if tag == "npdtype":
        return 0
    if dtype.itemsize == 0:  # numpy would give it one byte an element, which the data does not pay
        raise _refused("a dtype without size")
    if tag == "npscalar":
        if type(value[2]) is not bytes or len(value[2]) != dtype.itemsize:
            raise _refused("a numpy scalar whose data does not match its dtype")
        return dtype.itemsize
    raw = value[3]
    if type(raw) is not bytes or _shape(value[2]) * dtype.itemsize != len(raw):
        raise _refused("an array whose data does not match its shape")
    return len(raw)


def _measure_torch(value):
    """Bytes decode allocates for a torch value; its shape, dtype, device and data checked."""
    import torch
    tag = value[0]
    if tag in ("torch.dtype", "torch.device"):
        _expect(value, 2)
        if tag == "torch.dtype" and value[1] not in TORCH_DTYPES:
            raise _refused(f"an unknown torch dtype {str(value[1])[:40]!r}")
        if tag == "torch.device":
            _device(value[1])
        return 0
    if tag == "torch.Size":
        _expect(value, 2)
        _shape(value[1])
        return 0
    if tag != "tensor":
        raise _refused(f"an unknown kind of value ({tag[:40]!r})")
    _expect(value, 8)
    _, name, shape, raw, _requires_grad, device, _is_param, _grad = value
    if name not in TORCH_DTYPES:
        raise _refused(f"an unknown torch dtype {str(name)[:40]!r}")
    _device(device)
    itemsize = torch.empty((), dtype=getattr(torch, name)).element_size()
    if type(raw) is not bytes or _shape(shape) * itemsize != len(raw):
        raise _refused("a tensor whose data does not match its shape")
    return len(raw)


def _device(text):
    import torch
    if type(text) is not str or len(text) > 40:
        raise _refused("a malformed device")
    try:
        torch.device(text)
    except (RuntimeError, ValueError, TypeError) as err:
        raise _refused(f"an unknown device {text!r}") from err


def _build(data, remote):
    """The value `data` stands for (already checked by `_measure`)."""
    if type(data) in PLAIN:
        return data
    tag = data[0]
    if tag == "ref":
        return remote(data)
    if tag in _SEQUENCES:
        return _SEQUENCES[tag]([_build(v, remote) for v in data[1]])
    if tag in _MAPPINGS:
        pairs = [(_build(k, remote), _build(v, remote)) for k, v in data[1]]
        if tag == "defaultdict":
            return collections.defaultdict(None, pairs)
        if tag == "Counter":
            return collections.Counter(dict(pairs))
        return {"dict": dict, "OrderedDict": collections.OrderedDict}[tag](pairs)
    if tag == "complex":
        return complex(float(data[1]), float(data[2]))
    if tag == "range":
        return range(data[1], data[2], data[3])
    if tag == "slice":
        return slice(*(_build(v, remote) for v in data[1:4]))
    if tag == "ellipsis":
        return Ellipsis
    if tag in ("ndarray", "npscalar", "npdtype"):
        return _decode_numpy(data)
    return _decode_torch(data, remote)


def _numpy_dtype(text):
    import numpy as np
    dtype = np.dtype(str(text))
    if dtype.kind not in NUMPY_KINDS or dtype.fields is not None:
        raise ValueError(f"the dtype {text!r} is not plain data")
    return dtype


def _decode_numpy(data):
    import numpy as np
    tag = data[0]
    dtype = _numpy_dtype(data[1])
    if tag == "npdtype":
        return dtype
    if tag == "npscalar":
        return np.frombuffer(data[2], dtype=dtype, count=1)[0]
    shape = tuple(data[2])
    if not data[3]:
        return np.empty(shape, dtype=dtype)
    return np.frombuffer(data[3], dtype=dtype).reshape(shape).copy()


def _decode_torch(data, remote):
    import torch
    tag = data[0]
    if tag == "torch.dtype":
        return getattr(torch, data[1])
    if tag == "torch.device":
        return torch.device(data[1])
    if tag == "torch.Size":
        return torch.Size(data[1])
    _, name, shape, raw, requires_grad, device, is_param, grad = data
    dtype, shape = getattr(torch, name), tuple(shape)
    if not raw:
        tensor = torch.empty(shape, dtype=dtype)
    else:
        tensor = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape).clone()
    device = torch.device(device)
    if device.type != "cpu" and (device.type != "cuda" or torch.cuda.is_available()):
        tensor = tensor.to(device)
    if is_param:
        tensor = torch.nn.Parameter(tensor, requires_grad=bool(requires_grad))
    elif requires_grad and tensor.is_floating_point():
        tensor.requires_grad_(True)
    if grad is not None and tensor.is_leaf:
        tensor.grad = _decode_torch(grad, remote)
    return tensor
