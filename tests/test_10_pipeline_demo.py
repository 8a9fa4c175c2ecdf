"""10_model_pipeline_parallel's own code (not the exercises): it leaves `model` where it was and
its threaded pipeline neither hangs on an error nor builds autograd graphs.

The cells are read from the source notebook and their definitions run here, without the demo
that follows them."""
import copy
import queue
import threading
import time

import torch
from torch import nn

from autograder import course, notebooks

NOTEBOOK = course.source_notebook("10_model_pipeline_parallel")


def _definitions(marker, stop):
    """The code of the cell containing `marker`, up to (not including) the line starting with `stop`."""
    cell = next(c for c in notebooks.read(NOTEBOOK).cells if c.cell_type == "code" and marker in c.source)
    code = cell.source.split(f"\n{stop}", 1)[0]
    namespace = {"copy": copy, "queue": queue, "threading": threading, "time": time, "torch": torch, "nn": nn}
    exec(compile(code, f"<{marker}>", "exec"), namespace)
    return namespace


def test_splitting_the_model_across_devices_leaves_the_model_where_it_was():
    # "meta" stands in for a second GPU: a module moved there has no data any more.
    cells = _definitions("class TwoDeviceModel", "model = make_model()")
    model = cells["make_model"](width=16, depth=2)
    split = cells["TwoDeviceModel"](model, cut=2, devices=[torch.device("cpu"), torch.device("meta")])
    assert {p.device.type for p in model.parameters()} == {"cpu"}, "the notebook's model was moved"
    assert {p.device.type for p in split.part1.parameters()} == {"meta"}
    x = torch.randn(4, 16)
    model(x)   # the later test cells use `model` with tensors on the CPU


def _pipeline():
    return _definitions("def run_threaded_pipeline", "threads_before =")["run_threaded_pipeline"]


def test_a_failing_stage_raises_in_the_caller_and_hangs_nothing():
    def broken(t):
        raise ValueError("stage 0 is broken")

    run = _pipeline()
    result = {}

    def call():
        try:
            run([broken, nn.Identity()], list(torch.randn(6, 3).split(2)))
        except ValueError as err:
            result["error"] = err

    caller = threading.Thread(target=call, daemon=True)   # daemon: a hang must not hold pytest
    caller.start()
    caller.join(10)
    assert not caller.is_alive(), "run_threaded_pipeline hung after a stage raised"
    assert "stage 0 is broken" in str(result.get("error")), result


class _GradModeSeen(nn.Module):
    """Identity that notes whether autograd was on in the thread that ran it."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append(torch.is_grad_enabled())
        return x


def test_the_stages_build_no_autograd_graph():
    # Grad mode is per thread: no_grad() in the caller does not reach the stages' threads.
    run = _pipeline()
    layer, probe = nn.Linear(3, 3), _GradModeSeen()
    x = torch.randn(8, 3)
    with torch.no_grad():   # where the demo first had it
        out, events = run([layer, probe], list(x.split(2)))
        expected = layer(x)
    assert probe.seen == [False] * 4, "a stage ran with autograd on (it built a graph)"
    assert len(events) == 8 and torch.allclose(out, expected)
