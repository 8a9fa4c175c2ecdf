"""helpers.ranks.torchrun, which 09 and 12 use to run torchrun from a notebook: the output
without the OMP_NUM_THREADS banner, on every system, and never longer than its time limit."""
import subprocess
import sys
import time

import pytest

from helpers import ranks

# One write per rank: print() with several arguments writes each piece on its own where output is
# unbuffered (PYTHONUNBUFFERED), and the two ranks' pieces then interleave in the shared pipe
# ("rankrank 1 of 2", " 0 of 2", seen once); a write of one short line to a pipe is never split.
RANK_SCRIPT = ("import os\n"
               "os.write(1, f\"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}\\n\".encode())\n")


def test_the_output_comes_back_without_the_banner(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)   # torchrun prints its banner when it sets it
    (tmp_path / "hello.py").write_text(RANK_SCRIPT)
    done = ranks.torchrun("--standalone", "--nproc_per_node=2", "hello.py", cwd=tmp_path, timeout=120,
                          env={"TMPDIR": str(tmp_path)})   # torchrun's log folders: this test's own
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    assert sorted(lines) == ["rank 0 of 2", "rank 1 of 2"], lines


def test_on_windows_the_store_does_without_libuv(monkeypatch):
    # PyTorch's Windows wheels have no libuv, and torchrun's own TCPStore asks for it
    # (pytorch/pytorch#139990): the children get USE_LIBUV=0.
    seen = {}

    class FakePopen:
        def __init__(self, command, env=None, **kwargs):
            seen["command"], seen["env"] = command, env
            self.returncode = 0

        def communicate(self, timeout=None):
            return "", None

    monkeypatch.delenv("USE_LIBUV", raising=False)
    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    monkeypatch.setattr(sys, "platform", "win32")
    ranks.torchrun("--standalone", "my script.py")
    assert seen["env"]["USE_LIBUV"] == "0"
    # One argument each, whatever spaces the paths hold (no shell in between).
    assert seen["command"] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "my script.py"]
    monkeypatch.setattr(sys, "platform", "linux")
    ranks.torchrun("--standalone", "x.py")
    assert "USE_LIBUV" not in seen["env"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_at_the_time_limit_the_ranks_go_too(tmp_path, course_tools):
    # torchrun starts each rank in a session of its own: killing torchrun alone leaves them running.
    script = "import os, time\nopen(f'pid{os.getpid()}', 'w').close()\ntime.sleep(120)\n"
    (tmp_path / "sleeper.py").write_text(script)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish within 15 s"):
        ranks.torchrun("--standalone", "--nproc_per_node=2", "sleeper.py", cwd=tmp_path, timeout=15,
                       env={"TMPDIR": str(tmp_path)})
    assert time.monotonic() - start < 40
    pids = [int(path.name[3:]) for path in tmp_path.glob("pid*")]
    if not pids:
        pytest.skip("no rank had started within the time limit (a very busy machine)")
    assert not [pid for pid in pids if course_tools.running(pid, within=0.5)], "a rank outlived the time limit"
