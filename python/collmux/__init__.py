"""collmux from Python: the fused computation + collective operations of
libcollmux.so on PyTorch tensors and CuPy arrays, through ctypes (nothing
to compile).

MPI calls need nothing from here: with libcollmux.so preloaded, mpi4py's
collectives and point-to-point calls on device arrays already go through
collmux. What an interposer cannot see, a GEMV before an all-reduce, is
collmux's own API, which this package exposes::

    from mpi4py import MPI
    import torch, collmux

    # a row-parallel linear layer: each rank holds weight[:, k0:k0+k]
    y = collmux.gemv_allreduce(MPI.COMM_WORLD, w_slice, x_slice)

The library is the one already in the process (LD_PRELOAD), else
$COLLMUX_LIB, else libcollmux.so.0 from the loader's path. Each call is
queued on the current stream of the output's device (PyTorch's or CuPy's)
and returns at once; every rank of the communicator must make it, with the
same shapes. Errors raise collmux.Error, with the library's message on
stderr.

With PyTorch, the operations are registered as torch.ops.collmux.
gemv_allreduce(comm_handle, a, x), embedding_alltoall, gemm_alltoall,
gemm_reducescatter and allgather_gemm (register_torch_ops() says their arguments), so that they can sit in a
torch.compile graph (comm_handle is comm.py2f()): on import when PyTorch
is imported already, else by register_torch_ops().
"""

import contextlib
import ctypes
import os
import sys
from typing import List

__all__ = ["Error", "FLOAT32", "FLOAT16", "BFLOAT16", "allgather_gemm", "embedding_alltoall", "gemm_alltoall", "gemm_reducescatter", "gemv_allreduce", "symm_empty", "symm_free", "library", "register_torch_ops",
           "version"]

# Element types, as in collmux.h.
FLOAT32, FLOAT16, BFLOAT16 = 0, 1, 2


class Error(RuntimeError):
    """A collmux operation refused to run; the reason is on stderr."""


_lib = None


def library():
    """The ctypes handle of libcollmux.so (found as the module says)."""
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(None)  # preloaded: its symbols are the process's
    if not hasattr(lib, "collmux_version"):
        lib = ctypes.CDLL(os.environ.get("COLLMUX_LIB") or "libcollmux.so.0", mode=ctypes.RTLD_GLOBAL)
    lib.collmux_version.restype = ctypes.c_char_p
    f = lib.collmux_gemv_allreduce
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                  ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p,
                  ctypes.c_longlong]
    e = lib.collmux_embedding_alltoall
    e.restype = ctypes.c_int
    e.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_int,
                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_longlong), ctypes.c_void_p,
                  ctypes.c_void_p, ctypes.c_void_p]
    g = lib.collmux_gemm_alltoall
    g.restype = ctypes.c_int
    g.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                  ctypes.c_longlong, ctypes.c_void_p, ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_longlong),
                  ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong]
    r = lib.collmux_gemm_reducescatter
    r.restype = ctypes.c_int
    r.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                  ctypes.c_longlong, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_longlong]
    g = lib.collmux_allgather_gemm
    g.restype = ctypes.c_int
    g.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                  ctypes.c_longlong, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p,
                  ctypes.c_longlong]
    lib.collmux_symm_alloc.restype = ctypes.c_void_p
    lib.collmux_symm_alloc.argtypes = [ctypes.c_int, ctypes.c_size_t]
    lib.collmux_symm_free.restype = ctypes.c_int
    lib.collmux_symm_free.argtypes = [ctypes.c_int, ctypes.c_void_p]
    _lib = lib
    return lib


def version():
    """The library's version, "MAJOR.MINOR.PATCH"."""
    return library().collmux_version().decode()


def _handle(comm):
    """The communicator's Fortran handle: collmux.h takes it on every ABI."""
    if isinstance(comm, int):
        return comm
    if hasattr(comm, "py2f"):
        return comm.py2f()
    raise TypeError("collmux: comm must be an mpi4py communicator or its py2f() handle, not %s" % type(comm).__name__)


def _size_rank(comm):
    """(size, rank) of an mpi4py communicator or of its py2f() handle (as
    the torch.ops forms pass it)."""
    if not hasattr(comm, "size"):
        try:
            handle = int(comm)  # an int, or a SymInt where torch.compile traces
        except (TypeError, ValueError):
            raise TypeError("collmux: comm must be an mpi4py communicator or its py2f() handle, not %s"
                            % type(comm).__name__) from None
        from mpi4py import MPI
        comm = MPI.Comm.f2py(handle)
    return comm.size, comm.rank


class _Array:
    """What collmux needs of a device array: address, element type, shape,
    row stride in elements, and the stream its device's work goes on."""

    def __init__(self, arr, name):
        mod = type(arr).__module__.split(".")[0]
        if mod == "torch":
            import torch
            if not arr.is_cuda:
                raise ValueError("collmux: %s must be on a CUDA device" % name)
            types = {torch.float32: FLOAT32, torch.float16: FLOAT16, torch.bfloat16: BFLOAT16}
            if arr.dtype not in types:
                raise ValueError("collmux: %s is %s; float32, float16 and bfloat16 are supported" % (name, arr.dtype))
            self.ptr, self.dtype, self.shape = arr.data_ptr(), types[arr.dtype], tuple(arr.shape)
            self.strides = tuple(arr.stride())
            self.stream = torch.cuda.current_stream(arr.device).cuda_stream
            self.device = arr.device
        elif hasattr(arr, "__cuda_array_interface__"):
            cai = arr.__cuda_array_interface__
            types = {"<f4": FLOAT32, "<f2": FLOAT16}
            if cai["typestr"] not in types:
                raise ValueError("collmux: %s has type %s; float32 and float16 are supported" % (name, cai["typestr"]))
            size = 4 if cai["typestr"] == "<f4" else 2
            self.ptr, self.dtype, self.shape = cai["data"][0], types[cai["typestr"]], tuple(cai["shape"])
            st = cai.get("strides")
            if st is None:  # C-contiguous
                st, acc = [], 1
                for d in reversed(self.shape):
                    st.insert(0, acc * size)
                    acc *= d
            self.strides = tuple(s // size for s in st)
            self.stream, self.device = 0, None
            if mod == "cupy":
                import cupy
                self.stream = cupy.cuda.get_current_stream().ptr
        else:
            raise ValueError("collmux: %s must be a CUDA tensor (PyTorch) or a device array (CuPy), not %s"
                             % (name, type(arr).__name__))

    def rows(self, name):
        """(rows, columns, row stride) of a 2-D array, or of a 1-D one as a
        single row. Elements must be contiguous within a row and rows must
        not overlap (no broadcast, zero or negative strides): the kernels
        read and write every element where these say it is."""
        if len(self.shape) == 1:
            if self.shape[0] > 1 and self.strides[0] != 1:
                raise ValueError("collmux: %s must be contiguous" % name)
            return 1, self.shape[0], max(self.shape[0], 1)
        if len(self.shape) != 2 or (self.shape[1] > 1 and self.strides[1] != 1):
            raise ValueError("collmux: %s must be 1-D or 2-D with contiguous rows" % name)
        if self.shape[0] > 1 and self.strides[0] < max(self.shape[1], 1):
            raise ValueError("collmux: %s's rows overlap (row stride %d for %d columns); pass a copy"
                             % (name, self.strides[0], self.shape[1]))
        return self.shape[0], self.shape[1], max(self.strides[0], self.shape[1], 1)


def _kind(x):
    """"torch", "cupy", or another module's name (arrays collmux takes
    through __cuda_array_interface__ alone)."""
    return type(x).__module__.split(".")[0]


def _empty(like, shape):
    """An uninitialised array of like's kind, element type and device."""
    kind = _kind(like)
    if kind == "torch":
        return like.new_empty(shape)
    if kind == "cupy":
        import cupy
        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=like.dtype)
    raise ValueError("collmux: pass out= for inputs of type %s" % type(like).__name__)


def _on(x):
    """A context in which x's device is the current one (the library works
    on the current device)."""
    kind = _kind(x)
    if kind == "torch":
        import torch
        return torch.cuda.device(x.device)
    if kind == "cupy":
        import cupy
        return cupy.cuda.Device(x.device.id)
    return contextlib.nullcontext()


def _same_device(x, y):
    kind = _kind(x)
    if kind != _kind(y):
        return False
    if kind == "torch":
        return x.device == y.device
    if kind == "cupy":
        return x.device.id == y.device.id
    return True


def _contiguous(arr):
    """Whether a device array's elements are laid out row-major with no gaps."""
    if _kind(arr) == "torch":
        return arr.is_contiguous()
    cai = arr.__cuda_array_interface__
    if cai.get("strides") is None:
        return True
    size, want = int(cai["typestr"][2:]), []
    for d in reversed(cai["shape"]):
        want.insert(0, size)
        size *= d
    return all(d <= 1 or st == w for d, st, w in zip(cai["shape"], cai["strides"], want))


def _numel(arr):
    if _kind(arr) == "torch":
        return arr.numel()
    count = 1
    for d in arr.__cuda_array_interface__["shape"]:
        count *= d
    return count


def _index(arr, name):
    """The device address of a contiguous int64 device array (PyTorch or
    __cuda_array_interface__)."""
    if _kind(arr) == "torch":
        import torch
        if not (arr.is_cuda and arr.dtype == torch.int64 and arr.is_contiguous()):
            raise ValueError("collmux: %s must be a contiguous int64 CUDA tensor" % name)
        return arr.data_ptr()
    cai = getattr(arr, "__cuda_array_interface__", None)
    if cai is None or cai["typestr"] != "<i8" or not _contiguous(arr):
        raise ValueError("collmux: %s must be a contiguous int64 device array" % name)
    return cai["data"][0]


def gemv_allreduce(comm, a, x, out=None):
    """y = sum over the ranks r of a_r @ x_r, the same bits on every rank.

    a: this rank's (m, k) slice of the weight (rows contiguous; a column
    slice weight[:, k0:k0+k] of a row-major matrix is fine); x: its (k,)
    or (batch, k) slice of the input, batch 1 to 16; out: (m,) or
    (batch, m), allocated when None. k may differ between ranks. The
    products accumulate in fp32; how the ranks' partials are summed
    depends on COLLMUX_OPS_ALGO (collmux.h). Returns out.
    """
    handle = _handle(comm)
    A, X = _Array(a, "a"), _Array(x, "x")
    m, k, lda = A.rows("a")
    batch, kx, ldx = X.rows("x")
    if kx != k:
        raise ValueError("collmux: a has %d columns and x %d" % (k, kx))
    if X.dtype != A.dtype:
        raise ValueError("collmux: a and x must have one element type")
    if out is None:
        out = _empty(x, (m,) if len(X.shape) == 1 else (batch, m))
    Y = _Array(out, "out")
    by, my, ldy = Y.rows("out")
    if (by, my) != (batch, m) or Y.dtype != A.dtype:
        raise ValueError("collmux: out must be (%d, %d) of the inputs' type" % (batch, m))
    def call():
        return library().collmux_gemv_allreduce(handle, Y.stream, A.dtype, m, k, batch, A.ptr, lda, X.ptr, ldx,
                                                Y.ptr, ldy)

    if Y.device is not None:  # PyTorch: the library works on the current device, which must be out's
        import torch
        with torch.cuda.device(Y.device):
            rc = call()
    else:
        rc = call()
    if rc != 0:
        raise Error("collmux_gemv_allreduce failed (its reason is on stderr)")
    return out


def _samples(batch, n, me):
    """How many of the global batch's samples rank me of n owns."""
    return batch * (me + 1) // n - batch * me // n


def embedding_alltoall(comm, weights, rows, offsets, indices, batch, table_first, tables_total, mode="sum", out=None):
    """DLRM's model-parallel embedding stage in one operation (PyTorch or
    CuPy).

    weights: this rank's tables one after the other, (sum of rows, dim);
    rows: tables + 1 row offsets into weights (a list); offsets, indices:
    int64 device arrays in EmbeddingBag's form, table after table (bag (t, s)
    is indices[offsets[t * batch + s]:offsets[t * batch + s + 1]]); batch:
    the global batch; this rank's tables are table_first on of
    tables_total. Returns (or fills) out, (this rank's samples,
    tables_total, dim): rank q's samples are batch * q // n onwards."""
    handle = _handle(comm)
    n, me = _size_rank(comm)
    W = _Array(weights, "weights")
    if len(W.shape) != 2 or W.strides != (W.shape[1], 1):
        raise ValueError("collmux: weights must be a contiguous (rows, dim) tensor")
    offs, idx = _index(offsets, "offsets"), _index(indices, "indices")
    tables = len(rows) - 1
    if _numel(offsets) != tables * batch + 1:
        raise ValueError("collmux: offsets must hold tables * batch + 1 entries")
    mine = _samples(batch, n, me)
    if out is None:
        out = _empty(weights, (mine, tables_total, W.shape[1]))
    O = _Array(out, "out")
    if O.shape != (mine, tables_total, W.shape[1]) or not _contiguous(out) or O.dtype != W.dtype or not _same_device(out, weights):
        raise ValueError("collmux: out must be a contiguous (%d, %d, %d) tensor of the weights' type on their device"
                         % (mine, tables_total, W.shape[1]))
    arr = (ctypes.c_longlong * len(rows))(*rows)
    mode_id = {"sum": 0, "mean": 1}[mode]
    with _on(weights):
        rc = library().collmux_embedding_alltoall(handle, W.stream, W.dtype, mode_id, W.shape[1], batch, tables, table_first,
                                                  tables_total, W.ptr, arr, offs, idx, O.ptr if _numel(out) else None)
    if rc != 0:
        raise Error("collmux_embedding_alltoall failed (its reason is on stderr)")
    return out


def gemm_alltoall(comm, a, b, rows, dest, out_rows, capacity, out=None):
    """A mixture-of-experts layer's expert GEMMs and combine all-to-all in
    one operation (PyTorch or CuPy).

    a: (tokens, k), the rows the dispatch all-to-all brought to this
    rank's experts, expert-major then by source rank (rows contiguous);
    b: (experts, k, n), contiguous, one weight per expert; rows and dest:
    experts x size lists (or nested lists) of how many rows expert e got
    from rank p and where in rank p's output they go back; out_rows: the
    rows this rank gets back; capacity: the same on every rank, at least
    every rank's out_rows. Returns (or fills) out, (out_rows, n), whose
    rows no block lands in are undefined (collmux.h). An out in symmetric
    memory (symm_empty) on every rank, at the same offset of the same
    allocation with room for capacity rows, is written straight by the
    ranks' GEMMs, which may then write anywhere in those capacity rows."""
    handle = _handle(comm)
    size = _size_rank(comm)[0]
    A, B = _Array(a, "a"), _Array(b, "b")
    ta, k, lda = A.rows("a")
    if len(B.shape) != 3 or not _contiguous(b) or B.dtype != A.dtype or B.shape[1] != k or not _same_device(b, a):
        raise ValueError("collmux: b must be a contiguous (experts, %d, n) tensor of a's type on a's device" % k)
    experts, n = B.shape[0], B.shape[2]
    flat_rows = [int(v) for r in rows for v in (r if isinstance(r, (list, tuple)) else [r])]
    flat_dest = [int(v) for r in dest for v in (r if isinstance(r, (list, tuple)) else [r])]
    if len(flat_rows) != experts * size or len(flat_dest) != experts * size:
        raise ValueError("collmux: rows and dest must both be experts x size (%d x %d)" % (experts, size))
    if sum(flat_rows) != ta:
        raise ValueError("collmux: a has %d rows and rows add up to %d" % (ta, sum(flat_rows)))
    if out is None:
        out = _empty(a, (out_rows, n))
    O = _Array(out, "out")
    if O.shape != (out_rows, n) or not _contiguous(out) or O.dtype != A.dtype or not _same_device(out, a):
        raise ValueError("collmux: out must be a contiguous (%d, %d) tensor of a's type on a's device" % (out_rows, n))
    R = (ctypes.c_longlong * max(len(flat_rows), 1))(*flat_rows)
    D = (ctypes.c_longlong * max(len(flat_dest), 1))(*flat_dest)
    with _on(a):
        rc = library().collmux_gemm_alltoall(handle, A.stream, A.dtype, k, n, experts, A.ptr if ta else None, lda,
                                             B.ptr if _numel(b) else None, R, D, O.ptr, out_rows,
                                             capacity)  # even empty: symmetric or not
    if rc != 0:
        raise Error("collmux_gemm_alltoall failed (its reason is on stderr)")
    return out


def _gemm_operands(comm, a, b):
    """The communicator's handle, (size, rank), a (m, k) and b (k, n) of one
    type on one device as _Arrays, and (m, k, lda, n, ldb)."""
    handle = _handle(comm)
    size, me = _size_rank(comm)
    A, B = _Array(a, "a"), _Array(b, "b")
    m, k, lda = A.rows("a")
    kb, n, ldb = B.rows("b")
    if len(A.shape) != 2 or len(B.shape) != 2 or kb != k or B.dtype != A.dtype or not _same_device(b, a):
        raise ValueError("collmux: a must be (m, k) and b (k, n), of one type on one device")
    return handle, size, me, A, B, (m, k, lda, n, ldb)


def _result(arr, name, a, A, shape):
    """An output of `shape` and a's type on a's device: arr (checked), or a
    new one where arr is None; with its _Array and row stride."""
    if arr is None:
        arr = _empty(a, shape)
    R = _Array(arr, name)
    if R.shape != shape or R.dtype != A.dtype or not _same_device(arr, a):
        raise ValueError("collmux: %s must be (%d, %d) of a's type on a's device" % ((name,) + shape))
    return arr, R, R.rows(name)[2] if shape[0] else shape[1]


def gemm_reducescatter(comm, a, b, out=None):
    """A row-parallel linear layer with its output reduce-scattered by rows
    (sequence parallelism), in one operation (PyTorch or CuPy).

    a: (m, k), this rank's slice of the input's columns (rows contiguous);
    b: (k, n), the matching rows of the weight (rows contiguous); k may
    differ between ranks, m and n may not. Returns (or fills) out: this
    rank's rows of the sum over ranks of a @ b, rows m * rank // size to
    m * (rank + 1) // size - 1, (those rows, n), each rank's partial in
    fp32, summed in rank order and rounded once."""
    handle, size, me, A, B, (m, k, lda, n, ldb) = _gemm_operands(comm, a, b)
    mine = m * (me + 1) // size - m * me // size
    out, O, ldo = _result(out, "out", a, A, (mine, n))
    with _on(a):
        rc = library().collmux_gemm_reducescatter(handle, A.stream, A.dtype, m, n, k, A.ptr if _numel(a) else None, lda,
                                                  B.ptr if _numel(b) else None, ldb, O.ptr if _numel(out) else None, ldo)
    if rc != 0:
        raise Error("collmux_gemm_reducescatter failed (its reason is on stderr)")
    return out


def allgather_gemm(comm, a, b, out=None, gathered=None):
    """A column-parallel linear layer whose input is sharded by rows
    (sequence parallelism): the input's all-gather and the GEMM in one
    operation (PyTorch or CuPy).

    a: (m, k), this rank's rows of the input, rows m * rank to
    m * (rank + 1) - 1 (rows contiguous); b: (k, n), this rank's columns
    of the weight (rows contiguous); m and k are the same on every rank, n
    may differ. Returns (or fills) out: (size * m, n), the ranks' a stacked
    in rank order, times b; and fills gathered, where given, with the
    stacked a itself, (size * m, k)."""
    handle, size, me, A, B, (m, k, lda, n, ldb) = _gemm_operands(comm, a, b)
    out, O, ldo = _result(out, "out", a, A, (size * m, n))
    G, ldg = None, 0
    if gathered is not None:
        gathered, G, ldg = _result(gathered, "gathered", a, A, (size * m, k))
    with _on(a):
        rc = library().collmux_allgather_gemm(handle, A.stream, A.dtype, m, n, k, A.ptr if _numel(a) else None, lda,
                                              B.ptr if _numel(b) else None, ldb, O.ptr if _numel(out) else None, ldo,
                                              G.ptr if G is not None and _numel(gathered) else None, ldg)
    if rc != 0:
        raise Error("collmux_allgather_gemm failed (its reason is on stderr)")
    return out


class _SymmBytes:
    """collmux_symm_alloc's memory, as a CUDA array of bytes for PyTorch to
    view; it owns the allocation until symm_free."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = ptr, nbytes
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": None}


def symm_empty(comm, shape, dtype, device=None):
    """A PyTorch tensor of `shape` and `dtype` in symmetric memory: every
    rank of comm calls it alike (collective), and each rank's tensor is
    mapped by its peers, so that gemm_alltoall writes its output straight
    into it (collmux.h). Release it with symm_free(comm, tensor)."""
    import torch
    handle = _handle(comm)
    elem = torch.empty((), dtype=dtype).element_size()
    count = 1
    for d in shape:
        count *= d
    nbytes = max(count * elem, 4)
    dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    with torch.cuda.device(dev):
        ptr = library().collmux_symm_alloc(handle, nbytes)
    if not ptr:
        raise Error("collmux_symm_alloc failed (its reason is on stderr)")
    raw = torch.as_tensor(_SymmBytes(ptr, nbytes), device=dev)
    return raw[:count * elem].view(dtype).view(shape)


def symm_free(comm, tensor):
    """Frees the symmetric memory under a symm_empty tensor (collective;
    waits for the communicator's last operation). The tensor must not be
    used after."""
    import torch
    with torch.cuda.device(tensor.device):
        rc = library().collmux_symm_free(_handle(comm), tensor.untyped_storage().data_ptr())
    if rc != 0:
        raise Error("collmux_symm_free failed (its reason is on stderr)")


_torch_ops = False


def register_torch_ops():
    """Registers torch.ops.collmux.gemv_allreduce, embedding_alltoall,
    gemm_alltoall, gemm_reducescatter and allgather_gemm (once; PyTorch 2.4 or later), whose fake forms give
    torch.compile the outputs' shapes. Each takes the communicator as its
    py2f() handle, and the lists flat (rows and dest of gemm_alltoall
    experts x size, expert-major); each returns a new tensor. They are
    declared free of side effects, so a compiled graph may drop one whose
    result it never uses: every rank compiles the same graph and drops it
    alike."""
    global _torch_ops
    if _torch_ops:
        return
    import torch

    @torch.library.custom_op("collmux::gemv_allreduce", mutates_args=())
    def _gemv_allreduce(comm: int, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return gemv_allreduce(comm, a, x)

    @_gemv_allreduce.register_fake
    def _(comm, a, x):
        return x.new_empty((a.shape[0],) if x.dim() == 1 else (x.shape[0], a.shape[0]))

    @torch.library.custom_op("collmux::embedding_alltoall", mutates_args=())
    def _embedding_alltoall(comm: int, weights: torch.Tensor, rows: List[int], offsets: torch.Tensor,
                            indices: torch.Tensor, batch: int, table_first: int, tables_total: int,
                            mode: str) -> torch.Tensor:
        return embedding_alltoall(comm, weights, rows, offsets, indices, batch, table_first, tables_total, mode=mode)

    @_embedding_alltoall.register_fake
    def _(comm, weights, rows, offsets, indices, batch, table_first, tables_total, mode):
        n, me = _size_rank(comm)
        return weights.new_empty((_samples(batch, n, me), tables_total, weights.shape[1]))

    @torch.library.custom_op("collmux::gemm_alltoall", mutates_args=())
    def _gemm_alltoall(comm: int, a: torch.Tensor, b: torch.Tensor, rows: List[int], dest: List[int], out_rows: int,
                       capacity: int) -> torch.Tensor:
        return gemm_alltoall(comm, a, b, rows, dest, out_rows, capacity)

    @_gemm_alltoall.register_fake
    def _(comm, a, b, rows, dest, out_rows, capacity):
        return a.new_empty((out_rows, b.shape[2]))

    @torch.library.custom_op("collmux::gemm_reducescatter", mutates_args=())
    def _gemm_reducescatter(comm: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return gemm_reducescatter(comm, a, b)

    @_gemm_reducescatter.register_fake
    def _(comm, a, b):
        size, me = _size_rank(comm)
        m = a.shape[0]
        return a.new_empty((m * (me + 1) // size - m * me // size, b.shape[1]))

    @torch.library.custom_op("collmux::allgather_gemm", mutates_args=())
    def _allgather_gemm(comm: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return allgather_gemm(comm, a, b)

    @_allgather_gemm.register_fake
    def _(comm, a, b):
        size, _ = _size_rank(comm)
        return a.new_empty((size * a.shape[0], b.shape[1]))

    _torch_ops = True


if "torch" in sys.modules:
    register_torch_ops()
