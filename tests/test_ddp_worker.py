"""09's ddp_worker.run_by_value: an error on a rank reaches the notebook with its traceback, and
it is the failing rank's error, not its echo on the others ("Connection closed by peer").

Run in a fresh interpreter in 09's folder, as the notebook's kernel is: the ranks' forkserver
must be able to import ddp_worker."""
import json
import os
import subprocess
import sys
import textwrap

from autograder import course

FOLDER = course.SOURCE / "09_data_parallel"

SCENARIO = textwrap.dedent('''
    import json
    import torch.multiprocessing
    import ddp_worker

    def rank_zero_fails(rank, port):
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        if rank == 0:
            raise KeyError("no such rank")
        dist.barrier()   # rank 1 waits for rank 0, which is gone

    def fine(rank):
        pass

    def run(fn, *args):
        context = torch.multiprocessing.start_processes(
            ddp_worker.run_by_value, args=(ddp_worker.by_value(fn), *args), nprocs=2, join=False,
            start_method=ddp_worker.torch_start_method())
        try:
            while not context.join(timeout=60):
                pass
            return {"exitcodes": [p.exitcode for p in context.processes]}
        except Exception as err:
            return {"type": type(err).__name__, "rank": getattr(err, "error_index", None), "message": str(err)}
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.terminate()
                process.join(5)

    if __name__ == "__main__":
        # Which rank's error came first was a race, lost half the time: try it three times.
        failures = [run(rank_zero_fails, ddp_worker.free_port()) for _ in range(3)]
        print(json.dumps({"failures": failures, "fine": run(fine)}))
''')


def test_the_error_of_a_rank_reaches_the_caller_with_its_traceback(short_tmp):
    # -c: the working folder (09's) comes first on sys.path, as in the notebook's kernel.
    done = subprocess.run([sys.executable, "-c", SCENARIO], cwd=FOLDER, capture_output=True,
                          text=True, timeout=240, env={**os.environ, "TMPDIR": str(short_tmp)})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    for failure in result["failures"]:
        assert failure.get("type") == "ProcessRaisedException", failure   # not "terminated with exit code 1"
        assert failure["rank"] == 0 and "KeyError: 'no such rank'" in failure["message"], failure
    assert result["fine"] == {"exitcodes": [0, 0]}
