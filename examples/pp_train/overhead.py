"""The collector's step-time overhead on the CPU training example.

Runs train.py alternately with and without the collector, same seed and
configuration, and compares the median step time (steps after the first,
from the last stage, which ends every step at the barrier).

    PPPROF_LIB=/tmp/libppprof.so PYTHONPATH=collector/python \\
        python3 examples/pp_train/overhead.py --runs 5 --steps 8
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(args, collector, timed=False):
    with tempfile.TemporaryDirectory() as d:
        summary = os.path.join(d, "summary.json")
        cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.py"),
               "--out", os.path.join(d, "trace"), "--steps", str(args.steps),
               "--microbatches", str(args.microbatches), "--seed", str(args.seed), "--summary", summary]
        if not collector:
            cmd.append("--no-collector")
        if timed:
            cmd.append("--time-collector")
        subprocess.run(cmd, check=True)
        with open(summary) as f:
            s = json.load(f)
        if timed:
            per_rank = [s["collector_ms_per_step"]]
            for r in range(3):
                with open("%s.rank%d" % (summary, r)) as f:
                    per_rank.append(json.load(f)["collector_ms_per_step"])
            return statistics.median(s["step_ms"][1:]), per_rank
    return statistics.median(s["step_ms"][1:]), s["losses"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    on, off = [], []
    for i in range(args.runs):
        # Alternate which goes first, so that order effects cancel.
        if i % 2 == 0:
            ms_off, loss_off = run(args, False)
            ms_on, loss_on = run(args, True)
        else:
            ms_on, loss_on = run(args, True)
            ms_off, loss_off = run(args, False)
        if loss_on != loss_off:
            sys.exit("the collector changed the losses: %s vs %s" % (loss_on, loss_off))
        off.append(ms_off)
        on.append(ms_on)
        print("run %d: without %.1f ms, with %.1f ms" % (i, ms_off, ms_on), flush=True)
    m_on, m_off = statistics.median(on), statistics.median(off)
    print("median step: without %.1f ms, with %.1f ms: overhead %+.1f%% (%d runs of %d steps, m=%d)"
          % (m_off, m_on, 100 * (m_on / m_off - 1), args.runs, args.steps, args.microbatches))
    # The direct measure: time inside collector calls on the training
    # thread, which machine noise barely touches.
    ms, per_rank = run(args, True, timed=True)
    worst = max(per_rank)
    print("time in collector calls per step, per rank: %s ms; the most, %.3f ms, is %.3f%% of the %.1f ms step"
          % (", ".join("%.3f" % v for v in per_rank), worst, 100 * worst / ms, ms))


if __name__ == "__main__":
    main()
