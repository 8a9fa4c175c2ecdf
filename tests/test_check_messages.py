"""What a failing check tells the student names the student's own mistake.

09's run_ddp check once turned every error of the answer's launch into a hint about fixed
rendezvous ports, whatever the error (a bug in the answer, the check's own error, which the
runner must settle on the reference solutions instead)."""
import pytest

from autograder import samples

A = "09_data_parallel"


def _listening_on_29500():
    """A socket listening on the tutorials' fixed port (the test is skipped where another holds it)."""
    import socket

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("0.0.0.0", 29500))
    except OSError:
        server.close()
        pytest.skip("port 29500 is in use by a listening process here")
    server.listen(1)
    return server


def _first_failure(judge, code):
    failed = [o for o in judge(A, "run_ddp", code, until_failure=True) if not o.passed]
    assert failed, "the answer passed"
    return failed[0]


def test_an_error_of_the_answers_own_is_reported_as_its_own(judge):
    code = ("def train_rank(*args):\n    pass\n\n"
            "def run_ddp(world_size, epochs, seed):\n    raise KeyError('no such rank')\n")
    failure = _first_failure(judge, code)
    assert not failure.undecided
    assert failure.message.startswith("your code raised KeyError"), failure.message
    assert "rendezvous port" not in failure.message


def test_a_fixed_port_still_earns_the_hint(judge):
    failure = _first_failure(judge, samples.catalogue(A).WRONG["run_ddp"]["fixed port 29500"])
    assert not failure.undecided
    assert "a rendezvous port fixed in advance" in failure.message, failure.message


def test_a_fixed_port_fails_even_just_after_a_connection_to_it_closed(judge):
    """A connection to port 29500 closed moments before (TIME_WAIT, a minute on Linux: an earlier
    judgment, a torchrun demo) kept the check's decoy listener from binding, and the fixed-port
    answer then passed (seen in a test run). The decoy binds with SO_REUSEADDR now."""
    import socket

    server = _listening_on_29500()
    client = socket.create_connection(("127.0.0.1", 29500))
    accepted, _ = server.accept()
    accepted.close()  # the side that closes first keeps the connection in TIME_WAIT
    server.close()
    client.close()
    probe = socket.socket()
    try:
        probe.bind(("0.0.0.0", 29500))
        probe_bound = True
    except OSError:
        probe_bound = False
    finally:
        probe.close()
    assert not probe_bound, "the port should be in TIME_WAIT for this test to mean anything"
    failure = _first_failure(judge, samples.catalogue(A).WRONG["run_ddp"]["fixed port 29500"])
    assert not failure.undecided
    assert "a rendezvous port fixed in advance" in failure.message, failure.message


def test_the_decoy_on_the_fixed_port_waits_for_another_judgment_to_let_it_go():
    """Processes that share a network (the course's tests judge answers side by side; a grader
    without root) may hold port 29500 for a moment: another judgment's decoy or fixed-port ranks.
    The check's decoy waits for the port rather than give up at once and leave the answer to run
    unopposed, which then took the freed port and passed (seen once in a test run)."""
    import socket
    import threading

    from autograder import hidden
    occupied = hidden.load_checks(A)._OccupiedPort  # loaded first: it takes longer than the hold
    holder = _listening_on_29500()
    release = threading.Timer(1.0, holder.close)
    release.start()
    try:
        with occupied() as decoy:
            assert decoy.sock is not None, "the decoy gave up on the port another judgment held for a second"
            probe = socket.socket()
            with pytest.raises(OSError):
                probe.bind(("0.0.0.0", 29500))  # a fixed-port answer's rendezvous meets the decoy
            probe.close()
    finally:
        release.cancel()
        holder.close()


def test_an_error_in_a_rank_is_reported_as_the_answers_with_what_it_was(judge):
    """A train_rank that raises: torch passes the rank's traceback on, and the student reads the
    rank's own error (it read as an error of the check, or as the port hint)."""
    from autograder import course, notebooks

    cell = notebooks.answer_cells(notebooks.read(course.source_notebook(A)))["run_ddp"]
    start, end = cell.index("    ### BEGIN SOLUTION"), cell.index("    ### END SOLUTION")
    assert start < cell.index("def run_ddp"), "train_rank's solution comes first in the cell"
    code = cell[:start] + "    raise KeyError('no sample 7 in this shard')\n" + cell[end:]
    failure = _first_failure(judge, code)
    assert not failure.undecided
    assert "a rank of run_ddp raised an error" in failure.message and "KeyError" in failure.message, (
        failure.message)
    assert "no sample 7 in this shard" in failure.message and "rendezvous port" not in failure.message


def test_a_record_naming_processes_that_never_ran_fails_decided(judge):
    """Not seeing a rank leaves run_ddp's check undecided (a starved judge could miss one), but
    only once everything else has passed: a serial answer that starts idle processes (for the
    kernel's count) and writes a read record naming processes that never existed (pids at or
    above 2**22, the kernel's largest) still fails, decided: as root on the missing witnesses,
    else on the puzzles its own process solved. (With the check undecided at once, it was.)"""
    code = samples.catalogue(A)._TRAIN_HERE_FORGE_READS + (
        "class _Never:\n"
        "    def __init__(self, pid):\n"
        "        self.pid = pid\n\n"
        "def run_ddp(world_size, epochs, seed):\n"
        "    if world_size < 1 or ddp_worker.GLOBAL_BATCH % world_size:\n"
        "        raise ValueError('world_size')\n"
        "    idle = [multiprocessing.get_context('fork').Process(target=time.sleep, args=(120,), daemon=True)\n"
        "            for _ in range(world_size)]\n"
        "    for p in idle:\n"
        "        p.start()\n"
        "    try:\n"
        "        return _train_here_forge_reads(world_size, epochs, seed, [_Never(2**22 + k) for k in range(4)])\n"
        "    finally:\n"
        "        for p in idle:\n"
        "            p.kill()\n")
    failure = _first_failure(judge, code)
    assert not failure.undecided, failure.message
    assert "did not see" not in failure.message, failure.message


def test_an_alpha_not_halved_is_not_blamed_on_the_seeds(judge):
    """06's bootstrap_ci with the percentiles 100 * alpha and 100 * (1 - alpha): the reproducibility
    check asked for alpha=0.5, where both bounds fell on the median, and told the student to look
    at the seeds (a student's walk-through). Only the interval check fails it now, saying why."""
    code = samples.catalogue("06_joblib_vectorization").WRONG["bootstrap_ci"][
        "alpha not halved: the percentiles 100 * alpha and 100 * (1 - alpha)"]
    outcomes = judge("06_joblib_vectorization", "bootstrap_ci", code)
    failed = [o for o in outcomes if not o.passed]
    assert failed and not any(o.undecided for o in failed), outcomes
    assert not any("seed" in o.message for o in failed), [o.message for o in failed]
    assert any("percentiles" in o.message for o in failed), [o.message for o in failed]


@pytest.mark.parametrize("label,expected", [
    ("one task for the whole matrix", "row chunks"),
    ("prefer ignored: always threads", "prefer='processes' should run the chunks in worker processes")])
def test_cdist_joblib_mistakes_are_named(judge, label, expected):
    """One task, or prefer ignored, were told what the judge saw of the workers ("a task lost,
    repeated, changed or out of order?", "the tasks ran in the calling thread"), not the mistake."""
    code = samples.catalogue("06_joblib_vectorization").WRONG["cdist_joblib"][label]
    failed = [o for o in judge("06_joblib_vectorization", "cdist_joblib", code) if not o.passed]
    assert failed and not any(o.undecided for o in failed), failed
    assert any(expected in o.message for o in failed), [o.message for o in failed]


def test_a_message_quotes_an_answers_values_only_when_they_are_plain_numbers(judge):
    """A message that quotes what the answer returned must not carry out of the student's process
    what its code could read there (the checks' helpers run there): 03's transfer_many quotes the
    balances only when they are ints. An answer returning long strings gets no string back."""
    code = "def transfer_many(balances, transfers, n_threads):\n    return ['secret' * 800 for _ in balances]\n"
    failed = [o for o in judge("03_race_conditions", "transfer_many", code) if not o.passed]
    assert failed and not any("secret" in o.message for o in failed), [o.message[:200] for o in failed]
    assert any("not a list of ints" in o.message for o in failed), [o.message[:200] for o in failed]


def test_run_ddp_weights_that_equal_a_known_slip_say_which():
    """The weights check listed every possible cause ("gradients averaged? per-rank batch? set_epoch?
    lr?"); weights that equal a run gone wrong in a known way now name it. Judged on the weights
    alone here: the catalogue's answers that make these slips (never calling set_epoch, no
    shuffling, summed gradients) give these messages when judged whole."""
    from autograder import hidden
    checks = hidden.load_checks(A)
    seed, epochs, world_size = 4321, 2, 3
    variants = [({"lr_scale": world_size}, "summed rather than averaged"),
                ({"set_epoch": False}, "sampler.set_epoch(epoch)"),
                ({"shuffle": False}, "in their stored order"),
                ({"sampler_seed": 0}, "seed=seed")]
    for variant, said in variants:
        weights = checks._single_process(seed, epochs, **variant)
        assert said in checks._what_went_wrong(weights, seed, epochs, world_size), variant
    other = {name: value + 0.01 for name, value in checks._single_process(seed, epochs).items()}
    assert checks._what_went_wrong(other, seed, epochs, world_size).startswith("look at the averaging")


def test_a_wrong_type_is_named_where_the_check_runs_in_the_students_process(judge):
    """07's counter check reads layer_flops' result in the student's process (there()), where the
    checks' helpers travel by value: a module-level copy of type's __name__ descriptor arrived as
    the string "type", and the refused float was reported as the check's own AttributeError."""
    code = ("def layer_flops(layer, input_shape):\n"
            "    raise_if = not hasattr(layer, 'weight')\n"
            "    if raise_if:\n        raise ValueError('not a layer with weights')\n"
            "    return 2.0 * layer.weight.numel() * (input_shape[0] if len(input_shape) > 1 else 1)\n")
    failed = [o for o in judge("07_pytorch_devices", "layer_flops", code) if not o.passed]
    assert failed and not any(o.undecided for o in failed), failed
    messages = [o.message for o in failed]
    assert not any("could not use what your code returned" in m for m in messages), messages
    assert any("the count comes from the sizes" in o.description and "must be an int, got float" in o.message
               for o in failed), messages
