"""The Recorder: one per rank, a thin ctypes layer over libppprof."""

import atexit
import ctypes
import os
import signal
import threading
import warnings
import weakref

from . import _lib
from ._lib import PPProfError, SAME_STREAM

# PPPROF_SAME_STREAM as a ready C value, for the unconverted fast path.
_SAME_STREAM_C = ctypes.c_uint64(SAME_STREAM)
_ArgumentError = ctypes.ArgumentError
# The fast path passes ints unconverted, as C ints: ctypes truncates larger
# values silently, so only values of int32 range take it.
_I32 = 1 << 31

# The well-known kinds (ppprof.h).
F, B, W, SEND_F, RECV_F, SEND_B, RECV_B, OPT = 1, 2, 3, 4, 5, 6, 7, 8
NO_MICROBATCH = -1

_WELL_KNOWN = {"F": F, "B": B, "W": W, "SEND_F": SEND_F, "RECV_F": RECV_F,
               "SEND_B": SEND_B, "RECV_B": RECV_B, "OPT": OPT}

_DTYPES = {
    "torch.float32": "fp32", "torch.float": "fp32", "torch.float16": "fp16", "torch.half": "fp16",
    "torch.bfloat16": "bf16", "torch.float64": "fp64", "torch.double": "fp64",
    "torch.int64": "int64", "torch.long": "int64", "torch.int32": "int32", "torch.int": "int32",
    "torch.int8": "int8", "torch.uint8": "uint8", "torch.bool": "bool",
    "torch.float8_e4m3fn": "fp8e4m3", "torch.float8_e5m2": "fp8e5m2",
}

# Recorders alive in this process: closed at exit, disabled in forked
# children (the Go runtime does not survive fork).
_live = weakref.WeakSet()
_live_lock = threading.Lock()


def _after_fork_in_child():
    for r in list(_live):
        r._disable("forked child: the recorder belongs to the parent process")
        r._restore_signals()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_all():
    for r in list(_live):
        r.close()


atexit.register(_close_all)


def _torch():
    try:
        import torch  # noqa: F401
        return torch
    except ImportError:
        return None


def _loaded_cudart():
    """The path of the libcudart this process (PyTorch) already loaded, so
    the collector uses the same copy; None when there is none."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1]
                if "/libcudart" in path and ".so" in path:
                    return path
    except OSError:
        pass
    return None


def _config_value(v):
    s = str(v)
    if ";" in s or "\n" in s:
        raise ValueError("config value %r contains ';' or a newline" % s)
    return s


class Recorder:
    """Records one rank's pipeline ops into DIR/rank-NNNNN.arrows.

    Spans: ``with rec.forward(step, mb): ...`` (also backward, wgrad, span
    for free-form kinds), or begin()/end(). P2P: rec.isend / rec.irecv wrap
    torch.distributed's, or issue()/complete() around any other transport.
    Steps: rec.step(n); rec.optimizer(step) / rec.optimizer_step(opt, step,
    scaler).

    clock: "auto" (CUDA events when torch sees a GPU, else the host clock),
    "cuda", "host" or "virtual". signals: which of "usr1" (dump pending ops),
    "term" (flush and close, then die of SIGTERM as before), "int" the Go
    runtime handles, comma-separated, or "none". SIGINT is left to Python
    (KeyboardInterrupt, then atexit closes the recorder).

    Failures never stop training: unless strict=True, a recorder that cannot
    start warns and records nothing, and a call that fails warns once per
    message.
    """

    def __init__(self, out_dir, rank=0, stage=None, pipeline=0, tp_rank=0, *,
                 job=None, world_size=None, pp=None, tp=None, dp=None, cp=None,
                 virtual=None, microbatches=None, schedule=None, device=None, peak_flops=None,
                 clock="auto", cuda_device=None, cuda_library=None,
                 signals="usr1,term", watchdog_s=None, flush_s=None, batch_events=None,
                 buffer_events=None, compression=None, fsync=False, log="stderr",
                 lib=None, strict=False, extra_config=None):
        self.rank = int(rank)
        self.stage = self.rank if stage is None else int(stage)
        self.out_dir = str(out_dir)
        self.strict = strict
        self._warned = set()
        self._kinds = dict(_WELL_KNOWN)
        self._shapes = {}
        self._dtypes = {}
        self._h = 0
        self._saved_signals = {}
        self._disable(None)
        torch = _torch()
        cuda = False
        if clock == "auto":
            cuda = bool(torch is not None and torch.cuda.is_available())
            clock = "cuda" if cuda else "host"
        elif clock == "cuda":
            cuda = True
        cfg = {
            "dir": self.out_dir, "rank": self.rank, "stage": self.stage, "pipeline": pipeline,
            "tp_rank": tp_rank, "job": job, "world_size": world_size, "pp": pp, "tp": tp, "dp": dp,
            "cp": cp, "virtual": virtual, "microbatches": microbatches, "schedule": schedule,
            "device": device, "peak_flops": peak_flops, "clock": clock, "signals": signals,
            "log": log, "compression": compression, "batch_events": batch_events,
            "buffer_events": buffer_events, "fsync": 1 if fsync else None,
            "watchdog_ms": None if watchdog_s is None else (-1 if watchdog_s < 0 else int(watchdog_s * 1000)),
            "flush_ms": None if flush_s is None else int(flush_s * 1000),
        }
        if cuda:
            if cuda_device is None and torch is not None and torch.cuda.is_available():
                cuda_device = torch.cuda.current_device()
            cfg["cuda_device"] = cuda_device
            cfg["cuda_library"] = cuda_library or _loaded_cudart()
        cfg.update(extra_config or {})
        config = ";".join("%s=%s" % (k, _config_value(v)) for k, v in cfg.items() if v is not None)
        try:
            # lib: a path, or (tests) an object with the library's functions.
            lib = _lib.load(lib) if lib is None or isinstance(lib, (str, bytes, os.PathLike)) else lib
        except (OSError, PPProfError) as e:
            self._fail("cannot load libppprof: %s" % e)
            return
        self._save_signals(signals)
        h = lib.ppprof_init(config.encode())
        if h < 0:
            self._fail("ppprof_init: %s" % _lib.last_error(lib), code=h)
            return
        self._lib = lib
        self._h = h
        self._streams = cuda and torch is not None
        self._torch = torch
        self._stream = self._cuda_stream if self._streams else _zero
        self._begin_fn = self._begin_slow = lib.ppprof_begin
        self._end_fn = self._end_slow = lib.ppprof_end
        self._issue_fn = self._issue_slow = lib.ppprof_p2p_issue
        self._complete_fn = self._complete_slow = lib.ppprof_p2p_complete
        self._same = SAME_STREAM
        fast = None if self._streams or not isinstance(lib, ctypes.CDLL) else _lib.fast(lib._name)
        if fast is not None and fast.widens(h):
            self._begin_fn = fast.ppprof_begin
            self._end_fn = fast.ppprof_end
            self._complete_fn = fast.ppprof_p2p_complete
            self._same = _SAME_STREAM_C
        with _live_lock:
            _live.add(self)

    # ---- state ----

    @property
    def enabled(self):
        """Whether the recorder records (it started and is not closed)."""
        return self._h > 0

    def _disable(self, why):
        self._h = 0
        self._streams = False
        self._begin_fn = self._issue_fn = self._begin_slow = self._issue_slow = _zero_span
        self._end_fn = self._complete_fn = self._end_slow = self._complete_slow = _ok
        self._same = SAME_STREAM
        self._stream = _zero
        if why:
            self._why_disabled = why

    def _fail(self, msg, code=_lib.EINVAL):
        if self.strict:
            raise PPProfError(code, msg)
        warnings.warn("ppprof: %s; recording disabled" % msg, RuntimeWarning, stacklevel=3)

    def _error(self, code, what):
        msg = "%s: %s" % (what, _lib.last_error(self._lib)) if self._h else what
        if self.strict:
            raise PPProfError(code, msg)
        if msg not in self._warned:
            self._warned.add(msg)
            warnings.warn("ppprof: " + msg, RuntimeWarning, stacklevel=3)

    def _save_signals(self, signals):
        # What Python had before the Go runtime installs its handlers, to
        # put back in forked children (see _after_fork_in_child).
        for name, sig in (("term", signal.SIGTERM), ("usr1", signal.SIGUSR1), ("int", signal.SIGINT)):
            if signals and (name in signals or "all" in signals):
                try:
                    self._saved_signals[sig] = signal.getsignal(sig)
                except (ValueError, OSError):
                    pass

    def _restore_signals(self):
        for sig, handler in self._saved_signals.items():
            try:
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            except (ValueError, OSError, TypeError):
                pass

    def _cuda_stream(self):
        return self._torch.cuda.current_stream().cuda_stream

    def kind(self, name):
        """The kind id of a kind name ("F", "DATA", "OPT_SKIP"...)."""
        if isinstance(name, int):
            return name
        k = self._kinds.get(name)
        if k is None:
            if not self._h:
                return 0
            k = self._lib.ppprof_kind(name.encode())
            if k < 0:
                self._error(k, "kind %r" % name)
                return 0
            self._kinds[name] = k
        return k

    # ---- compute spans ----

    def begin(self, kind, step, mb=NO_MICROBATCH, chunk=0):
        """Start a compute op; returns a span (0: not recorded)."""
        if kind.__class__ is not int:
            kind = self.kind(kind)
        return self._begin(kind, step, mb, chunk)

    def _begin(self, kind, step, mb, chunk):
        try:
            if ((step | chunk | kind) >> 31) == 0 and -_I32 <= mb < _I32:
                s = self._begin_fn(self._h, kind, step, mb, chunk, self._stream())
            else:
                s = self._begin_slow(self._h, kind, step, mb, chunk, self._stream())
        except (_ArgumentError, TypeError) as e:
            self._error(_lib.EINVAL, "begin: %s" % e)
            return 0
        if s < 0:
            self._error(s, "begin")
            return 0
        return s

    def end(self, span, mem_bytes=0):
        """End a span on the current stream (mem_bytes: memory allocated now)."""
        if span > 0:
            try:
                if span < _I32 and (mem_bytes >> 31) == 0 and not self._streams:
                    rc = self._end_fn(self._h, span, self._same, mem_bytes)
                else:
                    rc = self._end_slow(self._h, span, self._stream() if self._streams else SAME_STREAM, mem_bytes)
            except (_ArgumentError, TypeError) as e:
                self._error(_lib.EINVAL, "end: %s" % e)
                return
            if rc < 0:
                self._error(rc, "end")

    def span(self, kind, step, mb=NO_MICROBATCH, chunk=0):
        """A context manager recording one op of kind (F, B, W, "DATA"...)."""
        if kind.__class__ is not int:
            kind = self.kind(kind)
        return _Span(self, kind, step, mb, chunk)

    def forward(self, step, mb, chunk=0):
        """``with rec.forward(step, mb):`` records F."""
        return _Span(self, F, step, mb, chunk)

    def backward(self, step, mb, chunk=0):
        """``with rec.backward(step, mb):`` records B."""
        return _Span(self, B, step, mb, chunk)

    def wgrad(self, step, mb, chunk=0):
        """``with rec.wgrad(step, mb):`` records W (backward-weight)."""
        return _Span(self, W, step, mb, chunk)

    # ---- P2P ----

    def issue(self, kind, peer, step, mb, chunk=0, nbytes=0, shape=None, dtype=None):
        """Record that a send or receive to/from peer was posted; returns a
        span to complete() when its wait returns."""
        if kind.__class__ is not int:
            kind = self.kind(kind)
        if shape.__class__ is str:
            shape = shape.encode()
        if dtype.__class__ is str:
            dtype = dtype.encode()
        try:
            s = self._issue_fn(self._h, kind, peer, step, mb, chunk, nbytes, shape, dtype, self._stream())
        except (_ArgumentError, TypeError) as e:
            self._error(_lib.EINVAL, "p2p issue: %s" % e)
            return 0
        if s < 0:
            self._error(s, "p2p issue")
            return 0
        return s

    def complete(self, span):
        """Record that a P2P op's wait returned."""
        if span > 0:
            try:
                if span < _I32 and not self._streams:
                    rc = self._complete_fn(self._h, span, self._same)
                else:
                    rc = self._complete_slow(self._h, span, self._stream() if self._streams else SAME_STREAM)
            except (_ArgumentError, TypeError) as e:
                self._error(_lib.EINVAL, "p2p complete: %s" % e)
                return
            if rc < 0:
                self._error(rc, "p2p complete")

    def _labels(self, tensor):
        shape = self._shapes.get(tensor.shape)
        if shape is None:
            shape = "x".join(str(d) for d in tensor.shape).encode()
            self._shapes[tensor.shape] = shape
        dtype = self._dtypes.get(tensor.dtype)
        if dtype is None:
            name = str(tensor.dtype)
            dtype = _DTYPES.get(name, name.replace("torch.", "")).encode()
            self._dtypes[tensor.dtype] = dtype
        return tensor.numel() * tensor.element_size(), shape, dtype

    def isend(self, tensor, dst, step, mb, kind=SEND_F, chunk=0, group=None, tag=0):
        """torch.distributed.isend, recorded: the returned work's wait()
        completes the op."""
        import torch.distributed as dist
        nbytes, shape, dtype = self._labels(tensor)
        span = self.issue(kind, dst, step, mb, chunk, nbytes, shape, dtype)
        return Work(self, dist.isend(tensor, dst, group=group, tag=tag), span)

    def irecv(self, tensor, src, step, mb, kind=RECV_F, chunk=0, group=None, tag=0):
        """torch.distributed.irecv, recorded."""
        import torch.distributed as dist
        nbytes, shape, dtype = self._labels(tensor)
        span = self.issue(kind, src, step, mb, chunk, nbytes, shape, dtype)
        return Work(self, dist.irecv(tensor, src, group=group, tag=tag), span)

    def wrap_work(self, work, kind, peer, step, mb, chunk=0, tensor=None):
        """Record an op already posted elsewhere: returns work wrapped so its
        wait() completes the op."""
        nbytes, shape, dtype = self._labels(tensor) if tensor is not None else (0, None, None)
        return Work(self, work, self.issue(kind, peer, step, mb, chunk, nbytes, shape, dtype))

    # ---- steps ----

    def step(self, step):
        """Mark the start of a step."""
        if self._h:
            rc = self._lib.ppprof_step(self._h, step)
            if rc < 0:
                self._error(rc, "step")

    def optimizer(self, step):
        """``with rec.optimizer(step) as o: ...; o.skipped = found_inf``
        records OPT, or OPT_SKIP when o.skipped was set."""
        return _OptSpan(self, step)

    def optimizer_step(self, optimizer, step, scaler=None):
        """Run the optimizer step (through a GradScaler when given, which
        also decides the skip: the scale drops when gradients overflowed)
        and record it."""
        with self.optimizer(step) as o:
            if scaler is None:
                return optimizer.step()
            before = scaler.get_scale()
            out = scaler.step(optimizer)
            scaler.update()
            o.skipped = scaler.get_scale() < before
            return out

    # ---- the file ----

    def flush(self):
        """Write the completed ops now."""
        self._call("ppprof_flush")

    def dump_pending(self):
        """Write the ops in flight (with a null end) now."""
        self._call("ppprof_dump_pending")

    def set_time(self, ns):
        """Set the time of a clock="virtual" recorder, in ns."""
        self._call("ppprof_set_time", int(ns))

    def stats(self):
        """The recorder's counters as a dict (empty when disabled)."""
        if not self._h:
            return {}
        st = _lib.Stats()
        self._lib.ppprof_stats_get(self._h, st)
        return {name: getattr(st, name) for name, _ in _lib.Stats._fields_}

    def _call(self, name, *args):
        if self._h:
            rc = getattr(self._lib, name)(self._h, *args)
            if rc < 0:
                self._error(rc, name)

    def close(self):
        """Write what is left and close the file. Idempotent."""
        h = self._h
        if not h:
            return
        stats = self.stats()
        self._disable("closed")
        rc = self._lib.ppprof_close(h)
        self.final_stats = stats
        with _live_lock:
            _live.discard(self)
        if rc < 0:
            self._error(rc, "close")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _zero():
    return 0


def _zero_span(*args):
    return 0


def _ok(*args):
    return 0


class _Span:
    __slots__ = ("_r", "_kind", "_step", "_mb", "_chunk", "_span")

    def __init__(self, r, kind, step, mb, chunk):
        self._r, self._kind, self._step, self._mb, self._chunk = r, kind, step, mb, chunk

    def __enter__(self):
        self._span = self._r._begin(self._kind, self._step, self._mb, self._chunk)
        return self

    def __exit__(self, *exc):
        if self._span > 0:
            self._r.end(self._span)
        return False


class _OptSpan:
    __slots__ = ("_r", "_step", "_span", "skipped")

    def __init__(self, r, step):
        self._r, self._step, self.skipped = r, step, False

    def __enter__(self):
        r = self._r
        self._span = 0
        if r._h:
            s = r._lib.ppprof_opt_begin(r._h, self._step, r._stream())
            if s < 0:
                r._error(s, "optimizer begin")
            else:
                self._span = s
        return self

    def __exit__(self, *exc):
        r = self._r
        if self._span > 0 and r._h:
            rc = r._lib.ppprof_opt_end(r._h, self._span, 1 if self.skipped else 0)
            if rc < 0:
                r._error(rc, "optimizer end")
        return False


class Work:
    """A torch.distributed work handle whose wait() completes the recorded
    P2P op. Everything else is the wrapped work's."""

    __slots__ = ("_rec", "_work", "_span")

    def __init__(self, rec, work, span):
        self._rec, self._work, self._span = rec, work, span

    def wait(self, *args, **kwargs):
        out = self._work.wait(*args, **kwargs)
        if self._span:
            span, self._span = self._span, 0
            self._rec.complete(span)
        return out

    def __getattr__(self, name):
        return getattr(self._work, name)
