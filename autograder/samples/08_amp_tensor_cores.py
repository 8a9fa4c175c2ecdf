"""Wrong and alternative answers of 08_amp_tensor_cores (see autograder/samples/__init__.py)."""
import textwrap

from autograder.samples import variant

_TRAIN_HEAD = '''
import torch
def train_amp(model, loader, optimizer, loss_fn, epochs, device, max_norm=None):
    if epochs < 0:
        raise ValueError("epochs")
    device = torch.device(device)
    low = torch.float16 if device.type == "cuda" else torch.bfloat16
    model.to(device)
    history = []
    for _ in range(epochs):
        losses = []
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
'''
# train_amp through a GradScaler (disabled on the CPU), for the answers that differ from it by a line.
_TRAIN_SCALED = variant(_TRAIN_HEAD, (
    '    low = torch.float16 if device.type == "cuda" else torch.bfloat16\n',
    '    low = torch.float16 if device.type == "cuda" else torch.bfloat16\n'
    '    scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda")\n')) + '''
            with torch.autocast(device.type, dtype=low):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            if max_norm is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
        history.append(sum(losses) / len(losses))
    return history
'''
# A right train_amp whose CUDA branch alone scales (a GradScaler made only there), for the answers
# whose mistake sits in that branch.
_SCALER_ON_CUDA_ONLY = '''
import torch
def train_amp(model, loader, optimizer, loss_fn, epochs, device, max_norm=None):
    if epochs < 0:
        raise ValueError("epochs must be >= 0")
    device = torch.device(device)
    use_cuda = device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda") if use_cuda else None
    model = model.to(device)
    out = []
    for _ in range(epochs):
        total, count = 0.0, 0
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type=device.type, dtype=torch.float16 if use_cuda else torch.bfloat16):
                loss = loss_fn(model(inputs), targets)
            if scaler is not None:
                scaler.scale(loss).backward()
                if max_norm is not None:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                if max_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
                optimizer.step()
            total += loss.item() * len(inputs)
            count += len(inputs)
        out.append(total / count)
    return out
'''
def _in_an_outer_disabled_block(code):
    """A train_amp's epochs loop wrapped, as a whole, in torch.autocast(..., enabled=False)."""
    head, loop = code.split("    for _ in range(epochs):\n")
    loop, tail = loop.split("    return history\n")
    return (head + "    with torch.autocast(device.type, enabled=False):\n"
            + textwrap.indent("    for _ in range(epochs):\n" + loop, "    ") + tail + "    return history\n")


# A right tensor_core_issues, for the answers that differ from it by a line or two.
_TCI = '''
import torch
from torch import nn


def tensor_core_issues(model, batch_size: int, dtype) -> list:
    if dtype in (torch.float16, torch.bfloat16):
        k = 8
    elif dtype == torch.int8:
        k = 16
    else:
        raise ValueError(f"unsupported dtype {dtype}")
    issues = [f"batch size {batch_size} is not a multiple of {k}"] if batch_size % k else []
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear):
            for attr in ("in_features", "out_features"):
                n = getattr(m, attr)
                if n % k:
                    issues.append(f"{name}: Linear {attr}={n} is not a multiple of {k}")
        elif isinstance(m, nn.Conv2d):
            for attr in ("in_channels", "out_channels"):
                n = getattr(m, attr)
                if n % k:
                    issues.append(f"{name}: Conv2d {attr}={n} is not a multiple of {k}")
    return issues
'''
_TCI_NO_BATCH = ('    issues = [f"batch size {batch_size} is not a multiple of {k}"] if batch_size % k else []\n',
                 "    issues = []\n")
_TCI_LINEAR = "        if isinstance(m, nn.Linear):\n"
_TCI_BATCH_NOTE = '{indent}issues.append(f"batch size {{batch_size}} is not a multiple of {{k}}")\n'

# A right end of the loop (no scaler: the checks train on the CPU), for the answers that differ from
# it by a line.
_TRAIN_TAIL = '''            with torch.autocast(device.type, dtype=low):
                loss = loss_fn(model(x), y)
            loss.backward()
            if max_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
            losses.append(loss.item())
        history.append(sum(losses) / len(losses))
    return history
'''

# Case 2 with the draft's first layer (128 inputs) kept.
_FC2_DRAFT_LAYER = '''
import torch
from torch import nn
def fixed_case_2():
    loader = torch.utils.data.DataLoader(torch.randn(123, 16), batch_size=40, drop_last=True)
    model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    return model, loader
'''

WRONG = {
    "pad_to_multiple": {
        "adds k even to a multiple": '''
def pad_to_multiple(n, k):
    if n < 0 or k < 1:
        raise ValueError("bad")
    return n + k - n % k
''',
        "rounds down": '''
def pad_to_multiple(n, k):
    if n < 0 or k < 1:
        raise ValueError("bad")
    return n // k * k
''',
        "no validation": '''
import math
def pad_to_multiple(n, k):
    return math.ceil(n / k) * k
''',
    },
    "tensor_core_issues": {
        "ignores the batch size": '''
import torch
from torch import nn
def tensor_core_issues(model, batch_size, dtype):
    if dtype not in (torch.float16, torch.bfloat16, torch.int8):
        raise ValueError(dtype)
    k = 16 if dtype == torch.int8 else 8
    out = []
    for m in model.modules():
        if isinstance(m, nn.Linear):
            out += [f"{n} not a multiple of {k}" for n in (m.in_features, m.out_features) if n % k]
        if isinstance(m, nn.Conv2d):
            out += [f"{n} not a multiple of {k}" for n in (m.in_channels, m.out_channels) if n % k]
    return out
''',
        "int8 uses 8": '''
import torch
from torch import nn
def tensor_core_issues(model, batch_size, dtype):
    if dtype not in (torch.float16, torch.bfloat16, torch.int8):
        raise ValueError(dtype)
    k = 8
    out = [f"batch {batch_size}"] if batch_size % k else []
    for m in model.modules():
        if isinstance(m, nn.Linear):
            out += [f"{n} not a multiple of {k}" for n in (m.in_features, m.out_features) if n % k]
        if isinstance(m, nn.Conv2d):
            out += [f"{n} not a multiple of {k}" for n in (m.in_channels, m.out_channels) if n % k]
    return out
''',
        "only looks at Linear layers": '''
import torch
from torch import nn
def tensor_core_issues(model, batch_size, dtype):
    if dtype not in (torch.float16, torch.bfloat16, torch.int8):
        raise ValueError(dtype)
    k = 16 if dtype == torch.int8 else 8
    out = [f"batch {batch_size}"] if batch_size % k else []
    for m in model.modules():
        if isinstance(m, nn.Linear):
            out += [f"{n} not a multiple of {k}" for n in (m.in_features, m.out_features) if n % k]
    return out
''',
        "one message per distinct size": '''
import torch
from torch import nn
def tensor_core_issues(model, batch_size, dtype):
    if dtype not in (torch.float16, torch.bfloat16, torch.int8):
        raise ValueError(dtype)
    k = 16 if dtype == torch.int8 else 8
    sizes = {batch_size}
    for m in model.modules():
        if isinstance(m, nn.Linear):
            sizes |= {m.in_features, m.out_features}
        if isinstance(m, nn.Conv2d):
            sizes |= {m.in_channels, m.out_channels}
    return [f"{n} is not a multiple of {k}" for n in sorted(sizes) if n % k]
''',
        "top-level children only": '''
import torch
from torch import nn
def tensor_core_issues(model, batch_size, dtype):
    if dtype not in (torch.float16, torch.bfloat16, torch.int8):
        raise ValueError(dtype)
    k = 16 if dtype == torch.int8 else 8
    out = [f"batch {batch_size}"] if batch_size % k else []
    for m in model.children():
        if isinstance(m, nn.Linear):
            out += [f"{n} not a multiple of {k}" for n in (m.in_features, m.out_features) if n % k]
        if isinstance(m, nn.Conv2d):
            out += [f"{n} not a multiple of {k}" for n in (m.in_channels, m.out_channels) if n % k]
    return out
''',
        "the batch size judged only when the model has a Linear layer": variant(
            _TCI, _TCI_NO_BATCH, (_TCI_LINEAR, _TCI_LINEAR + "            has_linear = True\n"), (
            "    return issues", "    if has_linear and batch_size % k:\n" + _TCI_BATCH_NOTE.format(indent=" " * 8)
            + "    return issues"), ("    issues = []\n", "    issues, has_linear = [], False\n")),
        "one batch-size message per Linear layer": variant(_TCI, _TCI_NO_BATCH, (
            _TCI_LINEAR, _TCI_LINEAR + "            if batch_size % k:\n" + _TCI_BATCH_NOTE.format(indent=" " * 16))),
        "FP8 and qint8 taken as int8 (the notebook names three types)": variant(
            _TCI, ("    elif dtype == torch.int8:\n",
                   "    elif dtype in (torch.int8, torch.qint8, torch.float8_e4m3fn, torch.float8_e5m2):\n")),
        "layers matched by exact type (subclasses of Linear missed)": variant(
            _TCI, (_TCI_LINEAR, "        if type(m) is nn.Linear:\n"),
            ("        elif isinstance(m, nn.Conv2d):\n", "        elif type(m) is nn.Conv2d:\n")),
        "a layer's misfit sizes gathered in a set (a square layer, Linear(12, 12), reported once)": '''
import torch
from torch import nn
def tensor_core_issues(model, batch_size, dtype):
    multiples = {torch.float16: 8, torch.bfloat16: 8, torch.int8: 16}
    if dtype not in multiples:
        raise ValueError(f"no Tensor Core rule for {dtype}")
    k = multiples[dtype]
    issues = [f"batch size {batch_size} is not a multiple of {k}"] if batch_size % k else []
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear):
            sizes = {m.in_features, m.out_features}
        elif isinstance(m, nn.Conv2d):
            sizes = {m.in_channels, m.out_channels}
        else:
            continue
        issues += [f"{name}: {type(m).__name__} size {n} is not a multiple of {k}" for n in sorted(sizes) if n % k]
    return issues
''',
        "the rule chosen by element size (int16, uint8 accepted)": variant(_TCI, ("""    if dtype in (torch.float16, torch.bfloat16):
        k = 8
    elif dtype == torch.int8:
        k = 16
    else:
        raise ValueError(f"unsupported dtype {dtype}")
""", """    k = {2: 8, 1: 16}.get(dtype.itemsize)  # rows of 16 bytes, as NVIDIA puts it
    if k is None:
        raise ValueError(f"unsupported dtype {dtype}")
""")),
        "any layer with in/out channels reported (a Conv1d too)": '''
import torch


def tensor_core_issues(model, batch_size: int, dtype) -> list:
    rules = {torch.float16: 8, torch.bfloat16: 8, torch.int8: 16}
    if dtype not in rules:
        raise ValueError(f"no Tensor Core rule for {dtype}")
    k = rules[dtype]
    issues = []
    if batch_size % k:
        issues.append(f"batch size {batch_size} is not a multiple of {k}")
    for name, m in model.named_modules():
        for attr in ("in_features", "out_features", "in_channels", "out_channels"):
            n = getattr(m, attr, None)
            if isinstance(n, int) and n % k:
                issues.append(f"{name}: {type(m).__name__} {attr}={n} is not a multiple of {k}")
    return issues
''',
    },
    "fixed_case_1": {
        "a TensorDataset returned, not the data tensor or a DataLoader": '''
import torch
from torch import nn
from torch.utils.data import TensorDataset
def fixed_case_1():
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(),
                          nn.Linear(16, 8))
    return model, TensorDataset(torch.randn(128, 16))
''',
        "the seed's code unchanged": '''
import torch
def fixed_case_1():
    data = torch.randn(128, 15)
    model = torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.Linear(64, 32), torch.nn.Linear(32, 16),
                                torch.nn.Linear(16, 8), torch.nn.Linear(8, 4), torch.nn.Linear(4, 5))
    return model, data
''',
        "runs, but 15 features and 3 outputs": '''
import torch
from torch import nn
def fixed_case_1():
    data = torch.randn(128, 15)
    model = nn.Sequential(nn.Linear(15, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                          nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 3))
    return model, data
''',
        "aligned but no activations": '''
import torch
import torch.nn.functional as F
from torch import nn
def fixed_case_1():
    data = F.pad(torch.randn(128, 15), (0, 1))
    model = nn.Sequential(nn.Linear(16, 64), nn.Linear(64, 32), nn.Linear(32, 16), nn.Linear(16, 8))
    return model, data
''',
        "Identity between the Linear layers": '''
import torch
import torch.nn.functional as F
from torch import nn
def fixed_case_1():
    model = nn.Sequential(nn.Linear(16, 64), nn.Identity(), nn.Linear(64, 32), nn.Identity(),
                          nn.Linear(32, 16), nn.Identity(), nn.Linear(16, 8))
    return model, F.pad(torch.randn(128, 15), (0, 1))
''',
        "a side layer reads the ReLU, the main path has none": '''
import torch
import torch.nn.functional as F
from torch import nn
class Sneaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3, self.l4 = nn.Linear(16, 64), nn.Linear(64, 32), nn.Linear(32, 16), nn.Linear(16, 8)
        self.side = nn.Linear(64, 8)
    def forward(self, x):
        h = self.l1(x)
        self.side(F.relu(h))  # read through a ReLU, then thrown away
        return self.l4(self.l3(self.l2(h)))
def fixed_case_1():
    return Sneaky(), F.pad(torch.randn(128, 15), (0, 1))
''',
        "no activation, but a model with activations handed to any copier (__deepcopy__)": '''
import copy
import torch
import torch.nn.functional as F
from torch import nn
class Trick(nn.Sequential):
    def __deepcopy__(self, memo):  # hands a copier a model with activations
        return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 8))
def fixed_case_1():
    return Trick(nn.Linear(16, 64), nn.Linear(64, 32), nn.Linear(32, 16), nn.Linear(16, 8)), F.pad(torch.randn(128, 15), (0, 1))
''',
    },
    "fixed_case_2": {
        "a loader of dict batches, which model(batch) cannot take": '''
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
class _Rows(Dataset):
    def __init__(self):
        self.x = torch.randn(123, 16)
    def __len__(self):
        return 120
    def __getitem__(self, i):
        return {"x": self.x[i]}
def fixed_case_2():
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    return model, DataLoader(_Rows(), batch_size=8)
''',
        "last batch of 59": '''
import torch
from torch import nn
def fixed_case_2():
    loader = torch.utils.data.DataLoader(torch.randn(123, 16), batch_size=64)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    return model, loader
''',
        "first layer still expects 128 features": _FC2_DRAFT_LAYER,
        "the draft's 128-input first layer kept, data of 128 features made up to fit it": variant(
            _FC2_DRAFT_LAYER, ("torch.randn(123, 16)", "torch.randn(123, 128)")),
        "drops most of the data": '''
import torch
from torch import nn
def fixed_case_2():
    loader = torch.utils.data.DataLoader(torch.randn(123, 16), batch_size=64, drop_last=True)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    return model, loader
''',
        "128 draws with replacement from the 123 samples (about 45 never seen, others twice)": '''
import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler
def fixed_case_2():
    data = torch.randn(123, 16)
    loader = DataLoader(data, batch_size=8, sampler=RandomSampler(data, replacement=True, num_samples=128))
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    return model, loader
''',
        "Dropout(0.0) in place of the ReLUs": '''
import torch
from torch import nn
from torch.utils.data import DataLoader
def fixed_case_2():
    loader = DataLoader(torch.randn(123, 16), batch_size=40, drop_last=True)
    model = nn.Sequential(nn.Linear(16, 64), nn.Dropout(0.0), nn.Linear(64, 32), nn.Dropout(0.0), nn.Linear(32, 16))
    return model, loader
''',
        "functional dropout left on in evaluation, no activation": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader


class MLP(nn.Module):
    """No activation at all: the layers still collapse into one linear map (times dropout masks)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 64), nn.Linear(64, 32), nn.Linear(32, 16)

    def forward(self, x):
        x = F.dropout(self.fc1(x), 0.1)   # training=True by default: random in eval mode too
        x = F.dropout(self.fc2(x), 0.1)
        return self.fc3(x)


def fixed_case_2():
    data = torch.randn(123, 16)
    return MLP(), DataLoader(data, batch_size=40, drop_last=True)
''',
    },
    "fixed_case_3": {
        "no padding: the prediction shrinks": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
def fixed_case_3():
    images = F.pad(torch.randn(1024, 3, 26, 26), (0, 0, 0, 0, 0, 5))
    loader = DataLoader(TensorDataset(images, torch.randn(1024, 1, 26, 26)), batch_size=64, drop_last=True)
    model = nn.Sequential(nn.Conv2d(8, 64, 3), nn.ReLU(), nn.Conv2d(64, 128, 3), nn.ReLU(),
                          nn.Conv2d(128, 64, 3), nn.ReLU(), nn.Conv2d(64, 8, 3), nn.Sigmoid())
    return model, loader
''',
        "runs, but 3 input channels and 1 output channel": '''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
def fixed_case_3():
    loader = DataLoader(TensorDataset(torch.randn(1024, 3, 26, 26), torch.randn(1024, 1, 26, 26)),
                        batch_size=64, drop_last=True)
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(128, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 1, 3, padding=1), nn.Sigmoid())
    return model, loader
''',
        "yields images only": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader
def fixed_case_3():
    images = F.pad(torch.randn(1024, 3, 26, 26), (0, 0, 0, 0, 0, 5))
    loader = DataLoader(images, batch_size=64, drop_last=True)
    model = nn.Sequential(nn.Conv2d(8, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(128, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 8, 3, padding=1), nn.Sigmoid())
    return model, loader
''',
        "BatchNorm in place of the ReLUs": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
def fixed_case_3():
    images = F.pad(torch.randn(1024, 3, 26, 26), (0, 0, 0, 0, 0, 5))
    loader = DataLoader(TensorDataset(images, torch.randn(1024, 1, 26, 26)), batch_size=64, drop_last=True)
    model = nn.Sequential(nn.Conv2d(8, 64, 3, padding=1), nn.BatchNorm2d(64), nn.Conv2d(64, 128, 3, padding=1),
                          nn.BatchNorm2d(128), nn.Conv2d(128, 64, 3, padding=1), nn.BatchNorm2d(64),
                          nn.Conv2d(64, 8, 3, padding=1), nn.Sigmoid())
    return model, loader
''',
    },
    "autocast_dtype": {
        "float16 everywhere": '''
import torch
def autocast_dtype(device):
    if str(device).split(":")[0] not in ("cpu", "cuda"):
        raise ValueError(device)
    return torch.float16
''',
        "bfloat16 everywhere": '''
import torch
def autocast_dtype(device):
    if str(device).split(":")[0] not in ("cpu", "cuda"):
        raise ValueError(device)
    return torch.bfloat16
''',
        "only the exact string 'cuda'": '''
import torch
def autocast_dtype(device):
    if device == "cuda":
        return torch.float16
    if device == "cpu":
        return torch.bfloat16
    raise ValueError(device)
''',
        "bfloat16 on a GPU that supports it": '''
import torch


def autocast_dtype(device) -> torch.dtype:
    kind = device.type if isinstance(device, torch.device) else str(device).split(":")[0]
    if kind == "cuda":
        # Ampere and newer: bfloat16 has float32's range, no GradScaler needed
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if kind == "cpu":
        return torch.bfloat16
    raise ValueError(f"unknown device {device!r}")
''',
        "float16 for any device torch knows (mps, xpu, meta)": '''
import torch


def autocast_dtype(device) -> torch.dtype:
    try:
        device = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"unknown device {device!r}") from err
    return torch.bfloat16 if device.type == "cpu" else torch.float16
''',
    },
    "train_amp": {
        "the epochs' losses as a generator, not a list": variant(_TRAIN_SCALED, ("    return history\n",
                                                                               "    return (loss for loss in history)\n")),
        "the loss after the forward's autocast block, by a helper decorated autocast(enabled=False) inside a disabled block": variant(_TRAIN_SCALED, ("import torch\n", "import torch\n\n\n@torch.autocast(\"cpu\", enabled=False)\n"
            "def float32_loss(loss_fn, out, y):\n    return loss_fn(out.float(), y)\n"), ("                loss = loss_fn(model(x), y)\n",
            "                out = model(x)\n"
            "            with torch.autocast(device.type, enabled=False):   # keep the loss out of autocast\n"
            "                loss = float32_loss(loss_fn, out, y)\n")),
        "the loss after the forward's autocast block, in two disabled blocks of its own": variant(_TRAIN_SCALED, ("                loss = loss_fn(model(x), y)\n",
            "                out = model(x)\n"
            "            # the loss in float32, after the block (autocast off twice \"to be sure\")\n"
            "            with torch.autocast(device.type, enabled=False), torch.autocast(device.type, enabled=False):\n"
            "                loss = loss_fn(out.float(), y)\n")),
        "the loss after the forward's autocast block, both inside an outer autocast(enabled=False)": _in_an_outer_disabled_block(_TRAIN_HEAD + variant(_TRAIN_TAIL, ("                loss = loss_fn(model(x), y)\n",
            "                out = model(x)\n"
            "            with torch.autocast(device.type, enabled=False):\n"
            "                loss = loss_fn(out.float(), y)\n"))),
        "no autocast at all": _TRAIN_HEAD + variant(_TRAIN_TAIL, (
            "            with torch.autocast(device.type, dtype=low):\n                loss", "            loss")),
        "backward inside autocast": _TRAIN_HEAD + variant(_TRAIN_TAIL, (
            "            loss.backward()\n", "                loss.backward()\n")),
        "clips scaled gradients": _TRAIN_HEAD.replace("    history = []", "    scaler = torch.amp.GradScaler(device.type)\n    history = []") + '''
            with torch.autocast(device.type, dtype=low):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            if max_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            losses.append(loss.item())
        history.append(sum(losses) / len(losses))
    return history
''',
        "float16 on the CPU": _TRAIN_HEAD + variant(_TRAIN_TAIL, ("dtype=low", "dtype=torch.float16")),
        "ignores max_norm": _TRAIN_HEAD + variant(_TRAIN_TAIL, (
            "            if max_norm is not None:\n"
            "                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n", "")),
        "returns the last batch loss": _TRAIN_HEAD + variant(_TRAIN_TAIL, (
            "history.append(sum(losses) / len(losses))", "history.append(losses[-1])")),
        "the loss computed after the autocast block (forward only under autocast)": _TRAIN_HEAD + variant(
            _TRAIN_TAIL, ("                loss = loss_fn(model(x), y)\n",
                          "                out = model(x)\n            loss = loss_fn(out, y)\n")),
        "the loss after the autocast block, in float32 (its own autocast(enabled=False) block)": _TRAIN_HEAD + variant(
            _TRAIN_TAIL, ("                loss = loss_fn(model(x), y)\n",
                          "                out = model(x)\n"
                          "            with torch.autocast(device.type, enabled=False):\n"
                          "                loss = loss_fn(out.float(), y)\n")),
        "the loss after the autocast block, on the output cast to float32": _TRAIN_HEAD + variant(
            _TRAIN_TAIL, ("                loss = loss_fn(model(x), y)\n",
                          "                out = model(x)\n            loss = loss_fn(out.float(), y)\n")),
        "no zero_grad: gradients pile up from batch to batch": variant(
            _TRAIN_HEAD, ("            optimizer.zero_grad()\n", "")) + _TRAIN_TAIL,
        "device used as a string only (never torch.device(device))": variant(
            _TRAIN_SCALED, ("    device = torch.device(device)\n", ""),
            ("low = torch.float16 if device.type == \"cuda\"", "low = torch.float16 if device == \"cuda\""),
            ("enabled=device.type == \"cuda\"", "enabled=device == \"cuda\""),
            ("torch.autocast(device.type, dtype=low)", "torch.autocast(device, dtype=low)")),
        "optimizer.step() after scaler.step(optimizer): two steps a batch": variant(
            _TRAIN_SCALED, ("            scaler.step(optimizer)\n", "            scaler.step(optimizer)\n            optimizer.step()\n")),
        "the model's weights cast to the low type (pure bfloat16 training, not mixed precision)": variant(
            _TRAIN_SCALED, ("    model.to(device)\n", "    model.to(device=device, dtype=low)\n")),
        # On the CPU a skipped move changes nothing: the check is undecided (TO_A_PERSON below).
        "never moves the model nor the batches to device": variant(
            _TRAIN_SCALED, ("    model.to(device)\n", ""), ("            x, y = x.to(device), y.to(device)\n", "")),
    },
}


_RULE_FUNCTION = '''
import torch
def tensor_core_issues(model, batch_size, dtype):
    if dtype == torch.int8:
        k = 16
    elif dtype in (torch.float16, torch.bfloat16):
        k = 8
    else:
        raise ValueError("unsupported dtype")
    found = []
    def rule(label, n):
        if n % k != 0:
            found.append(f"{label} is {n}; Tensor Cores want a multiple of {k}")
    rule("batch size", batch_size)
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            rule(f"{name}.in_features", m.in_features); rule(f"{name}.out_features", m.out_features)
        elif isinstance(m, torch.nn.Conv2d):
            rule(f"{name}.in_channels", m.in_channels); rule(f"{name}.out_channels", m.out_channels)
    return found
'''

ALTERNATIVE = {
    "pad_to_multiple": {
        "math.ceil": '''
import math
def pad_to_multiple(n, k):
    if k <= 0 or n < 0:
        raise ValueError("n >= 0 and k >= 1 please")
    return math.ceil(n / k) * k
''',
    },
    "tensor_core_issues": {
        "isinstance on a tuple and a rule function": _RULE_FUNCTION,
        "isinstance on a tuple and a rule function, the messages as a tuple": variant(_RULE_FUNCTION, ("    return found", "    return tuple(found)")),
    },
    "fixed_case_1": {
        "zero-padded features via torch.cat, 16 outputs": '''
import torch
from torch import nn
def fixed_case_1():
    x = torch.randn(128, 15)
    data = torch.cat([x, torch.zeros(128, 1)], dim=1)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 32), nn.GELU(),
                          nn.Linear(32, 16), nn.GELU(), nn.Linear(16, 16))
    return model, data
''',
        "a module of its own, activations from torch.nn.functional in forward": '''
import torch
import torch.nn.functional as F
from torch import nn
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3, self.out = nn.Linear(16, 64), nn.Linear(64, 32), nn.Linear(32, 16), nn.Linear(16, 8)
    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        x = F.gelu(self.fc3(x))
        return self.out(x)
def fixed_case_1():
    return Classifier(), F.pad(torch.randn(128, 15), (0, 1))
''',
        "one ReLU instance between every two layers": '''
import torch
import torch.nn.functional as F
from torch import nn
def fixed_case_1():
    act = nn.ReLU()  # no state: one instance serves every gap
    model = nn.Sequential(nn.Linear(16, 64), act, nn.Linear(64, 32), act, nn.Linear(32, 16), act, nn.Linear(16, 8))
    return model, F.pad(torch.randn(128, 15), (0, 1))
''',
        "layers called through their forward(), F.relu between them": '''
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 64), nn.Linear(64, 32)
        self.fc3, self.out = nn.Linear(32, 16), nn.Linear(16, 8)

    def forward(self, x):
        x = F.relu(self.fc1.forward(x))
        x = F.relu(self.fc2.forward(x))
        x = F.relu(self.fc3.forward(x))
        return self.out.forward(x)  # 8 scores, the first 3 are the classes


def fixed_case_1():
    data = F.pad(torch.randn(128, 15), (0, 1))
    return Net(), data
''',
        "a Linear subclass that applies its own ReLU": '''
import torch
import torch.nn.functional as F
from torch import nn


class LinearReLU(nn.Linear):
    """A Linear layer followed by its ReLU (the fused block of torch.ao.nn.intrinsic, written by hand)."""

    def forward(self, x):
        return F.relu(super().forward(x))


def fixed_case_1():
    data = F.pad(torch.randn(128, 15), (0, 1))
    model = nn.Sequential(LinearReLU(16, 64), LinearReLU(64, 32), LinearReLU(32, 16), nn.Linear(16, 8))
    return model, data
''',
        "the head made before the body (widths read in the order the layers run)": '''
# Correct: a module of its own whose output layer is created (registered) before the hidden stack.
# Called in the right order: 16 -> 64 -> 32 -> 16 -> 8, ReLU between every two Linear layers.
import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 8)          # 8 scores, the first 3 are the classes
        self.body = nn.Sequential(
            nn.Linear(16, 64), nn.ReLU(),
            nn.Linear(64, 32), nn.ReLU(),
            nn.Linear(32, 16), nn.ReLU(),
        )

    def forward(self, x):
        return self.head(self.body(x))


def fixed_case_1():
    data = F.pad(torch.randn(128, 15), (0, 1))
    return Classifier(), data
''',
        "features padded inside forward, a ModuleList, gelu": '''
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 64), nn.Linear(64, 32), nn.Linear(32, 16), nn.Linear(16, 8)])

    def forward(self, x):
        if x.shape[-1] == 15:
            x = F.pad(x, (0, 1))
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.gelu(x)
        return x


def fixed_case_1():
    return Net(), torch.randn(128, 15)
''',
        "model and data in bfloat16": '''
import torch
import torch.nn.functional as F
from torch import nn


def fixed_case_1():
    data = F.pad(torch.randn(128, 15), (0, 1)).to(torch.bfloat16)
    model = nn.Sequential(
        nn.Linear(16, 64), nn.ReLU(),
        nn.Linear(64, 32), nn.ReLU(),
        nn.Linear(32, 16), nn.ReLU(),
        nn.Linear(16, 8),
    ).to(torch.bfloat16)
    return model, data
''',
    },
    "fixed_case_2": {
        "padding the data set to 128 samples": '''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
def fixed_case_2():
    x = torch.randn(123, 16)
    x = torch.cat([x, x[:5]])  # 128 samples, batches of 64
    loader = DataLoader(TensorDataset(x), batch_size=64)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    return model, loader
''',
        # "at least 16 scores": the visible test once asked for exactly 16 and failed this answer.
        "24 scores per sample (more than the 16 asked for, still a multiple of 8)": '''
import torch
from torch import nn
from torch.utils.data import DataLoader
def fixed_case_2():
    loader = DataLoader(torch.randn(123, 16), batch_size=40, drop_last=True)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 24))
    return model, loader
''',
        "a shuffled loader of batches of 8, the last 3 samples dropped": '''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
def fixed_case_2():
    loader = DataLoader(TensorDataset(torch.randn(123, 16)), batch_size=8, shuffle=True, drop_last=True)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    return model, loader
''',
        "batches of 40, the data padded with rows of zeros to 160": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader


def fixed_case_2():
    """Batches of 40, the data set padded with zero samples to a whole number of batches (123 -> 160)."""
    batch = 40
    data = torch.randn(123, 16)
    padded = -(-len(data) // batch) * batch                    # pad_to_multiple(123, 40) = 160
    data = F.pad(data, (0, 0, 0, padded - len(data)))          # zero rows at the end
    loader = DataLoader(data, batch_size=batch)                # 4 full batches of 40
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    return model, loader
''',
    },
    "fixed_case_3": {
        "last convolution with 8 channels, prediction uses all of them": '''
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
def fixed_case_3():
    images = torch.zeros(1024, 8, 26, 26)
    images[:, :3] = torch.randn(1024, 3, 26, 26)
    masks = torch.randn(1024, 1, 26, 26)
    loader = DataLoader(TensorDataset(images, masks), batch_size=32)
    model = nn.Sequential(nn.Conv2d(8, 64, 3, padding="same"), nn.ReLU(),
                          nn.Conv2d(64, 128, 3, padding="same"), nn.ReLU(),
                          nn.Conv2d(128, 64, 3, padding="same"), nn.ReLU(),
                          nn.Conv2d(64, 8, 3, padding="same"), nn.Sigmoid())
    return model, loader
''',
        "convolutions in a ModuleList, F.relu between them": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
class Segmenter(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, padding=1) for a, b in ((8, 64), (64, 128), (128, 64), (64, 8)))
    def forward(self, x):
        for conv in self.convs[:-1]:
            x = F.relu(conv(x))
        return torch.sigmoid(self.convs[-1](x)[:, :1])
def fixed_case_3():
    images = F.pad(torch.randn(1024, 3, 26, 26), (0, 0, 0, 0, 0, 5))
    loader = DataLoader(TensorDataset(images, torch.randn(1024, 1, 26, 26)), batch_size=64, drop_last=True)
    return Segmenter(), loader
''',
        "a ResNet-style projection shortcut around the middle convolutions": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    """64 -> 128 -> 64 with ReLUs, and a ResNet-style 1x1 projection shortcut around the middle."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(8, 64, 3, padding=1)
        self.c2 = nn.Conv2d(64, 128, 3, padding=1)
        self.c3 = nn.Conv2d(128, 64, 3, padding=1)
        self.head = nn.Conv2d(64, 8, 3, padding=1)
        self.shortcut = nn.Conv2d(64, 64, 1)

    def forward(self, x):
        h1 = F.relu(self.c1(x))
        h = F.relu(self.c2(h1))
        h = F.relu(self.c3(h) + self.shortcut(h1))   # as torchvision's BasicBlock with a downsample
        return torch.sigmoid(self.head(h)[:, :1])


def fixed_case_3():
    images, masks = torch.randn(1024, 3, 26, 26), torch.randn(1024, 1, 26, 26)
    images = F.pad(images, (0, 0, 0, 0, 0, 5))
    return Net(), DataLoader(TensorDataset(images, masks), batch_size=64, drop_last=True)
''',
        "channels padded inside forward, padding same, a shuffled loader": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class UNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(8, 64, 3, padding="same")
        self.c2 = nn.Conv2d(64, 128, 3, padding="same")
        self.c3 = nn.Conv2d(128, 64, 3, padding="same")
        self.c4 = nn.Conv2d(64, 8, 3, padding="same")

    def forward(self, x):
        x = F.pad(x, (0, 0, 0, 0, 0, 8 - x.shape[1]))  # 3 -> 8 channels, zeros
        x = torch.relu(self.c1(x))
        x = torch.relu(self.c2(x))
        x = torch.relu(self.c3(x))
        return torch.sigmoid(self.c4(x)[:, :1])


def fixed_case_3():
    images, masks = torch.randn(1024, 3, 26, 26), torch.rand(1024, 1, 26, 26)
    loader = DataLoader(TensorDataset(images, masks), batch_size=64, shuffle=True)
    return UNetish(), loader
''',
        "a Dataset that pads, Conv-BatchNorm-ReLU blocks, batches of 32": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SegData(Dataset):
    def __init__(self, images, masks):
        self.images, self.masks = images, masks

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return F.pad(self.images[i], (0, 0, 0, 0, 0, 5)), self.masks[i]


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def fixed_case_3():
    images, masks = torch.randn(1024, 3, 26, 26), (torch.rand(1024, 1, 26, 26) > 0.5).float()
    model = nn.Sequential(block(8, 64), block(64, 128), block(128, 64), nn.Conv2d(64, 8, 3, padding=1))
    return model, DataLoader(SegData(images, masks), batch_size=32, shuffle=True)
''',
    },
    "autocast_dtype": {
        "torch.device and a dict": '''
import torch
def autocast_dtype(device):
    table = {"cuda": torch.float16, "cpu": torch.bfloat16}
    kind = torch.device(device).type if not isinstance(device, str) or device.split(":")[0] in table else device
    if kind not in table:
        raise ValueError(f"unknown device {device}")
    return table[kind]
''',
    },
    "train_amp": {
        "the loss in a float32 region inside the autocast block (as the notebook shows for a hand-written loss)":
            variant(_TRAIN_SCALED, ("                loss = loss_fn(model(x), y)\n",
                                    "                out = model(x)\n"
                                    "                with torch.autocast(device.type, enabled=False):\n"
                                    "                    loss = loss_fn(out.float(), y.float())\n")),
        "a GradScaler disabled on the CPU, scaler.step and update every batch": _TRAIN_SCALED,
        "scaler only on CUDA, weighted epoch means": _SCALER_ON_CUDA_ONLY,
        "batches moved by torch.as_tensor(..., device=) and .to(device, non_blocking=True), model.to(device=)":
            variant(_TRAIN_SCALED, ("    model.to(device)\n", "    model = model.to(device=device)\n"), (
                "            x, y = x.to(device), y.to(device)\n",
                "            x, y = torch.as_tensor(x, device=device), y.to(device, non_blocking=True)\n")),
        "an enabled CPU GradScaler, unscaled before clipping": '''
import torch
def train_amp(model, loader, optimizer, loss_fn, epochs, device, max_norm=None):
    if epochs < 0:
        raise ValueError("negative epochs")
    device = torch.device(device)
    scaler = torch.amp.GradScaler(device.type)
    model.to(device)
    history = []
    for _ in range(epochs):
        values = []
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            with torch.autocast(device.type, dtype=torch.float16 if device.type == "cuda" else torch.bfloat16):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            if max_norm:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            values.append(float(loss))
        history.append(sum(values) / len(values))
    return history
''',
        "epoch means as NumPy float32 (the losses summed as a tensor, read with .numpy())": variant(
            _SCALER_ON_CUDA_ONLY, ("total += loss.item() * len(inputs)", "total += loss.detach().float() * len(inputs)"),
            ("out.append(total / count)", "out.append(total.cpu().numpy() / count)")),
    },
}

# The "partly wrong" sample student: these answers wrong (or left blank), the rest right.
# A skipped move changes nothing on the CPU: the spies on the moves can only send this to a person.
TO_A_PERSON = {"train_amp": ["never moves the model nor the batches to device"]}

PARTIAL = {
    "train_amp": "backward inside autocast",
    "fixed_case_2": None,
}

# Wrong answers whose mistake sits in a branch that only CUDA runs: a grader whose GPU the answer can
# use (GradingLimits.gpus, with a memory cgroup) fails them (test_train_amp_clips_unscaled runs again
# on CUDA there); any other grader never runs that branch and passes them (the instructor guide says so). tests/gpu_machine/ judges them on
# a machine with a GPU; tests/test_checks_catalogue.py where the tests run on one.
_UNSCALE_THEN_CLIP = ("                    scaler.unscale_(optimizer)\n"
                      "                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n")
SEEN_ON_A_GPU = {
    "train_amp": {
        "clips before scaler.unscale_, on CUDA only": variant(_SCALER_ON_CUDA_ONLY, (
            _UNSCALE_THEN_CLIP, "                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n")),
        "clips, then scaler.unscale_, on CUDA only": variant(_SCALER_ON_CUDA_ONLY, (
            _UNSCALE_THEN_CLIP, "                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
                                "                    scaler.unscale_(optimizer)\n")),
    },
}
