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
        self.__cuda_array_interface__ = {"data": (arr.ctypes.data, False), "shape": arr.shape, "typestr": "<f4",
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
# the torch.ops forms pass the communicator as its handle: size and rank from it
expect("size and rank of a handle", collmux._size_rank(comm.py2f()) == (comm.size, comm.rank))
expect("size and rank of a communicator", collmux._size_rank(comm) == (comm.size, comm.rank))
expect("size and rank of no communicator", raises(TypeError, lambda: collmux._size_rank("world")))
expect("MPI goes on", comm.allreduce(1) == comm.size)
nbad = comm.allreduce(len(bad))
if comm.rank == 0:
    print(f"collmux_api: {comm.size} ranks, {nbad} failures", bad)
