"""mpi4py with NumPy arrays: results must be right under collmux."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
bad = 0

a = np.arange(10, dtype=np.float64) + rank
out = np.empty_like(a)
comm.Allreduce(a, out, op=MPI.SUM)
bad += not np.array_equal(out, np.arange(10) * size + size * (size - 1) / 2)

b = np.full(4, rank, dtype=np.int32)
comm.Allreduce(MPI.IN_PLACE, b, op=MPI.MAX)
bad += not np.all(b == size - 1)

c = np.arange(5, dtype=np.int64) if rank == 0 else np.zeros(5, dtype=np.int64)
comm.Bcast(c, root=0)
bad += not np.array_equal(c, np.arange(5))

g = np.empty(size * 3, dtype=np.int32)
comm.Allgather(np.full(3, rank, dtype=np.int32), g)
bad += not np.array_equal(g, np.repeat(np.arange(size), 3))

s = np.arange(size, dtype=np.int32) + 10 * rank
r = np.empty(size, dtype=np.int32)
comm.Alltoall(s, r)
bad += not np.array_equal(r, np.arange(size) * 10 + rank)

total = comm.allreduce(bad)
if rank == 0:
    print(f"mpi4py_numpy: {size} ranks, {total} failures")
sys.exit(1 if total else 0)
