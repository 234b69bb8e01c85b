"""Records a known sequence through the real libppprof (PPPROF_LIB), for
the Go test that reads the file back (collector/python/python_test.go).

usage: live_record.py DIR [signals]
  without "signals": records, forks a child that must not record, closes.
  with "signals": records, leaves a span open, prints "ready", sleeps: the
  test then sends SIGUSR1 and SIGTERM.
"""

import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ppprof  # noqa: E402
from fakelib import FakeTensor, FakeWork  # noqa: E402


def main():
    out = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    rec = ppprof.Recorder(out, rank=1, stage=1, job="py-live", world_size=3, pp=3, microbatches=2,
                          schedule="gpipe", clock="host", strict=True, flush_s=0.05,
                          signals="usr1,term" if mode == "signals" else "none")
    rec.step(0)
    t = FakeTensor((2, 8), "torch.float16", 2)
    for mb in range(2):
        w = rec.wrap_work(FakeWork(), ppprof.RECV_F, 0, 0, mb, tensor=t)
        w.wait()
        with rec.forward(0, mb):
            pass
        w = rec.wrap_work(FakeWork(), ppprof.SEND_F, 2, 0, mb, tensor=t)
        w.wait()
    with rec.span("LOSS", 0):
        pass
    with rec.optimizer(0) as o:
        o.skipped = True
    # Values beyond int32 take the declared (converting) path.
    with rec.span("DATA", 2 ** 33, chunk=0):
        pass
    if mode == "signals":
        rec.issue(ppprof.RECV_B, 2, 0, 1)  # never completes
        print("ready", flush=True)
        time.sleep(3600)
        return
    # Errors never raise unless strict: a non-strict recorder warns.
    rec.strict = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec.issue(ppprof.F, 2, 0, 0)
    assert "not a P2P kind" in str(caught[0].message), caught
    pid = os.fork()
    if pid == 0:
        # The child: the Go runtime did not survive fork; the recorder is
        # disabled and must not call into it (that would hang).
        with rec.forward(9, 9):
            pass
        rec.flush()
        os._exit(0 if not rec.enabled else 3)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, status
    rec.close()
    print("stats", rec.final_stats)


main()
