"""A CPU stand-in for the few CuPy calls of tests/py/mpi4py_unserved.py,
over the CUDA stand-in (tests/fakecuda): arrays whose memory the host
cannot touch, passed to mpi4py by the CUDA array interface, so that the
CPU suite runs that program's refusals (TestMPI4PyDeviceArraysInMPIIO).
Nothing here reads or writes the arrays' data."""
import ctypes
import types

int32 = "i"
_cu = ctypes.CDLL("libcuda.so.1")
if _cu.cuInit(0) != 0:
    raise ImportError("the CUDA stand-in did not start")


class _Array:
    def __init__(self, n):
        p = ctypes.c_uint64()
        if _cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(4 * n)) != 0:
            raise MemoryError("the CUDA stand-in has no room")
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<i4", "data": (p.value, False), "version": 3}

    def __ne__(self, other):  # the data stays unread: "unchanged"
        return False


def full(n, value, dtype=None):
    return _Array(n)


def any(x):
    return False


cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(synchronize=lambda: None))
