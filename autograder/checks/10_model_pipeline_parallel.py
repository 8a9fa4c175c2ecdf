"""Hidden checks of 10_model_pipeline_parallel (stages, micro-batches, GPipe, bubble)."""
import itertools
import random

import numpy as np
import torch
from torch import nn

from autograder.checks._support import exact_float, exact_list, raises_value_error, there, type_name


class _Residual(nn.Module):
    """x + tanh(linear(x)): a block the model holds as one layer; its forward is more than its
    children chained, so taking it apart changes what the model computes."""

    def __init__(self, width):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(width, width), nn.Tanh())

    def forward(self, x):
        return x + self.inner(x)


def _random_model(residual=False):
    widths = [random.choice([2, 3, 8, 20, 40]) for _ in range(random.randint(5, 8))]
    layers = []
    at = random.randrange(len(widths) - 1) if residual else None
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        if i == at:
            layers.append(_Residual(a))
        layers.append(nn.Linear(a, b))
        if random.random() < 0.5:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers), widths[0]


def _counts(layers):
    return [sum(p.numel() for p in layer.parameters()) for layer in layers]


def _optimal_max(counts, k):
    n, best = len(counts), float("inf")
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0, *cuts, n)
        best = min(best, max(sum(counts[a:b]) for a, b in zip(bounds, bounds[1:])))
    return best


# --- split_sequential -------------------------------------------------------------------
def test_split_sequential_chained_equals_model(split_sequential):
    """the stages are non-empty nn.Sequential holding the model's layers in order, and chained equal the model

    The last two models hold a residual block as one of their layers: a stage must keep it whole
    (splitting the model's leaf modules loses its skip connection).
    False failure of a correct answer: 0 (random models; the same layers
    in the same order give the same float32 results; atol 1e-6 besides).
    """
    for residual in (False, True, True):
        model, d_in = _random_model(residual)
        k = random.randint(1, min(4, len(model)))
        x = torch.randn(5, d_in)
        facts = there(_chained_stages, split_sequential, model, k, x)
        assert facts["stages"] is not None, f"the result must be a list, got {facts['type']}"
        exact_list(facts["stages"], "the result", k)
        assert all(s["sequential"] and s["length"] >= 1 for s in facts["stages"]), (
            "every stage must be a non-empty nn.Sequential")
        assert facts["n_layers"] == len(model) and facts["same_layers"], (
            "the stages must hold the model's own layer objects (not copies), each once, in order; a block the "
            "model holds as one layer (a residual block) stays whole")
        out = facts["out"]
        assert isinstance(out, torch.Tensor) and out.shape == model(x).shape and torch.allclose(
            out, model(x), atol=1e-6), "the chained stages do not compute what the model computes"


def _chained_stages(split_sequential, model, k, x):
    """(in the student's process) what split_sequential(model, k) gave, as plain data, and the chain's output.

    {"type": the result's type name, "stages": per stage {"sequential", "length"} (None unless
    the result is a list or tuple), "n_layers", "same_layers" (each layer of the stages is the
    model's own layer object at its place, not a copy: placed on devices and trained, copies
    would leave the model as it was), "out"}.
    """
    result = split_sequential(model, k)
    if type(result) not in (list, tuple):
        return {"type": type(result).__name__, "stages": None, "n_layers": None, "same_layers": False, "out": None}
    stages = [{"sequential": isinstance(s, nn.Sequential), "length": len(s) if isinstance(s, nn.Module) else 0}
              for s in result]
    if not all(s["sequential"] for s in stages):
        return {"type": type(result).__name__, "stages": type(result)(stages), "n_layers": None,
                "same_layers": False, "out": None}
    flat = [layer for s in result for layer in s]
    same = len(flat) == len(model) and all(a is b for a, b in zip(flat, model))
    out = x
    with torch.no_grad():
        for s in result:
            out = s(out)
    return {"type": type(result).__name__, "stages": type(result)(stages), "n_layers": len(flat), "same_layers": same,
            "out": out if isinstance(out, torch.Tensor) else None}


# Widths where cutting greedily at the average stage size is not optimal (found by search); in
# the third, equal numbers of layers per stage are not optimal either. Every grading uses all of
# them: drawing two of the first three let the equal-numbers answer through 1 grading in 60
# (audited). In the last two, the most even split by another measure (the smallest sum of squared
# stage sizes, or the smallest max - min) is not optimal, nor is one that counts the weights but not
# the biases; random models catch those in 2 to 6 % of draws.
HARD_SPLITS = [([3, 20, 40, 8, 40, 8, 20], 3), ([40, 2, 40, 3, 40], 3), ([8, 20, 8, 20, 20, 2, 2], 3),
               ([20, 8, 8, 20, 3], 3), ([2, 8, 40, 3, 40], 3)]


def _linear_chain(widths):
    return nn.Sequential(*[nn.Linear(a, b) for a, b in zip(widths, widths[1:])])


def test_split_sequential_balanced(split_sequential):
    """the largest stage's parameter count (frozen parameters too, those of a layer's sublayers too,
    buffers not) is the smallest possible

    False failure of a correct answer: 0 (random models, exact integer
    counts against an exhaustive search).
    """
    cases = [(_linear_chain(w), k) for w, k in HARD_SPLITS]
    frozen = _linear_chain([40, 40, 40, 2, 2])
    frozen[0].requires_grad_(False)  # frozen weights still count: they take the stage's memory
    cases.append((frozen, 2))  # counting only trainable ones gives 3280, the optimum is 1728
    # A block's parameters sit in its sublayers: counting a layer's own (parameters(recurse=False))
    # gives the block 0 and the largest stage 588, not 450 (2 stages) or 420 (3).
    cases.append((nn.Sequential(_Residual(20), *_linear_chain([20, 8, 20, 2, 20])), random.choice([2, 3])))
    # BatchNorm's running statistics are buffers, not parameters: counting the state_dict's
    # tensors puts the cut after the first BatchNorm (440), not before it (424).
    cases.append((nn.Sequential(nn.Linear(8, 40), nn.BatchNorm1d(40), nn.Linear(40, 8), nn.BatchNorm1d(8)), 2))
    for residual in (False, False, False, False, True, True):
        model, _ = _random_model(residual)
        cases.append((model, random.randint(2, min(4, len(model)))))
    for model, k in cases:
        stages = split_sequential(model, k)
        got = max(sum(_counts(list(s))) for s in stages)
        best = _optimal_max(_counts(list(model)), k)
        assert got == best, (
            f"the largest stage has {got} parameters; a better contiguous split has at most {best}")


def test_split_sequential_errors(split_sequential):
    """n_stages < 1 or more than the number of layers raises ValueError

    False failure of a correct answer: 0 (a random model, exact).
    """
    model, _ = _random_model()
    with raises_value_error("split_sequential(model, 0)"):
        split_sequential(model, 0)
    with raises_value_error("split_sequential with more stages than layers"):
        split_sequential(model, len(model) + 1)
    stages = split_sequential(model, len(model))  # one layer per stage is allowed
    assert len(stages) == len(model), "split_sequential(model, len(model)) gives one stage per layer"


# --- pipeline_forward -----------------------------------------------------------------------
def test_pipeline_forward_equals_model(pipeline_forward):
    """the output equals the model's, for batch sizes not divisible by the micro-batch count

    False failure of a correct answer: 0. Running
    micro-batches instead of the whole batch changes float32 rounding only
    (~1e-7 on outputs of order 1 from at most 8 layers of width <= 40), under
    atol = rtol = 1e-5.
    """
    for _ in range(3):
        model, d_in = _random_model()
        cut = random.randint(1, len(model) - 1)
        stages = [model[:cut], model[cut:]]
        m = random.randint(2, 5)
        x = torch.randn(m * random.randint(2, 4) + random.randint(1, m - 1), d_in)
        out = pipeline_forward(stages, x, m)
        assert isinstance(out, torch.Tensor), (
            f"pipeline_forward must return one tensor, the micro-batches' outputs concatenated, got {type_name(out)}")
        assert out.shape == model(x).shape, "the output has the wrong shape"
        assert torch.allclose(out, model(x), atol=1e-5), "the output differs from the model's"


def test_pipeline_forward_microbatches(pipeline_forward):
    """every stage runs once per micro-batch, on micro-batches whose sizes differ by at most one,
    and the output is made of those passes' outputs

    False failure of a correct answer: 0. The hook counts are exact (random sizes). Each
    stage's forward hook adds its own random offset (0.5 to 1 in size) to what the stage
    returns, so a correct answer, whose output is the stages' hooked micro-batch outputs
    chained, returns exactly the model with those offsets added after each stage: only
    float32 rounding differs from the judge's whole-batch chain: over 3000 random draws
    the worst error was 0.023 of the tolerance (atol = rtol = 1e-5; outputs below 3). An output computed
    around the stages' calls (stage.forward) misses the offsets.
    """
    model, d_in = _random_model()
    cut = random.randint(1, len(model) - 1)
    stages = [model[:cut], model[cut:]]
    m = random.randint(3, 5)
    n = m * random.randint(2, 3) + 1
    x = torch.randn(n, d_in)
    offsets = [random.choice([-1, 1]) * random.uniform(0.5, 1.0) for _ in stages]
    seen, out = there(_stage_batch_sizes, pipeline_forward, stages, x, m, offsets)
    for sizes in seen:
        assert None not in sizes, (
            "a stage was given a tensor of a class of its own, whose size the grader does not read: "
            "pass the stages plain tensors (the micro-batches of x)")
        assert len(sizes) == m, (f"with {m} micro-batches each stage should run {m} times, it ran {len(sizes)} "
                                 "(call each stage as stage(micro), not stage.forward or its layers one by one)")
        assert sum(sizes) == n and max(sizes) - min(sizes) <= 1, (
            "the micro-batches should cover the batch once, with sizes differing by at most one")
    expected = x
    with torch.no_grad():
        for stage, offset in zip(stages, offsets):
            expected = stage(expected) + offset
    assert isinstance(out, torch.Tensor) and out.shape == expected.shape, "the output has the wrong shape"
    assert torch.allclose(out.detach(), expected, atol=1e-5, rtol=1e-5), (
        "the output is not made of the stages' outputs for the micro-batches (with the grader's hooks on "
        "the stages, it should follow them): was it computed in another pass, e.g. with stage.forward?")


def _stage_batch_sizes(pipeline_forward, stages, x, m, offsets):
    """(in the student's process) per stage, the batch sizes it ran on during pipeline_forward(stages, x, m),
    and the output, while each stage's forward hook adds offsets[stage] to what it returns."""
    from helpers.workers import plain_size  # the size as torch keeps it: no subclass or mode asked
    seen = [[] for _ in stages]
    handles = [s.register_forward_pre_hook(lambda mod, args, i=i: seen[i].append(plain_size(args[0])))
               for i, s in enumerate(stages)]
    handles += [s.register_forward_hook(lambda mod, args, output, c=c: output + c)
                for s, c in zip(stages, offsets)]
    try:
        out = pipeline_forward(stages, x, m)
    finally:
        for h in handles:
            h.remove()
    return seen, out


def test_pipeline_forward_keeps_the_graph(pipeline_forward):
    """with grad mode on, the output carries the autograd graph: its backward pass gives the
    stages' parameters the gradients the model's own forward pass gives

    False failure of a correct answer: 0. Splitting, `.to()` and concatenating are differentiable,
    so only float32 rounding differs (gradients summed micro-batch by micro-batch): over 3000
    random draws the worst error was 0.0094 of the tolerance (atol = rtol = 1e-4; gradients up to 120).
    """
    model, d_in = _random_model()
    cut = random.randint(1, len(model) - 1)
    m = random.randint(2, 5)
    x = torch.randn(m * random.randint(2, 4) + random.randint(1, m - 1), d_in)
    facts = there(_gradients, pipeline_forward, model, cut, x, m)
    assert "type" not in facts, (
        f"pipeline_forward must return one tensor, the micro-batches' outputs concatenated, not a {facts.get('type')}")
    assert facts["requires_grad"], (
        "the output must keep the autograd graph (requires_grad, when the stages' parameters do): "
        "no torch.no_grad() and no .detach(), or a pipeline built on it cannot be trained")
    model.zero_grad(set_to_none=True)  # without a judge, _gradients ran on this very model
    with torch.enable_grad():
        model(x).sum().backward()
    for p, got in zip(model.parameters(), facts["grads"]):
        assert got is not None and torch.allclose(got, p.grad, atol=1e-4, rtol=1e-4), (
            "the output's backward pass does not give the stages' parameters the model's gradients: "
            "every micro-batch's output must stay connected to the stages that computed it")


def _gradients(pipeline_forward, model, cut, x, m):
    """(in the student's process) with grad mode on, whether pipeline_forward([model[:cut],
    model[cut:]], x, m) requires grad, and the gradients of its sum for the model's parameters
    (None for one it did not reach)."""
    with torch.enable_grad():  # grad mode is per thread: set it here, whatever the caller's
        out = pipeline_forward([model[:cut], model[cut:]], x, m)
        if not isinstance(out, torch.Tensor):
            return {"requires_grad": False, "grads": None, "type": type(out).__name__}
        if not out.requires_grad:
            return {"requires_grad": False, "grads": None}
        out.sum().backward()
    return {"requires_grad": True, "grads": [None if p.grad is None else p.grad.clone() for p in model.parameters()]}


def test_pipeline_forward_errors(pipeline_forward):
    """n_microbatches < 1 or more than the batch size raises ValueError

    False failure of a correct answer: 0 (a random model, exact).
    """
    model, d_in = _random_model()
    x = torch.randn(4, d_in)
    with raises_value_error("pipeline_forward(stages, x, 0)"):
        pipeline_forward([model], x, 0)
    with raises_value_error("pipeline_forward with more micro-batches than samples"):
        pipeline_forward([model], x, 5)
    out = pipeline_forward([model], x, 4)  # one sample per micro-batch is allowed
    assert isinstance(out, torch.Tensor), (
        f"pipeline_forward must return one tensor, the micro-batches' outputs concatenated, got {type_name(out)}")
    assert out.shape == model(x).shape, (
        "pipeline_forward(stages, x, len(x)) runs one sample per micro-batch")


def test_pipeline_forward_moves_to_each_stage(pipeline_forward):
    """each micro-batch moves to the device of each stage's parameters before that stage runs

    False failure of a correct answer: 0 (exact). The last stage sits on PyTorch's `meta` device,
    which has no data: its forward pre-hook must see every micro-batch arrive there. That stage
    starts with a layer without parameters (Identity, Tanh or ReLU, which run on meta), so the
    device must come from the stage's parameters, not from its first layer. The first stage's
    parameters are on the CPU, so no one device serves both stages.
    """
    model, d_in = _random_model()
    # A Linear follows the last stage's first layer, and the first stage holds parameters (the
    # model's first Linear, on the CPU): an answer that moves every micro-batch to one device
    # only, the first it finds among the stages' parameters, is caught at every draw.
    cut = random.choice([i for i in range(1, len(model) - 1) if isinstance(model[i], nn.Linear)])
    m = random.randint(2, 4)
    x = torch.randn(m * 2 + 1, d_in)
    first = random.choice([nn.Identity, nn.Tanh, nn.ReLU])()
    devices, problem = there(_on_meta, pipeline_forward, model, cut, first, x, m)
    # An answer that copies each output back to x's device stops at the first (no data on meta):
    # every micro-batch the stage got must have been moved there, all m where the call ran through.
    assert devices and set(devices) == {"meta"} and (problem or len(devices) == m), (
        "each micro-batch must reach the last stage on its device: move it to the device of each stage's "
        f"parameters before running it (the stage got inputs on {sorted(set(devices)) or 'no device'}"
        + (f"; {problem}" if problem else "") + ")")


def _on_meta(pipeline_forward, model, cut, first, x, m):
    """(in the student's process) the device of each input the last stage got during
    pipeline_forward(stages, x, m), the stages being model[:cut] (an Identity if empty) and
    `first` (a layer without parameters) followed by model[cut:], moved to the meta device, and
    what went wrong, if anything. Where the output goes afterwards is the answer's to choose
    (moving it back to x's device fails on meta)."""
    stages = [model[:cut] if cut else nn.Sequential(nn.Identity()), nn.Sequential(first, *model[cut:]).to("meta")]
    from autograder.sandbox import wire  # a tensor's device as torch keeps it: no subclass or mode asked
    devices = []
    hook = stages[1].register_forward_pre_hook(
        lambda mod, args: devices.append(wire.tensor_attributes(args[0], "device", during_call=True)[0].type))
    try:
        pipeline_forward(stages, x, m)
    except RuntimeError as err:  # a CPU tensor given to a meta layer, or a meta output copied out
        return devices, f"it raised {type(err).__name__}: {err}"[:300]
    finally:
        hook.remove()
    return devices, None


# --- gpipe_schedule ------------------------------------------------------------------------------
def _expected_schedule(p, m):
    out = []
    for s in range(p):
        for j in range(m):
            out += [(s + j, s, j, "F"), ((m + p - 1) + (p - 1 - s) + j, s, j, "B")]
    return sorted(out)


def test_gpipe_schedule_exact(gpipe_schedule):
    """the schedule has the GPipe step of every forward and backward pass, sorted by time step

    False failure of a correct answer: 0 (random sizes, exact comparison).
    """
    for p, m in [(1, 1), (1, 3), (3, 1), (random.randint(2, 6), random.randint(2, 9)),
                 (random.randint(2, 6), random.randint(2, 9))]:
        got = exact_list(gpipe_schedule(p, m), f"gpipe_schedule({p}, {m})", 2 * p * m)
        # Any tuple (a NamedTuple too): its items, as values.
        got = [tuple(exact_list(item, "each entry (time_step, stage, microbatch, kind)", 4)) for item in got]
        for item in got:
            # NumPy's integers count as ints (a schedule built with np.arange), bools do not.
            assert all(type(v) is int or isinstance(v, np.integer) for v in item[:3]) and item[3] in ("F", "B"), (
                "time_step, stage and microbatch are ints, kind is 'F' or 'B'")
        # Sorted by time step; within a step, passes in any order ("sorted" read as by time).
        assert [item[0] for item in got] == sorted(item[0] for item in got), "the schedule must be sorted by time step"
        assert sorted(got) == _expected_schedule(p, m), (
            f"gpipe_schedule({p}, {m}) does not match GPipe's steps (F at s + j, "
            "B at (m + p - 1) + (p - 1 - s) + j, counting from 0)")


def test_gpipe_schedule_errors(gpipe_schedule):
    """a stage or micro-batch count below 1 raises ValueError"""
    for bad in ((0, 3), (2, 0), (-1, 2)):
        with raises_value_error(f"gpipe_schedule{bad}"):
            gpipe_schedule(*bad)


# --- bubble_fraction ---------------------------------------------------------------------------
def test_bubble_fraction_formula(bubble_fraction):
    """the bubble fraction is (p - 1) / (m + p - 1)

    False failure of a correct answer: 0 (random sizes; 1e-12 against one rounding
    of 1e-16).
    """
    for p, m in [(1, 1), (1, 7), (2, 1)] + [(random.randint(2, 16), random.randint(1, 64)) for _ in range(8)]:
        got = exact_float(bubble_fraction(p, m), f"bubble_fraction({p}, {m})")
        assert abs(got - (p - 1) / (m + p - 1)) < 1e-12, f"bubble_fraction({p}, {m}) is not (p - 1) / (m + p - 1)"


def test_bubble_fraction_errors(bubble_fraction):
    """a stage or micro-batch count below 1 raises ValueError"""
    for bad in ((0, 4), (3, 0), (-2, -2)):
        with raises_value_error(f"bubble_fraction{bad}"):
            bubble_fraction(*bad)
