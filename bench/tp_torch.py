"""tp_torch: issue 18's tensor-parallel linear layers as PyTorch runs
them, against PyTorch's own fused operators and collmux's, on the same GPUs
and the same bf16 inputs in one run.

rs: a row-parallel layer under sequence parallelism (each rank holds
K / ranks columns of the m x K input and the matching rows of the K x n
weight, and gets m / ranks rows of the product):
  a  torch.matmul, then torch.distributed's NCCL reduce_scatter_tensor
  c  torch.ops.symm_mem.fused_matmul_reduce_scatter
  d  collmux.gemm_reducescatter
ag: a column-parallel layer (each rank holds m / ranks rows of the input
and n / ranks columns of the weight, and gets the m x n / ranks product of
the whole input):
  a  torch.distributed's NCCL all_gather_into_tensor, then torch.matmul
  c  torch.ops.symm_mem.fused_all_gather_matmul
  d  collmux.allgather_gemm
(c where this PyTorch has it). The results are compared to (a) (to a
relative 2e-2: rs's a sums bf16 partials, c and d fp32 ones). Per
contender the median over 5 rounds of 10 calls, the slowest rank's. Rank 0
prints CSV like bench/tp.c's, its op gemm_reducescatter_torch or
allgather_gemm_torch (its baseline is not tp.c's):
  op,m,k,n,ranks,contender,us,speedup_vs_a

usage (one node, libcollmux.so preloaded, PYTHONPATH=python, run from the
repository so that bench/ is on sys.path):
  mpirun -np N python3 bench/tp_torch.py [rs|ag [m [K [n]]]]
"""
import sys

import torch
import torch.distributed as dist
from mpi4py import MPI

import collmux
import torch_bench

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
op = sys.argv[1] if len(sys.argv) > 1 else "rs"
argv = [int(a) for a in sys.argv[2:]]
ag = op == "ag"
m = argv[0] if len(argv) > 0 else 8192
K = argv[1] if len(argv) > 1 else (8192 if ag else 28672)
n = argv[2] if len(argv) > 2 else (28672 if ag else 8192)
if op not in ("rs", "ag") or m % size or K % size or n % size:
    sys.exit("tp_torch: the op is rs or ag, and m, K and n must be multiples of the ranks")

dev = torch_bench.start(comm)
gen = torch.Generator(device=dev).manual_seed(2000 + rank)
rows, k, cols = (m // size, K, n // size) if ag else (m, K // size, n)
a = (torch.randn(rows, k, device=dev, generator=gen) / 8).to(torch.bfloat16)
b = (torch.randn(k, cols, device=dev, generator=gen) / K ** 0.5).to(torch.bfloat16)
group = dist.group.WORLD


def unfused():
    """(a): NCCL and the GEMM, as Megatron-style layers do."""
    if ag:
        full = torch.empty(m, K, dtype=torch.bfloat16, device=dev)
        dist.all_gather_into_tensor(full, a, group=group)
        return full @ b
    out = torch.empty(m // size, n, dtype=torch.bfloat16, device=dev)
    dist.reduce_scatter_tensor(out, a @ b, group=group)
    return out


def torch_fused():
    """(c): PyTorch's symmetric-memory operator."""
    if ag:
        return torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, group.group_name)[1][0]
    return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, group.group_name)


def fused():
    """(d): collmux's operation."""
    return collmux.allgather_gemm(comm, a, b) if ag else collmux.gemm_reducescatter(comm, a, b)


def main():
    contenders = [("a:torch+nccl-allgather" if ag else "a:torch+nccl-reducescatter", unfused), ("d:collmux-fused", fused)]
    ok, why = True, ""
    try:  # every rank must agree: the contenders are collective
        from torch.distributed._symmetric_memory import enable_symm_mem_for_group
        enable_symm_mem_for_group(group.group_name)
        # raises where this PyTorch lacks the operator
        torch.ops.symm_mem.fused_all_gather_matmul if ag else torch.ops.symm_mem.fused_matmul_reduce_scatter
    except Exception as e:  # an older PyTorch, or symmetric memory refused here
        ok, why = False, f"{type(e).__name__}: {e}"
    if comm.allreduce(ok, op=MPI.LAND):
        contenders.insert(1, ("c:torch-symm_mem-fused", torch_fused))
    elif rank == 0:
        print(f"tp_torch: contender c left out: {why or 'refused on another rank'}", file=sys.stderr)
    ref = unfused()
    for name, f in contenders[1:]:
        got = f()
        torch.cuda.synchronize()
        err = max(comm.allgather(((got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()))
        if err > 2e-2:
            if rank == 0:
                print(f"tp_torch: {name} differs from (a) by {err:.2e} (relative)", file=sys.stderr)
            sys.exit(1)  # on every rank: err is every rank's largest
    times = [(name, torch_bench.timed(comm, f)) for name, f in contenders]
    if rank == 0:
        print("op,m,k,n,ranks,contender,us,speedup_vs_a")
        for name, us in times:
            print(f"{'allgather_gemm' if ag else 'gemm_reducescatter'}_torch,{m},{K},{n},{size},{name},{us:.1f},{times[0][1] / us:.3f}")


try:
    main()
except SystemExit:
    raise
except BaseException as e:  # one rank's failure ends the job, not a hang in the others' collectives
    print(f"tp_torch: rank {rank}: {type(e).__name__}: {e}", file=sys.stderr)
    comm.Abort(1)
dist.destroy_process_group()
