"""Where the driver's entry points handed out by `cuGetProcAddress` lie (issue 48: what
records the events NCCL's own streams wait on). A runtime carried inside another library
(NCCL's, stripped) reaches the driver only through `cuGetProcAddress`: if the address it
is given for `cuEventRecord` is not the exported symbol's, probing the export misses it.

usage: python procaddress.py   (prints one JSON line per name)
"""
import ctypes
import json

NAMES = ["cuEventRecord", "cuEventRecordWithFlags", "cuStreamWaitEvent",
         "cuEventQuery", "cuStreamSynchronize", "cuEventSynchronize", "cuLaunchKernel"]


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def main():
    cuda = ctypes.CDLL("libcuda.so.1")
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    print(json.dumps({"cuInit": cuda.cuInit(0)}))
    get = cuda.cuGetProcAddress_v2
    get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                    ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]
    for name in NAMES:
        for flags, mode in ((0, "default"), (2, "per_thread")):
            p, status = ctypes.c_void_p(), ctypes.c_int()
            r = get(name.encode(), ctypes.byref(p), 13000, flags, ctypes.byref(status))
            exported = ctypes.cast(getattr(cuda, name), ctypes.c_void_p).value
            info = DlInfo()
            found = libc.dladdr(p, ctypes.byref(info)) if p.value else 0
            print(json.dumps({
                "name": name, "flags": mode, "result": r, "status": status.value,
                "handed_out": hex(p.value or 0), "exported": hex(exported),
                "same": p.value == exported,
                "nearest_symbol": info.dli_sname.decode() if found and info.dli_sname else None,
                "offset_from_it": (p.value - info.dli_saddr) if found and info.dli_saddr else None,
                "file_offset": (p.value - info.dli_fbase) if found else None,
            }))


if __name__ == "__main__":
    main()
