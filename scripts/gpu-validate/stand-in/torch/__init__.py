"""Just enough of torch for budget_inproc.py's loop, over the simulated libcudart.so.13
(SIM_CUDART): a smoke test of the GPU script's plumbing on a machine without a GPU, not
of any figure. As root, after `cargo build --release -p rocsync-user` and the tests' build:

    SIM_CUDART=$(ls target/release/build/rocsync-tests-*/out/cuda/libcudart.so.13 | head -1) \
    PYTHONPATH=scripts/gpu-validate/stand-in \
    python3 scripts/gpu-validate/budget_inproc.py target/release/rocsync /tmp/x 1 10 2 budget
"""
import contextlib
import ctypes
import os

__version__ = "sim"
_lib = ctypes.CDLL(os.environ["SIM_CUDART"])


class version:
    cuda = "sim"


class _Stream:
    def __init__(self, handle=None):
        self.h = ctypes.c_void_p(handle)
        if handle is None:
            _lib.cudaStreamCreate(ctypes.byref(self.h))

    def wait_event(self, e):
        _lib.cudaStreamWaitEvent(self.h, e.h, 0)


class _Event:
    def __init__(self):
        self.h = None

    def record(self, stream):
        if self.h is None:
            self.h = ctypes.c_void_p()
            _lib.cudaEventCreateWithFlags(ctypes.byref(self.h), 2)
        _lib.cudaEventRecord(self.h, stream.h)

    def query(self):
        return _lib.cudaEventQuery(self.h) == 0

    def __del__(self):
        if self.h is not None:
            _lib.cudaEventDestroy(self.h)


class _Tensor:
    def mul_(self, _):
        return self


class cuda:
    Stream = _Stream
    Event = _Event
    _default = None

    @staticmethod
    def init():
        pass

    @staticmethod
    def synchronize():
        _lib.cudaDeviceSynchronize()

    @staticmethod
    def current_stream():
        if cuda._default is None:
            cuda._default = _Stream(0)
        return cuda._default

    @staticmethod
    def stream(_):
        return contextlib.nullcontext()

    @staticmethod
    def get_device_name():
        return "simulated"


def ones(*_, **__):
    return _Tensor()
