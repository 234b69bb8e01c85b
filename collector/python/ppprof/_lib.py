"""Loading libppprof.so (the collector's C ABI) with ctypes."""

import ctypes
import ctypes.util
import os
import threading

# Return codes of ppprof.h.
OK = 0
EINVAL = -1
EHANDLE = -2
EIO = -3
ENOCUDA = -4

# PPPROF_SAME_STREAM: end or complete on the stream the span began on.
SAME_STREAM = (1 << 64) - 1

ABI_VERSION = 1


class PPProfError(RuntimeError):
    """A call into libppprof failed: code is the PPPROF_E* code."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Stats(ctypes.Structure):
    _fields_ = [
        ("recorded", ctypes.c_int64),
        ("written", ctypes.c_int64),
        ("dropped", ctypes.c_int64),
        ("rejected", ctypes.c_int64),
        ("abandoned", ctypes.c_int64),
        ("device_errors", ctypes.c_int64),
        ("watchdog", ctypes.c_int64),
    ]


_lock = threading.Lock()
_loaded = {}


def library_path(path=None):
    """Where libppprof.so is: path, $PPPROF_LIB, beside this package, or the
    system's library path."""
    if path:
        return path
    if os.environ.get("PPPROF_LIB"):
        return os.environ["PPPROF_LIB"]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libppprof.so")
    if os.path.exists(here):
        return here
    found = ctypes.util.find_library("ppprof")
    if found:
        return found
    raise PPProfError(
        EINVAL,
        "libppprof.so not found: build it with "
        "'go build -buildmode=c-shared -o libppprof.so ./collector/capi' "
        "and set PPPROF_LIB to its path (or copy it beside the ppprof package)",
    )


def load(path=None):
    """Load libppprof (once per path) and declare its functions."""
    path = library_path(path)
    with _lock:
        lib = _loaded.get(path)
        if lib is not None:
            return lib
        lib = ctypes.CDLL(path)
        i32, i64, u64, cp = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_char_p
        c_int = ctypes.c_int
        sigs = {
            "ppprof_abi_version": ([], c_int),
            "ppprof_init": ([cp], c_int),
            "ppprof_kind": ([cp], c_int),
            "ppprof_begin": ([c_int, c_int, i64, i32, i32, u64], i64),
            "ppprof_end": ([c_int, i64, u64, i64], c_int),
            "ppprof_p2p_issue": ([c_int, c_int, i32, i64, i32, i32, i64, cp, cp, u64], i64),
            "ppprof_p2p_complete": ([c_int, i64, u64], c_int),
            "ppprof_opt_begin": ([c_int, i64, u64], i64),
            "ppprof_opt_end": ([c_int, i64, c_int], c_int),
            "ppprof_step": ([c_int, i64], c_int),
            "ppprof_set_time": ([c_int, i64], c_int),
            "ppprof_flush": ([c_int], c_int),
            "ppprof_dump_pending": ([c_int], c_int),
            "ppprof_stats_get": ([c_int, ctypes.POINTER(Stats)], c_int),
            "ppprof_close": ([c_int], c_int),
            "ppprof_last_error": ([], cp),
        }
        for name, (args, res) in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = res
        if lib.ppprof_abi_version() != ABI_VERSION:
            raise PPProfError(EINVAL, "%s has ABI version %d, this binding speaks %d"
                              % (path, lib.ppprof_abi_version(), ABI_VERSION))
        _loaded[path] = lib
        return lib


class _Fast:
    """Hot-path functions called without ctypes argument conversion,
    holding the GIL (they never block): about twice as fast as the
    declared ones. Python ints then travel as C ints, which libffi widens
    to the 64-bit registers the functions read, on x86-64 and arm64. Only
    functions whose arguments all travel in registers (six at most: libffi
    does not widen arguments on the stack), only when probes show the
    widening, and only for host and virtual clocks (CUDA stream handles are
    64-bit pointers). A value outside the int32 range raises
    ctypes.ArgumentError, and callers fall back to the declared functions.
    """

    def __init__(self, path):
        lib = ctypes.PyDLL(path)
        for name, res in (("ppprof_begin", ctypes.c_int64), ("ppprof_end", ctypes.c_int),
                          ("ppprof_p2p_complete", ctypes.c_int), ("ppprof_step", ctypes.c_int)):
            fn = getattr(lib, name)
            fn.restype = res
            setattr(self, name, fn)

    def widens(self, h):
        """Probe open recorder h: step -1 must arrive as -1 (refused), not
        as 4294967295 (accepted)."""
        rc = self.ppprof_step(h, -1)
        if rc == EINVAL:
            return True
        self.ppprof_step(h, 0)
        return False


_fast = {}


def fast(path=None):
    """The _Fast functions of the library, or None where passing ints
    unconverted is not known to be right (the probe below fails)."""
    path = library_path(path)
    with _lock:
        if path in _fast:
            return _fast[path]
        f = None
        try:
            libc = ctypes.CDLL(None)
            libc.llabs.restype = ctypes.c_longlong
            # A negative C int must arrive sign-extended in the 64-bit
            # register that a 64-bit parameter is read from.
            if ctypes.sizeof(ctypes.c_void_p) == 8 and libc.llabs(-5) == 5 and libc.llabs(7) == 7:
                f = _Fast(path)
        except (OSError, AttributeError):
            f = None
        _fast[path] = f
        return f


def last_error(lib):
    msg = lib.ppprof_last_error()
    return msg.decode("utf-8", "replace") if msg else ""
