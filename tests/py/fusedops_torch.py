"""The collmux Python package on the GPU machine: collmux.gemv_allreduce as
a Megatron-style row-parallel linear layer on PyTorch tensors (bf16, the
weight sliced by columns as a view, uneven slices), against the full
product computed on each rank; the same bits on every rank; the same
operation as torch.ops.collmux.gemv_allreduce, also inside a
torch.compile graph (fullgraph); and on CuPy arrays. collmux.embedding_alltoall
against torch's EmbeddingBag over all the tables, each rank's samples;
collmux.gemm_alltoall against torch's products of each rank's tokens; both
again as torch.ops.collmux operators, alone and in a torch.compile graph;
collmux.gemm_reducescatter against the full product's rows of each rank,
collmux.allgather_gemm against the full product and the gathered input,
as an operator, and on CuPy arrays.
Prints
"fusedops_torch: N ranks, F failures"."""
import hashlib
import os
import sys

import torch
from mpi4py import MPI

import collmux

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
local = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID", "0"))  # Open MPI, MPICH
dev = torch.device("cuda", int(local) % torch.cuda.device_count())
torch.cuda.set_device(dev)
bad = []


def expect(what, ok):
    if not ok:
        bad.append(what)


def digest(t):
    return hashlib.sha256(t.view(torch.uint8).cpu().numpy().tobytes()).hexdigest()


g = torch.Generator(device="cpu").manual_seed(7)
for m, K, batch in [(4096, 4096, 1), (1000, 3001, 3), (8192, 2048, 16), (33, 17, 2)]:
    w = (torch.randn(m, K, generator=g) / K ** 0.5).to(torch.bfloat16).to(dev)
    x = torch.randn(batch, K, generator=g).to(torch.bfloat16).to(dev)
    bounds = [K * r // size for r in range(size + 1)]
    k0, k1 = bounds[rank], bounds[rank + 1]
    y = collmux.gemv_allreduce(comm, w[:, k0:k1], x[:, k0:k1])
    ref = (x.float() @ w.float().T).to(torch.bfloat16)
    torch.cuda.synchronize()
    err = ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    expect(f"({m},{K},{batch}) close to the full product: {err:.2e}", y.shape == (batch, m) and err < 2e-2)
    hs = comm.allgather(digest(y))
    expect(f"({m},{K},{batch}) the same bits on every rank", len(set(hs)) == 1)
    y2 = torch.ops.collmux.gemv_allreduce(comm.py2f(), w[:, k0:k1], x[:, k0:k1])
    expect(f"({m},{K},{batch}) torch.ops gives the same", torch.equal(y, y2))

# a 1-D input, and a layer in a compiled graph
h = comm.py2f()
w = torch.randn(512, 256 * size, device=dev, dtype=torch.bfloat16)
x = torch.randn(256 * size, device=dev, dtype=torch.bfloat16)
mine = slice(256 * rank, 256 * (rank + 1))
y = collmux.gemv_allreduce(comm, w[:, mine], x[mine])
expect("1-D input gives a 1-D output", y.shape == (512,))


def layer(a, v):
    return torch.relu(torch.ops.collmux.gemv_allreduce(h, a, v)) * 2


compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
expect("torch.compile graph", torch.equal(compiled(w[:, mine], x[mine]), layer(w[:, mine], x[mine])))

try:
    import cupy as cp
    with cp.cuda.Device(dev.index):
        a = cp.asarray(cp.random.standard_normal((300, 64)), dtype=cp.float16)
        v = cp.asarray(cp.random.standard_normal((2, 64)), dtype=cp.float16)
        yc = collmux.gemv_allreduce(comm, a, v)
        parts = comm.allgather((a.get(), v.get()))
        refc = sum(p[1].astype("float32") @ p[0].astype("float32").T for p in parts)
        cp.cuda.get_current_stream().synchronize()
        errc = float(abs(yc.get().astype("float32") - refc).max() / abs(refc).max())
        expect(f"CuPy float16: {errc:.2e}", errc < 2e-3)
except ImportError:
    print("fusedops_torch: CuPy skipped", file=sys.stderr)

# embedding pooling + all-to-all: every rank builds the whole job's tables
# and bags alike (one seed), owns its share of the tables, and must get
# EmbeddingBag's pooling of every table for its samples
ge = torch.Generator(device="cpu").manual_seed(11)
for dtype, mode, dim, batch, ntab in [(torch.float32, "sum", 64, 37, 5), (torch.bfloat16, "mean", 24, 16, 3)]:
    nrows = [50 + 7 * t for t in range(ntab)]
    tabs = [torch.randn(r, dim, generator=ge).to(dtype) for r in nrows]
    lens = [torch.randint(0, 6, (batch,), generator=ge) for _ in range(ntab)]
    idx = [torch.randint(0, nrows[t], (int(lens[t].sum()),), generator=ge) for t in range(ntab)]
    t0, t1 = ntab * rank // size, ntab * (rank + 1) // size
    rows, offs, inds, base = [0], [0], [], 0
    for t in range(t0, t1):
        rows.append(rows[-1] + nrows[t])
        offs += (base + torch.cumsum(lens[t], 0)).tolist()
        inds.append(idx[t])
        base += int(lens[t].sum())
    w = torch.cat(tabs[t0:t1]).to(dev) if t1 > t0 else torch.empty(0, dim, dtype=dtype, device=dev)
    out = collmux.embedding_alltoall(comm, w, rows, torch.tensor(offs, dtype=torch.int64, device=dev),
                                     (torch.cat(inds) if inds else torch.empty(0, dtype=torch.int64)).to(dev),
                                     batch, t0, ntab, mode=mode)
    s0, s1 = batch * rank // size, batch * (rank + 1) // size
    ref = torch.stack([torch.nn.functional.embedding_bag(idx[t], tabs[t].float(), torch.cat([torch.zeros(1, dtype=torch.int64),
                       torch.cumsum(lens[t], 0)[:-1]]), mode=mode) for t in range(ntab)], 1)[s0:s1].to(dtype)
    torch.cuda.synchronize()
    err = ((out.float().cpu() - ref.float()).abs().max() / ref.float().abs().max()).item() if out.numel() else 0.0
    expect(f"embedding {dtype} {mode}: {err:.2e} from EmbeddingBag", tuple(out.shape) == (s1 - s0, ntab, dim) and err < 1e-2)
    # the same as torch.ops.collmux.embedding_alltoall, and in a compiled graph
    args = (comm.py2f(), w, rows, torch.tensor(offs, dtype=torch.int64, device=dev),
            (torch.cat(inds) if inds else torch.empty(0, dtype=torch.int64)).to(dev), batch, t0, ntab, mode)
    expect(f"embedding {dtype} {mode}: torch.ops gives the same", torch.equal(torch.ops.collmux.embedding_alltoall(*args), out))

    def stage(*a):
        return torch.ops.collmux.embedding_alltoall(*a).sum(1)
    got = torch.compile(stage, backend="aot_eager", fullgraph=True)(*args)
    expect(f"embedding {dtype} {mode}: torch.compile graph", torch.equal(got, out.sum(1)))

# GEMM + all-to-all as an MoE layer's combine: every rank builds the
# whole job alike (one seed); rank q holds q + 1 experts, expert e got
# cnt[q][e][p] tokens from rank p, and each token's product goes back to
# rank p, holder-major then expert-major, as the dispatch sent them
gm = torch.Generator(device="cpu").manual_seed(13)
for dtype, k, n in [(torch.bfloat16, 256, 96), (torch.float32, 40, 33)]:
    cnt = [[[int(torch.randint(0, 9, (1,), generator=gm)) for p in range(size)] for e in range(q + 1)] for q in range(size)]
    xs = [[[torch.randn(cnt[q][e][p], k, generator=gm).to(dtype) for p in range(size)] for e in range(q + 1)] for q in range(size)]
    ws = [torch.randn(q + 1, k, n, generator=gm).to(dtype) for q in range(size)]
    back = [sum(cnt[q][e][p] for q in range(size) for e in range(q + 1)) for p in range(size)]
    dest = [[sum(cnt[qq][ee][p] for qq in range(size) for ee in range(qq + 1) if (qq, ee) < (rank, e)) for p in range(size)]
            for e in range(rank + 1)]
    a = torch.cat([xs[rank][e][p] for e in range(rank + 1) for p in range(size)]).to(dev)
    ref = torch.cat([xs[q][e][rank].float() @ ws[q][e].float() for q in range(size) for e in range(q + 1)]).to(dtype)
    # into a tensor of its own, then into symmetric memory (max(back) rows on every rank)
    symm = collmux.symm_empty(comm, (max(back), n), dtype, dev)
    for where, o in (("", None), (" into symmetric memory", symm[:back[rank]])):
        out = collmux.gemm_alltoall(comm, a, ws[rank].to(dev), cnt[rank], dest, back[rank], max(back), out=o)
        torch.cuda.synchronize()
        err = ((out.float().cpu() - ref.float()).abs().max() / ref.float().abs().max()).item() if out.numel() else 0.0
        expect(f"gemm_alltoall {dtype}{where}: {err:.2e} from torch", tuple(out.shape) == (back[rank], n) and err < 1e-2)
    # the same as torch.ops.collmux.gemm_alltoall (lists flat), and in a compiled graph
    args = (comm.py2f(), a, ws[rank].to(dev), [v for r in cnt[rank] for v in r], [v for r in dest for v in r], back[rank],
            max(back))
    expect(f"gemm_alltoall {dtype}: torch.ops gives the same", torch.equal(torch.ops.collmux.gemm_alltoall(*args), out))

    def combine(*a):
        return torch.ops.collmux.gemm_alltoall(*a) * 2
    got = torch.compile(combine, backend="aot_eager", fullgraph=True)(*args)
    expect(f"gemm_alltoall {dtype}: torch.compile graph", torch.equal(got, out * 2))
    collmux.symm_free(comm, symm)

# GEMM + reduce-scatter as a row-parallel linear layer under sequence
# parallelism: each rank holds a column slice of the input and the
# matching rows of the weight (uneven slices), and gets its rows of the
# product; the same as torch.ops.collmux.gemm_reducescatter, alone and in
# a compiled graph
gr = torch.Generator(device="cpu").manual_seed(17)
for dtype, m, K, n in [(torch.bfloat16, 1024, 1536, 512), (torch.float32, 37, 40, 24)]:
    x = torch.randn(m, K, generator=gr).to(dtype).to(dev)
    w = (torch.randn(K, n, generator=gr) / K ** 0.5).to(dtype).to(dev)
    bounds = [K * r // size for r in range(size + 1)]
    k0, k1 = bounds[rank], bounds[rank + 1]
    r0, r1 = m * rank // size, m * (rank + 1) // size
    xs, ws = x[:, k0:k1], w[k0:k1]  # a column slice: row stride K
    y = collmux.gemm_reducescatter(comm, xs, ws)
    ref = (x.float() @ w.float())[r0:r1]
    torch.cuda.synchronize()
    err = ((y.float() - ref).abs().max() / ref.abs().max()).item() if y.numel() else 0.0
    tol = 1e-5 if dtype == torch.float32 else 2e-2  # fp32: partials in fp32, rounded once
    expect(f"gemm_reducescatter {dtype} ({m},{K},{n}): {err:.2e} from the full product", tuple(y.shape) == (r1 - r0, n) and err < tol)
    expect(f"gemm_reducescatter {dtype}: torch.ops gives the same",
           torch.equal(torch.ops.collmux.gemm_reducescatter(comm.py2f(), xs, ws), y))

    def rowpar(h, a, b):
        return torch.ops.collmux.gemm_reducescatter(h, a, b) + 1
    got = torch.compile(rowpar, backend="aot_eager", fullgraph=True)(comm.py2f(), xs, ws)
    expect(f"gemm_reducescatter {dtype}: torch.compile graph", torch.equal(got, y + 1))

# all-gather + GEMM as a column-parallel linear layer under sequence
# parallelism: each rank holds its rows of the input (a column slice of a
# wider tensor, so rows are strided) and its columns of the weight, and gets
# the product of the whole input with them, and the gathered input, bit for
# bit; the same as torch.ops.collmux.allgather_gemm, alone and compiled
for dtype, m, K, n in [(torch.bfloat16, 512, 768, 384 + 8 * rank), (torch.float32, 13, 40, 24)]:
    x = torch.randn(size * m, K + 3, generator=torch.Generator().manual_seed(31 + m)).to(dtype).to(dev)  # the same on every rank
    w = (torch.randn(K, n, generator=torch.Generator().manual_seed(37 + rank)) / K ** 0.5).to(dtype).to(dev)
    xs = x[rank * m:(rank + 1) * m, :K]  # this rank's rows: row stride K + 3
    gathered = torch.empty(size * m, K, dtype=dtype, device=dev)
    y = collmux.allgather_gemm(comm, xs, w, gathered=gathered)
    ref = x[:, :K].float() @ w.float()
    torch.cuda.synchronize()
    err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    expect(f"allgather_gemm {dtype} ({m},{K},{n}): {err:.2e} from the full product", tuple(y.shape) == (size * m, n) and err < tol)
    expect(f"allgather_gemm {dtype}: the gathered input, bit for bit", torch.equal(gathered, x[:, :K]))
    expect(f"allgather_gemm {dtype}: torch.ops gives the same", torch.equal(torch.ops.collmux.allgather_gemm(comm.py2f(), xs, w), y))

    def colpar(h, a, b):
        return torch.ops.collmux.allgather_gemm(h, a, b) * 2
    got = torch.compile(colpar, backend="aot_eager", fullgraph=True)(comm.py2f(), xs, w)
    expect(f"allgather_gemm {dtype}: torch.compile graph", torch.equal(got, y * 2))

# the same on CuPy arrays (float32), against NumPy's product of the whole
try:
    import cupy as cp
    import numpy as np
    with cp.cuda.Device(dev.index):
        rng = np.random.default_rng(19)  # the same on every rank
        m, K, n = 40, 24 * size, 16
        x, w = rng.standard_normal((m, K)).astype(np.float32), rng.standard_normal((K, n)).astype(np.float32)
        k0, k1, r0, r1 = 24 * rank, 24 * (rank + 1), m * rank // size, m * (rank + 1) // size
        yc = collmux.gemm_reducescatter(comm, cp.asarray(x[:, k0:k1]), cp.asarray(w[k0:k1]))
        cp.cuda.get_current_stream().synchronize()
        refc = (x.astype(np.float64) @ w.astype(np.float64))[r0:r1]
        errc = float(abs(yc.get() - refc).max() / abs(refc).max()) if r1 > r0 else 0.0
        expect(f"CuPy gemm_reducescatter: {errc:.2e}", yc.shape == (r1 - r0, n) and errc < 1e-5)
except ImportError:
    print("fusedops_torch: CuPy skipped", file=sys.stderr)

nbad = comm.allreduce(len(bad))
if rank == 0:
    print(f"fusedops_torch: {size} ranks, {nbad} failures", [b for b in bad])
