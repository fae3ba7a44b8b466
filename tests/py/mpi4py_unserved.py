"""mpi4py with CuPy device arrays in what collmux does not serve on device
memory (MPI-IO here): each call fails with MPI_ERR_OTHER, as collmux's
refusal says, and never reaches the MPI, which is not CUDA-aware. The
process's first device array goes to MPI-IO first: mpi4py 4.1.2's test_io
did so at two ranks and crashed Open MPI 4.1.6 in MPI_Wait after
MPI_File_iwrite, with no refusal from collmux (session 26): mpi4py 4's
wheels call MPI_File_iwrite_c, and collmux's narrowing of it to the
MPI's MPI_File_iwrite skipped the check for CUDA (at one rank, after
other tests had made that check, it was refused). Rank 0 says which
library the process's MPI_File_iwrite binds to."""
import ctypes
import os
import sys
import tempfile

import cupy as cp
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
bad = []


def address(lib, fn):
    try:
        return ctypes.cast(getattr(lib, fn), ctypes.c_void_p).value
    except AttributeError:
        return None


if rank == 0 and os.environ.get("LD_PRELOAD"):
    preload = ctypes.CDLL(os.environ["LD_PRELOAD"].split(":")[0])
    for fn in ("MPI_File_iwrite", "MPI_File_iwrite_c", "MPI_Wait"):
        at = address(ctypes.CDLL(None), fn)
        print(f"{fn} binds to {'collmux' if at and at == address(preload, fn) else 'absent' if at is None else 'the MPI'}", flush=True)

a = cp.full(13, 42, dtype=cp.int32)
cp.cuda.get_current_stream().synchronize()
path = os.path.join(tempfile.gettempdir(), f"collmux-unserved-{os.getpid()}")
fh = MPI.File.Open(MPI.COMM_SELF, path, MPI.MODE_RDWR | MPI.MODE_CREATE | MPI.MODE_DELETE_ON_CLOSE)
# first, the large-count twin, as mpi4py 4's wheels call it (through a weak
# reference) where the MPI has none and collmux narrows it to
# MPI_File_iwrite: that path once skipped the check for CUDA and took the
# process's first device array for host memory
iwrite_c = address(ctypes.CDLL(None), "MPI_File_iwrite_c")
if iwrite_c:
    c_iwrite = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_void_p)(iwrite_c)
    req = ctypes.c_void_p()
    rc = c_iwrite(MPI._handleof(fh), a.__cuda_array_interface__["data"][0], 13, MPI._handleof(MPI.INT), ctypes.byref(req))
    if rc == MPI.SUCCESS or MPI.Get_error_class(rc) != MPI.ERR_OTHER:
        bad.append(f"MPI_File_iwrite_c: {rc}")
for name, call in (
    ("MPI_File_iwrite", lambda: fh.Iwrite(a).Wait()),
    ("MPI_File_write", lambda: fh.Write(a)),
    ("MPI_File_iread", lambda: fh.Iread(a).Wait()),
    ("MPI_File_read_at", lambda: fh.Read_at(0, a)),
):
    try:
        call()
        bad.append(name + " returned")
    except MPI.Exception as e:
        if e.Get_error_class() != MPI.ERR_OTHER:
            bad.append(f"{name}: {e}")
fh.Close()
if cp.any(a != 42):
    bad.append("the refused reads changed the array")

for b in bad:
    print(f"rank {rank}: {b}", file=sys.stderr)
failures = comm.allreduce(len(bad))
if rank == 0:
    print(f"mpi4py_unserved: {size} ranks, {failures} failures")
sys.exit(1 if failures else 0)
