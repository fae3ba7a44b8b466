"""rs_torch: issue 18's GEMM + reduce-scatter as PyTorch runs it, against
PyTorch's own fused operator and collmux's, on the same GPUs and the same
bf16 inputs in one run (a row-parallel linear layer under sequence
parallelism: each rank holds K / ranks columns of the m x K input and the
matching rows of the K x n weight, and gets m / ranks rows of the product).

  a  torch.matmul, then torch.distributed's NCCL reduce_scatter_tensor
  c  torch.ops.symm_mem.fused_matmul_reduce_scatter (PyTorch's
     symmetric-memory fused operator), where this PyTorch has it
  d  collmux.gemm_reducescatter

The results are compared to (a) (to a relative 2e-2: a sums bf16
partials, c and d fp32 ones). Per contender the median over 5 rounds of 10
calls, the slowest rank's. Rank 0 prints CSV like bench/rs.c's, its op
gemm_reducescatter_torch (its baseline is not rs.c's):
  op,m,k,n,ranks,contender,us,speedup_vs_a

usage (one node, libcollmux.so preloaded, PYTHONPATH=python, run from the
repository so that bench/ is on sys.path):
  mpirun -np N python3 bench/rs_torch.py [m [K [n]]]
"""
import sys

import torch
import torch.distributed as dist
from mpi4py import MPI

import collmux
import torch_bench

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
argv = [int(a) for a in sys.argv[1:]]
m = argv[0] if len(argv) > 0 else 8192
K = argv[1] if len(argv) > 1 else 28672
n = argv[2] if len(argv) > 2 else 8192
if m % size or K % size:
    sys.exit("rs_torch: m and K must be multiples of the ranks")

dev = torch_bench.start(comm)
gen = torch.Generator(device=dev).manual_seed(2000 + rank)
a = (torch.randn(m, K // size, device=dev, generator=gen) / 8).to(torch.bfloat16)
b = (torch.randn(K // size, n, device=dev, generator=gen) / K ** 0.5).to(torch.bfloat16)
group = dist.group.WORLD


def unfused():
    """(a): the GEMM, then NCCL's reduce-scatter."""
    out = torch.empty(m // size, n, dtype=torch.bfloat16, device=dev)
    dist.reduce_scatter_tensor(out, a @ b, group=group)
    return out


def torch_fused():
    """(c): PyTorch's symmetric-memory operator."""
    return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, group.group_name)


def fused():
    """(d): collmux's operation."""
    return collmux.gemm_reducescatter(comm, a, b)


def main():
    contenders = [("a:torch+nccl-reducescatter", unfused), ("d:collmux-fused", fused)]
    ok, why = True, ""
    try:  # every rank must agree: the contenders are collective
        from torch.distributed._symmetric_memory import enable_symm_mem_for_group
        enable_symm_mem_for_group(group.group_name)
        torch.ops.symm_mem.fused_matmul_reduce_scatter  # raises where this PyTorch lacks the operator
    except Exception as e:  # an older PyTorch, or symmetric memory refused here
        ok, why = False, f"{type(e).__name__}: {e}"
    if comm.allreduce(ok, op=MPI.LAND):
        contenders.insert(1, ("c:torch-symm_mem-fused", torch_fused))
    elif rank == 0:
        print(f"rs_torch: contender c left out: {why or 'refused on another rank'}", file=sys.stderr)
    ref = unfused()
    for name, f in contenders[1:]:
        got = f()
        torch.cuda.synchronize()
        err = max(comm.allgather(((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()))
        if err > 2e-2:
            if rank == 0:
                print(f"rs_torch: {name} differs from (a) by {err:.2e} (relative)", file=sys.stderr)
            sys.exit(1)  # on every rank: err is every rank's largest
    times = [(name, torch_bench.timed(comm, f)) for name, f in contenders]
    if rank == 0:
        print("op,m,k,n,ranks,contender,us,speedup_vs_a")
        for name, us in times:
            print(f"gemm_reducescatter_torch,{m},{K},{n},{size},{name},{us:.1f},{times[0][1] / us:.3f}")


try:
    main()
except SystemExit:
    raise
except BaseException as e:  # one rank's failure ends the job, not a hang in the others' collectives
    print(f"rs_torch: rank {rank}: {type(e).__name__}: {e}", file=sys.stderr)
    comm.Abort(1)
dist.destroy_process_group()
