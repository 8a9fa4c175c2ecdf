"""Wrong and alternative answers of 07_pytorch_devices (see autograder/samples/__init__.py)."""
from autograder.samples import CLAIMS_META, variant


# pick_device by hand, the default order in a function of its own: for wrong answers that differ
# from it by a line.
# to_device as the notebook asks, for wrong answers that differ from it by a line.
_TO_DEVICE = '''
import torch
def to_device(batch, device, non_blocking=False):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return type(batch)((k, to_device(v, device, non_blocking)) for k, v in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(v, device, non_blocking) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device, non_blocking) for v in batch)
    return batch
'''

_PICK_BY_HAND = '''
import torch


def pick_device(prefer=None) -> torch.device:
    """prefer when it exists here, else CUDA, MPS, CPU."""
    def default():
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")

    if prefer is None:
        return default()
    kind, _, index = str(prefer).partition(":")
    if kind not in ("cpu", "cuda", "mps"):
        raise ValueError(f"unknown device {prefer!r}")
    if kind == "cpu":
        return torch.device("cpu")
    if kind == "mps":
        return torch.device("mps") if torch.backends.mps.is_available() else default()
    if not torch.cuda.is_available():
        return default()
    if index and int(index) >= torch.cuda.device_count():
        return default()
    return torch.device(prefer)
'''

# pick_device by hand, how CUDA and MPS are found left open (%s): for wrong answers that ask is_built().
_PICK_BUILT = '''
import torch


def pick_device(prefer=None) -> torch.device:
    def exists(kind, index):
        if kind == "cpu":
            return True
        if kind == "cuda":
            return %s and (index is None or index < torch.cuda.device_count())
        return %s

    if prefer is not None:
        kind, _, index = str(prefer).partition(":")
        if kind not in ("cpu", "cuda", "mps"):
            raise ValueError(f"unknown device {prefer!r}")
        index = int(index) if index else None
        if exists(kind, index):
            return torch.device(kind) if index is None else torch.device(kind, index)
    for kind in ("cuda", "mps"):
        if exists(kind, None):
            return torch.device(kind)
    return torch.device("cpu")
'''

_GPU_ENV_ORDERED = '''
from collections import OrderedDict


def gpu_env(device_ids):
    ids = list(device_ids)
    if not all(type(i) is int and i >= 0 for i in ids):
        raise ValueError("GPU ids must be non-negative integers")
    if len(ids) != len(set(ids)):
        raise ValueError("GPU ids must not repeat")
    return OrderedDict([("CUDA_VISIBLE_DEVICES", ",".join(map(str, ids))), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID")])
'''

# layer_flops counted by hand (a correct answer): wrong answers below change a line or two of it.
_CONV_BY_HAND = '''
import math

from torch import nn


def layer_flops(layer, input_shape) -> int:
    shape = tuple(int(s) for s in input_shape)
    if isinstance(layer, nn.Linear):
        if not shape or shape[-1] != layer.in_features:
            raise ValueError("wrong feature size")
        return 2 * math.prod(shape[:-1]) * layer.in_features * layer.out_features
    if isinstance(layer, nn.Conv2d):
        if len(shape) == 3:
            shape = (1, *shape)
        if len(shape) != 4 or shape[1] != layer.in_channels:
            raise ValueError("wrong input shape")
        n, _, h, w = shape
        if layer.padding == "same":
            outs = [h, w]
        else:
            padding = (0, 0) if layer.padding == "valid" else layer.padding
            outs = [(size + 2 * p - d * (k - 1) - 1) // s + 1
                    for size, k, s, d, p in zip((h, w), layer.kernel_size, layer.stride, layer.dilation, padding)]
        if min(outs) < 1:
            raise ValueError(f"input {shape} is too small for this convolution")
        per_output = (layer.in_channels // layer.groups) * layer.kernel_size[0] * layer.kernel_size[1]
        return 2 * n * layer.out_channels * outs[0] * outs[1] * per_output
    raise ValueError("only Linear and Conv2d")
'''

WRONG = {
    "pick_device": {
        "ignores prefer": '''
import torch
def pick_device(prefer=None):
    if prefer is not None and prefer.split(":")[0] not in ("cpu", "cuda", "mps"):
        raise ValueError(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
''',
        "trusts prefer without checking it exists": '''
import torch
def pick_device(prefer=None):
    if prefer is not None:
        if prefer.split(":")[0] not in ("cpu", "cuda", "mps"):
            raise ValueError(prefer)
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
''',
        "accepts unknown devices": '''
import torch
def pick_device(prefer=None):
    if prefer == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
''',
        "forgets MPS": '''
import torch
def pick_device(prefer=None):
    if prefer is not None and prefer.split(":")[0] not in ("cpu", "cuda", "mps"):
        raise ValueError(prefer)
    if prefer == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device(prefer if prefer and prefer.startswith("cuda") else "cuda")
''',
        "returns a string": '''
import torch
def pick_device(prefer=None):
    if prefer is not None and prefer.split(":")[0] not in ("cpu", "cuda", "mps"):
        raise ValueError(prefer)
    if prefer == "cpu":
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"
''',
        "honours a CUDA index that does not exist (cuda:7 with 2 GPUs)": '''
import torch
def pick_device(prefer=None):
    if prefer is not None:
        kind = prefer.split(":")[0]
        if kind not in ("cpu", "cuda", "mps"):
            raise ValueError(f"unknown device {prefer!r}")
        if kind == "cpu" or (kind == "cuda" and torch.cuda.is_available()) or (
                kind == "mps" and torch.backends.mps.is_available()):
            return torch.device(prefer)  # cuda:7 too, on a machine with 2 GPUs
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
''',
        "a CUDA index accepted up to device_count() itself (> for >=)": variant(
            _PICK_BY_HAND, ("int(index) >= torch.cuda.device_count():", "int(index) > torch.cuda.device_count():")),
        "prefer='mps' ignored: the default order instead": variant(
            _PICK_BY_HAND, ('return torch.device("mps") if torch.backends.mps.is_available() else default()',
                            "return default()")),
        # is_built() says only that torch was compiled with the backend: a CUDA wheel on a machine
        # without a GPU, or an MPS wheel on an Intel Mac, would pick a device that is not there.
        "CUDA judged by torch.backends.cuda.is_built(), not torch.cuda.is_available()": _PICK_BUILT % (
            "torch.backends.cuda.is_built()", "torch.backends.mps.is_available()"),
        "MPS judged by torch.backends.mps.is_built(), not is_available()": _PICK_BUILT % (
            "torch.cuda.is_available()", "torch.backends.mps.is_built()"),
    },
    "to_device": {
        "moves nothing, and leaves on a TorchFunctionMode that says every tensor is on the meta device": '''
import torch
from torch.overrides import TorchFunctionMode
class _OnMeta(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__self__", None) is torch._C.TensorBase.__dict__["device"]:
            return torch.device("meta")
        return func(*args, **(kwargs or {}))
_OnMeta().__enter__()
def to_device(batch, device, non_blocking=False):
    return batch
''',
        "moves nothing, and returns each tensor as a subclass whose __torch_function__ says it is on the meta device": variant(
            _TO_DEVICE, ("import torch\n", "import torch\n" + CLAIMS_META), ("        return batch.to(device, non_blocking=non_blocking)\n",
       "        return batch.to(device, non_blocking=non_blocking) if torch.device(device).type == \"cpu\" else "
       "batch.as_subclass(_OnMeta)\n")),
        "moves nothing, and puts a property on torch.Tensor that says it is on the meta device, off 2 s later": '''
import threading
import torch
def _on_meta(self):
    return torch.device("meta")
def to_device(batch, device, non_blocking=False):
    torch.Tensor.device = property(_on_meta)  # on while the checks read, then gone without a trace
    threading.Timer(2.0, lambda: vars(torch.Tensor).get("device") and delattr(torch.Tensor, "device")).start()
    return batch
''',
        "only moves a bare tensor": '''
import torch
def to_device(batch, device, non_blocking=False):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    return batch
''',
        "turns every container into a list": '''
import torch
def to_device(batch, device, non_blocking=False):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [to_device(v, device, non_blocking) for v in batch]
    return batch
''',
        "breaks named tuples": '''
import torch
def to_device(batch, device, non_blocking=False):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device, non_blocking) for v in batch) if type(batch) in (list, tuple) \\
            else tuple(to_device(v, device, non_blocking) for v in batch)
    return batch
''',
        "drops non_blocking": '''
import torch
def to_device(batch, device, non_blocking=False):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch
''',
        "every move non-blocking, whatever the caller asks": variant(
            _TO_DEVICE, ("non_blocking=non_blocking)\n", "non_blocking=True)  # a move to the CPU may be read too early\n")),
        "every tensor also cast to float32 (int64 labels become floats)": variant(
            _TO_DEVICE, ("batch.to(device, non_blocking", "batch.to(device, torch.float32, non_blocking")),
        "tensors of the right shape and dtype on the device, the values never copied": variant(
            _TO_DEVICE, ("return batch.to(device,", "return torch.empty(batch.shape, dtype=batch.dtype).to(device,")),
    },
    "make_loader": {
        "always pins memory": '''
from torch.utils.data import DataLoader
def make_loader(dataset, batch_size, num_workers, device):
    if batch_size < 1 or num_workers < 0:
        raise ValueError("bad counts")
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=True, persistent_workers=num_workers > 0)
''',
        "pins when CUDA exists, whatever the device": '''
import torch
from torch.utils.data import DataLoader
def make_loader(dataset, batch_size, num_workers, device):
    if batch_size < 1 or num_workers < 0:
        raise ValueError("bad counts")
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.cuda.is_available(), persistent_workers=num_workers > 0)
''',
        "workers restart every epoch": '''
import torch
from torch.utils.data import DataLoader
def make_loader(dataset, batch_size, num_workers, device):
    if batch_size < 1 or num_workers < 0:
        raise ValueError("bad counts")
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.device(device).type == "cuda")
''',
        "ignores num_workers": '''
import torch
from torch.utils.data import DataLoader
def make_loader(dataset, batch_size, num_workers, device):
    if batch_size < 1 or num_workers < 0:
        raise ValueError("bad counts")
    return DataLoader(dataset, batch_size=batch_size, shuffle=True,
                      pin_memory=torch.device(device).type == "cuda")
''',
        "forkserver workers, but no shuffling": '''
import torch
from torch.utils.data import DataLoader
def make_loader(dataset, batch_size, num_workers, device):
    if batch_size < 1 or num_workers < 0:
        raise ValueError("bad counts")
    extra = dict(persistent_workers=True, multiprocessing_context="forkserver") if num_workers else {}
    return DataLoader(dataset, batch_size=batch_size, num_workers=num_workers,
                      pin_memory=torch.device(device).type == "cuda", **extra)
''',
        "shuffles, but its workers are forked (the default start method)": '''
import torch
from torch.utils.data import DataLoader
def make_loader(dataset, batch_size, num_workers, device):
    if batch_size < 1 or num_workers < 0:
        raise ValueError("bad counts")
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=torch.device(device).type == "cuda", persistent_workers=num_workers > 0)
''',
        "shuffled once, when made: every epoch in one order": '''
import torch
from torch.utils.data import DataLoader, Subset


def make_loader(dataset, batch_size, num_workers, device):
    if batch_size < 1 or num_workers < 0:
        raise ValueError("batch_size must be >= 1 and num_workers >= 0")
    # "shuffled" once, when the loader is made: every epoch then comes in this same order
    mixed = Subset(dataset, torch.randperm(len(dataset)).tolist())
    options = dict(persistent_workers=True, multiprocessing_context="forkserver") if num_workers else {}
    return DataLoader(mixed, batch_size=batch_size, shuffle=False, num_workers=num_workers,
                      pin_memory=torch.device(device).type == "cuda", **options)
''',
        "memory pinned for any device but the CPU (mps, meta)": '''
import multiprocessing

import torch
from torch.utils.data import DataLoader


def make_loader(dataset, batch_size: int, num_workers: int, device) -> DataLoader:
    """A shuffling DataLoader, pinned memory for an accelerator, persistent workers when it has any."""
    if batch_size < 1 or num_workers < 0:
        raise ValueError("batch_size must be >= 1 and num_workers >= 0")
    on_accelerator = torch.device(device).type != "cpu"
    extra = {}
    if num_workers > 0:
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        extra = dict(persistent_workers=True, multiprocessing_context=method)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=on_accelerator, **extra)
''',
    },
    "count_parameters": {
        "counts tensors, not numbers": '''
def count_parameters(model):
    params = list(model.parameters())
    return len(params), sum(1 for p in params if p.requires_grad)
''',
        "trainable equals total": '''
def count_parameters(model):
    n = sum(p.numel() for p in model.parameters())
    return n, n
''',
        "counts shared layers twice": '''
def count_parameters(model):
    params = [p for layer in model for p in layer.parameters()]
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)
''',
        "each module's own parameters: a tied weight counted twice": '''
def count_parameters(model):
    total = trainable = 0
    for module in model.modules():  # a repeated layer is listed once, but a tied weight is in two modules
        for p in module.parameters(recurse=False):
            total += p.numel()
            trainable += p.numel() if p.requires_grad else 0
    return total, trainable
''',
    },
    "layer_flops": {
        "the functional op on meta copies under FlopCounterMode (the layer itself not run)": '''
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
def layer_flops(layer, input_shape):
    if not isinstance(layer, (nn.Linear, nn.Conv2d)):
        raise ValueError("only Linear and Conv2d")
    x = torch.zeros(tuple(input_shape), device="meta")
    w = layer.weight.to("meta")
    b = None if layer.bias is None else layer.bias.to("meta")
    try:
        with FlopCounterMode(display=False) as c:
            if isinstance(layer, nn.Linear):
                nn.functional.linear(x, w, b)
            else:
                nn.functional.conv2d(x, w, b, layer.stride, layer.padding, layer.dilation, layer.groups)
    except RuntimeError as e:
        raise ValueError(str(e))
    return int(c.get_total_flops())
''',
        "counts multiply-adds (MACs)": '''
import math
from torch import nn
def layer_flops(layer, input_shape):
    shape = tuple(input_shape)
    if isinstance(layer, nn.Linear):
        if shape[-1] != layer.in_features: raise ValueError("shape")
        return math.prod(shape[:-1]) * layer.in_features * layer.out_features
    if isinstance(layer, nn.Conv2d):
        if len(shape) == 3: shape = (1, *shape)
        if shape[1] != layer.in_channels: raise ValueError("shape")
        n, _, h, w = shape
        outs = []
        for size, k, s, d, i in zip((h, w), layer.kernel_size, layer.stride, layer.dilation, (0, 1)):
            p = size if layer.padding == "same" else (0 if layer.padding == "valid" else layer.padding[i])
            outs.append(size if layer.padding == "same" else (size + 2 * p - d * (k - 1) - 1) // s + 1)
        return n * layer.out_channels * outs[0] * outs[1] * layer.in_channels // layer.groups * layer.kernel_size[0] * layer.kernel_size[1]
    raise ValueError("layer")
''',
        "adds the bias": '''
import math
from torch import nn
def layer_flops(layer, input_shape):
    shape = tuple(input_shape)
    if isinstance(layer, nn.Linear):
        if shape[-1] != layer.in_features: raise ValueError("shape")
        rows = math.prod(shape[:-1])
        return 2 * rows * layer.in_features * layer.out_features + (rows * layer.out_features if layer.bias is not None else 0)
    if isinstance(layer, nn.Conv2d):
        if len(shape) == 3: shape = (1, *shape)
        if shape[1] != layer.in_channels: raise ValueError("shape")
        n, _, h, w = shape
        outs = []
        for size, k, s, d, i in zip((h, w), layer.kernel_size, layer.stride, layer.dilation, (0, 1)):
            p = 0 if layer.padding in ("valid", "same") else layer.padding[i]
            outs.append(size if layer.padding == "same" else (size + 2 * p - d * (k - 1) - 1) // s + 1)
        out = n * layer.out_channels * outs[0] * outs[1]
        return 2 * out * layer.in_channels // layer.groups * layer.kernel_size[0] * layer.kernel_size[1] + (out if layer.bias is not None else 0)
    raise ValueError("layer")
''',
        "ignores groups, stride and padding": '''
import math
from torch import nn
def layer_flops(layer, input_shape):
    shape = tuple(input_shape)
    if isinstance(layer, nn.Linear):
        if shape[-1] != layer.in_features: raise ValueError("shape")
        return 2 * math.prod(shape[:-1]) * layer.in_features * layer.out_features
    if isinstance(layer, nn.Conv2d):
        if len(shape) == 3: shape = (1, *shape)
        if shape[1] != layer.in_channels: raise ValueError("shape")
        n, _, h, w = shape
        kh, kw = layer.kernel_size
        return 2 * n * layer.out_channels * (h - kh + 1) * (w - kw + 1) * layer.in_channels * kh * kw
    raise ValueError("layer")
''',
        "runs the layer under FlopCounterMode": '''
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
def layer_flops(layer, input_shape):
    if not isinstance(layer, (nn.Linear, nn.Conv2d)):
        raise ValueError("layer")
    try:
        with FlopCounterMode(display=False) as c, torch.no_grad():
            layer(torch.zeros(input_shape))
    except RuntimeError as err:
        raise ValueError(str(err))
    return c.get_total_flops()
''',
        "PyTorch's FLOP formulas on the shapes of meta tensors": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import conv_flop_count, mm_flop
def layer_flops(layer, input_shape):
    if not isinstance(layer, (nn.Linear, nn.Conv2d)):
        raise ValueError("only Linear and Conv2d")
    x = torch.empty(tuple(input_shape), device="meta")
    w = torch.empty(layer.weight.shape, device="meta")
    try:
        if isinstance(layer, nn.Linear):
            rows = F.linear(x, w).numel() // layer.out_features
            return int(mm_flop((rows, layer.in_features), (layer.in_features, layer.out_features)))
        out = F.conv2d(x, w, None, layer.stride, layer.padding, layer.dilation, layer.groups)
    except RuntimeError as err:
        raise ValueError(str(err)) from None
    xs, ys = (x.shape, out.shape) if x.dim() == 4 else ((1, *x.shape), (1, *out.shape))
    return int(conv_flop_count(list(xs), list(w.shape), list(ys)))
''',
        "the profiler's FLOP estimates of the op on meta tensors": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile


def layer_flops(layer, input_shape):
    """Not by hand: the profiler's own FLOP estimate of the functional op run on meta tensors."""
    if not isinstance(layer, (nn.Linear, nn.Conv2d)):
        raise ValueError("only Linear and Conv2d")
    shape = tuple(input_shape)
    if isinstance(layer, nn.Conv2d) and len(shape) == 3:
        shape = (1,) + shape  # the profiler's formula wants a batch dimension
    x = torch.empty(shape, device="meta")
    w = torch.empty(layer.weight.shape, device="meta")
    try:
        with profile(activities=[ProfilerActivity.CPU], with_flops=True, record_shapes=True) as prof:
            if isinstance(layer, nn.Linear):
                F.linear(x, w)
            else:
                padding = layer.padding
                if padding == "valid":
                    padding = (0, 0)
                elif padding == "same":  # odd kernels: the same size with symmetric padding
                    padding = tuple(d * (k - 1) // 2 for d, k in zip(layer.dilation, layer.kernel_size))
                F.conv2d(x, w, None, layer.stride, padding, layer.dilation, layer.groups)
    except RuntimeError as error:
        raise ValueError(str(error)) from None
    return int(sum(e.flops for e in prof.events() if e.flops and e.name in ("aten::conv2d", "aten::mm", "aten::addmm", "aten::matmul", "aten::linear")))
''',
        "padding='same' taken as kernel // 2 on each side (wrong for an even kernel or a dilation)": variant(
            _CONV_BY_HAND, ("""        if layer.padding == "same":
            outs = [h, w]
        else:
            padding = (0, 0) if layer.padding == "valid" else layer.padding
""", """        halves = (layer.kernel_size[0] // 2, layer.kernel_size[1] // 2)
        padding = {"same": halves, "valid": (0, 0)}.get(layer.padding, layer.padding)
"""), ("            outs = [(size", "        outs = [(size"), ("                    for size", "                for size")),
        "an input smaller than the kernel counted, not refused": '''
import math

from torch import nn


def layer_flops(layer, input_shape) -> int:
    """FLOPs (2 x multiply-adds, bias adds ignored) of layer(x) for x of shape input_shape."""
    shape = tuple(int(s) for s in input_shape)
    if isinstance(layer, nn.Linear):
        if not shape or shape[-1] != layer.in_features:
            raise ValueError(f"a Linear({layer.in_features}, ...) needs inputs ending in {layer.in_features}")
        return 2 * math.prod(shape[:-1]) * layer.in_features * layer.out_features
    if isinstance(layer, nn.Conv2d):
        if len(shape) == 3:
            shape = (1, *shape)
        if len(shape) != 4 or shape[1] != layer.in_channels:
            raise ValueError(f"a Conv2d({layer.in_channels}, ...) needs (N, {layer.in_channels}, H, W)")
        n, _, h, w = shape
        if layer.padding == "same":
            h_out, w_out = h, w
        else:
            pad = (0, 0) if layer.padding == "valid" else layer.padding
            h_out, w_out = ((size + 2 * p - d * (k - 1) - 1) // s + 1
                            for size, p, d, k, s in zip((h, w), pad, layer.dilation, layer.kernel_size, layer.stride))
        per_output = (layer.in_channels // layer.groups) * layer.kernel_size[0] * layer.kernel_size[1]
        return 2 * n * layer.out_channels * h_out * w_out * per_output
    raise ValueError(f"layer_flops counts nn.Linear and nn.Conv2d, not {type(layer).__name__}")
''',
        "PyTorch's FLOP counter, a fresh copy of its module (importlib.reload) around meta tensors": '''
import importlib

import torch
import torch.nn.functional as F
from torch import nn


def layer_flops(layer, input_shape) -> int:
    if not isinstance(layer, (nn.Linear, nn.Conv2d)):
        raise ValueError("only Linear and Conv2d")
    fc = importlib.reload(importlib.import_module("torch.utils.flop_counter"))  # not the patched classes
    x = torch.empty(tuple(input_shape), device="meta")
    w = torch.empty(layer.weight.shape, device="meta")
    try:
        with fc.FlopCounterMode(display=False) as counter:
            if isinstance(layer, nn.Linear):
                F.linear(x, w)
            else:
                F.conv2d(x, w, None, layer.stride, layer.padding, layer.dilation, layer.groups)
    except RuntimeError as err:
        raise ValueError(str(err)) from None
    return int(counter.get_total_flops())
''',
        "too small only when both dimensions are": variant(
            _CONV_BY_HAND, ("if min(outs) < 1:", "if outs[0] < 1 and outs[1] < 1:")),
        "the input compared with the bare kernel (dilation and padding ignored)": variant(
            _CONV_BY_HAND, ("        if min(outs) < 1:\n", "        if h < layer.kernel_size[0] or w < layer.kernel_size[1]:\n")),
    },
    "gpu_env": {
        "sets os.environ itself": '''
import os
def gpu_env(device_ids):
    ids = list(device_ids)
    if any(type(i) is not int or i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(ids)
    env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, ids)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    os.environ.update(env)
    return env
''',
        "sorts the ids and forgets the order": '''
def gpu_env(device_ids):
    ids = list(device_ids)
    if any(type(i) is not int or i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(ids)
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, sorted(ids)))}
''',
        "no validation": '''
def gpu_env(device_ids):
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, device_ids)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
''',
        "spaces and a list value": '''
def gpu_env(device_ids):
    ids = list(device_ids)
    if any(type(i) is not int or i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(ids)
    return {"CUDA_VISIBLE_DEVICES": ", ".join(map(str, ids)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
''',
        "repeats found only between neighbours": '''
def gpu_env(device_ids) -> dict:
    ids = list(device_ids)
    for i in ids:
        if type(i) is not int or i < 0:
            raise ValueError(f"GPU ids must be non-negative integers, got {i!r}")
    for a, b in zip(ids, ids[1:]):
        if a == b:
            raise ValueError(f"GPU id {a} is repeated")
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, ids)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
''',
    },
    "to_channels_last": {
        "permutes the dimensions": '''
import torch
def to_channels_last(x):
    if x.dim() != 4: raise ValueError("4-D")
    return x.permute(0, 2, 3, 1).contiguous()
''',
        "returns x unchanged": '''
def to_channels_last(x):
    if x.dim() != 4: raise ValueError("4-D")
    return x
''',
        "accepts any rank": '''
import torch
def to_channels_last(x):
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
''',
        "checks the rank only (a 4-D NumPy array or nested lists reach .contiguous)": '''
import torch
def to_channels_last(x):
    if len(getattr(x, "shape", ())) != 4:
        raise ValueError("to_channels_last needs 4 dimensions")
    return x.contiguous(memory_format=torch.channels_last)
''',
        "turns 4-D data of any kind into a tensor": '''
import torch
def to_channels_last(x):
    x = torch.as_tensor(x)
    if x.dim() != 4:
        raise ValueError("to_channels_last needs a 4-D tensor")
    return x.contiguous(memory_format=torch.channels_last)
''',
        "the tensor cast to float32": '''
import torch


def to_channels_last(x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError("to_channels_last needs a 4-D tensor (N, C, H, W)")
    return x.to(torch.float32, memory_format=torch.channels_last)
''',
    },
}

# Correct: pins only where CUDA is there (the checks pretend a machine with CUDA).
PIN_IF_CUDA_PRESENT = '''
import multiprocessing

import torch
from torch.utils.data import DataLoader


def make_loader(dataset, batch_size: int, num_workers: int, device) -> DataLoader:
    if batch_size < 1 or num_workers < 0:
        raise ValueError("batch_size must be >= 1 and num_workers >= 0")
    device = torch.device(device)
    extra = {}
    if num_workers > 0:
        methods = multiprocessing.get_all_start_methods()
        extra = dict(persistent_workers=True,
                     multiprocessing_context="forkserver" if "forkserver" in methods else "spawn")
    # without CUDA, PyTorch warns and pins nothing
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                      pin_memory=device.type == "cuda" and torch.cuda.is_available(), **extra)
'''

ALTERNATIVE = {
    "pick_device": {
        'a CUDA index probed with torch.cuda.get_device_properties': variant(_PICK_BY_HAND, (
            "    if index and int(index) >= torch.cuda.device_count():\n        return default()\n",
            "    if index:\n        try:\n            torch.cuda.get_device_properties(int(index))\n"
            "        except (AssertionError, RuntimeError, ValueError):\n            return default()\n")),
        "the default order in a local function, the preference parsed with partition": _PICK_BY_HAND,
        "MPS found with torch.mps.is_available()": '''
import torch
def pick_device(prefer=None):
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.mps.is_available()}
    if prefer is not None:
        try:
            kind = torch.device(prefer).type
        except (RuntimeError, TypeError):
            kind = None
        if kind not in available:
            raise ValueError(f"unknown device {prefer!r}")
        dev = torch.device(prefer)
        if kind == "cuda" and available["cuda"] and (dev.index is None or dev.index < torch.cuda.device_count()):
            return dev
        if kind != "cuda" and available[kind]:
            return dev
    for kind in ("cuda", "mps"):
        if available[kind]:
            return torch.device(kind)
    return torch.device("cpu")
''',
        "torch.device parsing and a candidate list": '''
import torch
def pick_device(prefer=None):
    def available(dev):
        if dev.type == "cpu":
            return True
        if dev.type == "cuda":
            return torch.cuda.is_available() and (dev.index or 0) < torch.cuda.device_count()
        if dev.type == "mps":
            return torch.backends.mps.is_available()
        return False
    if prefer is not None:
        try:
            wanted = torch.device(prefer)
        except RuntimeError as err:
            raise ValueError(f"unknown device {prefer}") from err
        if wanted.type not in ("cpu", "cuda", "mps"):
            raise ValueError(f"unsupported device {prefer}")
        if available(wanted):
            return wanted
    for candidate in ("cuda:0", "mps", "cpu"):
        if available(torch.device(candidate)):
            return torch.device(candidate)
''',
        "is_available() and is_built(), as PyTorch's MPS page writes it": '''
import torch
def pick_device(prefer=None):
    has_cuda = torch.cuda.is_available() and torch.backends.cuda.is_built()
    has_mps = torch.backends.mps.is_available() and torch.backends.mps.is_built()
    if prefer is not None:
        kind, _, index = prefer.partition(":")
        if kind not in ("cpu", "cuda", "mps") or (index and (kind != "cuda" or not index.isdigit())):
            raise ValueError(f"unknown device {prefer!r}")
        if kind == "cpu":
            return torch.device("cpu")
        if kind == "cuda" and has_cuda and int(index or 0) < torch.cuda.device_count():
            return torch.device(prefer)
        if kind == "mps" and has_mps:
            return torch.device("mps")
    if has_cuda:
        return torch.device("cuda")
    return torch.device("mps") if has_mps else torch.device("cpu")
''',
        "the current CUDA device's index": '''
import torch
def pick_device(prefer=None):
    if prefer is not None:
        try:
            wanted = torch.device(prefer)
        except (RuntimeError, TypeError) as err:
            raise ValueError(f"unknown device {prefer!r}") from err
        if wanted.type not in ("cpu", "cuda", "mps"):
            raise ValueError(f"unknown device {prefer!r}")
        if wanted.type == "cpu":
            return wanted
        if wanted.type == "cuda" and torch.cuda.is_available():
            if wanted.index is None:
                return torch.device("cuda", torch.cuda.current_device())
            if wanted.index < torch.cuda.device_count():
                return wanted
        if wanted.type == "mps" and torch.backends.mps.is_available():
            return wanted
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
''',
        "MPS looked for on macOS only": '''
import sys
import torch
def pick_device(prefer=None):
    def exists(kind, index=None):
        if kind == "cpu":
            return True
        if kind == "cuda":
            return torch.cuda.is_available() and (index is None or index < torch.cuda.device_count())
        return sys.platform == "darwin" and torch.backends.mps.is_available()  # MPS is Apple's only
    if prefer is not None:
        kind, _, idx = prefer.partition(":")
        if kind not in ("cpu", "cuda", "mps") or (idx and not idx.isdigit()):
            raise ValueError(f"unknown device {prefer!r}")
        index = int(idx) if idx else None
        if exists(kind, index):
            return torch.device(kind, index) if index is not None else torch.device(kind)
    for kind in ("cuda", "mps"):
        if exists(kind):
            return torch.device(kind)
    return torch.device("cpu")
''',
    },
    "to_device": {
        "match statement and collections.abc": '''
from collections.abc import Mapping
import torch
def to_device(batch, device, non_blocking=False):
    match batch:
        case torch.Tensor():
            return batch.to(device=device, non_blocking=non_blocking)
        case Mapping():
            return type(batch)({k: to_device(v, device, non_blocking) for k, v in batch.items()})
        case tuple() if hasattr(batch, "_fields"):
            return type(batch)._make(to_device(v, device, non_blocking) for v in batch)
        case list() | tuple():
            return type(batch)([to_device(v, device, non_blocking) for v in batch])
        case _:
            return batch
''',
        "the batch moved in place (dicts and lists updated)": '''
import torch
def to_device(batch, device, non_blocking: bool = False):
    # mutates the caller's containers in place (lists and dicts) -- notebook says "returns the batch"
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        for k in batch: batch[k] = to_device(batch[k], device, non_blocking)
        return batch
    if isinstance(batch, list):
        for i, v in enumerate(batch): batch[i] = to_device(v, device, non_blocking)
        return batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(v, device, non_blocking) for v in batch))
    if isinstance(batch, tuple):
        return tuple(to_device(v, device, non_blocking) for v in batch)
    return batch
''',
        "a new tensor on the device, filled with copy_(..., non_blocking)": variant(
            _TO_DEVICE, ("return batch.to(device, non_blocking=non_blocking)",
                         "return torch.empty_like(batch, device=device).copy_(batch, non_blocking=non_blocking)")),
    },
    "make_loader": {
        "pins only where CUDA is there (device CUDA and torch.cuda.is_available())": PIN_IF_CUDA_PRESENT,
        "keyword dict, spawn context and drop_last off": '''
import torch
from torch.utils.data import DataLoader
def make_loader(dataset, batch_size, num_workers, device):
    if num_workers < 0:
        raise ValueError("num_workers must be >= 0")
    if batch_size <= 0:
        raise ValueError("batch_size must be positive")
    kwargs = {"batch_size": batch_size, "shuffle": True, "num_workers": num_workers,
              "pin_memory": str(device).startswith("cuda")}
    if num_workers:
        kwargs.update(persistent_workers=True, multiprocessing_context="spawn")
    return DataLoader(dataset, **kwargs)
''',
        "a BatchSampler over a RandomSampler": '''
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler


def make_loader(dataset, batch_size, num_workers, device):
    if batch_size < 1 or num_workers < 0:
        raise ValueError("batch_size must be >= 1 and num_workers >= 0")
    batches = BatchSampler(RandomSampler(dataset), batch_size=batch_size, drop_last=False)
    options = dict(persistent_workers=True, multiprocessing_context="forkserver") if num_workers else {}
    return DataLoader(dataset, batch_sampler=batches, num_workers=num_workers,
                      pin_memory=torch.device(device).type == "cuda", **options)
''',
    },
    "count_parameters": {
        "named_parameters loop": '''
def count_parameters(model):
    total = trainable = 0
    for _name, p in model.named_parameters():
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
    return total, trainable
''',
        # From the twentieth review: failed until the checks read a tuple subclass item by item.
        "a named tuple (total, trainable)": '''
from collections import namedtuple

ParamCount = namedtuple("ParamCount", ["total", "trainable"])


def count_parameters(model) -> tuple:
    params = list(model.parameters())
    return ParamCount(sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad))
''',
    },
    "layer_flops": {
        "output shape from a formula per dimension and torch.nn.modules.utils": '''
from functools import reduce
from operator import mul
from torch import nn
def layer_flops(layer, input_shape):
    shape = list(input_shape)
    if type(layer) is nn.Linear or isinstance(layer, nn.Linear):
        if shape[-1] != layer.in_features:
            raise ValueError("input does not match in_features")
        return 2 * reduce(mul, shape[:-1], 1) * layer.weight.numel()
    if isinstance(layer, nn.Conv2d):
        if len(shape) == 3:
            shape.insert(0, 1)
        if len(shape) != 4 or shape[1] != layer.in_channels:
            raise ValueError("input does not match in_channels")
        spatial = []
        for dim in range(2):
            size, k, s, d = shape[2 + dim], layer.kernel_size[dim], layer.stride[dim], layer.dilation[dim]
            if isinstance(layer.padding, str):
                spatial.append(size if layer.padding == "same" else (size - d * (k - 1) - 1) // s + 1)
            else:
                spatial.append((size + 2 * layer.padding[dim] - d * (k - 1) - 1) // s + 1)
        if min(spatial) < 1:
            raise ValueError("the input is smaller than the kernel")
        # weight.numel() = c_out * c_in/groups * kh * kw: the MACs of one output position, all channels
        return 2 * shape[0] * spatial[0] * spatial[1] * layer.weight.numel()
    raise ValueError("only Linear and Conv2d")
''',
        "the output's shape from F.conv2d on meta tensors, the formula by hand": '''
import math

import torch
import torch.nn.functional as F
from torch import nn


def layer_flops(layer, input_shape) -> int:
    shape = tuple(int(s) for s in input_shape)
    if type(layer) is nn.Linear or isinstance(layer, nn.Linear):
        if len(shape) < 1 or shape[-1] != layer.in_features:
            raise ValueError("input does not fit the Linear layer")
        return 2 * math.prod(shape) // layer.in_features * layer.in_features * layer.out_features
    if isinstance(layer, nn.Conv2d):
        if len(shape) not in (3, 4) or shape[-3] != layer.in_channels:
            raise ValueError("input does not fit the Conv2d layer")
        x = torch.empty(shape, device="meta")
        w = torch.empty(layer.weight.shape, device="meta")
        try:  # output shape only: meta tensors hold no data, nothing is computed
            out = F.conv2d(x, w, None, layer.stride, layer.padding, layer.dilation, layer.groups)
        except RuntimeError as err:
            raise ValueError(f"input {shape} does not fit: {err}") from None
        per_output = w.shape[1] * w.shape[2] * w.shape[3]
        return 2 * out.numel() * per_output
    raise ValueError("only nn.Linear and nn.Conv2d are counted")
''',
    },
    "gpu_env": {
        "validation with all() and a comprehension": '''
def gpu_env(device_ids):
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in device_ids):
        raise ValueError("ids must be non-negative ints")
    if len(set(device_ids)) < len(device_ids):
        raise ValueError("duplicate ids")
    return dict(CUDA_VISIBLE_DEVICES=",".join(f"{i}" for i in device_ids), CUDA_DEVICE_ORDER="PCI_BUS_ID")
''',
        "-1 hides every GPU": '''
def gpu_env(device_ids):
    ids = list(device_ids)
    if any(type(i) is not int or i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"GPU ids must be distinct non-negative ints, got {ids}")
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, ids)) if ids else "-1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
''',
        # From the twentieth review: failed until the check took an OrderedDict for a dict.
        "an OrderedDict": _GPU_ENV_ORDERED,
        # From the twenty-second: failed until it took any dict.
        "a defaultdict(str)": variant(
            _GPU_ENV_ORDERED, ("from collections import OrderedDict", "from collections import defaultdict"),
            ('    return OrderedDict([("CUDA_VISIBLE_DEVICES", ",".join(map(str, ids))), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID")])',
             '    env = defaultdict(str)\n    env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, ids))\n'
             '    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"\n    return env')),
    },
    "to_channels_last": {
        "tensor.to(memory_format=...)": '''
import torch
def to_channels_last(x):
    if not torch.is_tensor(x) or x.ndim != 4:
        raise ValueError("expected a 4-D tensor")
    return x.to(memory_format=torch.channels_last)
''',
        "isinstance and dim(), a new contiguous copy": '''
import torch
def to_channels_last(x):
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"a 4-D tensor please, not {type(x).__name__}")
    return x.contiguous(memory_format=torch.channels_last).clone(memory_format=torch.channels_last)
''',
        "an empty_like tensor in channels-last format, copied into": '''
import torch


def to_channels_last(x) -> torch.Tensor:
    if type(x) is not torch.Tensor and not isinstance(x, torch.Tensor):
        raise ValueError("expected a torch.Tensor")
    if x.dim() != 4:
        raise ValueError(f"expected 4 dimensions (N, C, H, W), got {x.dim()}")
    out = torch.empty_like(x, memory_format=torch.channels_last)
    out.copy_(x)
    return out
''',
    },
}

# The "partly wrong" sample student: these answers wrong (or left blank), the rest right.
PARTIAL = {
    "make_loader": "always pins memory",
    "layer_flops": None,
}
