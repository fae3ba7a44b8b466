"""mpi4py with CuPy and PyTorch device arrays on an MPI that is not
CUDA-aware: with collmux preloaded, nonblocking and persistent collectives,
point-to-point calls and MPIX_Query_cuda_support work as on a CUDA-aware
MPI and give the right results."""
import ctypes
import sys

import cupy as cp
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
cp.cuda.Device(rank % cp.cuda.runtime.getDeviceCount()).use()
bad = []


def expect(name, ok):
    if not bool(ok):
        bad.append(name)


def sync():
    cp.cuda.get_current_stream().synchronize()


# what PyTorch's MPI process group asks before it takes a CUDA tensor
expect("MPIX_Query_cuda_support", ctypes.CDLL(None).MPIX_Query_cuda_support() == 1)

# nonblocking collectives, completed by Wait, Waitall and Test loops
a = cp.arange(1000, dtype=cp.float32) + rank
out = cp.empty_like(a)
sync()
r = comm.Iallreduce(a, out, op=MPI.SUM)
r.Wait()
expect("iallreduce", cp.all(out == cp.arange(1000, dtype=cp.float32) * size + size * (size - 1) / 2))

bufs = [cp.full(64, rank * 10 + k, dtype=cp.int64) for k in range(50)]
outs = [cp.empty_like(b) for b in bufs]
sync()
reqs = [comm.Iallreduce(b, o, op=MPI.MAX) for b, o in zip(bufs, outs)]
MPI.Request.Waitall(reqs)
expect("50 iallreduce, waitall", all(bool(cp.all(o == (size - 1) * 10 + k)) for k, o in enumerate(outs)))

c = cp.arange(100, dtype=cp.int32) if rank == 0 else cp.zeros(100, dtype=cp.int32)
sync()
r = comm.Ibcast(c, root=0)
while not r.Test():
    pass
expect("ibcast, test loop", cp.all(c == cp.arange(100)))

g = cp.empty(size * 10, dtype=cp.float64)
sync()
comm.Iallgather(cp.full(10, rank, dtype=cp.float64), g).Wait()
expect("iallgather", cp.all(g == cp.repeat(cp.arange(size), 10)))

sc = cp.arange(5, dtype=cp.int32) + rank
so = cp.empty_like(sc)
sync()
comm.Iscan(sc, so, op=MPI.SUM).Wait()  # staged: NCCL has no scan
expect("iscan", cp.all(so == cp.arange(5) * (rank + 1) + rank * (rank + 1) // 2))

# persistent all-reduce (MPI-4), restarted with new inputs
if hasattr(comm, "Allreduce_init"):
    pa = cp.zeros(16, dtype=cp.float32)
    po = cp.empty_like(pa)
    p = comm.Allreduce_init(pa, po, op=MPI.SUM)
    ok = True
    for it in range(100):
        pa.fill(rank + it)
        sync()
        p.Start()
        p.Wait()
        ok = ok and bool(cp.all(po == size * it + size * (size - 1) / 2))
    p.Free()
    expect("persistent allreduce, 100 starts", ok)

# point-to-point: MPI matches, collmux moves device data
right, left = (rank + 1) % size, (rank - 1) % size
x = cp.arange(1 << 16, dtype=cp.float32) + rank
y = cp.zeros_like(x)
sync()
comm.Sendrecv(x, dest=right, sendtag=5, recvbuf=y, source=left, recvtag=5)
expect("sendrecv", cp.all(y == cp.arange(1 << 16, dtype=cp.float32) + left))

z = cp.full(32, rank, dtype=cp.int32)
sync()
comm.Sendrecv_replace(z, dest=right, source=left)
expect("sendrecv_replace", cp.all(z == left))

if size >= 2:
    if rank == 0:
        s = cp.arange(1000, dtype=cp.float64)
        sync()
        comm.Send(s, dest=1, tag=11)
        h = cp.asnumpy(s)  # device -> host receive on the peer
        comm.Send(h, dest=1, tag=12)
        rq = [comm.Isend(cp.full(8, k, dtype=cp.int64), dest=1, tag=100 + k) for k in range(20)]
        MPI.Request.Waitall(rq)
    elif rank == 1:
        st = MPI.Status()
        d = cp.zeros(2000, dtype=cp.float64)  # longer than the message: the rest stays
        d[1000:] = -1
        sync()
        comm.Recv(d, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        expect("recv: data", cp.all(d[:1000] == cp.arange(1000)) and cp.all(d[1000:] == -1))
        expect("recv: status", st.Get_source() == 0 and st.Get_tag() == 11 and st.Get_count(MPI.DOUBLE) == 1000)
        d2 = cp.zeros(1000, dtype=cp.float64)
        sync()
        comm.Recv(d2, source=0, tag=12)
        expect("host send -> device recv", cp.all(d2 == cp.arange(1000)))
        rbufs = [cp.zeros(8, dtype=cp.int64) for _ in range(20)]
        sync()
        rq = [comm.Irecv(rbufs[k], source=0, tag=100 + k) for k in range(20)]
        done = 0
        while done < 20:
            idx = MPI.Request.Waitany(rq)
            if idx == MPI.UNDEFINED:
                break
            done += 1
        expect("20 irecv, waitany", all(bool(cp.all(b == k)) for k, b in enumerate(rbufs)))

torch_ok = "skipped"
try:
    import torch

    dev = f"cuda:{rank % torch.cuda.device_count()}"
    t = torch.full((32,), float(rank), device=dev)
    tout = torch.empty_like(t)
    torch.cuda.synchronize()
    comm.Iallreduce(t, tout, op=MPI.SUM).Wait()
    expect("torch iallreduce", bool((tout == size * (size - 1) / 2).all()))
    tr = torch.zeros(32, device=dev)
    torch.cuda.synchronize()
    rq = [comm.Isend(t, dest=right, tag=7), comm.Irecv(tr, source=left, tag=7)]
    MPI.Request.Waitall(rq)
    expect("torch isend/irecv", bool((tr == float(left)).all()))
    torch_ok = "ran"
except ImportError:
    pass

nbad = comm.allreduce(len(bad))
if rank == 0:
    print(f"mpi4py_cupy_nb: {size} ranks, {nbad} failures, torch {torch_ok}", bad)
sys.exit(1 if nbad else 0)
