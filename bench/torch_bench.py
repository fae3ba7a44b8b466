"""What the PyTorch benchmarks (bench/embedding_torch.py, bench/rs_torch.py)
share: this rank's GPU, torch.distributed's NCCL group over the MPI ranks,
and the clock."""
import os
import socket
import statistics

import torch
import torch.distributed as dist
from mpi4py import MPI


def start(comm):
    """This rank's GPU (local rank modulo the GPUs), then torch.distributed's
    NCCL group over comm's ranks on this node (rank 0 picks a free port and
    tells the others through MPI). Returns the device."""
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID", "0"))
    dev = torch.device("cuda", int(local) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    port = None
    if comm.rank == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    port = comm.bcast(port)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=comm.rank, world_size=comm.size, device_id=dev)
    return dev


def timed(comm, f, iters=10, rounds=5):
    """The median over rounds of the mean of iters calls of f, in us, the
    slowest rank's, after one call."""
    f()
    per = []
    for _ in range(rounds):
        comm.Barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            f()
        b.record()
        b.synchronize()
        per.append(a.elapsed_time(b) * 1000 / iters)
    return comm.allreduce(statistics.median(per), op=MPI.MAX)
