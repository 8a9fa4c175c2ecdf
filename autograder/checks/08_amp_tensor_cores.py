"""Hidden checks of 08_amp_tensor_cores (Tensor Core shapes, autocast, GradScaler)."""
import math
import random
import re
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.linear import NonDynamicallyQuantizableLinear
from torch.utils.data import DataLoader, TensorDataset

from autograder.checks._support import exact_float, exact_int, exact_list, raises_value_error, there, timeout, type_name


@contextmanager
def _one_thread():
    """Tiny models train far faster on one torch thread, above all on a busy machine."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


# --- pad_to_multiple ----------------------------------------------------------------------
def test_pad_to_multiple_values(pad_to_multiple):
    """the smallest multiple of k at least n, for random n and k

    False failure of a correct answer: 0 (random inputs, exact comparison).
    """
    for _ in range(50):
        k = random.randint(1, 32)
        n = random.randint(0, 500)
        expected = math.ceil(n / k) * k
        assert exact_int(pad_to_multiple(n, k), "pad_to_multiple") == expected, (
            "the result must be the smallest multiple of k that is >= n")
    k = random.choice([8, 16])
    m = k * random.randint(1, 20)
    assert pad_to_multiple(m, k) == m, "a multiple of k stays as it is"
    assert pad_to_multiple(0, k) == 0, "0 is a multiple of k"


def test_pad_to_multiple_errors(pad_to_multiple):
    """a negative n or a k below 1 raises ValueError"""
    for bad in ((-1, 8), (5, 0), (5, -8)):
        with raises_value_error(f"pad_to_multiple{bad}"):
            pad_to_multiple(*bad)


# --- tensor_core_issues ------------------------------------------------------------------------
def _random_dims(k, n):
    """n sizes, each a multiple of k or not, at random, at least one of them not."""
    dims = []
    for _ in range(n):
        if random.random() < 0.5:
            dims.append(k * random.randint(1, 8))
        else:
            dims.append(k * random.randint(0, 8) + random.randint(1, k - 1))
    if all(d % k == 0 for d in dims):  # always leave something to find
        dims[random.randrange(n)] += random.randint(1, k - 1)
    return dims


def _check_messages(issues, offending, what, fewer=None):
    """One message per offending size, each naming its size: the messages must pair off with the
    sizes one to one (a matching, not first come first served: where the batch size equals a
    layer's size, the message of the layer may also name the batch size, and taking it for the
    batch first would leave the layer's size without its message)."""
    issues = exact_list(issues, "the result")
    assert all(isinstance(m, str) for m in issues), "every issue must be a message (str)"
    assert len(issues) == len(offending), (
        f"{what}: expected one message per offending dimension ({len(offending)}), got {len(issues)}"
        + ((fewer or _FEWER) if len(issues) < len(offending) else _MORE))
    names = [[j for j, m in enumerate(issues) if re.search(rf"(?<!\d){n}(?!\d)", m)] for n in offending]
    assert _pairs_off(names, len(issues)), f"{what}: a message must name each offending size (one is missing)"


# Where to look, by which way the count is off: the catalogued mistakes that give too few
# messages miss nested layers, subclasses, the batch size or a size shared by two layers; those
# that give too many count other layers, or the batch size once per layer.
_FEWER = (" (too few: is every Linear and Conv2d found, nested ones and subclasses too, as model.modules() "
          "and isinstance find them; is a size two layers share reported for each, and a square layer's in and out "
          "sizes both; is the batch size judged?)")
_MORE = (" (too many: only Linear and Conv2d sizes count, each once per layer that has it, "
         "and the batch size once)")


def _pairs_off(names, n_messages):
    """Whether every size can have a message of its own, names[i] listing the messages that name
    size i (augmenting paths, Kuhn's algorithm: a handful of sizes here)."""
    owner = [None] * n_messages

    def place(i, tried):
        for j in names[i]:
            if j not in tried:
                tried.add(j)
                if owner[j] is None or place(owner[j], tried):
                    owner[j] = i
                    return True
        return False

    return all(place(i, set()) for i in range(len(names)))


def test_tensor_core_issues_linear(tensor_core_issues):
    """one message per offending Linear dimension and batch size, float16 and bfloat16

    The model ends in a square layer of a misfit size (d_model to d_model, common in real models):
    two messages for it, in_features and out_features, not one per distinct size.
    False failure of a correct answer: 0 (random sizes, exact comparison of the messages).
    """
    aligned = random.choice((True, False))  # one model with a misfit batch size, one without, in either order
    for dtype, batch_ok in ((torch.float16, aligned), (torch.bfloat16, not aligned)):
        sizes = _random_dims(8, 4)
        # The nested layer is a subclass of nn.Linear (the one nn.MultiheadAttention projects with):
        # still a Linear layer, which an answer matching layers by exact type would miss. Its
        # in_features are always a misfit, so that such an answer reports one message too few.
        if sizes[1] % 8 == 0:
            sizes[1] += random.randint(1, 7)
        square = 8 * random.randint(1, 8) + random.randint(1, 7)
        model = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(),
                              nn.Sequential(NonDynamicallyQuantizableLinear(sizes[1], sizes[2]), nn.Tanh()),
                              nn.Linear(sizes[2], sizes[3]), nn.ReLU(), nn.Linear(sizes[3], square), nn.ReLU(),
                              nn.Linear(square, square))
        batch = 8 * random.randint(1, 16) + (0 if batch_ok else random.randint(1, 7))
        dims = [sizes[0], sizes[1], sizes[1], sizes[2], sizes[2], sizes[3], sizes[3], square, square, square]
        offending = [n for n in dims + [batch] if n % 8]
        _check_messages(tensor_core_issues(model, batch, dtype), offending, "a model of Linear layers")


def test_tensor_core_issues_conv(tensor_core_issues):
    """Conv2d channels count, other layers do not (a BatchNorm, a Conv1d), and the batch size counts for convolutions too

    The middle width is always a misfit. It is the first convolution's out_channels,
    the second's in_channels and the BatchNorm's width: an answer must report it
    twice (once per convolution) and not a third time for the BatchNorm. The batch
    size is always a misfit here (a model of convolutions only still has a batch). A last,
    square 1x1 convolution of misfit channels gives two messages (in and out), not one.
    False failure of a correct answer: 0 (random sizes, exact counts).
    """
    channels = _random_dims(8, 3)
    if channels[1] % 8 == 0:
        channels[1] += random.randint(1, 7)
    square = 8 * random.randint(1, 8) + random.randint(1, 7)
    model = nn.Sequential(nn.Conv2d(channels[0], channels[1], 3), nn.BatchNorm2d(channels[1]), nn.ReLU(),
                          nn.Conv2d(channels[1], channels[2], 1), nn.ReLU(), nn.Conv2d(channels[2], square, 1),
                          nn.ReLU(), nn.Conv2d(square, square, 1),
                          # not an nn.Conv2d: its misfit channels are not the exercise's to report
                          nn.Conv1d(square, 8 * random.randint(1, 4) + 3, 1))
    batch = 8 * random.randint(1, 8) + random.randint(1, 7)
    offending = [n for n in (channels[0], channels[1], channels[1], channels[2], channels[2], square, square, square,
                             batch) if n % 8]
    _check_messages(tensor_core_issues(model, batch, torch.float16), offending, "a model of Conv2d layers")


def test_tensor_core_issues_int8(tensor_core_issues):
    """int8 needs multiples of 16

    False failure of a correct answer: 0 (random sizes, exact comparison of the messages).
    """
    a, b = 16 * random.randint(1, 4) + 8, 16 * random.randint(1, 4)
    model = nn.Linear(a, b)
    assert exact_list(tensor_core_issues(model, 32, torch.float16), "the messages") == [], "multiples of 8 are fine for float16"
    _check_messages(tensor_core_issues(model, 24, torch.int8), [a, 24], "int8 (multiples of 16)",
                    fewer=f" (too few: {a} and 24 are multiples of 8 but not of 16: is int8 held to 16?)")


def test_tensor_core_issues_clean_and_errors(tensor_core_issues):
    """an aligned model gives no message; any dtype but float16, bfloat16 and int8 raises ValueError"""
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 8))
    assert exact_list(tensor_core_issues(model, 64, torch.bfloat16), "the messages") == [], "an aligned model must give []"
    # Not only by size: int16 has float16's 2 bytes, and uint8, the 8-bit floats and the quantised
    # qint8 int8's 1, yet the notebook names its three types.
    others = (torch.float64, torch.float32, torch.int16, torch.uint8, torch.qint8, torch.float8_e4m3fn)
    for dtype in others:
        with raises_value_error(f"tensor_core_issues(..., {dtype})"):
            tensor_core_issues(model, 64, dtype)


# --- fixed cases ----------------------------------------------------------------------------------
def _misaligned(model):
    bad = []
    for m in model.modules():
        if isinstance(m, nn.Linear):
            bad += [n for n in (m.in_features, m.out_features) if n % 8]
        elif isinstance(m, nn.Conv2d):
            bad += [n for n in (m.in_channels, m.out_channels) if n % 8]
    return bad


def _layers(model, kind):
    return [m for m in model.modules() if isinstance(m, kind)]


def _gaps_without_activation(model, inputs, seed):
    """(in the student's process) (layer calls whose output some later layer call reads through
    no non-linearity, the layers' output widths in the order they are first called: None unless
    every Linear/Conv2d of the model was used that way), for one forward pass in evaluation mode,
    without gradients.

    A layer call is a linear or conv2d operation with the weight of one of the model's Linear or
    Conv2d layers, however it is reached (the module called, its forward(), F.linear with its
    weight, a subclass that applies its activation inside forward): a TorchFunctionMode sees
    them all, in the order they run. For each call but the last, its output is replaced by a, by
    b and by their midpoint, and the inputs of the later calls are read each time: a and b are
    the output plus independent normal noise of width w = 3 x its largest value + 1. Every later
    call whose input changes with them reads this output (a shortcut branch whose input does not
    change is passed over) and must read it through a non-linearity: code between that is affine
    (nothing, Identity, Dropout or BatchNorm in evaluation mode, a reshape, a pooling average)
    gives g(midpoint) = (g(a) + g(b)) / 2 up to rounding, and an activation does not. The torch
    generator is seeded alike before every run, so that dropout left on in evaluation mode draws
    the same mask each time and shows as what it is, a scaling; an input that still differs
    between two runs at the same point proves nothing and counts as read through no non-linearity.
    """
    # In float64, so that rounding hides nothing a real activation does: the model's own tensors
    # are given float64 data for the probe and their own data back after it. (Not a copy: an
    # answer's __deepcopy__ could hand the probe another model than the one it returned.)
    tensors = [t for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()]
    saved = [(t, t.data) for t in tensors]
    try:
        for t in tensors:
            t.data = t.data.double()
        return _probe_layer_calls(model, inputs.double(), seed)
    except Exception:  # noqa: BLE001 (a model that cannot run in float64: probed as it is, below)
        pass
    finally:
        for t, data in saved:
            t.data = data
    return _probe_layer_calls(model, inputs, seed)


def _probe_layer_calls(model, inputs, seed):
    """(in the student's process) _gaps_without_activation on this model and input, as they are."""
    from torch.overrides import TorchFunctionMode

    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    weights = {id(m.weight) for m in layers}
    modes = [(m, m.training) for m in model.modules()]
    draw = torch.Generator().manual_seed(seed)  # the noise; not the process's own generator
    ops = {F.linear, torch.conv2d}

    class Layers(TorchFunctionMode):
        """Numbers the layer calls of a run; records their outputs and inputs; can replace one output."""

        def __init__(self, replace=None, value=None):
            super().__init__()
            self.replace, self.value, self.outputs, self.inputs, self.used = replace, value, [], [], set()
            self.widths = []  # each layer's output width (out_features, out_channels), in the order first called

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            weight = args[1] if len(args) > 1 else kwargs.get("weight")
            if func not in ops or id(weight) not in weights or not isinstance(out, torch.Tensor):
                return out
            if id(weight) not in self.used:
                self.widths.append(int(weight.shape[0]))
            self.used.add(id(weight))
            x = args[0] if args else kwargs.get("input")
            self.inputs.append(x.detach().clone() if isinstance(x, torch.Tensor) else None)
            self.outputs.append(out.detach().clone())
            # a copy: an in-place activation (ReLU(inplace=True)) would change the point itself
            return self.value.clone() if len(self.outputs) - 1 == self.replace else out

    def run(replace=None, value=None):
        with torch.random.fork_rng(devices=[]), Layers(replace, value) as seen:
            torch.manual_seed(seed)
            model(inputs)
        return seen

    try:
        model.eval()
        with torch.no_grad(), _one_thread():
            base = run()
            flat = 0
            for k, out in enumerate(base.outputs[:-1]):
                width = 3 * float(out.abs().max()) + 1
                a, b = (out + width * torch.randn(out.shape, generator=draw, dtype=torch.float64).to(out)
                        for _ in range(2))
                runs = [run(k, point).inputs for point in (a, b, (a + b) / 2, a)]
                flat += _flat_consumer(runs, k, every=out.dtype == torch.float64)
            return flat, base.widths if len(base.used) == len(weights) else None
    finally:
        for m, training in modes:
            m.training = training


def _flat_consumer(runs, k, every):
    """(in the student's process) whether some later layer call reads call k's output through no
    non-linearity: its input changed with that output (runs: the inputs of every call with it
    set to a, to b, to their midpoint, to a again) and is affine in it, or gave two answers at
    one point. Calls whose input did not change do not read it, nor, for this test, do calls
    whose input changed by less than 1e4 roundings of its largest value (a path through several
    layers of small weights, say): rounding could hide there what an activation does. An affine
    input misses the midpoint by a few roundings at most; it must miss by at most 1,000 (in
    float64, 2e-13 of the largest value). In float32 (a model that cannot run in float64) only
    the first call that reads the output is judged, as a path through several layers can leave
    an activation's mark near rounding there (2 models of 100 with sigmoids and weights scaled by
    1e-3 to 1e3 did; none with the first call alone): every=False."""
    for j in range(k + 1, min(len(r) for r in runs)):
        seen = [r[j] for r in runs]
        if any(s is None for s in seen) or len({s.shape for s in seen}) != 1 or not seen[0].is_floating_point():
            continue  # not one tensor of one shape: nothing affine to find
        if not torch.equal(seen[0], seen[3]):
            return True  # the same point gave two inputs: nothing can be concluded from the others
        rounding = torch.finfo(seen[0].dtype).eps * (max(float(s.abs().max()) for s in seen) + 1e-300)
        if float((seen[0] - seen[1]).abs().max()) < 1e4 * rounding:
            continue  # reads call k's output too faintly to tell, or not at all
        if float(((seen[0] + seen[1]) / 2 - seen[2]).abs().max()) <= 1e3 * rounding:
            return True
        if not every:
            return False
    return False


def _activation_modules_between(model):
    """Whether a module other than Linear/Conv2d sits between every two of them in model.modules()."""
    linear_like = (nn.Linear, nn.Conv2d)
    leaves = [m for m in model.modules() if not list(m.children())]
    heavy = [i for i, m in enumerate(leaves) if isinstance(m, linear_like)]
    return all(any(not isinstance(m, linear_like) for m in leaves[a + 1:b]) for a, b in zip(heavy, heavy[1:]))


def _layer_facts(model, inputs, kind):
    """(whether the output of every Linear/Conv2d call but the last reaches every later layer call
    that reads it through a non-linearity, the output widths of the `kind` layers in the order the
    model calls them): _gaps_without_activation, _flat_consumer. Where some layer's weight was
    used other than by F.linear or conv2d (x @ weight.T, say), the order of the modules decides
    both, as it did before (a model that makes its head before its body lists it first).

    False failure of a correct answer: < 1e-16. The next layer call reads an output through
    its activation directly. With ReLU (or LeakyReLU, ELU, GELU at the noise's width), an entry
    whose a and b fall on either side of 0 misses the midpoint by min(|a|, |b|) / 2; a/w and b/w
    are N(c, 1) with |c| <= 1/3, so an entry does so with probability >= 0.46, and by more than
    the 1,000 roundings allowed unless a or b lies within about 1e-12 w of 0 (in float32, 1e-3 w).
    The smallest gap graded has 64 entries (a batch and a width are multiples of 8; case 1 has
    128 samples, case 3 gives 2 images of 64 x 26 x 26): no such entry, below 0.55**64 = 2e-17.
    A smooth activation (tanh, sigmoid) bends over a width of about 1, which the noise (w >= 1)
    spans at nearly every entry. A later call reads it through that activation and more layers,
    which can only add bends; where it reads it too faintly to tell, it is not judged. Measured:
    0 wrong verdicts in 100 to 300 models each of 12 activations and 3 affine gaps (in float64
    and in float32), with weights and inputs scaled by 1e-3 to 1e3, and in 100 models with
    in-place activations."""
    flat, widths = there(_gaps_without_activation, model, inputs, random.randrange(2**31))
    if widths is None:
        return _activation_modules_between(model), [_width(m) for m in _layers(model, kind)]
    return flat == 0, widths


def _width(layer):
    return layer.out_features if isinstance(layer, nn.Linear) else layer.out_channels


def _result(out, what):
    assert type(out) is tuple and len(out) == 2, f"{what} must return a tuple (model, data_or_loader)"
    model, data = out
    assert isinstance(model, nn.Module), f"{what}: the first element must be the model (an nn.Module)"
    return model, data


def _batches(data):
    """The input tensors of the data: the tensor itself, or each batch of a loader (a TensorDataset
    yields [inputs])."""
    if isinstance(data, torch.Tensor):
        return [data]
    # A data set iterates sample by sample: each "batch" would be one sample's features.
    assert not isinstance(data, torch.utils.data.Dataset), (
        f"return the data as a tensor or a DataLoader, not a {type_name(data)} (DataLoader(dataset, batch_size=...))")
    batches = []
    for batch in data:
        inputs = batch[0] if isinstance(batch, (list, tuple)) and len(batch) else batch
        assert isinstance(inputs, torch.Tensor), (
            f"each batch must be a tensor of inputs, or a list or tuple that starts with one, not a {type_name(inputs)}")
        batches.append(inputs)
    return batches


def _forward(model, inputs):
    """(in the student's process) model(inputs) without gradients, on one torch thread."""
    with torch.no_grad(), _one_thread():
        try:
            return model(inputs)
        except RuntimeError as err:  # sizes that do not fit: what these exercises ask to fix
            raise AssertionError(f"the model cannot take its data: {err}") from None


def test_fixed_case_1_runs(fixed_case_1):
    """case 1: 128 samples of 15 (or 16) features, at least 3 scores each"""
    model, data = _result(fixed_case_1(), "fixed_case_1")
    batches = _batches(data)
    assert sum(len(b) for b in batches) == 128, "case 1 has 128 samples"
    for batch in batches:
        out = there(_forward, model, batch)
        assert out.dim() == 2 and out.shape[0] == len(batch), "the model must give one row of scores per sample"
        assert out.shape[1] >= 3, "the model must give at least 3 class scores"
    first = _layers(model, nn.Linear)[0]
    assert first.in_features in (15, 16), "the first layer must take the 15 features (padded to 16)"


def test_fixed_case_1_tensor_cores(fixed_case_1):
    """case 1: Tensor-Core-friendly sizes, the original widths, activations between layers"""
    model, data = _result(fixed_case_1(), "fixed_case_1")
    assert not _misaligned(model), "some Linear sizes are not multiples of 8"
    assert all(len(b) % 8 == 0 for b in _batches(data)), "the batch size must be a multiple of 8"
    activations, widths = _layer_facts(model, _batches(data)[0], nn.Linear)
    assert widths[:3] == [64, 32, 16], "keep the original hidden widths 64, 32, 16"
    assert activations, "put an activation between the Linear layers"


def test_fixed_case_2_runs(fixed_case_2):
    """case 2: the model runs on every batch of the 123 samples, at least 16 scores each

    The samples are counted as distinct rows too: 128 draws with replacement fill whole batches
    but leave about 45 of the 123 samples unseen. Rows that repeat a sample, or zero rows that pad
    the data set to whole batches, count once or not at all. The batches must show at least
    min(100, D) distinct samples, D those of the loader's data set (so that data made of equal
    rows is not failed for it); a loader whose data set cannot be read is not judged on this.
    False failure of a correct answer: 0 (a correct loader shows every sample of its data set but
    a few, at least 120 of 123: exact comparison).
    """
    model, data = _result(fixed_case_2(), "fixed_case_2")
    batches = _batches(data)
    assert batches, "the loader yields no batch"
    features = {tuple(b.shape[1:]) for b in batches}
    assert features == {(16,)}, (
        f"case 2's samples have 16 features each, these batches hold samples of shape {sorted(features)} "
        "(repair the model's first layer, not the data)")
    seen = 0
    for inputs in batches:
        out = there(_forward, model, inputs)
        assert out.shape[0] == len(inputs) and out.shape[-1] >= 16, "the model must give at least 16 scores for each sample"
        seen += len(inputs)
    # Rows of zeros that pad the data set to whole batches (the notebook allows it) are not samples.
    padding = sum(int((b.reshape(len(b), -1) == 0).all(dim=1).sum()) for b in batches)
    assert 100 <= seen <= 128 or 100 <= seen - padding <= 123, (
        "the loader should cover (nearly) all 123 samples, each once (rows of zeros that pad it to whole "
        "batches aside)")
    in_data = _distinct_samples(lambda: _batches(DataLoader(data.dataset, batch_size=len(data.dataset))))
    shown = _distinct_samples(lambda: batches)
    assert None in (in_data, shown) or shown >= min(100, in_data), (
        f"the batches show only {shown} distinct samples of the {in_data} in the data set: they should "
        "cover (nearly) all of them, each once (did the sampler draw with replacement?)")


def _distinct_samples(batches):
    """The number of distinct rows in batches() (rows of zeros, padding, aside), or None where it
    cannot be read (no data set, one without a length, not tensors)."""
    try:
        rows = torch.cat([b.reshape(len(b), -1).double() for b in batches()])  # double: exact for float types
    except Exception:  # noqa: BLE001 (nothing to compare: not judged)
        return None
    return len(torch.unique(rows[~(rows == 0).all(dim=1)], dim=0))


def test_fixed_case_2_tensor_cores(fixed_case_2):
    """case 2: every batch and every Linear size a multiple of 8"""
    model, data = _result(fixed_case_2(), "fixed_case_2")
    batches = _batches(data)
    sizes = [len(b) for b in batches]
    assert all(n % 8 == 0 for n in sizes), "every batch size must be a multiple of 8 (the last one too)"
    assert not _misaligned(model), "some Linear sizes are not multiples of 8"
    activations, widths = _layer_facts(model, batches[0], nn.Linear)
    assert widths[:2] == [64, 32], "keep the original hidden widths 64, 32"
    assert activations, "keep the activations between the Linear layers"


@timeout(120)
def test_fixed_case_3_runs(fixed_case_3):
    """case 3: (images, masks) batches; predictions match the masks' size"""
    model, loader = _result(fixed_case_3(), "fixed_case_3")
    count = 0
    first = None
    for batch in loader:
        assert isinstance(batch, (list, tuple)) and len(batch) == 2, "the loader must yield (images, masks)"
        first = first or batch
        count += len(batch[0])
    assert count >= 1000, "the loader should cover the 1024 samples"
    images, masks = first
    assert tuple(masks.shape[1:]) == (1, 26, 26), "masks are 1 x 26 x 26"
    out = there(_forward, model, images[:8])
    assert out.shape[0] == 8 and out.shape[1] >= 1, "one prediction per image"
    assert tuple(out.shape[2:]) == (26, 26), "the prediction must keep the 26 x 26 size of the mask"


def test_fixed_case_3_tensor_cores(fixed_case_3):
    """case 3: channels and batch sizes multiples of 8, the original widths, activations"""
    model, loader = _result(fixed_case_3(), "fixed_case_3")
    images = _batches(loader)
    assert all(len(b) % 8 == 0 for b in images), "every batch size must be a multiple of 8"
    assert not _misaligned(model), "some Conv2d channel counts are not multiples of 8"
    # 2 images: 86,528 entries per output, and a quarter of the probe's CPU time of 8 (1 CPU-s)
    activations, widths = _layer_facts(model, images[0][:2], nn.Conv2d)
    assert widths[:3] == [64, 128, 64], "keep the original channel widths 64, 128, 64"
    assert activations, "keep the activations between the convolutions"


# --- autocast_dtype ------------------------------------------------------------------------------
def _dtypes_on_a_bf16_gpu(autocast_dtype, devices):
    """(in the student's process) str(autocast_dtype(d)) for each device, while torch says that its
    GPU supports bfloat16 (as recent ones do): the answer must still give float16 for CUDA."""
    real = torch.cuda.is_bf16_supported
    torch.cuda.is_bf16_supported = lambda *args, **kwargs: True
    try:
        return [str(autocast_dtype(device)) for device in devices]
    finally:
        torch.cuda.is_bf16_supported = real


def test_autocast_dtype_values(autocast_dtype):
    """float16 for CUDA devices (whatever the GPU supports), bfloat16 for the CPU, strings or torch.device"""
    got = autocast_dtype("cpu")
    assert type(got) is torch.dtype, f"return a torch.dtype (torch.bfloat16, torch.float16), got {type_name(got)}"
    for device in ("cuda", "cuda:1", torch.device("cuda"), torch.device("cuda", 0)):
        assert autocast_dtype(device) is torch.float16, "CUDA autocasts to float16"
    for device in ("cpu", torch.device("cpu")):
        assert autocast_dtype(device) is torch.bfloat16, "the CPU autocasts to bfloat16"
    assert there(_dtypes_on_a_bf16_gpu, autocast_dtype, ["cuda", "cuda:0"]) == [str(torch.float16)] * 2, (
        "CUDA autocasts to float16, as the notebook asks, even on a GPU that supports bfloat16")


def test_autocast_dtype_unknown(autocast_dtype):
    """an unknown device type raises ValueError (also MPS, XPU and meta: only CUDA and the CPU are asked for)"""
    for device in ("banana", "mps", "xpu", torch.device("meta")):
        with raises_value_error(f"autocast_dtype({device!r})"):
            autocast_dtype(device)


# --- train_amp -------------------------------------------------------------------------------------
class _BackwardSpy(torch.autograd.Function):
    states = []

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        _BackwardSpy.states.append(torch.is_autocast_enabled("cpu"))
        return grad


class _Spy(nn.Module):
    def forward(self, x):
        return _BackwardSpy.apply(x)


class _NormSGD(torch.optim.SGD):
    """SGD that records the gradient norm it is given at every step."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.norms = []

    def step(self, closure=None):
        grads = [p.grad.detach().float() for g in self.param_groups for p in g["params"] if p.grad is not None]
        self.norms.append(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item())
        return super().step(closure)


def _problem(batches=4, batch_size=16, features=8, seed=None, model_seed=None):
    g = torch.Generator().manual_seed(seed if seed is not None else random.randint(0, 10**6))
    X = torch.randn(batches * batch_size, features, generator=g)
    y = X @ torch.randn(features, 1, generator=g) * 3
    loader = DataLoader(TensorDataset(X, y), batch_size=batch_size)
    model_seed = seed if model_seed is None else model_seed
    with torch.random.fork_rng(devices=[]):
        if model_seed is not None:  # a seeded problem starts from a seeded model too: its outcome is known
            torch.manual_seed(model_seed)
        model = nn.Sequential(nn.Linear(features, 16), _Spy(), nn.ReLU(), nn.Linear(16, 1))
    return model, loader


def _draw():
    """Seeds of a random problem, drawn by the judge (the student's process may have seeded its own
    generators): one for the data, one for the model's initial weights."""
    return {"seed": random.randint(0, 10**6), "model_seed": random.randint(0, 2**31 - 1)}


# The training runs in the student's process (`there`): the spies (the loss function's
# record, the forward hook, _BackwardSpy, _NormSGD's norms) fill their lists over there,
# and _one_thread must hold where the model runs. What they saw comes back as lists.
def _epoch_means(train_amp, epochs, draw):
    """(in the student's process) (history, its batch losses, the result of 0 epochs, batches per epoch)."""
    model, loader = _problem(**draw)
    recorded = []

    def loss_fn(out, target):
        loss = nn.functional.mse_loss(out.float(), target)
        recorded.append(loss.item())
        return loss

    with _one_thread():
        history = train_amp(model, loader, torch.optim.SGD(model.parameters(), lr=0.01), loss_fn, epochs, "cpu")
        losses = list(recorded)
        none = train_amp(model, loader, torch.optim.SGD(model.parameters(), lr=0.01), loss_fn, 0, "cpu")
    return history, losses, none, len(loader)


def test_train_amp_epoch_means(train_amp):
    """returns one float per epoch: the mean of that epoch's batch losses

    False failure of a correct answer: 0 (a mean of float32 losses agrees to
    1e-6 relative; 1e-3 is allowed).
    """
    epochs = random.randint(2, 4)
    history, recorded, none, per_epoch = there(_epoch_means, train_amp, epochs, _draw())
    history = exact_list(history, "the result", length=epochs)
    assert len(recorded) == epochs * per_epoch, "the loss should be computed once per batch, every epoch"
    for e, value in enumerate(history):
        value = exact_float(value, f"the loss of epoch {e + 1}")
        expected = sum(recorded[e * per_epoch:(e + 1) * per_epoch]) / per_epoch
        assert abs(value - expected) <= 1e-3 * abs(expected) + 1e-5, (
            f"epoch {e + 1}: the value returned is not the mean of that epoch's batch losses")
    assert exact_list(none, "train_amp(..., epochs=0)") == [], "0 epochs give an empty list"


def _history(train_amp, seed, lr, epochs):
    """(in the student's process) train_amp's result on the seeded problem."""
    model, loader = _problem(seed=seed)
    with _one_thread():
        return train_amp(model, loader, torch.optim.SGD(model.parameters(), lr=lr), nn.MSELoss(), epochs, "cpu")


def test_train_amp_learns(train_amp):
    """the loss goes down on an easy regression

    False failure of a correct answer: 0 beyond rounding. The problem and the
    model's initial weights both come from one of 101 seeds, each checked with
    the reference and with a plain float32 loop: the last epoch's loss is at
    most 0.21 of the first, far under the 0.6 asked (with unseeded weights,
    400 draws gave at most 0.21 too). Other correct answers differ from these
    by rounding only.
    """
    history = exact_list(there(_history, train_amp, random.randint(0, 100), 0.05, 6), "the result", length=6)
    first, last = (exact_float(history[e], f"the loss of epoch {e + 1}") for e in (0, 5))
    assert last < 0.6 * first, "the training loss should fall clearly over 6 epochs"


def _autocast_depth():
    """How many torch.autocast blocks, enabled or not, the caller is in (torch reads the count only
    through its increment and decrement)."""
    depth = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return depth


def _forward_states(train_amp, draw):
    """(in the student's process) (autocast on, output dtype, weight dtype) of the first Linear at every
    forward pass, whether every call of the loss function ran under autocast, and the dtypes of the
    model's parameters after training. A float32 region the answer opened inside the autocast block
    of its forward pass (autocast(enabled=False), as the notebook shows for a hand-written loss)
    counts as under autocast: the loss is still computed in that block, which a loss after it is
    not, in disabled blocks of its own or not. The nesting of autocast blocks tells them apart: the
    loss must be nested deeper than the forward pass last was, and the forward's block not left
    since (every block's exit calls torch.autocast_decrement_nesting, watched here)."""
    model, loader = _problem(**draw)
    seen, loss_seen, forward_depth, lowest = [], [], [0], [0]
    real_decrement = torch.autocast_decrement_nesting

    def decrement():
        depth = real_decrement()
        lowest[0] = min(lowest[0], depth)
        return depth

    from autograder.sandbox import wire  # dtypes as torch keeps them: a subclass the answer made is not asked

    def on_forward(module, inputs, output):
        forward_depth[0] = lowest[0] = _autocast_depth()
        seen.append((torch.is_autocast_enabled("cpu"), wire.tensor_attributes(output, "dtype", during_call=True)[0],
                     module.weight.dtype))

    model[0].register_forward_hook(on_forward)
    mse = nn.MSELoss()

    def loss_fn(out, target):
        nested = _autocast_depth() > forward_depth[0] and lowest[0] >= forward_depth[0]
        loss_seen.append(torch.is_autocast_enabled("cpu") or nested)
        return mse(out, target)

    torch.autocast_decrement_nesting = decrement
    try:
        with _one_thread():
            train_amp(model, loader, torch.optim.SGD(model.parameters(), lr=0.01), loss_fn, 1, "cpu")
    finally:
        torch.autocast_decrement_nesting = real_decrement
    return ([(bool(on), str(dtype), str(weight)) for on, dtype, weight in seen], [bool(on) for on in loss_seen],
            sorted({str(p.dtype) for p in model.parameters()}))


def test_train_amp_forward_under_autocast(train_amp):
    """forward and loss run under CPU autocast, in bfloat16, on float32 weights

    Mixed precision keeps the weights in float32 (autocast lowers copies): weights cast to the low
    type (model.to(dtype=...), .half(), .bfloat16()) are pure low-precision training.
    False failure of a correct answer: 0 (exact flags and dtypes).
    """
    seen, loss_seen, params = there(_forward_states, train_amp, _draw())
    assert seen, "the model was never called"
    assert all(on for on, _, _ in seen), "the forward pass must run inside torch.autocast"
    assert all(dtype == str(torch.bfloat16) for _, dtype, _ in seen), "on the CPU, autocast must use bfloat16"
    assert all(weight == str(torch.float32) for _, _, weight in seen) and params == [str(torch.float32)], (
        "the model's weights must stay float32 during and after training (mixed precision: autocast "
        "casts copies to the low type; do not cast the model itself)")
    assert loss_seen, "loss_fn was never called"
    assert all(loss_seen), "the loss must be computed inside torch.autocast too (forward and loss, as the notebook says)"


def _backward_states(train_amp, draw):
    """(in the student's process) whether CPU autocast was on at every backward pass through _Spy."""
    model, loader = _problem(**draw)
    _BackwardSpy.states = []
    with _one_thread():
        train_amp(model, loader, torch.optim.SGD(model.parameters(), lr=0.01), nn.MSELoss(), 1, "cpu")
    return [bool(on) for on in _BackwardSpy.states]


def test_train_amp_backward_outside(train_amp):
    """backward runs outside autocast

    False failure of a correct answer: 0 (exact flags).
    """
    states = there(_backward_states, train_amp, _draw())
    assert states, "backward was never called"
    assert not any(states), "backward() must be called after leaving the autocast block"


def _step_norms(train_amp, draw, epochs, lr, device="cpu", **kwargs):
    """(in the student's process) the gradient norm _NormSGD saw at every optimizer step, and the
    number of batches of an epoch."""
    model, loader = _problem(**draw)
    optimizer = _NormSGD(model.parameters(), lr=lr)
    with _one_thread():
        train_amp(model, loader, optimizer, nn.MSELoss(), epochs, device, **kwargs)
    return [float(n) for n in optimizer.norms], len(loader)


def test_train_amp_clips_unscaled(train_amp):
    """with max_norm, the optimizer sees gradients clipped to max_norm (unscaled)

    False failure of a correct answer: < 1e-50. Clipping leaves a norm of
    max_norm * g / (g + 1e-6) for a gradient norm g >= 0.95 * max_norm (<= 0.005);
    measured over 400 random problems, g had a minimum of 4.1 and a log-spread
    putting 0.005 more than 20 standard deviations below its mean. Where the
    answer can use the grader's GPU it runs again on CUDA, on problems drawn the
    same way, with the same bound for each step the GradScaler takes
    (_clips_unscaled_on_cuda; there, a problem whose every step was skipped
    decides nothing and another is drawn).
    """
    max_norm = random.choice([1e-3, 2e-3, 5e-3])
    # The device as a torch.device here (the notebook: a string or a torch.device).
    norms, batches = there(_step_norms, train_amp, _draw(), 2, 0.01, device=torch.device("cpu"), max_norm=max_norm)
    assert norms, "optimizer.step() was never called"
    assert len(norms) == 2 * batches, (
        f"the optimizer stepped {len(norms)} times in 2 epochs of {batches} batches: once per batch "
        "(scaler.step(optimizer) steps it; do not call optimizer.step() as well)")
    assert all(n <= max_norm * 1.01 for n in norms), (
        "gradients were not clipped to max_norm before the optimizer step")
    assert all(n >= max_norm * 0.95 for n in norms), (
        "the gradients reaching the optimizer are far below max_norm: were they clipped while still scaled?")
    if there(_cuda_usable):
        _clips_unscaled_on_cuda(train_amp, max_norm)


def _cuda_usable():
    """(in the student's process) whether its code can use CUDA: a grader's GPU that the sandbox
    leaves in sight (only when asked, GradingLimits.gpus, and memory is in a cgroup:
    autograder/sandbox/enter.py)."""
    return bool(torch.cuda.is_available())


def _clips_unscaled_on_cuda(train_amp, max_norm):
    """The clipping check again on CUDA, on a grader whose GPU the answer can use: there a
    GradScaler scales the gradients, and a CPU grader never runs an answer's CUDA branch (clipping
    before scaler.unscale_ there went unseen). GradScaler skips a step whose scaled gradients
    overflowed float16 while it lowers its scale: on an H200 the reference took 3 to 6 of its 8
    steps in each of 300 random problems, every step taken within 1 +- 1e-6 of max_norm, and an
    answer that clips before unscale_ on CUDA only gave 6e-5 to 2.4e-4 of it. A problem whose every
    step was skipped decides nothing: up to three are drawn, then the check is undecided."""
    for _ in range(3):
        norms, batches = there(_step_norms, train_amp, _draw(), 2, 0.01, device=torch.device("cuda"),
                               max_norm=max_norm)
        if norms:
            break
    else:
        pytest.skip("on the grader's GPU, GradScaler skipped every step of three problems: whether the "
                    "gradients are clipped after unscaling there could not be seen")
    assert len(norms) <= 2 * batches, (
        f"on CUDA the optimizer stepped {len(norms)} times in 2 epochs of {batches} batches: at most once "
        "per batch (scaler.step(optimizer) steps it, or skips the step; do not call optimizer.step() as well)")
    assert all(n <= max_norm * 1.01 for n in norms), (
        "on CUDA, gradients were not clipped to max_norm before the optimizer step")
    assert all(n >= max_norm * 0.95 for n in norms), (
        "on CUDA, the gradients reaching the optimizer are far below max_norm: they were clipped while "
        "still scaled (call scaler.unscale_(optimizer) before clipping)")


def test_train_amp_no_clip_by_default(train_amp):
    """without max_norm the gradients are left alone

    False failure of a correct answer: < 1e-50. Over 400 random problems the
    largest gradient norm of the epoch was at least 4.1 (mean 17); 0.05 lies
    16.7 standard deviations below the mean of its logarithm.
    """
    norms, batches = there(_step_norms, train_amp, _draw(), 1, 0.001)
    assert norms and max(norms) > 0.05, "gradients should not be clipped without max_norm"
    assert len(norms) == batches, f"the optimizer stepped {len(norms)} times in one epoch of {batches} batches"


def _moves(train_amp, draw, device):
    """(in the student's process) whether the model was moved to `device` (model.to or .cpu() with
    that device), and how many of the batch tensors the loader yielded were moved there, of how
    many (Tensor.to, .cpu(), torch.as_tensor / asarray / tensor with device=, seen by a
    TorchFunctionMode), in one epoch; None where the answer raised under the spies (the other
    checks judge such errors, not this one)."""
    from torch.overrides import TorchFunctionMode
    from torch.utils.data import default_collate

    model, loader = _problem(**draw)
    kind = torch.device(device).type
    yielded, moved, model_moved = {}, set(), []  # yielded: id -> tensor, kept alive so ids stay unique

    def collate(samples):
        batch = default_collate(samples)
        yielded.update((id(t), t) for t in batch)
        return batch

    def to_kind(target, *args, **kwargs):
        """Whether the device named (target "to": the one Tensor.to's arguments give) is of `device`'s kind."""
        try:
            target = torch._C._nn._parse_to(*args, **kwargs)[0] if target == "to" else target
            return target is not None and torch.device(target).type == kind
        except Exception:  # noqa: BLE001 (arguments it cannot read: no evidence, and the call goes on)
            return False

    for name in ("to", "cpu"):
        real = getattr(model, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            model_moved.append(to_kind("cpu") if _name == "cpu" else to_kind("to", *args, **kwargs))
            return _real(*args, **kwargs)
        object.__setattr__(model, name, spy)

    class Moves(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if args and id(args[0]) in yielded:
                if name == "to":
                    ok = to_kind("to", *args[1:], **kwargs)
                elif name in ("as_tensor", "asarray", "tensor"):
                    ok = to_kind(kwargs.get("device"))
                else:
                    ok = name == "cpu" and to_kind("cpu")
                if ok:
                    moved.add(id(args[0]))
            return func(*args, **kwargs)

    loader = DataLoader(loader.dataset, batch_size=loader.batch_size, collate_fn=collate)
    try:
        with _one_thread(), Moves():
            train_amp(model, loader, torch.optim.SGD(model.parameters(), lr=0.01), nn.MSELoss(), 1, device)
    except Exception:  # noqa: BLE001 (an error of the answer: the other checks judge it)
        return None
    return any(model_moved), len(moved & yielded.keys()), len(yielded)


def test_train_amp_moves_to_device(train_amp):
    """the model and every batch (inputs and targets) are moved to `device`

    On the CPU a move changes nothing, so only spies can see it: model.to / model.cpu() with the
    device asked, and Tensor.to, .cpu() or torch.as_tensor (asarray, tensor) with device= on each
    tensor the loader yields. An answer that moves them only where it matters (`if device.type ==
    "cuda": ...`), or another way, leaves no such trace: then the check is undecided (a person
    reads the code), never failed.
    False failure of a correct answer: 0 (it passes or is undecided).
    """
    seen = there(_moves, train_amp, _draw(), random.choice(["cpu", torch.device("cpu")]))
    if seen is None:
        pytest.skip("the answer raised an error while the grader watched its moves (see the other checks)")
    model_moved, moved, batches = seen
    if not (model_moved and batches and moved == batches):
        pytest.skip(f"the grader saw the model moved to the device: {'yes' if model_moved else 'no'}, and "
                    f"{moved} of the {batches} batch tensors (inputs and targets) moved there: on the CPU a "
                    "move that is skipped changes nothing, so a person must check that the model and each "
                    "batch are moved to `device`")


def test_train_amp_errors(train_amp):
    """negative epochs raise ValueError"""
    model, loader = _problem()
    with raises_value_error("train_amp(..., epochs=-1, ...)"):
        train_amp(model, loader, torch.optim.SGD(model.parameters(), lr=0.01), nn.MSELoss(), -1, "cpu")
