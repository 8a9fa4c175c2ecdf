"""09_data_parallel ships a torchrun entry script: it must train with 2 ranks and match DDP."""
import os
import subprocess
import sys

import pytest
import torch

from autograder import course

FOLDER = course.SOURCE / "09_data_parallel"


@pytest.mark.skipif(not (FOLDER / "train_torchrun.py").is_file(), reason="09_data_parallel not present")
def test_torchrun_script_trains_two_ranks(tmp_path):
    out = tmp_path / "w.pt"
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(FOLDER / "train_torchrun.py"), "--epochs", "2", "--seed", "3", "--out", str(out)],
        # torchrun keeps its log folders (torchelastic_*, one per rank) in the temp folder: this test's own.
        cwd=tmp_path, capture_output=True, text=True, timeout=240, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "over 2 ranks" in done.stdout
    sys.path.insert(0, str(FOLDER))
    try:
        import ddp_worker
    finally:
        sys.path.remove(str(FOLDER))
    net = ddp_worker.make_model(3)
    data = ddp_worker.make_dataset(3)
    opt = torch.optim.SGD(net.parameters(), lr=ddp_worker.LR)
    for epoch in range(2):
        order = torch.randperm(len(data), generator=torch.Generator().manual_seed(3 + epoch))
        for batch in order.split(ddp_worker.GLOBAL_BATCH):
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(data.X[batch]), data.y[batch]).backward()
            opt.step()
    got = torch.load(out)
    for name, value in net.state_dict().items():
        assert torch.allclose(got[name], value, atol=2e-5), name
