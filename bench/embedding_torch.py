"""embedding_torch: issue 18's contender (a) for the embedding stage, as a
PyTorch model runs it, against collmux's fused operation, on the same GPUs
and the same inputs in one run.

  a  torch.nn.functional.embedding_bag over each of this rank's tables for
     the whole global batch, then torch.distributed's NCCL all_to_all_single
     of the pooled rows to their samples' owners, then the interleaving into
     (samples, tables, dim) that the model needs (counted)
  d  collmux.embedding_alltoall: each bag written into its owner's memory as
     it is pooled

Every rank builds its share of TABLES tables of ROWS x DIM rows; every sample
looks each table up LO..HI times (uniform). The two results are compared
(sum pooling in fp32: to a relative 1e-4, since the orders of summation
differ). Per contender the median over ROUNDS rounds of ITERS calls, the
slowest rank's. Rank 0 prints CSV like bench/embedding.c:
  op,tables,rows,dim,batch,lookups,ranks,contender,us,speedup_vs_a

usage (one node, libcollmux.so preloaded, PYTHONPATH=python; bench/ on
sys.path, as running it from there puts it):
  mpirun -np N python3 bench/embedding_torch.py [batch [lo hi [rows]]]
"""
import sys

import torch
import torch.distributed as dist
from mpi4py import MPI

import collmux
import torch_bench

TABLES, DIM, ITERS, ROUNDS = 26, 128, 10, 5

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
argv = [int(a) for a in sys.argv[1:]]
batch = argv[0] if len(argv) > 0 else 16384
lo, hi = (argv[1], argv[2]) if len(argv) > 2 else (20, 80)
nrows = argv[3] if len(argv) > 3 else 1 << 20

dev = torch_bench.start(comm)

t0, t1 = TABLES * rank // size, TABLES * (rank + 1) // size
mine = [batch * (q + 1) // size - batch * q // size for q in range(size)]
gen = torch.Generator(device=dev).manual_seed(1000 + rank)
w = torch.randn((t1 - t0) * nrows, DIM, device=dev, generator=gen)
lens = torch.randint(lo, hi + 1, ((t1 - t0), batch), device=dev, generator=gen)
offs = torch.zeros((t1 - t0) * batch + 1, dtype=torch.int64, device=dev)
offs[1:] = torch.cumsum(lens.flatten(), 0)
idx = torch.randint(0, nrows, (int(offs[-1]),), device=dev, generator=gen)
rows = [nrows * t for t in range(t1 - t0 + 1)]
# each table's indices and bag offsets, as a model holds them
bounds = offs[::batch].tolist()
per_table = [(idx[bounds[t]:bounds[t + 1]], offs[t * batch:(t + 1) * batch] - bounds[t]) for t in range(t1 - t0)]


def unfused():
    """(a): per table EmbeddingBag over the global batch, NCCL all-to-all, interleave."""
    pooled = torch.empty(batch, t1 - t0, DIM, device=dev)
    for t, (ix, of) in enumerate(per_table):
        pooled[:, t] = torch.nn.functional.embedding_bag(ix, w[t * nrows:(t + 1) * nrows], of, mode="sum")
    recv = torch.empty(mine[rank] * TABLES * DIM, device=dev)
    # rank q receives, from each rank p, its samples' rows of p's tables
    in_splits = [m * (t1 - t0) * DIM for m in mine]
    out_splits = [mine[rank] * (TABLES * (p + 1) // size - TABLES * p // size) * DIM for p in range(size)]
    dist.all_to_all_single(recv, pooled.reshape(-1), out_splits, in_splits)
    out = torch.empty(mine[rank], TABLES, DIM, device=dev)
    at = 0
    for p in range(size):
        p0, p1 = TABLES * p // size, TABLES * (p + 1) // size
        n = mine[rank] * (p1 - p0) * DIM
        out[:, p0:p1] = recv[at:at + n].view(mine[rank], p1 - p0, DIM)
        at += n
    return out


def fused():
    """(d): collmux's operation."""
    return collmux.embedding_alltoall(comm, w, rows, offs, idx, batch, t0, TABLES)


ra, rd = unfused(), fused()
torch.cuda.synchronize()
err = ((ra - rd).abs().max() / ra.abs().max().clamp(min=1e-30)).item() if ra.numel() else 0.0
errs = comm.allgather(err)
if max(errs) > 1e-4:
    if rank == 0:
        print(f"embedding_torch: (a) and (d) differ by {max(errs):.2e} (relative)", file=sys.stderr)
    sys.exit(1)
ua, ud = torch_bench.timed(comm, unfused, ITERS, ROUNDS), torch_bench.timed(comm, fused, ITERS, ROUNDS)
if rank == 0:
    print("op,tables,rows,dim,batch,lookups,ranks,contender,us,speedup_vs_a")
    for name, us in (("a:torch+nccl", ua), ("d:fused", ud)):
        print(f"embedding,{TABLES},{nrows},{DIM},{batch},{lo}-{hi},{size},{name},{us:.1f},{ua / us:.3f}")
dist.destroy_process_group()
