"""The collmux Python package on a machine without a GPU (the CPU suite):
it finds the preloaded library, reports its version, checks its arguments,
and turns the library's refusal into collmux.Error while MPI goes on.
Prints "collmux_api: N ranks, F failures"."""
import sys

import numpy as np
from mpi4py import MPI

import collmux

comm = MPI.COMM_WORLD
bad = []


def expect(what, ok):
    if not ok:
        bad.append(what)


expect("version", collmux.version() == sys.argv[1])


class HostPretendingDevice:
    """A host array that claims to be a device one: the library, not the
    package, must catch it."""

    def __init__(self, arr):
        self._arr = arr
        self.__cuda_array_interface__ = {"data": (arr.ctypes.data, False), "shape": arr.shape, "typestr": arr.dtype.str,
                                         "version": 3, "strides": None}


def raises(kind, f):
    try:
        f()
    except kind:
        return True
    except Exception as e:  # the wrong kind
        print("unexpected", type(e).__name__, e, file=sys.stderr)
    return False


a = np.ones((8, 4), np.float32)
expect("numpy refused", raises(ValueError, lambda: collmux.gemv_allreduce(comm, a, a[0])))
expect("shapes checked", raises(ValueError, lambda: collmux.gemv_allreduce(comm, HostPretendingDevice(a),
                                                                           HostPretendingDevice(np.ones(5, np.float32)))))
expect("bad comm", raises(TypeError, lambda: collmux.gemv_allreduce("world", HostPretendingDevice(a),
                                                                    HostPretendingDevice(a[0].copy()))))
expect("library refuses host memory", raises(collmux.Error, lambda: collmux.gemv_allreduce(
    comm, HostPretendingDevice(a), HostPretendingDevice(np.ones(4, np.float32)), HostPretendingDevice(np.ones(8, np.float32)))))
overlapping = HostPretendingDevice(np.ones(8, np.float32))
overlapping.__cuda_array_interface__ = dict(overlapping.__cuda_array_interface__, shape=(4, 8), strides=(0, 4))
expect("broadcast rows refused", raises(ValueError, lambda: collmux.gemv_allreduce(comm, HostPretendingDevice(a),
                                                                                   overlapping)))
# the other operations take the same arrays (CuPy's, as PyTorch's): their
# checks, and the library's refusal of host memory, on every rank alike
H = HostPretendingDevice
mine = 8 * (comm.rank + 1) // comm.size - 8 * comm.rank // comm.size
expect("reduce-scatter refuses host memory", raises(collmux.Error, lambda: collmux.gemm_reducescatter(
    comm, H(np.ones((8, 4), np.float32)), H(np.ones((4, 6), np.float32)), out=H(np.ones((mine, 6), np.float32)))))
expect("reduce-scatter checks b", raises(ValueError, lambda: collmux.gemm_reducescatter(
    comm, H(np.ones((8, 4), np.float32)), H(np.ones((5, 6), np.float32)), out=H(np.ones((mine, 6), np.float32)))))
expect("reduce-scatter checks out", raises(ValueError, lambda: collmux.gemm_reducescatter(
    comm, H(np.ones((8, 4), np.float32)), H(np.ones((4, 6), np.float32)), out=H(np.ones((mine + 1, 6), np.float32)))))
expect("reduce-scatter needs out= for such arrays", raises(ValueError, lambda: collmux.gemm_reducescatter(
    comm, H(np.ones((8, 4), np.float32)), H(np.ones((4, 6), np.float32)))))
n_all = 3 * comm.size
expect("all-gather + GEMM refuses host memory", raises(collmux.Error, lambda: collmux.allgather_gemm(
    comm, H(np.ones((3, 4), np.float32)), H(np.ones((4, 6), np.float32)), out=H(np.ones((n_all, 6), np.float32)))))
expect("all-gather + GEMM checks out", raises(ValueError, lambda: collmux.allgather_gemm(
    comm, H(np.ones((3, 4), np.float32)), H(np.ones((4, 6), np.float32)), out=H(np.ones((3, 6), np.float32)))))
expect("all-gather + GEMM checks gathered", raises(ValueError, lambda: collmux.allgather_gemm(
    comm, H(np.ones((3, 4), np.float32)), H(np.ones((4, 6), np.float32)), out=H(np.ones((n_all, 6), np.float32)),
    gathered=H(np.ones((n_all, 6), np.float32)))))
counts = [[1] * comm.size, [2] * comm.size]  # 2 experts, 3 rows from each rank
at = [[0] * comm.size, [1] * comm.size]
expect("GEMM + all-to-all refuses host memory", raises(collmux.Error, lambda: collmux.gemm_alltoall(
    comm, H(np.ones((3 * comm.size, 4), np.float32)), H(np.ones((2, 4, 6), np.float32)), counts, at, 3 * comm.size,
    3 * comm.size, out=H(np.ones((3 * comm.size, 6), np.float32)))))
expect("GEMM + all-to-all checks b", raises(ValueError, lambda: collmux.gemm_alltoall(
    comm, H(np.ones((3 * comm.size, 4), np.float32)), H(np.ones((4, 6), np.float32)), counts, at, 3 * comm.size,
    3 * comm.size, out=H(np.ones((3 * comm.size, 6), np.float32)))))
batch = 4 * comm.size
offsets = H(np.arange(2 * batch + 1, dtype=np.int64))
indices = H(np.zeros(2 * batch, np.int64))
emb_out = H(np.ones((4, 2, 8), np.float32))
expect("embedding refuses host memory", raises(collmux.Error, lambda: collmux.embedding_alltoall(
    comm, H(np.ones((20, 8), np.float32)), [0, 10, 20], offsets, indices, batch, 0, 2, out=emb_out)))
expect("embedding wants int64 offsets", raises(ValueError, lambda: collmux.embedding_alltoall(
    comm, H(np.ones((20, 8), np.float32)), [0, 10, 20], H(np.zeros(2 * batch + 1, np.float32)), indices, batch, 0, 2,
    out=emb_out)))

# the torch.ops forms pass the communicator as its handle: size and rank from it
expect("size and rank of a handle", collmux._size_rank(comm.py2f()) == (comm.size, comm.rank))
expect("size and rank of a communicator", collmux._size_rank(comm) == (comm.size, comm.rank))
expect("size and rank of no communicator", raises(TypeError, lambda: collmux._size_rank("world")))
expect("MPI goes on", comm.allreduce(1) == comm.size)
nbad = comm.allreduce(len(bad))
if comm.rank == 0:
    print(f"collmux_api: {comm.size} ranks, {nbad} failures", bad)
