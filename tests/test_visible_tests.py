"""Every approach a notebook offers passes its visible tests, not only its hidden checks;
the common mistakes the visible tests are written to catch fail them.

For each assignment, one clean process (with a thread that waits all along, as a
kernel's own threads do) replays the notebook as grading does
(the course's non-demo cells and the reference answers, in order), then, for
every correct ALTERNATIVE answer in the catalogue, and every WRONG one named in
CAUGHT_VISIBLY, runs it in place of the reference and executes the visible part
of its exercise's test cells.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from autograder import course, notebooks, samples
from autograder.pipeline import verify

CHILD = textwrap.dedent('''
    def _main():  # local names only: the notebook's cells share this module's globals
        import json, os, sys
        from autograder.sandbox import student as student_side
        spec = json.load(sys.stdin)
        import threading  # a thread waiting all along, as a kernel's own wait for messages (profilers see it)
        threading.Thread(target=threading.Event().wait, daemon=True).start()
        sys.path.append(spec["folder"])
        namespace = sys.modules["__main__"].__dict__
        namespace["get_ipython"] = lambda: student_side.QuietShell()
        for label, code in spec["cells"]:
            try:
                student_side.run_cell(namespace, label, code)
            except BaseException as err:
                print(f"{label} raised {err!r}", file=sys.stderr)
        results = []
        for exercise, label, answer, reference, tests in spec["alternatives"]:
            student_side.run_cell(namespace, exercise, answer)
            for grade_id, code in tests:
                try:
                    student_side.run_cell(namespace, grade_id, code)
                    results.append([label, grade_id, True, ""])
                except BaseException as err:
                    results.append([label, grade_id, False, f"{type(err).__name__}: {err}"])
            student_side.run_cell(namespace, exercise, reference)
        with open(spec["out"], "w") as out:
            json.dump(results, out)
        sys.stdout.flush()
        os._exit(0)
    _main()
''')


# Catalogued wrong answers that a student's own run of the visible tests must already reject
# (bin/validate, the Validate button): {assignment: {exercise: [labels]}}.
CAUGHT_VISIBLY = {
    "02_gil": {"run_threads": ["results in completion order"], "run_processes": ["threads instead of processes"],
               "fetch_all": ["not a coroutine function"]},
    "03_race_conditions": {"transfer_many": ["changes the list passed in"],
                           "process_safe_counter": ["the shared Value itself returned, not its .value"]},
    "04_rng_reproducibility": {"independent_draws": ["no argument checks",
                                                     "worker i seeded with seed + i (the notebook's half-right fix)",
                                                     "the draws stacked into one array (np.stack: a 2-D array, not a list)"],
                               "forked_draws": ["the draws stacked into one array (np.stack: a 2-D array, not a list)"],
                               "seeded_loader": ["num_workers=0 written in for the one-process branch: no ValueError for -1"]},
    "05_multiprocessing_pools": {
        "amdahl_speedup": ["no argument checks"],
        "generate_trajectories": ["the seeds' version: global RNG in forked workers",
                                  "chunksize n // n_workers: 0, and Nones, for fewer trajectories than workers",
                                  "the trajectories stacked into one array (np.array: a 3-D array, not a list)"]},
    "06_joblib_vectorization": {"run_with_blas_threads": ["swallows fn's exception"]},
    "07_pytorch_devices": {
        "to_device": ["breaks named tuples", "turns every container into a list"],
        "gpu_env": ["no validation"],
        "make_loader": ["shuffled once, when made: every epoch in one order"],
        "layer_flops": ["padding='same' taken as kernel // 2 on each side (wrong for an even kernel or a dilation)"]},
    "08_amp_tensor_cores": {"pad_to_multiple": ["no validation"]},
    "09_data_parallel": {"ring_allreduce": ["one sum copied to every rank",
                                            "gather to rank 0 then broadcast, p - 1 additions in rank order"]},
    "10_model_pipeline_parallel": {"bubble_fraction": ["no ValueError"], "gpipe_schedule": ["no ValueError", "not sorted"],
                                   "pipeline_forward": ["no ValueError"],
                                   "split_sequential": ["equal numbers of layers per stage"]},
    "11_profiling_scaling": {"karp_flatt": ["clipped to [0, 1]"],
                             "torch_top_ops": ["with_stack, record_shapes and profile_memory, every row ranked (Python functions too)",
                                               "with_stack, rows grouped by the Python stack, summed per name (Python functions too)"]},
    "12_collectives_sharding": {
        "ring_allreduce_p2p": ["pieces cut by torch.chunk (fewer than p on short tensors)",
                               "the sums made in place, in the caller's tensor (a view of it, no clone)"],
        "accumulate_gradients": ["every rank trains on the whole global batch (no rank_share)", "no ValueError",
                                 "the first micro_batches - 1 forward passes first, then their backward passes"],
        "train_fsdp": ["returns rank 0's local shards, not the full tensors", "no ValueError",
                       "reshard_after_forward=False on every layer, get_model_state_dict"],
        "zero_memory": ["no ValueError"]},
}


def _spec(assignment, out):
    source = notebooks.read(course.source_notebook(assignment))
    answers = {gid: notebooks.solution_code(src) for gid, src in notebooks.answer_cells(source).items()}
    tests = notebooks.test_cells(source)
    catalogue, alternatives = samples.catalogue(assignment), []

    def visible(exercise):
        return [(gid, notebooks.visible_code(src)) for gid, src in tests.items() if gid.startswith(f"test_{exercise}")]

    for exercise, entries in catalogue.ALTERNATIVE.items():
        for label, code in entries.items():
            alternatives.append((exercise, label, code, answers[exercise], visible(exercise)))
    for exercise, labels in CAUGHT_VISIBLY.get(assignment, {}).items():
        for label in labels:
            alternatives.append((exercise, "wrong: " + label, catalogue.WRONG[exercise][label], answers[exercise],
                                 visible(exercise)))
    cells = [(label, answers.get(label, code)) for label, code in verify.payload_for(source, source)["cells"]
             if isinstance(code, str)]  # not the test cells' places (what the judge keeps there)
    return {"cells": cells, "alternatives": alternatives, "out": str(out),
            "folder": str(course.SOURCE / assignment)}


def test_alternatives_pass_the_visible_tests(assignment, tmp_path, short_tmp):
    """Correct alternatives pass every visible test; the wrong answers of CAUGHT_VISIBLY fail one."""
    spec = _spec(assignment, tmp_path / "results.json")
    if not spec["alternatives"]:
        pytest.skip(f"{assignment} catalogues no alternative answer and names no wrong one")
    # Output goes to a file, not a pipe: idle joblib (loky) workers outlive the child for
    # minutes and would hold a pipe open; they are stopped with the child's session.
    log = tmp_path / "child.log"
    with open(log, "w") as out:
        # It ends with os._exit: what its pools and forkservers leave in TMPDIR goes with short_tmp.
        child = subprocess.Popen([sys.executable, "-P", "-c", CHILD], stdin=subprocess.PIPE, stdout=out,
                                 stderr=subprocess.STDOUT, text=True, cwd=tmp_path, start_new_session=True,
                                 env={**os.environ, "TMPDIR": str(short_tmp)})
        try:
            child.communicate(json.dumps(spec), timeout=600)
        finally:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait()
    assert child.returncode == 0, log.read_text()[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    failed = [f"{label} / {grade_id}: {message}" for label, grade_id, passed, message in results
              if not passed and not label.startswith("wrong: ")]
    assert not failed, "correct alternatives fail a visible test:\n" + "\n".join(failed)
    caught = {label for label, _, passed, _ in results if label.startswith("wrong: ") and not passed}
    missed = sorted({label for label, *_ in results if label.startswith("wrong: ")} - caught)
    assert not missed, "wrong answers pass every visible test:\n" + "\n".join(missed)
