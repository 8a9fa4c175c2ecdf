"""Train ddp_worker's model with DistributedDataParallel, launched by torchrun.

    torchrun --standalone --nproc_per_node=2 train_torchrun.py --epochs 2 --seed 0 --out w.pt
    python -m torch.distributed.run ...   (the same launcher, when torchrun is not on PATH)

torchrun starts one process per rank and hands each its place through
environment variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT);
`init_process_group()` reads them (the "env://" method). `--standalone`
makes torchrun pick a free port on this machine itself. On several machines run
the same command on each, with `--nnodes=N --node_rank=i` (or a shared
`--rdzv_id`), `--rdzv_backend=c10d --rdzv_endpoint=HOST:PORT` instead of
`--standalone`.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_worker  # noqa: E402  (the model and data every rank shares)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="weights_torchrun.pt")
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available() and torch.cuda.device_count() >= int(os.environ["LOCAL_WORLD_SIZE"])
    dist.init_process_group("nccl" if use_cuda else "gloo")      # env:// from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    if use_cuda:
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)

    net = ddp_worker.make_model(args.seed).to(device)
    ddp = DistributedDataParallel(net, device_ids=[device.index] if use_cuda else None)
    data = ddp_worker.make_dataset(args.seed)
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed)   # rank, world from the group
    loader = DataLoader(data, batch_size=ddp_worker.GLOBAL_BATCH // world, sampler=sampler)
    optimiser = torch.optim.SGD(ddp.parameters(), lr=ddp_worker.LR)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)                 # a new shuffle each epoch, the same on every rank
        total = torch.zeros(2, device=device)
        for inputs, targets in loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimiser.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
            loss.backward()                      # DDP all-reduces the gradients here
            optimiser.step()
            total += torch.stack([loss.detach() * len(inputs), torch.tensor(float(len(inputs)), device=device)])
        dist.all_reduce(total)                   # every rank's loss sum and sample count
        if rank == 0:
            print(f"epoch {epoch}: mean loss {total[0].item() / total[1].item():.4f} over {world} ranks")

    if rank == 0:
        torch.save({k: v.cpu() for k, v in net.state_dict().items()}, args.out)
        print(f"rank 0 saved the weights to {args.out}")
    dist.barrier()
    dist.destroy_process_group()         # the standard ending stops here and returns
    # The course's workaround, not PyTorch practice: with this PyTorch on the CPU, gloo
    # sometimes aborts during interpreter shutdown, so flush and leave without it.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
