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


def load_untrusted(data):
    return _DataOnly(io.BytesIO(data)).load()


def dump_plain(obj):
    """Pickle a tree of builtin containers and plain values (the student's side's replies)."""
    return pickle.dumps(obj, protocol=5)


# --- the student's side: encode ----------------------------------------------------------------
def encode(value, keep):
    """`value` as plain data; objects that are not values are kept by `keep(obj) -> handle`."""
    kind = type(value)
    if kind in PLAIN:
        return value
    if kind is complex:
        return ("complex", value.real, value.imag)
    if kind is list or kind is tuple or kind is set or kind is frozenset:
        return (kind.__name__, [encode(v, keep) for v in value])
    if kind is dict or kind is collections.OrderedDict or kind is collections.Counter:
        return (kind.__name__, [(encode(k, keep), encode(v, keep)) for k, v in value.items()])
    if kind is collections.defaultdict:
        return ("defaultdict", [(encode(k, keep), encode(v, keep)) for k, v in value.items()])
    if kind is range:
        return ("range", value.start, value.stop, value.step)
    if kind is slice:
        return ("slice", encode(value.start, keep), encode(value.stop, keep), encode(value.step, keep))
    if value is Ellipsis:
        return ("ellipsis",)
    module = getattr(kind, "__module__", "")
    if module == "numpy" or module.startswith("numpy."):
        encoded = _encode_numpy(value)
        if encoded is not None:
            return encoded
    if module.startswith("torch"):
        encoded = _encode_torch(value, keep)
        if encoded is not None:
            return encoded
    return keep(value)


def _encode_numpy(value):
    import numpy as np
    if type(value) is np.ndarray and value.dtype.kind in NUMPY_KINDS and value.dtype.fields is None:
        return ("ndarray", value.dtype.str, list(value.shape), np.ascontiguousarray(value).tobytes())
    if isinstance(value, np.generic) and type(value).__module__ == "numpy" and value.dtype.kind in NUMPY_KINDS:
        return ("npscalar", value.dtype.str, value.tobytes())
    if isinstance(value, np.dtype) and value.kind in NUMPY_KINDS and value.fields is None:
        return ("npdtype", value.str)
    return None


def _encode_torch(value, keep):
    import torch
    kind = type(value)
    if kind is torch.dtype:
        return ("torch.dtype", str(value).removeprefix("torch."))
    if kind is torch.device:
        return ("torch.device", str(value))
    if kind is torch.Size:
        return ("torch.Size", [int(v) for v in value])
    if kind in (torch.Tensor, torch.nn.Parameter) and value.layout == torch.strided:
        name = str(value.dtype).removeprefix("torch.")
        if name not in TORCH_DTYPES or value.is_meta:
            return None
        data = value.detach().to("cpu").contiguous()
        raw = data.view(torch.uint8).numpy().tobytes() if data.numel() and data.dim() else (
            data.reshape(1).view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        grad = value.grad if value.is_leaf and value.grad is not None else None
        return ("tensor", name, list(value.shape), raw, bool(value.requires_grad), str(value.device),
                kind is torch.nn.Parameter, None if grad is None else _encode_torch(grad, keep))
    return None


# --- the judge's side: decode ------------------------------------------------------------------
def decode(data, remote):
    """Rebuild a value from what `encode` produced; handles become `remote(handle_tuple)`."""
    if type(data) in PLAIN:
        return data
    if type(data) is not tuple or not data or type(data[0]) is not str:
        raise ValueError("a malformed value from the student's process")
    tag = data[0]
    if tag == "ref":
        if len(data) != 4 or type(data[1]) is not int or type(data[2]) is not list:
            raise ValueError("a malformed handle from the student's process")
        return remote(data)
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [decode(v, remote) for v in data[1]]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag in ("dict", "OrderedDict", "Counter", "defaultdict"):
        pairs = [(decode(k, remote), decode(v, remote)) for k, v in data[1]]
        if tag == "defaultdict":
            return collections.defaultdict(None, pairs)
        if tag == "Counter":
            return collections.Counter(dict(pairs))
        return {"dict": dict, "OrderedDict": collections.OrderedDict}[tag](pairs)
    if tag == "complex":
        return complex(float(data[1]), float(data[2]))
    if tag == "range":
        return range(int(data[1]), int(data[2]), int(data[3]))
    if tag == "slice":
        return slice(*(decode(v, remote) for v in data[1:4]))
    if tag == "ellipsis":
        return Ellipsis
    if tag in ("ndarray", "npscalar", "npdtype"):
        return _decode_numpy(data)
    if tag.startswith("torch.") or tag == "tensor":
        return _decode_torch(data, remote)
    raise ValueError(f"an unknown kind of value ({tag!r}) from the student's process")


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
        return np.frombuffer(bytes(data[2]), dtype=dtype, count=1)[0]
    shape = tuple(int(n) for n in data[2])
    return np.frombuffer(bytes(data[3]), dtype=dtype).reshape(shape).copy()


def _decode_torch(data, remote):
    import torch
    tag = data[0]
    if tag == "torch.dtype":
        if data[1] not in TORCH_DTYPES:
            raise ValueError(f"an unknown torch dtype {data[1]!r}")
        return getattr(torch, data[1])
    if tag == "torch.device":
        return torch.device(str(data[1]))
    if tag == "torch.Size":
        return torch.Size(int(n) for n in data[1])
    _, name, shape, raw, requires_grad, device, is_param, grad = data
    if name not in TORCH_DTYPES:
        raise ValueError(f"an unknown torch dtype {name!r}")
    dtype, shape = getattr(torch, name), tuple(int(n) for n in shape)
    count = 1
    for n in shape:
        count *= n
    if count == 0:
        tensor = torch.empty(shape, dtype=dtype)
    else:
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype)
        if flat.numel() != count:
            raise ValueError("a tensor whose data does not match its shape")
        tensor = flat.reshape(shape).clone()
    device = torch.device(str(device))
    if device.type != "cpu" and (device.type != "cuda" or torch.cuda.is_available()):
        tensor = tensor.to(device)
    if is_param:
        tensor = torch.nn.Parameter(tensor, requires_grad=bool(requires_grad))
    elif requires_grad and tensor.is_floating_point():
        tensor.requires_grad_(True)
    if grad is not None and tensor.is_leaf:
        tensor.grad = _decode_torch(grad, remote)
    return tensor
