"""helpers.ranks: ranks from a warm forkserver (spawn where there is none), errors and hangs
bounded, no rank outliving its launch."""
import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from autograder import course
from helpers import ranks


def _parent_pid():
    import torch.distributed as dist
    return os.getppid(), os.getpid(), dist.get_world_size()


def _all_reduce_rank():
    import torch
    import torch.distributed as dist
    t = torch.ones(2) * (dist.get_rank() + 1)
    dist.all_reduce(t)
    return t


def _fail_on_rank_one():
    import torch.distributed as dist
    if dist.get_rank() == 1:
        raise KeyError("rank one says no")
    return "fine"


def _hang():
    time.sleep(60)


def test_ranks_come_from_one_warm_forkserver():
    """No rank is forked from the caller (it may have run torch); a second launch forks from the
    same server as the first (evidence without a clock: the ranks' parent)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("no forkserver on this platform: ranks are spawned")
    first = ranks.launch(_parent_pid, 2)
    second = ranks.launch(_parent_pid, 3)
    parents = {parent for parent, _, _ in first.results + second.results}
    assert len(parents) == 1 and os.getpid() not in parents
    assert [size for _, _, size in second.results] == [3, 3, 3]
    assert len({pid for _, pid, _ in first.results + second.results}) == 5


def _what_a_rank_sees():
    import torch
    return os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count()


def test_ranks_see_no_gpu():
    """Ranks are gloo CPU processes: a GPU of the machine is hidden from them (with one GPU,
    FSDP's default mesh would otherwise put rank 1 on a cuda:1 that does not exist)."""
    run = ranks.launch(_what_a_rank_sees, 2)
    assert run.results == [("", 0), ("", 0)]


def test_results_and_counts_under_spawn_too():
    for method in (None, "spawn"):
        run = ranks.launch(_all_reduce_rank, 3, start_method=method)
        assert [t.tolist() for t in run.results] == [[6.0, 6.0]] * 3
        assert all(counts["all_reduce"]["calls"] == 1 for counts in run.counts)


def test_a_forked_rank_is_refused():
    with pytest.raises(ValueError, match="start_method must be 'forkserver' or 'spawn'"):
        ranks.launch(_all_reduce_rank, 2, start_method="fork")


def test_an_error_on_a_rank_is_raised_in_the_caller():
    with pytest.raises(KeyError, match="rank one says no") as err:
        ranks.launch(_fail_on_rank_one, 2)
    assert any("raised on rank 1 of 2" in note for note in err.value.__notes__)


def test_a_ranks_error_in_a_notebook_shows_no_launcher_internals():
    """In a notebook's traceback (IPython's, as a kernel and the feedback show it), a rank's error
    skips the launcher's frame (its code names the records' witness, proof and weights: noise
    between the student's cell and the rank's own traceback)."""
    from IPython.core.ultratb import AutoFormattedTB

    try:
        ranks.launch(_fail_on_rank_one, 2)
    except KeyError:
        text = AutoFormattedTB(mode="Context", theme_name="nocolor").text(*sys.exc_info())
    assert "skipping hidden" in text and "witness" not in text and "in launch" not in text, text
    assert "rank one says no" in text and "raised on rank 1 of 2" in text, text


def test_a_hang_is_bounded_and_leaves_no_rank():
    start = time.perf_counter()
    with pytest.raises(TimeoutError, match="did not finish within 3 s"):
        ranks.launch(_hang, 2, timeout=3)
    assert time.perf_counter() - start < 20
    children = [p for p in multiprocessing.active_children() if p.name.startswith("rank")]
    assert not children


def _sleep(seconds):
    time.sleep(seconds)


def test_the_caller_sleeps_while_its_ranks_run():
    """The launching process spends a fixed CPU cost, however long its ranks run: the checks of 12
    weigh the caller's CPU to tell work done on the ranks from work done in the caller (a machine
    that slows the ranks must not make a correct launch look like the latter). Polling three
    forkserver ranks every 10 ms cost 33 ms of CPU per second (0.16 s over these 5 s); waiting on
    their sentinels costs about a millisecond in all."""
    spent = []
    ranks.launch(_sleep, 3, 0.0)  # the first launch of a process starts the forkserver
    gc.disable()  # a full collection over this process's heap (0.1-0.2 s with torch) is no launcher's
    try:
        for seconds in (0.0, 5.0):
            before = time.process_time()
            ranks.launch(_sleep, 3, seconds)
            spent.append(time.process_time() - before)
    finally:
        gc.enable()
    assert spent[1] - spent[0] < 0.06, (
        f"the caller spent {spent[1] - spent[0]:.3f} s more CPU while its ranks slept 5 s than when they "
        f"did not ({spent[0]:.3f} s)")


LAUNCHER = textwrap.dedent('''
    import os, sys, time
    from helpers import ranks

    def sleeper(folder):
        import torch.distributed as dist
        open(os.path.join(folder, f"{os.getpid()}.pid"), "w").close()
        time.sleep(120)

    ranks.launch(sleeper, 2, sys.argv[1], timeout=300)
''')


def test_no_rank_outlives_a_killed_launcher(tmp_path, course_tools, short_tmp):
    """The launcher killed with SIGKILL (no clean-up runs): its ranks leave within seconds."""
    # Its temp folders (the ranks' rendezvous, the forkserver's) are left by the kill: in the test's own.
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(tmp_path)], cwd=course.ROOT,
                                env={**os.environ, "PYTHONPATH": str(course.ROOT), "TMPDIR": str(short_tmp)})
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("*.pid"))) < 2:
        assert time.monotonic() < deadline and launcher.poll() is None, "the ranks did not start"
        time.sleep(0.1)
    pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
    launcher.send_signal(signal.SIGKILL)
    launcher.wait()
    deadline = time.monotonic() + 15
    while any(course_tools.running(pid) for pid in pids):
        assert time.monotonic() < deadline, f"ranks {[p for p in pids if course_tools.running(p)]} outlived their launcher"
        time.sleep(0.2)


# In a fresh interpreter, so that no forkserver started earlier in this process (without the
# preload) serves the ranks. Each rank writes whether torch._dynamo was already loaded when its
# function started: DistributedDataParallel and FSDP import it when they are built, about a
# second of CPU per rank and launch unless the forkserver loaded it once.
_PRELOAD_PROBE = """
import os, sys, tempfile
sys.path.insert(0, {folder!r})

def probe(rank, out):
    with open(os.path.join(out, str(rank)), "w") as f:
        f.write(str("torch._dynamo" in sys.modules))

if __name__ == "__main__":
    out = tempfile.mkdtemp()
    if {launcher!r} == "helpers.ranks":
        from helpers import ranks
        import torch.distributed as dist
        run = ranks.launch(lambda: probe(dist.get_rank(), out), 2)
    else:
        import torch.multiprocessing
        import ddp_worker
        method = ddp_worker.torch_start_method()
        assert method == "forkserver", method
        context = torch.multiprocessing.start_processes(
            ddp_worker.run_by_value, args=(ddp_worker.by_value(probe), out), nprocs=2, join=False,
            start_method=method)
        while not context.join(timeout=60):
            pass
    print(sorted(open(os.path.join(out, name)).read() for name in os.listdir(out)))
"""


@pytest.mark.parametrize("launcher", ["helpers.ranks", "ddp_worker"])
def test_ranks_start_with_what_ddp_imports_preloaded(launcher, tmp_path, short_tmp):
    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("no forkserver on this platform: ranks are spawned")
    script = tmp_path / "probe.py"
    script.write_text(_PRELOAD_PROBE.format(folder=str(course.SOURCE / "09_data_parallel"), launcher=launcher))
    env = {k: v for k, v in os.environ.items() if k != "COURSE_START_METHOD"}
    env["TMPDIR"] = str(short_tmp)  # the probe's folder of notes, and the forkserver's
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "['True', 'True']", done.stdout + done.stderr[-2000:]


def _accumulate(forwards_first):
    """Three micro-batches through a DDP model: each forward followed by its backward, or the three
    forward passes first; then one SGD step."""
    import torch
    from torch.nn.parallel import DistributedDataParallel
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    pieces = torch.randn(3, 2, 3)
    with model.no_sync():
        if forwards_first:
            for loss in [model(x).sum() for x in pieces]:
                loss.backward()
        else:
            for x in pieces:
                model(x).sum().backward()
    optimizer.step()


@pytest.mark.parametrize("forwards_first,ahead", [(False, 1), (True, 3)])
def test_the_forward_passes_ahead_of_their_backward_are_counted(forwards_first, ahead):
    run = ranks.launch(_accumulate, 2, forwards_first)
    assert [counts["ddp_forwards_ahead"]["largest"] for counts in run.counts] == [ahead, ahead]
    assert all(counts["ddp_backward"]["calls"] == 3 for counts in run.counts)


def _fsdp_step_and_a_look():
    """One trained pass of 4 rows through an FSDP model, and a look at 6 rows with gradients on,
    never backpropagated."""
    import torch
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    fully_shard(model[0])
    fully_shard(model[2])
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    model(torch.randn(6, 3))


def test_only_the_rows_of_trained_fsdp_passes_are_counted():
    """Under the checks' recording: the rows of the passes a backward pass followed, and each
    optimiser step's gradient norm (None for FSDP's sharded gradients, whose norm needs every rank)."""
    with ranks.recording(ddp_weights=True):
        run = ranks.launch(_fsdp_step_and_a_look, 2)
    for counts in run.counts:
        assert counts["fsdp_trained_rows"]["calls"] == 1 and counts["fsdp_trained_rows"]["bytes"] == 4
        assert counts["optimizer_steps"]["sharded"] == [True]  # each rank's pieces: their squares add up
        assert counts["fsdp_groups_gathered"]["largest"] == 1
    with ranks.recording(ddp_weights=True):
        run = ranks.launch(_accumulate, 2, False)
    squares = [counts["optimizer_steps"]["gradient_squares"] for counts in run.counts]
    assert len(squares[0]) == 1 and len(squares[0][0]) == 2 and squares[0] == squares[1]  # no_sync, same seed


def _decoys():
    """Two training passes of 2 rows through a DDP model whose forward takes a 5-row decoy first; a
    backward pass made only to be seen (a zero loss of the first parameter, before any forward
    pass); a step whose closure computes the gradients."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    class Tagged(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 1)

        def forward(self, tag, x):
            return self.layer(x)

    torch.manual_seed(0)
    model = DistributedDataParallel(Tagged())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def closure():
        optimizer.zero_grad()
        (next(model.parameters()).sum() * 0).backward()
        loss = model(torch.zeros(5), torch.ones(2, 3)).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    model(torch.zeros(5), torch.ones(2, 3)).sum().backward()


def test_the_rows_are_those_that_reach_the_first_linear_layer():
    with ranks.recording(ddp_weights=True):
        run = ranks.launch(_decoys, 2)
    for counts in run.counts:
        assert counts["ddp_forward_rows"] == {"calls": 2, "bytes": 4, "largest": 2}
        assert counts["ddp_backward"]["calls"] == 2  # the zero loss went through no pass
        # the closure's gradients, read as the step ends: ones(2, 3) summed -> weight 2s, bias 2
        assert counts["optimizer_steps"]["gradient_squares"] == [[pytest.approx(3 * 4), pytest.approx(4)]]
