"""Hidden checks of 12_collectives_sharding (ring all-reduce, ZeRO, partitioning, no_sync, FSDP2).

The multi-rank checks start ranks with helpers.ranks.launch, which counts each
rank's point-to-point and collective calls and the bytes handed to them: the
checks rely on those counts and on the results, never on the clock. The ranks
are launched (by the check or by the answer) in the student's process, through
`there`; the counts and results come back as plain data. That the ranks ran as
processes the judge sees itself: the kernel's count of the processes the student's
tree created (as root), and /proc (a rank lives for seconds, the judge looks every
5 ms).
"""
import contextlib
import itertools
import math
import random
import types

import pytest
import torch
from torch import nn

from autograder.checks._support import (assert_worked_outside, caller_cpu, created, exact_float, exact_int, exact_list,
                                        kernel_decides, observe, raises_value_error, there, timeout, witnessed_in,
                                        work_for_workers)
from helpers import ranks, sharding

_SENDS = ("send", "isend")
_RECEIVES = ("recv", "irecv")
_GATHERS = ("all_gather", "all_gather_into_tensor", "all_gather_single", "_all_gather_base")
_SCATTERS = ("reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "_reduce_scatter_base",
             "process_group.reduce_scatter", "process_group._reduce_scatter_base",
             "process_group.reduce_scatter_tensor_coalesced")


# --- ring_allreduce_p2p -----------------------------------------------------------------
def _ring_on_rank(ring, cases):
    """Runs in every rank: the student's ring on each case, with the counts of that one call."""
    import torch
    import torch.distributed as dist

    from helpers import ranks

    rank = dist.get_rank()
    out = []
    for seed, shape, dtype, *tamper in cases:
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed * 1000 + rank)).to(dtype)
        before, sent_before = ranks.local_counts(), len(ranks.local_destinations())
        given = x.clone()  # the caller's tensor, which the text says stays as it was
        with _tampering(*(tamper[0] if tamper and tamper[0][0] == rank else (None, 0))) as first:
            y = ring(given)
        after, sent_to = ranks.local_counts(), ranks.local_destinations()[sent_before:]
        used = {}
        for name, entry in after.items():
            old = before.get(name, {})
            calls = entry["calls"] - old.get("calls", 0)
            if calls:
                used[name] = {"calls": calls, "bytes": entry["bytes"] - old.get("bytes", 0)}
        out.append((x, y.detach().clone() if isinstance(y, torch.Tensor) else y, used, sent_to, first.get("sent"),
                    torch.equal(given, x)))
    return out


@contextlib.contextmanager
def _tampering(rank, delta):
    """(in a rank) Adds `delta` to every number of this rank's first point-to-point message, on its
    way (the message sent is a changed copy; the sender's own tensor is left as it is). Yields a
    dict whose "sent" is then the tensor it was asked to send (None: it saw none). Done inside
    the launcher's counting wrappers of send and isend, through which every counted message goes
    (an import of them by name included)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    first, keep, swapped = {"sent": None}, [], []
    if rank is None:
        yield first
        return

    def tampered(original):
        def send(*args, **kwargs):
            if first["sent"] is not None:  # one message only (and send's own inner isend passes)
                return original(*args, **kwargs)
            key = 0 if args else "tensor"
            tensor = args[0] if args else kwargs.get("tensor")
            first["sent"] = tensor.detach().clone()
            changed = tensor.detach() + delta
            keep.append(changed)  # alive until the call ends (an isend in flight)
            if args:
                args = (changed,) + args[1:]
            else:
                kwargs[key] = changed
            return original(*args, **kwargs)
        return send

    for name in ("send", "isend"):
        counted = getattr(c10d, name, None) or getattr(dist, name)
        free = getattr(getattr(counted, "__code__", None), "co_freevars", ())
        if getattr(counted, "_course_counted", False) and "original" in free:
            cell = counted.__closure__[free.index("original")]
            swapped.append((cell, cell.cell_contents))
            cell.cell_contents = tampered(cell.cell_contents)
    try:
        yield first
    finally:
        for cell, original in swapped:
            cell.cell_contents = original


def _ring_hint(y, expected, p):
    """Where a ring's result went wrong, as a question: the sum held in about one piece of p (the
    all-gather phase missing), or all but the end (a length that p does not divide)."""
    right = torch.isclose(y.double().flatten(), expected.flatten(), rtol=1e-4, atol=1e-4)
    share = float(right.double().mean()) if right.numel() else 0.0
    if 0 < share <= 1.5 / p:
        return (f" ({share:.0%} of the elements hold it, about one piece of {p}: after the reduce-scatter, "
                "does an all-gather, p - 1 more steps, pass the summed pieces round?)")
    if right.numel() % p and bool(right[: right.numel() - right.numel() % p].all()):
        return " (all but the last elements: a length not divisible by the number of ranks?)"
    return ""


def _launch_ring(ring, world_size, cases):
    """(in the student's process) the ranks' results of _ring_on_rank, as plain data.

    Per rank and case: (input, the result as a plain tensor or None, the calls it made,
    the result's type name, the destination of each of its sends in order, the first message as
    sent, whether the input was left as it was).
    """
    import torch

    from helpers import ranks

    run = ranks.launch(_ring_on_rank, world_size, ring, cases, timeout=90)
    return [[(x, y.detach().as_subclass(torch.Tensor).clone() if isinstance(y, torch.Tensor) else None,
              used, type(y).__name__, sent_to, first, kept) for x, y, used, sent_to, first, kept in results]
            for results in run.results]


def _check_ring(ring, world_size, cases):
    with _ranks_watched(world_size) as watched:
        results = there(_launch_ring, ring, world_size, cases)
    p = world_size
    undecided = None
    for k, (_, shape, dtype, *tamper) in enumerate(cases):
        inputs = [results[r][k][0] for r in range(p)]
        expected = torch.stack([t.double() for t in inputs]).sum(0)
        n = expected.numel()
        itemsize = inputs[0].element_size()
        if tamper:
            expected, undecided = _tampered_sum(expected, inputs, results, k, *tamper[0])
        for r in range(p):
            _, y, used, kind, sent_to, _, kept = results[r][k]
            assert isinstance(y, torch.Tensor), f"ring_allreduce_p2p must return a tensor, got {kind}"
            assert kept, (f"rank {r}'s input tensor was changed: return a new tensor and leave the caller's "
                          "as it was (work on a clone)")
            assert tuple(y.shape) == tuple(shape), (
                f"the result has shape {tuple(y.shape)}, the input {tuple(shape)}")
            assert torch.allclose(y.double(), expected, rtol=1e-4, atol=1e-4), (
                f"with {p} ranks and {n} elements rank {r} does not hold the element-wise sum over ranks"
                + _ring_hint(y, expected, p))
            collectives = sorted(name for name in used
                                 if name in ranks.COLLECTIVES or name in ranks.DIRECT_COLLECTIVES)
            assert not collectives, f"the ring must use point-to-point messages only; it called {collectives}"
            sends = sum(used.get(name, {}).get("calls", 0) for name in _SENDS)
            receives = sum(used.get(name, {}).get("calls", 0) for name in _RECEIVES)
            assert sends == 2 * (p - 1) and receives == 2 * (p - 1), (
                f"with {p} ranks each rank sends and receives 2(p-1) = {2 * (p - 1)} messages in a ring "
                f"(reduce-scatter, then all-gather); rank {r} sent {sends} and received {receives}")
            sent = sum(used.get(name, {}).get("bytes", 0) for name in _SENDS)
            most = 2 * (p - 1) * math.ceil(n / p) * itemsize
            least = 2 * (p - 1) * (n // p) * itemsize
            wider = _wider_elements(sent, least, most, dtype)
            assert least <= sent <= most, (
                f"in a ring each rank sends 2(p-1) chunks of about n/p elements: {least}-{most} bytes "
                f"here; rank {r} sent {sent}" + (wider or f" (cut the tensor's {n} elements, flattened, into {p} "
                f"pieces of {n // p} or {math.ceil(n / p)}: rows are too coarse when a tensor has few)"))
            if p > 1:
                _assert_one_neighbour_per_half(sent_to, r, p)
    if undecided:
        pytest.skip(undecided)
    _decided_if_seen(watched)


def _wider_elements(sent, least, most, dtype):
    """A hint where a rank sent as many elements as a ring should, at 2, 4 or 8 times the bytes."""
    for k in (2, 4, 8):
        if most < sent and k * least <= sent <= k * most:
            return (f" (as many elements at {k} times the bytes: send the chunks in the input's own dtype, "
                    f"{str(dtype).removeprefix('torch.')})")
    return ""


def _tampered_sum(expected, inputs, results, k, rank, delta):
    """The sum a ring leaves when `delta` was added, on its way, to every number of rank `rank`'s
    first message: that message is one of its own pieces, whose segment's sum then carries
    `delta` round the ring to every rank. (sum, None), or (the plain sum, why undecided) where the
    grader's wrapper saw no message."""
    sent = results[rank][k][5]
    if sent is None:
        return expected, ("the grader could not change a message on its way (none went through the "
                          "launcher's send or isend)")
    # Where the ranks' results carry delta: those are the piece's positions if it travelled.
    y = results[rank][k][1]
    if not isinstance(y, torch.Tensor) or y.shape != expected.shape:
        return expected, None  # failed below, as any answer
    carried = ((y.double() - expected - delta).abs() < 1e-3).flatten()
    own = inputs[rank].flatten()[carried]
    # A ring over chunks padded to equal sizes sends zeros the result then drops (normal draws are
    # never exactly 0): only the message's other numbers are looked for.
    real = sent.flatten()[sent.flatten() != 0]
    assert int(carried.sum()) == real.numel() > 0 and torch.equal(own.sort().values, real.sort().values), (
        f"{delta} was added, on its way, to every number of rank {rank}'s first message (one of its own "
        f"pieces, {real.numel()} numbers); in a ring that piece's segment then carries {delta} in its sum "
        f"to every rank, but rank {rank}'s result carries it in {int(carried.sum())} places: does the "
        "result come from the messages the ring passed?")
    return expected + delta * carried.reshape(expected.shape).double(), None


def _assert_one_neighbour_per_half(sent_to, r, p):
    """Each half of a ring (reduce-scatter, then all-gather) sends every chunk to the same
    neighbour. Sending each chunk straight to the rank that sums it, then each sum to every rank,
    makes as many messages of the same size: only their destinations tell it from a ring (with 3
    ranks both others are neighbours, so the destinations must not change within a half)."""
    neighbours = {(r + 1) % p, (r - 1) % p}
    for half, name in ((sent_to[:p - 1], "reduce-scatter"), (sent_to[p - 1:], "all-gather")):
        assert len(set(half)) == 1 and half[0] in neighbours, (
            f"in a ring each rank sends every chunk of the {name} to the same neighbour; with {p} ranks "
            f"rank {r} sent its {name} chunks to ranks {half} (a chunk sent straight to every rank is "
            f"not a ring)")


@timeout(150)
def test_ring_allreduce_p2p_three_ranks(ring_allreduce_p2p):
    """3 ranks: the sum on every rank, 2(p-1) messages, about 2(p-1)/p of the tensor sent, no collective

    Each half's messages go to one neighbour (either way round). And the result must come from the
    messages: in the last case 64 is added, on its way, to every number of one rank's first message
    (one of its own pieces, in any ring); the ranks' results must all carry it, on exactly that
    piece's positions (_tampered_sum): a sum gathered another way (the rendezvous store, files)
    beside decoy messages carries it nowhere.
    False failure of a correct answer: 0: the counts and destinations are exact, and float32 sums of three
    normal draws in another order differ by ~1e-7, far inside rtol=atol=1e-4; with the 64 added, the
    sums near 64 round by at most ~2e-5, inside the 1e-3 that tells a carried 64 from none. A message
    that went past the launcher's send and isend (which then counts none) leaves the check undecided.
    """
    seed = random.randint(0, 10**6)
    n_uneven = 3 * random.randint(300, 600) + random.choice([1, 2])
    cases = [(seed, (n_uneven,), torch.float32),                  # not divisible by 3
             (seed + 1, (4, random.choice([5, 7])), torch.float64),  # 2-D, not divisible
             (seed + 2, (3 * random.randint(2, 50),), torch.float32),  # divisible
             (seed + 3, (random.choice([2, 4]),), torch.float32),  # a piece with 0 or 2 elements
             # 64 added to a rank's first message on its way: the results must carry it
             (seed + 4, (3 * random.randint(20, 60) + 1,), torch.float32, (random.randrange(3), 64.0))]
    _check_ring(ring_allreduce_p2p, 3, cases)


@timeout(90)
def test_ring_allreduce_p2p_one_rank(ring_allreduce_p2p):
    """1 rank: the tensor itself, and no message at all

    False failure of a correct answer: 0: nothing random is compared but the input itself.
    """
    _check_ring(ring_allreduce_p2p, 1, [(random.randint(0, 10**6), (random.randint(1, 40),), torch.float32)])


# --- zero_memory --------------------------------------------------------------------------------
def _zero(psi, n, stage):
    return [16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n, 16 * psi / n][stage]


def test_zero_memory_paper_figures(zero_memory):
    """7.5 B parameters on 64 ranks: 120, 31.4, 16.6 and 1.9 GB per rank"""
    for stage, gb in enumerate([120, 31.4, 16.6, 1.9]):
        got = exact_float(zero_memory(7_500_000_000, 64, stage), f"zero_memory(7.5e9, 64, {stage})")
        assert abs(got / 1e9 - gb) < 0.05, (
            f"stage {stage}: 7.5 B parameters on 64 ranks need {gb} GB per rank (the paper), got {got / 1e9:.2f} GB "
            "(return bytes, not GB; 2 + 2 + 12 bytes per parameter)")


def test_zero_memory_formula(zero_memory):
    """every stage, for other sizes and rank counts, including 1 rank and 0 parameters

    False failure of a correct answer: 0: the formula is exact up to rel_tol=1e-9.
    """
    for psi, n in [(1000, 1), (0, 8), (random.randint(10**3, 10**10), random.randint(2, 512)), (12345, 3)]:
        for stage in range(4):
            got = exact_float(zero_memory(psi, n, stage), "zero_memory(...)")
            want = _zero(psi, n, stage)
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-6), (
                f"zero_memory({psi}, {n}, {stage}) should be {want!r} bytes, got {got!r}"
                + (" (stage 2 shards optimiser states and gradients, not the parameters)" if stage == 2 else ""))


def test_zero_memory_errors(zero_memory):
    """another stage, world_size < 1 or n_params < 0 raise ValueError"""
    for args in [(100, 4, 4), (100, 4, -1), (100, 0, 1), (100, -2, 1), (-1, 4, 0)]:
        with raises_value_error(f"zero_memory{args}"):
            zero_memory(*args)


# --- partition_parameters -----------------------------------------------------------------------
def _loads(parts, sizes, world_size):
    parts = exact_list(parts, "the result", world_size)
    seen, indices = [], []
    for part in parts:
        # NumPy's integers too: an answer that orders the parameters with np.argsort hands them on.
        part = [exact_int(index, "each index") for index in exact_list(part, "each rank's list")]
        indices.append(part)
        seen += part
    assert sorted(seen) == list(range(len(sizes))), (
        "every parameter index must be on exactly one rank (indices into sizes, not the sizes)")
    return [sum(sizes[i] for i in part) for part in indices]


def _best(sizes, world_size):
    """The optimal largest load, by trying every assignment (small cases only)."""
    best = math.inf
    for choice in itertools.product(range(world_size), repeat=len(sizes)):
        loads = [0] * world_size
        for size, rank in zip(sizes, choice):
            loads[rank] += size
        best = min(best, max(loads))
    return best


def _perfect(world_size, target, rng):
    """Sizes that split into world_size groups of exactly `target` each (so the best is target)."""
    sizes = []
    for _ in range(world_size):
        cuts = sorted(rng.sample(range(1, target), rng.randint(1, 5)))
        sizes += [b - a for a, b in zip([0] + cuts, cuts + [target])]
    rng.shuffle(sizes)
    return sizes


def test_partition_parameters_balance(partition_parameters):
    """the largest load is at most 4/3 of the best possible, on cases that expose naive rules

    False failure of a correct answer: 0: the best is computed exactly (exhaustive search,
    or known by construction), and LPT is proven within 4/3 of it (Graham, 1969).
    """
    rng = random.Random(random.randint(0, 10**6))
    cases = [([10, 1, 10, 1], 2),                         # round-robin puts both 10s together
             ([9, 1, 1, 1, 1, 1, 1, 1, 1, 1], 2),          # equal counts per rank: 13 > 4/3 × 9
             ([1, 1, 2], 2),                               # greedy in index order: 3 > 4/3 × 2
             ([5, 5, 4, 4, 3, 3, 3], 3)]                   # LPT's worst case family
    for _ in range(3):
        p = rng.randint(2, 3)
        cases.append(([rng.randint(0, 30) for _ in range(rng.randint(2, 8))], p))
    for sizes, p in cases:
        loads = _loads(partition_parameters(list(sizes), p), sizes, p)
        best = _best(sizes, p)
        assert max(loads) <= 4 / 3 * best + 1e-9, (
            f"with {p} ranks the most loaded rank carries {max(loads)}, more than 4/3 of the best "
            f"possible {best} (round-robin or equal counts ignore the sizes: place large ones first)")
    for _ in range(3):                                     # larger: the best is known by construction
        p = rng.randint(2, 6)
        target = rng.randint(50, 10**6)
        sizes = _perfect(p, target, rng)
        loads = _loads(partition_parameters(list(sizes), p), sizes, p)
        assert max(loads) <= 4 / 3 * target, (
            f"{len(sizes)} parameters on {p} ranks: the best split has {target} on every rank, "
            f"yours puts {max(loads)} on one (more than 4/3 of that)")


def test_partition_parameters_edges(partition_parameters):
    """fewer parameters than ranks, no parameters, one rank; ValueError for bad input

    False failure of a correct answer: 0 (exact loads).
    """
    sizes = [7, 3]
    loads = _loads(partition_parameters(sizes, 4), sizes, 4)
    assert sorted(loads) == [0, 0, 3, 7], "with more ranks than parameters each parameter gets its own rank"
    assert _loads(partition_parameters([], 3), [], 3) == [0, 0, 0], "no parameters: three empty lists"
    sizes = [random.randint(0, 9) for _ in range(6)]
    assert _loads(partition_parameters(sizes, 1), sizes, 1) == [sum(sizes)], "one rank takes everything"
    for world_size in (0, -2):
        with raises_value_error(f"partition_parameters([1, 2], {world_size})"):
            partition_parameters([1, 2], world_size)
    with raises_value_error("partition_parameters([1, -2], 2)"):
        partition_parameters([1, -2], 2)


# --- training recipes: the single-process reference ----------------------------------------
def _single_process(steps, seed, gradient_norms=None):
    """The weights after `steps` steps; each step's gradients' norms (one per parameter, sorted)
    appended to gradient_norms."""
    model = sharding.make_model(seed)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    for step in range(steps):
        inputs, targets = sharding.global_batch(X, y, step)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs), targets).backward()
        if gradient_norms is not None:  # each parameter's gradient's norm, smallest first
            gradient_norms.append(sorted(float(p.grad.double().norm()) for p in model.parameters()))
        optimizer.step()
    return model.state_dict()


def _share_gradients(steps, seed, world_size, per_layer=False, micro_batches=1):
    """[step][rank]: the shapes of the gradients of rank `rank`'s share's mean loss at single-process
    training's weights of that step, for a contiguous share (sharding.rank_share), a strided one
    (x[rank::world_size]) and, with micro_batches, the rank's share of each of the global batch's
    micro-batches: each parameter's gradient's norm over the norm of them all, sorted (the
    shape a rank's gradient has before DDP's all-reduce, whatever it scaled its losses by); with
    per_layer, one norm per Linear layer (weight and bias), as FSDP reduce-scatters them."""
    model = sharding.make_model(seed)
    X, y = sharding.make_data(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=sharding.LR)
    shapes = []
    for step in range(steps):
        inputs, targets = sharding.global_batch(X, y, step)
        per_rank = []
        for rank in range(world_size):
            shares = [(sharding.rank_share(inputs, rank, world_size), sharding.rank_share(targets, rank, world_size)),
                      (inputs[rank::world_size], targets[rank::world_size])]
            if micro_batches > 1:  # the global batch cut into micro-batches first, each shared out
                shares.append(tuple(torch.cat([sharding.rank_share(piece, rank, world_size)
                                               for piece in data.chunk(micro_batches)]) for data in (inputs, targets)))
            grads = [torch.autograd.grad(nn.functional.mse_loss(model(x), t), list(model.parameters()))
                     for x, t in shares]
            if per_layer:  # a Linear layer's weight and bias together, as FSDP reduce-scatters them
                grads = [[torch.cat([w.flatten(), b.flatten()]) for w, b in zip(g[0::2], g[1::2])] for g in grads]
            per_rank.append([_shape(g) for g in grads])
        shapes.append(per_rank)
        optimizer.zero_grad()
        nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
    return shapes


def _shape(gradients):
    norms = sorted(float(g.double().norm()) for g in gradients)
    total = math.hypot(*norms)
    return [n / total for n in norms] if total > 0 else norms


def _recorded(train, *args, puzzles=()):
    """(in the student's process) train(*args) with every ranks.launch it makes recorded.

    (the weights as plain data: a dict of name -> tensor, with the type name instead of any
    value that is not a plain torch.Tensor, or the type name of a result that is not a dict;
    [(world_size, per-rank counts, per-rank (pid, witness thread id), per-rank answers to
    `puzzles`, per-rank weights of the DDP model the rank trained or None, per-rank pieces of the
    FSDP model the rank trained or None, per-rank inputs of its reduce-scatters by step) of each
    launch]).
    """
    import torch

    from helpers import ranks

    with ranks.recording(puzzles, ddp_weights=True) as runs:
        weights = train(*args)
    from torch.distributed.tensor import DTensor

    def plain(value):
        if type(value) is torch.nn.Parameter and not isinstance(value, DTensor):
            value = value.detach()  # dict(model.named_parameters()): the weights, as Parameters
        return value if type(value) is torch.Tensor else type(value).__name__

    if isinstance(weights, dict):
        weights = {str(name): plain(value) for name, value in weights.items()}
    else:
        weights = type(weights).__name__
    return weights, [(run.world_size, run.counts, getattr(run, "witnesses", []), getattr(run, "proofs", []),
                      getattr(run, "ddp_weights", []), getattr(run, "fsdp_shards", []),
                      getattr(run, "fsdp_reduce_scatter_inputs", []))
                     for run in runs]


def _same_weights(weights, expected, hint):
    """weights as _recorded gives them back."""
    assert isinstance(weights, dict), f"return a state dict (a dict), got {weights}"
    assert set(weights) == set(expected), (
        f"the keys should be the plain model's {sorted(expected)}, got {sorted(weights)}")
    for name, value in expected.items():
        got = weights[name]
        assert type(got) is torch.Tensor, (
            f"{name} must be a plain torch.Tensor (gather sharded DTensors with full_tensor()), "
            f"got {got if isinstance(got, str) else type(got).__name__}")
        assert got.shape == value.shape, f"{name} has shape {tuple(got.shape)}, expected {tuple(value.shape)}"
        assert torch.allclose(got.detach(), value, atol=2e-5, rtol=1e-4), (
            f"the final weights differ from single-process training on the global batch ({hint})")


@contextlib.contextmanager
def _ranks_watched(world_size):
    """with _ranks_watched(world_size): <the there() call that launches the ranks>

    The judge's own evidence that world_size ranks ran as processes, gathered outside the
    student's process (whose record of its launches its code can edit): the kernel's count of
    the processes the student's tree created meanwhile (as root; the forkserver forks the ranks
    and is part of the tree), and what /proc showed running at once. A serial answer that
    writes a launch into helpers.ranks' record starts no rank processes: as root it fails
    here; without the kernel's record, /proc alone leaves it undecided (a judge starved of CPU
    could miss real ranks), and its puzzles, solved in the calling process, fail it.
    Yields what the judge saw: `.made`, the kernel's record, is set once the block ends.
    """
    watched = types.SimpleNamespace(made=None)
    with observe() as seen, created() as made:
        yield watched
    watched.made = made
    if kernel_decides(made):
        assert made.processes >= world_size, (
            f"{world_size} ranks should run as {world_size} new processes; the answer started "
            f"{made.processes}")
    watched.at_most = seen.max_processes - 1  # ranks seen running at once: _decided_if_seen()
    watched.world_size = world_size


def _decided_if_seen(watched):
    """Last in a check, once everything else has passed: /proc, looked at every few milliseconds
    by a judge that a busy machine can starve of CPU for the ranks' whole life, not showing them
    all at once cannot fail an answer: the check is undecided (never passed). Last, so that a
    decisive failure (the puzzles of a serial answer, the kernel's count as root) is never hidden
    behind it."""
    if watched.at_most < watched.world_size:
        pytest.skip(f"the grader saw at most {watched.at_most} of the {watched.world_size} ranks running "
                    "at once (a busy machine?)")


def _the_launch(runs, world_size, name, watched, work):
    """The counts of the last launch in runs [(world_size, counts, witnesses, proofs, ...), ...], a
    record kept in the student's process: as root, each rank it names must have started its
    witness thread (helpers.ranks' _rank_main does, before the rank's function runs) where the
    kernel saw it. And each rank solved its puzzle while the calling process spent less than half
    their CPU (`work`: puzzles, caller_cpu(), allowance): a witness can be forged by a process
    started to do only that."""
    assert runs, (f"{name} must start its ranks with helpers.ranks.launch: the grader reads the "
                  "launcher's counts")
    started, counts, witnesses, proofs = runs[-1][:4]
    assert started == world_size, (
        f"{name}(world_size={world_size}, ...) started {started} ranks")
    if kernel_decides(watched.made):
        ran = {pair[0] for pair in witnesses if type(pair) in (tuple, list) and len(pair) == 2
               and witnessed_in(watched.made, *pair)}  # distinct pids: one rank named twice counts once
        assert len(ran) == world_size, (
            f"{name}: {world_size} ranks should run as processes started by this launch; the operating "
            f"system saw {len(ran)} of them do so")
    puzzles, spent, allowance = work
    assert_worked_outside(puzzles, list(proofs)[:world_size], spent, allowance, name)
    return counts


# --- accumulate_gradients -----------------------------------------------------------------
def _check_accumulate(accumulate_gradients, world_size, micro_batches):
    seed = random.randint(0, 10**6)
    steps = sharding.N_SAMPLES // sharding.GLOBAL_BATCH
    puzzles, allowance = work_for_workers(world_size, world_size)  # one per rank
    with _ranks_watched(world_size) as watched, caller_cpu() as spent:
        weights, runs = there(_recorded, accumulate_gradients, world_size, micro_batches, seed,
                              puzzles=[p.task for p in puzzles])
    launched = _the_launch(runs, world_size, "accumulate_gradients", watched, (puzzles, spent, allowance))
    norms = []
    expected = _single_process(steps, seed, norms)
    _same_weights(weights, expected, "is each micro-batch loss divided by micro_batches? each rank on its share?")
    # The weights returned could come from elsewhere (a model rank 0 trained alone, beside DDP
    # ranks that trained wrongly): the model each rank trained with DDP must hold them too.
    for rank, trained in enumerate(runs[-1][4][:world_size] if len(runs[-1]) > 4 else [None]):
        assert isinstance(trained, dict), f"rank {rank} trained no DistributedDataParallel model"
        _same_weights(_named_as(trained, expected), expected,
                      f"checked in the DistributedDataParallel model rank {rank} trained, as well as in "
                      "the weights returned: is each micro-batch loss divided by micro_batches?")
    share = sharding.GLOBAL_BATCH // (world_size * micro_batches)  # rows of one micro-batch of one rank
    undecided = uncounted = None
    for rank, counts in enumerate(launched):
        # The training passes: forward passes of the DDP model that a backward pass then went
        # through (a pass for a look, never backpropagated, is not one); the rows the model trained
        # on: those of the calls of its first Linear layer that a backward pass went through.
        rows = counts.get("ddp_forward_rows", {})
        unseen = counts.get("ddp_rows_unseen", {}).get("calls", 0)
        trained = counts.get("ddp_trained_passes", {}).get("calls", 0)
        syncs = counts.get("ddp_gradient_sync", {}).get("calls", 0)
        backwards = counts.get("ddp_backward", {}).get("calls", 0)
        assert trained == steps * micro_batches, (
            f"with micro_batches={micro_batches} each rank trains with {micro_batches} forward and backward passes "
            f"of its DistributedDataParallel model per step, {steps * micro_batches} in all; rank {rank} ran "
            f"{trained} forward passes that a backward pass went through")
        if unseen:  # decided below all the same where the gradient the rank hands over is read
            uncounted = uncounted or (f"rank {rank} trained on inputs the grader could not count (read where they "
                                      "reach the model's first Linear layer)")
        else:
            assert rows.get("largest") == share and rows.get("bytes") == steps * micro_batches * share, (
                f"each micro-batch of a rank holds GLOBAL_BATCH / (world_size * micro_batches) = {share} samples "
                f"(its rank_share of the global batch, split in {micro_batches}); rank {rank}'s model trained on up "
                f"to {rows.get('largest', 0)} at once ({rows.get('bytes', 0)} in all, where "
                f"{steps * micro_batches * share} were due): does each rank train on its own share?")
        assert backwards == steps * micro_batches, (
            f"one backward pass per micro-batch, {micro_batches} per step, {steps * micro_batches} in all; rank "
            f"{rank} ran {backwards} through its forward passes (a loss summed over the micro-batches and "
            "backpropagated once keeps every micro-batch's graph alive, which accumulation is there to avoid)")
        assert syncs == steps, (
            f"exactly one gradient all-reduce per optimiser step: {steps} in all; rank {rank} made {syncs} "
            "(are the first micro_batches - 1 forward and backward passes inside model.no_sync()?)")
        ahead = counts.get("ddp_forwards_ahead", {}).get("largest", 0)
        assert ahead == 1, (
            f"each micro-batch's backward pass should run before the next micro-batch's forward pass, so that "
            f"one graph (one micro-batch's activations) is alive at a time; rank {rank} had {ahead} forward "
            "passes waiting for their backward passes at once")
    # Each rank's own share, seen in what it hands to DDP's all-reduce: ranks that all train on the
    # whole batch hand over the same gradient, whose weights come out right all the same.
    shapes = _share_gradients(steps, seed, world_size, micro_batches=micro_batches)
    for rank, counts in enumerate(launched):
        local = counts.get("ddp_gradient_sync", {}).get("local_gradient_squares")
        if not (isinstance(local, list) and len(local) == steps):
            undecided = undecided or uncounted or (
                f"the grader could not read the gradients rank {rank} handed to DDP's all-reduce")
            continue
        for step, squares in enumerate(local):
            got = _shape([torch.tensor(v).sqrt() for v in squares])
            assert any(len(got) == len(want) and all(abs(g - w) <= 1e-3 for g, w in zip(got, want))
                       for want in shapes[step][rank]), (
                f"the gradient rank {rank} handed to DDP's all-reduce in step {step} is not that of its own share of "
                "the global batch: does each rank train on its rank_share (and only on it)?")
    _gradients_then_verdict(launched, steps, norms, "divide each micro-batch's loss by micro_batches, and keep "
                            "the learning rate at sharding.LR", undecided, watched)


def _gradients_then_verdict(launched, steps, norms, hint, undecided, watched):
    """Last in a check of 12's training: the gradients each optimiser step applied (undecided where
    they cannot be followed), then what was left undecided, then whether the ranks were seen."""
    applied = _applied_norms(launched, steps)
    if isinstance(applied, str):
        undecided = undecided or applied
    else:
        _assert_global_gradients(applied, norms, hint)
    if undecided:
        pytest.skip(undecided)
    _decided_if_seen(watched)


def _applied_norms(launched, steps):
    """Per rank, per optimiser step, the norms of the gradients that step applied (one per parameter,
    sorted: an optimiser may hold the parameters in any order), as helpers.ranks notes their sums
    of squares; where they were sharded (DTensors: each rank noted its pieces'), the whole
    gradients', the same for every rank. A str saying why where the steps cannot be followed (no
    torch.optim optimiser, or not `steps` steps)."""
    squares = [counts.get("optimizer_steps", {}).get("gradient_squares") for counts in launched]
    sharded = [counts.get("optimizer_steps", {}).get("sharded") for counts in launched]
    for rank in range(len(launched)):
        if not (isinstance(squares[rank], list) and len(squares[rank]) == steps
                and isinstance(sharded[rank], list) and len(sharded[rank]) == steps
                and all(isinstance(step, list) and len(step) == len(squares[0][i])
                        for i, step in enumerate(squares[rank]))):
            return (f"rank {rank}'s optimiser steps could not be followed (the grader reads the gradients "
                    f"a torch.optim optimiser applies at each of the {steps} steps)")
    for rank, counts in enumerate(launched):
        rates = counts.get("optimizer_steps", {}).get("learning_rates")
        assert isinstance(rates, list) and all(
            isinstance(step, list) and step and all(math.isclose(lr, sharding.LR, rel_tol=1e-9) for lr in step)
            for step in rates), (
            f"rank {rank}'s optimiser stepped with learning rates {rates}, where every step uses sharding.LR = "
            f"{sharding.LR}: scale the loss, not the learning rate")
    applied = []
    for rank in range(len(launched)):
        applied.append([sorted(math.sqrt(sum(squares[other][step][i] for other in range(len(launched)))
                                         if sharded[rank][step] else squares[rank][step][i])
                               for i in range(len(squares[rank][step])))
                        for step in range(steps)])
    return applied


def _assert_global_gradients(applied, norms, hint):
    """Each rank's optimiser must step with the gradients of the global batch's mean loss: each
    parameter's gradient's norm as the single-process training's at each step (float32 rounding:
    ~1e-6 relative, against 1e-3)."""
    for rank, steps in enumerate(applied):
        for step, (got, want) in enumerate(zip(steps, norms)):
            total_got, total_want = math.hypot(*got), math.hypot(*want)
            assert len(got) == len(want) and all(
                abs(g - w) <= 1e-3 * w + 1e-6 * total_want for g, w in zip(got, want)), (
                f"the gradient rank {rank}'s optimiser applied in step {step} has norm {total_got:.4g}, where the "
                f"global batch's mean loss gives {total_want:.4g} ({total_got / total_want:.3g} times as large, "
                f"over {len(got)} parameters where the model has {len(want)}): {hint}")


@timeout(150)
def test_accumulate_gradients_ranks(accumulate_gradients):
    """2 or 3 ranks, 3 or 4 micro-batches: the single-process weights, one all-reduce per step

    False failure of a correct answer: 0 for the counts (exact, with one forward pass ahead of its
    backward at most); the weights differ from the reference by float32 rounding (~1e-7) against
    atol=2e-5 after 4 small SGD steps, both those returned and those of the DDP model each rank
    trained (the same tensors in a correct answer); the norm of the gradient each optimiser step
    applies differs from the global batch's by float32 rounding (~1e-6 relative) against 1e-3
    (a learning rate divided by micro_batches with the loss unscaled: micro_batches times as large),
    and so does the shape of what each rank hands to the all-reduce from its share's gradient's (a
    contiguous or a strided share).
    """
    # Three micro-batches or more: with two, an answer that runs its first micro_batches - 1 forward
    # passes before their backward passes does each in the right order.
    _check_accumulate(accumulate_gradients, *random.choice([(2, 3), (2, 4), (3, 4)]))


def test_accumulate_gradients_errors(accumulate_gradients):
    """world_size or micro_batches below 1, or a product that does not divide GLOBAL_BATCH: ValueError"""
    for args in [(0, 2, 0), (2, 0, 0), (-1, 1, 0), (5, 1, 0), (3, 3, 0)]:
        with raises_value_error(f"accumulate_gradients{args}"):
            accumulate_gradients(*args)


# --- train_fsdp -------------------------------------------------------------------------------------
def _linear_bytes(model):
    return [sum(p.numel() * p.element_size() for p in m.parameters())
            for m in model.modules() if isinstance(m, nn.Linear)]


def _check_fsdp(train_fsdp, world_size, steps):
    seed = random.randint(0, 10**6)
    puzzles, allowance = work_for_workers(world_size, world_size)  # one per rank
    with _ranks_watched(world_size) as watched, caller_cpu() as spent:
        weights, runs = there(_recorded, train_fsdp, world_size, steps, seed, puzzles=[p.task for p in puzzles])
    norms = []
    expected = _single_process(steps, seed, norms)
    # The weights returned could come from elsewhere (a model the caller trained alone, beside FSDP
    # ranks that trained wrongly): the FSDP model the ranks trained, put together from the piece
    # each rank held as it ended, must hold them too. Judged first, as it needs no clock: such an
    # answer then fails decided, whatever the load makes of the caller's CPU below.
    unjoined = None
    if runs and runs[-1][0] == world_size:
        assembled = _assembled(runs[-1][5] if len(runs[-1]) > 5 else [], world_size)
        if isinstance(assembled, str):
            unjoined = assembled  # undecided, once everything else has passed
        else:
            assert not set(assembled) <= {"weight", "bias"}, (
                "the outermost module wrapped with fully_shard that ran a training forward pass holds one "
                "layer's parameters only: call fully_shard on the root model too, after its layers, and call "
                "the model (model(x), not model.forward(x)) so that FSDP's hooks run")
            _same_weights(_named_as(assembled, expected), expected, "checked in the FSDP model the ranks "
                          "trained, put together from their shards, as well as in the weights returned: each "
                          "rank on its share of the global batch?")
    launched = _the_launch(runs, world_size, "train_fsdp", watched, (puzzles, spent, allowance))
    _same_weights(weights, expected, "each rank on its share of the global batch? SGD with sharding.LR?")
    layers = _linear_bytes(sharding.make_model(0))
    # One layer gathered, with FSDP's padding of each parameter's rows up to a multiple of world_size.
    one_layer = 1.25 * max(layers) + 256
    share = sharding.GLOBAL_BATCH // world_size
    uncounted = None
    for rank, counts in enumerate(launched):
        gathers = sum(counts.get(name, {}).get("calls", 0) for name in _GATHERS)
        largest = max([counts.get(name, {}).get("largest", 0) for name in _GATHERS])
        assert gathers >= len(layers) * steps, (
            f"with fully_shard on each of the {len(layers)} Linear layers, every forward pass gathers "
            f"each layer's parameters: at least {len(layers) * steps} all-gathers in {steps} steps; "
            f"rank {rank} made {gathers} (a plain DDP wrapper gathers nothing; sharding only the "
            "root gathers the whole model at once)")
        # A layer freed after its forward pass is gathered again for its backward pass: 2 per layer
        # and step, but one for a last layer kept whole (a layer hidden from the record, kept whole
        # too, still shows here).
        assert gathers >= (2 * len(layers) - 1) * steps, (
            f"rank {rank} made {gathers} all-gathers in {steps} steps, where each of the {len(layers)} layers freed "
            f"after its forward pass and gathered again for its backward pass makes {2 * len(layers)} a step: keep "
            "the default reshard_after_forward for the layers (with False, a rank holds every such layer's full "
            "parameters from its forward pass to its backward pass, more than its shard plus one layer)")
        # The layers held gathered at once in a training forward pass, as FSDP's own state shows them
        # after each sharded module ran: one, with the default reshard_after_forward or with the last
        # layer alone kept whole (its backward pass comes first), and the next one on its way where it
        # is prefetched. More: layers kept whole after their forward pass (reshard_after_forward=False),
        # or several prefetched at once.
        held = counts.get("fsdp_groups_gathered", {}).get("largest", 0)
        coming = counts.get("fsdp_groups_gathering", {}).get("largest", 0)
        if counts.get("fsdp_groups_unseen", {}).get("calls", 0) or "fsdp_groups_gathered" not in counts:
            unjoined = unjoined or f"the grader could not see which layers rank {rank} held gathered"
        else:
            assert held <= 1 and coming <= 2, (
                f"rank {rank} held {held} layers' full parameters at once during a forward pass ({coming} with "
                "those being gathered), where FSDP holds one (its shard plus one layer, and the next on its way "
                "if prefetched): keep the default reshard_after_forward for the layers (at most the last may "
                "stay whole) and prefetch no more than the next layer")
        # And in the backward pass, read at each all-gather and reduce-scatter FSDP makes there: the
        # layer whose gradients it computes and the next on its way.
        coming = counts.get("fsdp_groups_gathering_backward", {}).get("largest", 0)
        assert coming <= 2, (
            f"rank {rank} held {coming} layers' full parameters at once during a backward pass (those being "
            "gathered included), where FSDP holds the layer whose gradients it computes and the next: prefetch no "
            "more than the next layer, gather no layer by hand (unshard()), and checkpoint activations layer by "
            "layer, not around the whole model (its recomputation then gathers every layer at once)")
        assert largest <= one_layer, (
            f"no rank should hold more than its shard plus one layer's full parameters "
            f"(about {max(layers)} bytes here), but rank {rank} gathered {largest} bytes at once: "
            "call fully_shard on each Linear layer before the root")
        # Training the sharded model, not only running it: each backward pass reduce-scatters each
        # layer's gradients (a model trained elsewhere, loaded into FSDP and run forward, makes none).
        scatters = sum(counts.get(name, {}).get("calls", 0) for name in _SCATTERS)
        assert scatters >= len(layers) * steps, (
            f"each backward pass through the sharded model reduce-scatters the gradients of each of the "
            f"{len(layers)} Linear layers: at least {len(layers) * steps} reduce-scatters in {steps} steps; "
            f"rank {rank} made {scatters} (is the loss's backward() run on the FSDP model's output?)")
        # Each rank on its own share: FSDP averages the ranks' gradients, so ranks that all train on the
        # whole batch end with the same weights; the rows the model trained on tell them apart (those
        # of the calls of its first Linear layer that a backward pass went through).
        rows = counts.get("fsdp_trained_rows", {})
        if counts.get("fsdp_rows_unseen", {}).get("calls", 0):  # decided below where the gradients are read
            uncounted = uncounted or (f"rank {rank} trained the FSDP model on inputs the grader could not count "
                                      "(read where they reach the model's first Linear layer)")
        else:
            assert rows.get("largest", 0) <= share and rows.get("bytes", 0) == steps * share, (
                f"each rank trains on its rank_share of the global batch: {share} samples a step, {steps * share} "
                f"in {steps} steps; rank {rank}'s model trained on {rows.get('bytes', 0)} (up to "
                f"{rows.get('largest', 0)} at once)")
    # Each rank's own share, seen in what it hands to the reduce-scatters (as in accumulate_gradients):
    # ranks that all carry the whole batch through the layers hand over the same gradients.
    shapes = _share_gradients(steps, seed, world_size, per_layer=True)
    handed = runs[-1][6] if len(runs[-1]) > 6 else []
    for rank in range(world_size):
        per_step = _layer_shapes(handed[rank] if rank < len(handed) else None, steps, len(layers))
        if per_step is None:
            stepped = launched[rank].get("optimizer_steps", {}).get("calls", 0) if rank < len(launched) else 0
            unjoined = unjoined or uncounted or (
                f"the grader could not read what rank {rank} handed to FSDP's reduce-scatters"
                + ("" if stepped else ": it follows the training steps at a torch.optim optimiser's step(), and "
                   f"rank {rank} made none (an SGD step written by hand cannot be followed; torch.optim.SGD can)"))
            continue
        for step, got in enumerate(per_step):
            assert any(all(abs(g - w) <= 1e-3 for g, w in zip(got, want)) for want in shapes[step][rank]), (
                f"the gradients rank {rank} handed to FSDP's reduce-scatters in step {step} are not those of its own "
                "share of the global batch: does each rank train on its rank_share (and only on it)?")
    _gradients_then_verdict(launched, steps, norms, "each rank on its share, each loss the mean over it, SGD "
                            "with sharding.LR, every step through the sharded model", unjoined, watched)


def _layer_shapes(handed, steps, layers):
    """Per step, the shape (as _shape) of the layers' gradients a rank handed to FSDP's reduce-scatters
    ([step][call] tensors): a step's calls are its backward passes' calls one after the other (each
    reduce-scatters every layer once), added up layer by layer; None where they cannot be put
    together so (another number of calls, or of sizes)."""
    if not isinstance(handed, list) or len(handed) < steps:
        return None
    shapes = []
    for calls in handed[:steps]:
        if not calls or len(calls) % layers:
            return None
        sums = []
        for j in range(layers):
            pieces = calls[j::layers]
            if any(p.numel() != pieces[0].numel() for p in pieces):
                return None
            sums.append(torch.stack(pieces).sum(0))
        shapes.append(_shape(sums))
    return shapes


def _assembled(pieces, world_size):
    """The full state dict of the FSDP model the ranks trained, from each rank's pieces, as
    helpers.ranks records them (_fsdp_shards); a str saying why where they cannot be put together
    (sharded over more than one dimension of the mesh)."""
    pieces = list(pieces)[:world_size]
    for rank in range(world_size):
        assert rank < len(pieces) and isinstance(pieces[rank], dict), (
            f"rank {rank} trained no model wrapped with fully_shard (none made a training forward pass)")
    full = {}
    for name in pieces[0]:
        parts = [held.get(name) for held in pieces]
        assert all(isinstance(p, tuple) and p and p[0] == parts[0][0] for p in parts), (
            f"the ranks' FSDP models differ: {name} is not held alike by every rank")
        if parts[0][0] == "placements":
            return f"the grader cannot put {name} together from its pieces ({parts[0][1]})"
        if parts[0][0] == "piece":
            copies = _joined(name, parts)
        else:
            copies = [p[1] for p in parts]
        full[name] = copies[0]
        for i, copy in enumerate(copies[1:], 1):
            _same_weights({name: copy}, {name: full[name]}, f"copy {i} of {name} held by the ranks")
    return full


def _named_as(weights, expected):
    """`weights` with the names of `expected` where the model the ranks trained holds the plain model
    under a prefix (a wrapper that computes the loss, say: "model.0.weight" for "0.weight"): the one
    prefix that every name shares and that leaves exactly the expected names; or in a container of
    its own, in the plain model's order; else as they are."""
    if set(weights) == set(expected) or not weights:
        return weights
    first = next(iter(weights))  # a prefix that every name shares is a prefix of the first one
    for cut in [i + 1 for i, c in enumerate(first) if c == "."]:
        if all(k.startswith(first[:cut]) for k in weights) and {k[cut:] for k in weights} == set(expected):
            return {k[cut:]: v for k, v in weights.items()}
    # The layers in a container of the answer's own (an nn.ModuleList: "layers.1.weight" for
    # "2.weight"): as many tensors, of the same shapes in the same order, named in the plain model's.
    shapes = [getattr(v, "shape", None) for v in weights.values()]
    if shapes == [v.shape for v in expected.values()]:
        return dict(zip(expected, weights.values()))
    return weights


def _joined(name, parts):
    """Each replica of `name`, put together from ranks' ("piece", mesh shape, coordinate, sharded mesh
    dimension, tensor dimension, local) entries: along the sharded mesh dimension, in coordinate order."""
    shape, mesh_dim, dim = parts[0][1], parts[0][3], parts[0][4]
    assert all(p[1] == shape and p[3] == mesh_dim and p[4] == dim for p in parts), (
        f"the ranks' FSDP models shard {name} differently")
    replicas = {}
    for p in parts:
        coordinate = tuple(p[2])
        key = coordinate if mesh_dim is None else coordinate[:mesh_dim] + coordinate[mesh_dim + 1:]
        replicas.setdefault(key, []).append((coordinate[mesh_dim] if mesh_dim is not None else 0, p[5]))
    copies = []
    for held in replicas.values():
        held.sort(key=lambda item: item[0])
        assert [i for i, _ in held] == list(range(len(held))), f"the pieces of {name} do not cover its mesh"
        copies.append(torch.cat([t for _, t in held], dim=dim) if mesh_dim is not None else held[0][1])
    return copies


@timeout(150)
def test_train_fsdp_ranks(train_fsdp):
    """2 or 3 ranks (3: uneven shards): the single-process weights, gathered one layer at a time

    False failure of a correct answer: 0 for the counts (exact: at least one reduce-scatter per
    layer and step and two all-gathers per layer and step but one, as FSDP2 makes them with the
    default reshard_after_forward or with the last layer kept whole; at most one layer held
    gathered in a forward pass, two counting one prefetched or in a backward pass, where FSDP2
    holds one; the rows of the first layer's trained calls, each rank's share; the learning rate
    exactly sharding.LR; the gradients each step applies, per parameter, as in single-process
    training up to float32 rounding, ~1e-6 relative, against 1e-3; what each rank hands to the
    reduce-scatters, per layer, shaped as its share's gradient, ~1e-6 against 1e-3); the weights differ from the
    reference by float32 rounding (~1e-8 measured) against atol=2e-5, both those returned and
    those of the FSDP model the ranks trained (each rank's shards, put together: the same numbers
    in a correct answer).
    """
    _check_fsdp(train_fsdp, random.choice([2, 3]), 2)


def test_train_fsdp_errors(train_fsdp):
    """world_size below 1 or not dividing GLOBAL_BATCH, or steps < 0: ValueError"""
    for args in [(0, 1, 0), (5, 1, 0), (2, -1, 0)]:
        with raises_value_error(f"train_fsdp{args}"):
            train_fsdp(*args)
