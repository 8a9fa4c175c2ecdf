"""Each rank all-reduces its rank number and says where it runs; started by torchrun.

    torchrun --nnodes=2 --nproc-per-node=1 \
             --rdzv-backend=c10d --rdzv-endpoint=HOST:PORT --rdzv-id=job two_nodes.py

(the same command on every node: with the c10d rendezvous the nodes take their ranks as they join)

torchrun gives each process its place through environment variables (RANK,
LOCAL_RANK, WORLD_SIZE, GROUP_RANK = the node's rank, MASTER_ADDR, MASTER_PORT);
`init_process_group("gloo")` with no address reads them.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    node = os.environ.get("NODE_NAME", socket.gethostname())
    print(f"rank {rank} of {world} on {node} (node rank {os.environ.get('GROUP_RANK')}, "
          f"local rank {os.environ.get('LOCAL_RANK')}, pid {os.getpid()}): "
          f"sum of all ranks = {total.item():.0f}", flush=True)
    # The standard ending, then os._exit: the course's workaround for gloo's crash at exit.
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
