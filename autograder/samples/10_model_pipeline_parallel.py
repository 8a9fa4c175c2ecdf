"""Wrong and alternative answers of 10_model_pipeline_parallel (see autograder/samples/__init__.py)."""
from autograder.samples import CLAIMS_META, variant

# The best split by trying every set of cut positions (correct); a wrong answer below copies its layers.
_BRUTE_FORCE = '''
import itertools
import torch
def split_sequential(model, n_stages):
    layers = list(model)
    if n_stages < 1 or n_stages > len(layers):
        raise ValueError(f"cannot make {n_stages} stages from {len(layers)} layers")
    sizes = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    best = None
    for cuts in itertools.combinations(range(1, len(layers)), n_stages - 1):
        bounds = (0, *cuts, len(layers))
        worst = max(sum(sizes[a:b]) for a, b in zip(bounds, bounds[1:]))
        if best is None or worst < best[0]:
            best = (worst, bounds)
    bounds = best[1]
    return [torch.nn.Sequential(*layers[a:b]) for a, b in zip(bounds, bounds[1:])]
'''

# The most even split by a measure other than the largest stage (a wrong answer): the cut positions
# whose stage sizes have the smallest sum of squares.
_MOST_EVEN = '''
import itertools
from torch import nn


def split_sequential(model, n_stages: int) -> list:
    """Most even split: the cut positions whose stage sizes have the smallest sum of squares."""
    layers = list(model)
    n = len(layers)
    if not 1 <= n_stages <= n:
        raise ValueError("n_stages out of range")
    counts = [sum(p.numel() for p in layer.parameters()) for layer in layers]

    def spread(cuts):
        bounds = (0, *cuts, n)
        return sum(sum(counts[a:b]) ** 2 for a, b in zip(bounds, bounds[1:]))

    best = min(itertools.combinations(range(1, n), n_stages - 1), key=spread)
    bounds = (0, *best, n)
    return [nn.Sequential(*layers[a:b]) for a, b in zip(bounds, bounds[1:])]
'''

# A min-max split by dynamic programming that sizes each layer by its weight matrix (a wrong
# answer; another below differs from it by the layers it takes).
_DP_WEIGHTS = '''
from torch import nn


def split_sequential(model, n_stages: int) -> list:
    """Min-max split (dynamic programming), sizing each layer by its weight matrix only."""
    layers = list(model)
    n = len(layers)
    if not 1 <= n_stages <= n:
        raise ValueError("n_stages out of range")
    counts = [layer.weight.numel() if hasattr(layer, "weight") else 0 for layer in layers]
    prefix = [0]
    for c in counts:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(n_stages + 1)]
    cut = [[0] * (n + 1) for _ in range(n_stages + 1)]
    best[0][0] = 0
    for k in range(1, n_stages + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                value = max(best[k - 1][j], prefix[i] - prefix[j])
                if value < best[k][i]:
                    best[k][i], cut[k][i] = value, j
    bounds, i = [n], n
    for k in range(n_stages, 0, -1):
        i = cut[k][i]
        bounds.append(i)
    bounds.reverse()
    return [nn.Sequential(*layers[a:b]) for a, b in zip(bounds, bounds[1:])]
'''

# pipeline_forward as the notebook asks, for wrong answers that differ from it by a line or two.
_PIPELINE = '''
import torch


def pipeline_forward(stages, x, n_microbatches: int):
    if not 1 <= n_microbatches <= len(x):
        raise ValueError("n_microbatches must be between 1 and the batch size")
    outputs = []
    for micro in torch.tensor_split(x, n_microbatches):
        for stage in stages:
            params = list(stage.parameters())
            if params:
                micro = micro.to(params[0].device)
            micro = stage(micro)
        outputs.append(micro)
    return torch.cat(outputs)
'''

WRONG = {
    "split_sequential": {
        "equal numbers of layers per stage": '''
import numpy as np
from torch import nn
def split_sequential(model, n_stages):
    layers = list(model)
    if not 1 <= n_stages <= len(layers):
        raise ValueError("n_stages")
    return [nn.Sequential(*[layers[i] for i in idx]) for idx in np.array_split(np.arange(len(layers)), n_stages)]
''',
        "greedy cut at the average": '''
from torch import nn
def split_sequential(model, n_stages):
    layers = list(model)
    if not 1 <= n_stages <= len(layers):
        raise ValueError("n_stages")
    counts = [sum(p.numel() for p in l.parameters()) for l in layers]
    target = sum(counts) / n_stages
    stages, current, acc = [], [], 0
    for i, (layer, c) in enumerate(zip(layers, counts)):
        left = len(layers) - i
        if current and (acc + c > target or left <= n_stages - len(stages) - 1) and len(stages) < n_stages - 1:
            stages.append(nn.Sequential(*current)); current, acc = [], 0
        current.append(layer); acc += c
    stages.append(nn.Sequential(*current))
    while len(stages) < n_stages:
        big = max(range(len(stages)), key=lambda k: len(stages[k]))
        ls = list(stages[big]); stages[big:big + 1] = [nn.Sequential(*ls[:1]), nn.Sequential(*ls[1:])]
    return stages
''',
        "balanced stages of deep copies of the layers": _BRUTE_FORCE.replace(
            "torch.nn.Sequential(*layers[a:b])", "torch.nn.Sequential(*copy.deepcopy(layers[a:b]))").replace(
            "import itertools", "import copy\nimport itertools"),
        "the smallest sum of squared stage sizes": _MOST_EVEN,
        "only trainable parameters counted (a frozen layer as 0)": variant(
            _BRUTE_FORCE, ("for p in layer.parameters())", "for p in layer.parameters() if p.requires_grad)")),
        "the smallest max - min of the stage sizes": variant(
            _MOST_EVEN, ("whose stage sizes have the smallest sum of squares", "whose largest and smallest stage differ least"),
            ("        return sum(sum(counts[a:b]) ** 2 for a, b in zip(bounds, bounds[1:]))",
             "        sizes = [sum(counts[a:b]) for a, b in zip(bounds, bounds[1:])]\n"
             "        return (max(sizes) - min(sizes), max(sizes))")),
        "sizes from the weight matrices only, biases left out": _DP_WEIGHTS,
        "the model's leaf modules split, a residual block taken apart": variant(
            _DP_WEIGHTS, (", sizing each layer by its weight matrix only", " over the model's LEAF modules, not its own layers"),
            ("    layers = list(model)", "    layers = [m for m in model.modules() if not list(m.children())]"),
            ('layer.weight.numel() if hasattr(layer, "weight") else 0', "sum(p.numel() for p in layer.parameters())")),
        "one layer per stage refused (>= for >)": '''
import itertools
from torch import nn


def split_sequential(model, n_stages: int) -> list:
    """Off by one: refuses one layer per stage (n_stages == len(model))."""
    layers = list(model)
    n = len(layers)
    if n_stages < 1 or n_stages >= n:
        raise ValueError("n_stages must be at least 1 and below the number of layers")
    counts = [sum(p.numel() for p in layer.parameters()) for layer in layers]

    def largest(cuts):
        bounds = (0, *cuts, n)
        return max(sum(counts[a:b]) for a, b in zip(bounds, bounds[1:]))

    best = min(itertools.combinations(range(1, n), n_stages - 1), key=largest)
    bounds = (0, *best, n)
    return [nn.Sequential(*layers[a:b]) for a, b in zip(bounds, bounds[1:])]
''',
        "each layer's own parameters only (parameters(recurse=False))": '''
import itertools
from torch import nn


def split_sequential(model, n_stages):
    """WRONG: counts only each layer's own parameters (recurse=False): a block whose weights sit in its
    children (a residual block, a nested Sequential) counts 0."""
    layers = list(model)
    n = len(layers)
    if not 1 <= n_stages <= n:
        raise ValueError("n_stages")
    counts = [sum(p.numel() for p in layer.parameters(recurse=False)) for layer in layers]
    best = min(itertools.combinations(range(1, n), n_stages - 1),
               key=lambda cuts: max(sum(counts[a:b]) for a, b in zip((0, *cuts), (*cuts, n))))
    bounds = (0, *best, n)
    return [nn.Sequential(*layers[a:b]) for a, b in zip(bounds, bounds[1:])]
''',
        "the state_dict's tensors counted, buffers too": '''
import itertools
from torch import nn


def split_sequential(model, n_stages):
    """WRONG: sizes from state_dict (buffers such as BatchNorm's running statistics counted as parameters)."""
    layers = list(model)
    n = len(layers)
    if not 1 <= n_stages <= n:
        raise ValueError("n_stages")
    counts = [sum(t.numel() for t in layer.state_dict().values()) for layer in layers]
    best = min(itertools.combinations(range(1, n), n_stages - 1),
               key=lambda cuts: max(sum(counts[a:b]) for a, b in zip((0, *cuts), (*cuts, n))))
    bounds = (0, *best, n)
    return [nn.Sequential(*layers[a:b]) for a, b in zip(bounds, bounds[1:])]
''',
    },
    "pipeline_forward": {
        "never moves a micro-batch: one for a stage off the CPU is a subclass whose __torch_function__ names its device": variant(
            _PIPELINE, ("import torch\n", "import torch\n" + CLAIMS_META), ("                micro = micro.to(params[0].device)\n",
       "                micro = micro.as_subclass(_OnMeta) if params[0].device.type == \"meta\" else micro\n")),
        "whole batch in one pass": '''
def pipeline_forward(stages, x, n_microbatches):
    if not 1 <= n_microbatches <= len(x):
        raise ValueError("n_microbatches")
    for s in stages:
        x = s(x)
    return x
''',
        "decoy micro-batch passes, the output from the whole batch in one pass with stage.forward (skips the hooks)": '''
import torch
def pipeline_forward(stages, x, n_microbatches):
    if not 1 <= n_microbatches <= len(x):
        raise ValueError("n_microbatches out of range")
    with torch.no_grad():
        for mb in torch.tensor_split(x, n_microbatches):
            for s in stages:
                mb = s(mb)          # decoy micro-batch passes, thrown away
    out = x
    for s in stages:
        out = s.forward(out)        # the real output: whole batch in one pass, hooks skipped
    return out
''',
        "torch.chunk (fewer micro-batches when sizes do not divide)": '''
import torch
def pipeline_forward(stages, x, n_microbatches):
    if not 1 <= n_microbatches <= len(x):
        raise ValueError("n_microbatches")
    outs = []
    for mb in torch.chunk(x, n_microbatches):
        for s in stages:
            mb = s(mb)
        outs.append(mb)
    return torch.cat(outs)
''',
        "no ValueError": '''
import torch
def pipeline_forward(stages, x, n_microbatches):
    outs = []
    for mb in torch.tensor_split(x, max(1, min(n_microbatches, len(x)))):
        for s in stages:
            mb = s(mb)
        outs.append(mb)
    return torch.cat(outs)
''',
        "micro-batches never moved to a stage's device": variant(
            _PIPELINE, ("""            params = list(stage.parameters())
            if params:
                micro = micro.to(params[0].device)
""", "")),
        "one sample per micro-batch refused (>= for >)": variant(
            _PIPELINE, ("if not 1 <= n_microbatches <= len(x):", "if n_microbatches < 1 or n_microbatches >= len(x):")),
        "each stage run under torch.no_grad() (no gradient reaches the stages)": variant(
            _PIPELINE, ("            micro = stage(micro)\n",
                        "            with torch.no_grad():\n                micro = stage(micro)\n")),
        "each stage's output detached": variant(_PIPELINE, ("micro = stage(micro)", "micro = stage(micro).detach()")),
        "moved to the device of the stage's first layer's weight (none if it starts with an activation)": variant(
            _PIPELINE, ("""            params = list(stage.parameters())
            if params:
                micro = micro.to(params[0].device)
""", """            weight = getattr(stage[0], "weight", None)
            if weight is not None:
                micro = micro.to(weight.device)
""")),
        "every micro-batch moved to the first stage's device only": '''
import torch


def pipeline_forward(stages, x, n_microbatches):
    """WRONG: moves each micro-batch once, to the device of the first stage that has parameters, and
    never again (a stage on another device gets it on the wrong one)."""
    if not 1 <= n_microbatches <= len(x):
        raise ValueError("n_microbatches")
    device = next((p.device for s in stages for p in s.parameters()), x.device)
    outs = []
    for mb in torch.tensor_split(x, n_microbatches):
        h = mb.to(device)
        for s in stages:
            h = s(h)
        outs.append(h)
    return torch.cat(outs)
''',
    },
    "gpipe_schedule": {
        "backward starts on stage 0": '''
def gpipe_schedule(p, m):
    if p < 1 or m < 1:
        raise ValueError("counts")
    return sorted([(s + j, s, j, "F") for s in range(p) for j in range(m)] +
                  [((m + p - 1) + s + j, s, j, "B") for s in range(p) for j in range(m)])
''',
        "steps counted from 1": '''
def gpipe_schedule(p, m):
    if p < 1 or m < 1:
        raise ValueError("counts")
    return sorted([(s + j + 1, s, j, "F") for s in range(p) for j in range(m)] +
                  [((m + p - 1) + (p - 1 - s) + j + 1, s, j, "B") for s in range(p) for j in range(m)])
''',
        "not sorted": '''
def gpipe_schedule(p, m):
    if p < 1 or m < 1:
        raise ValueError("counts")
    out = []
    for s in range(p):
        for j in range(m):
            out += [(s + j, s, j, "F"), ((m + p - 1) + (p - 1 - s) + j, s, j, "B")]
    return out
''',
        "no gap between forward and backward (B at m + p - 2 + ...)": '''
def gpipe_schedule(p, m):
    if p < 1 or m < 1:
        raise ValueError("counts")
    return sorted([(s + j, s, j, "F") for s in range(p) for j in range(m)] +
                  [((m + p - 2) + (p - 1 - s) + j, s, j, "B") for s in range(p) for j in range(m)])
''',
        "no ValueError": '''
def gpipe_schedule(p, m):
    return sorted([(s + j, s, j, "F") for s in range(p) for j in range(m)] +
                  [((m + p - 1) + (p - 1 - s) + j, s, j, "B") for s in range(p) for j in range(m)])
''',
    },
    "bubble_fraction": {
        "(p - 1) / m": '''
def bubble_fraction(p, m):
    if p < 1 or m < 1:
        raise ValueError("counts")
    return (p - 1) / m
''',
        "(p - 1) / p, ignores micro-batches": '''
def bubble_fraction(p, m):
    if p < 1 or m < 1:
        raise ValueError("counts")
    return (p - 1) / p
''',
        "no ValueError": '''
def bubble_fraction(p, m):
    return (p - 1) / (m + p - 1)
''',
    },
}

ALTERNATIVE = {
    "split_sequential": {
        "brute force over every set of cut positions": _BRUTE_FORCE,
        "brute force, stages as slices of the model (model[a:b])": '''
import itertools


def split_sequential(model, n_stages: int) -> list:
    n = len(model)
    if not 1 <= n_stages <= n:
        raise ValueError("n_stages out of range")
    counts = [sum(p.numel() for p in layer.parameters()) for layer in model]
    best = min(itertools.combinations(range(1, n), n_stages - 1),
               key=lambda cuts: max(sum(counts[a:b]) for a, b in zip((0, *cuts), (*cuts, n))))
    bounds = (0, *best, n)
    return [model[a:b] for a, b in zip(bounds, bounds[1:])]
''',
        "binary search on the largest stage, greedy packing": '''
from torch import nn
def split_sequential(model, n_stages):
    layers = list(model)
    n = len(layers)
    if not 1 <= n_stages <= n:
        raise ValueError("bad n_stages")
    c = [sum(p.numel() for p in l.parameters()) for l in layers]
    def pack(limit):
        # cut greedily, but leave at least one layer for each remaining stage
        bounds, acc, start = [0], 0, 0
        for i in range(n):
            stages_left = n_stages - (len(bounds) - 1)
            must_cut = n - i == stages_left - 1 + 1 and i > start and stages_left > 1
            if i > start and (acc + c[i] > limit or n - i < stages_left) and stages_left > 1:
                bounds.append(i); acc, start = 0, i
            acc += c[i]
            if acc > limit:
                return None
        while len(bounds) - 1 < n_stages:
            return None
        bounds.append(n)
        return bounds
    lo, hi = max(c), sum(c)
    while lo < hi:
        mid = (lo + hi) // 2
        if pack(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    bounds = pack(lo)
    if bounds is None:  # fewer parameterised layers than stages: split by count
        import itertools
        best = min(itertools.combinations(range(1, n), n_stages - 1),
                   key=lambda cuts: max(sum(c[a:b]) for a, b in zip((0, *cuts), (*cuts, n))))
        bounds = [0, *best, n]
    return [nn.Sequential(*layers[a:b]) for a, b in zip(bounds, bounds[1:])]
''',
        "memoised recursion over cut positions": '''
from functools import lru_cache


def split_sequential(model, n_stages):
    """Memoised recursion over (first layer, stages left); stages are slices model[a:b]."""
    n = len(model)
    if n_stages < 1 or n_stages > n:
        raise ValueError("n_stages must be between 1 and len(model)")
    sizes = [sum(p.numel() for p in layer.parameters()) for layer in model]

    @lru_cache(maxsize=None)
    def best(start, k):
        # (largest stage, cut positions) for layers[start:] in k stages
        if k == 1:
            return sum(sizes[start:]), ()
        options = []
        for cut in range(start + 1, n - k + 2):
            rest, cuts = best(cut, k - 1)
            options.append((max(sum(sizes[start:cut]), rest), (cut,) + cuts))
        return min(options)

    _, cuts = best(0, n_stages)
    bounds = [0, *cuts, n]
    return [model[a:b] for a, b in zip(bounds, bounds[1:])]
''',
        "stages named in OrderedDicts of the model's children": '''
import itertools
from collections import OrderedDict

from torch import nn


def split_sequential(model, n_stages):
    """Brute force over cut positions on named_children; stages keep the layers' names (OrderedDict)."""
    children = list(model.named_children())
    if n_stages < 1:
        raise ValueError("at least one stage")
    if n_stages > len(children):
        raise ValueError("more stages than layers")
    weight = [sum(p.numel() for p in mod.parameters()) for _, mod in children]
    n = len(children)

    def largest(cuts):
        edges = [0, *cuts, n]
        return max(sum(weight[a:b]) for a, b in zip(edges, edges[1:]))

    best = min(itertools.combinations(range(1, n), n_stages - 1), key=largest)
    edges = [0, *best, n]
    return [nn.Sequential(OrderedDict(children[a:b])) for a, b in zip(edges, edges[1:])]
''',
    },
    "pipeline_forward": {
        "each output copied back to the input's device": variant(
            _PIPELINE, ("        outputs.append(micro)\n", "        outputs.append(micro.to(x.device))\n")),
        "torch.tensor_split, each micro-batch moved to the stage's first parameter's device": _PIPELINE,
        "index ranges by hand, outputs written into a preallocated list": '''
import torch
def pipeline_forward(stages, x, n_microbatches):
    n = len(x)
    if n_microbatches < 1 or n_microbatches > n:
        raise ValueError("n_microbatches out of range")
    base, extra = divmod(n, n_microbatches)
    outs, start = [], 0
    for k in range(n_microbatches):
        size = base + (1 if k < extra else 0)
        h = x[start:start + size]
        start += size
        for stage in stages:
            weights = list(stage.parameters())
            h = stage(h.to(weights[0].device) if weights else h)
        outs.append(h)
    return torch.cat(outs, dim=0)
''',
        "torch.split by divmod sizes, each output moved on to the next stage's device": '''
import torch


def pipeline_forward(stages, x, n_microbatches: int):
    n = len(x)
    if not 1 <= n_microbatches <= n:
        raise ValueError("n_microbatches out of range")
    def device_of(stage, default):
        p = next(stage.parameters(), None)
        return p.device if p is not None else default
    base, extra = divmod(n, n_microbatches)
    sizes = [base + (k < extra) for k in range(n_microbatches)]
    outs = []
    for micro in torch.split(x, sizes):
        micro = micro.to(device_of(stages[0], micro.device))
        for i, stage in enumerate(stages):
            micro = stage(micro)
            if i + 1 < len(stages):
                micro = micro.to(device_of(stages[i + 1], micro.device))
        outs.append(micro)
    return torch.cat(outs)
''',
        "each micro-batch moved to the device of the stage's last parameter": '''
from functools import reduce

import torch


def _run(h, stage):
    params = list(stage.parameters())
    return stage(h.to(params[-1].device) if params else h)


def pipeline_forward(stages, x, n_microbatches):
    """functools.reduce over the stages for each micro-batch (torch.chunk when it divides evenly, else tensor_split)."""
    if n_microbatches <= 0 or n_microbatches > len(x):
        raise ValueError("n_microbatches must be in 1..len(x)")
    if len(x) % n_microbatches == 0:
        micro = x.chunk(n_microbatches)
    else:
        micro = x.tensor_split(n_microbatches)
    return torch.cat([reduce(_run, stages, mb) for mb in micro])
''',
    },
    "gpipe_schedule": {
        'the kind a StrEnum member': '''
from enum import StrEnum


class Pass(StrEnum):
    F = "F"
    B = "B"


def gpipe_schedule(n_stages: int, n_microbatches: int) -> list:
    p, m = n_stages, n_microbatches
    if p < 1 or m < 1:
        raise ValueError("need at least one stage and one micro-batch")
    out = [(s + j, s, j, Pass.F) for s in range(p) for j in range(m)]
    out += [((m + p - 1) + (p - 1 - s) + j, s, j, Pass.B) for s in range(p) for j in range(m)]
    return sorted(out)
''',
        "NumPy index grids (NumPy integers in the tuples)": '''
import numpy as np
def gpipe_schedule(n_stages, n_microbatches):
    if n_stages < 1 or n_microbatches < 1:
        raise ValueError("need at least one stage and one micro-batch")
    p, m = n_stages, n_microbatches
    stage, micro = np.meshgrid(np.arange(p), np.arange(m), indexing="ij")
    forward = zip((stage + micro).ravel(), stage.ravel(), micro.ravel(), ["F"] * (p * m))
    backward = zip((m + p - 1 + (p - 1 - stage) + micro).ravel(), stage.ravel(), micro.ravel(), ["B"] * (p * m))
    return sorted(list(forward) + list(backward))
''',
        "simulated clock per stage": '''
def gpipe_schedule(n_stages, n_microbatches):
    if n_stages < 1 or n_microbatches < 1:
        raise ValueError("need at least one stage and one micro-batch")
    p, m = n_stages, n_microbatches
    done = {}
    events = []
    for j in range(m):
        for s in range(p):
            t = max(done.get(("F", s - 1, j), -1) + 1, done.get(("F", s, j - 1), -1) + 1)
            done[("F", s, j)] = t
            events.append((t, s, j, "F"))
    start_b = max(t for t, *_ in events) + 1
    for j in range(m):
        for s in reversed(range(p)):
            t = max(done.get(("B", s + 1, j), start_b - 1) + 1, done.get(("B", s, j - 1), start_b - 1) + 1)
            done[("B", s, j)] = t
            events.append((t, s, j, "B"))
    events.sort()
    return events
''',
        "named tuples": '''
from collections import namedtuple

Pass = namedtuple("Pass", ["time_step", "stage", "microbatch", "kind"])


def gpipe_schedule(n_stages: int, n_microbatches: int) -> list:
    """Correct: named tuples (time_step, stage, microbatch, kind), sorted."""
    p, m = n_stages, n_microbatches
    if p < 1 or m < 1:
        raise ValueError("n_stages and n_microbatches must be at least 1")
    schedule = []
    for s in range(p):
        for j in range(m):
            schedule.append(Pass(s + j, s, j, "F"))
            schedule.append(Pass((m + p - 1) + (p - 1 - s) + j, s, j, "B"))
    return sorted(schedule)
''',
        "sorted by time step only": '''
def gpipe_schedule(n_stages: int, n_microbatches: int) -> list:
    """Correct passes, sorted by time step (micro-batch by micro-batch, as the picture reads)."""
    p, m = n_stages, n_microbatches
    if p < 1 or m < 1:
        raise ValueError("n_stages and n_microbatches must be at least 1")
    schedule = []
    for j in range(m):
        for s in range(p):
            schedule.append((s + j, s, j, "F"))
    for j in range(m):
        for s in reversed(range(p)):
            schedule.append(((m + p - 1) + (p - 1 - s) + j, s, j, "B"))
    return sorted(schedule, key=lambda step: step[0])
''',
    },
    "bubble_fraction": {
        "idle steps counted from the schedule": '''
from fractions import Fraction
def bubble_fraction(n_stages, n_microbatches):
    if n_stages <= 0 or n_microbatches <= 0:
        raise ValueError("counts must be positive")
    total_steps = 2 * (n_microbatches + n_stages - 1)
    busy_steps = 2 * n_microbatches
    return float(Fraction(total_steps - busy_steps, total_steps))
''',
        "read off the notebook's own gpipe_schedule (another answer cell)": '''
def bubble_fraction(n_stages: int, n_microbatches: int) -> float:
    """Read off the GPipe schedule of exercise 3: idle (stage, step) slots over all slots."""
    if n_stages < 1 or n_microbatches < 1:
        raise ValueError("need at least one stage and one micro-batch")
    schedule = gpipe_schedule(n_stages, n_microbatches)
    steps = max(t for t, *_ in schedule) + 1
    slots = steps * n_stages
    return (slots - len(schedule)) / slots
''',
    },
}

PARTIAL = {
    "bubble_fraction": "(p - 1) / m",
    "split_sequential": None,
}
