"""The Python binding's cost per recorded event, host clock.

usage: PPPROF_LIB=/path/libppprof.so python3 collector/python/bench.py [N]

Prints nanoseconds per event for: raw begin/end calls, the forward()
context manager, and issue/complete of a P2P op with labels.
"""

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ppprof  # noqa: E402


def measure(n, chunk, body, rec):
    spent = 0.0
    done = 0
    while done < n:
        t0 = time.perf_counter()
        body(chunk)
        spent += time.perf_counter() - t0
        rec.flush()  # let the writer catch up, off the clock
        done += chunk
    return spent / done * 1e9


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    chunk = 10000
    with tempfile.TemporaryDirectory() as d:
        rec = ppprof.Recorder(d, rank=1, clock="host", strict=True, signals="none",
                              buffer_events=65536, batch_events=16384)
        begin, end, F = rec.begin, rec.end, ppprof.F

        def raw(k):
            for i in range(k):
                end(begin(F, 1, 3))

        fwd = rec.forward

        def ctx(k):
            for i in range(k):
                with fwd(1, 3):
                    pass

        issue, complete, SEND_F = rec.issue, rec.complete, ppprof.SEND_F
        shape, dtype = b"4x2048x1024", b"bf16"

        def p2p(k):
            for i in range(k):
                complete(issue(SEND_F, 2, 1, 3, 0, 16777216, shape, dtype))

        def empty(k):
            for i in range(k):
                pass

        base = measure(n, chunk, empty, rec)
        results = [("begin_end", measure(n, chunk, raw, rec)), ("context_manager", measure(n, chunk, ctx, rec)),
                   ("p2p_issue_complete", measure(n, chunk, p2p, rec))]
        rec.close()
        for name, ns in results:
            print("%s_ns %.0f" % (name, ns - base))
        print("dropped", rec.final_stats["dropped"])


main()
