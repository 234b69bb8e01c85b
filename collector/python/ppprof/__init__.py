"""ppprof: the pipeline-parallel profiler's collector, for Python/PyTorch.

A ctypes binding of libppprof.so (the collector's C ABI; no compiled
extension). One Recorder per rank writes DIR/rank-NNNNN.arrows as the job
runs; ``ppprof analyze DIR`` and ``ppprof hang DIR`` read them.

    import ppprof
    rec = ppprof.Recorder("/tmp/trace", rank=rank, stage=stage, pp=4, microbatches=8)
    with rec.forward(step, mb):
        out = stage_module(x)
    work = rec.isend(out, dst=rank + 1, step=step, mb=mb)
    ...
    work.wait()
    rec.close()

See docs/collector.md.
"""

from ._lib import PPProfError, SAME_STREAM, library_path
from .pipelining import instrument_pipelining
from .recorder import (B, F, NO_MICROBATCH, OPT, RECV_B, RECV_F, SEND_B, SEND_F, W,
                       Recorder, Work)

__all__ = [
    "Recorder", "Work", "PPProfError", "instrument_pipelining", "library_path",
    "F", "B", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OPT", "NO_MICROBATCH", "SAME_STREAM",
]
