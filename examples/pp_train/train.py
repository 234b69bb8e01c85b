"""A small transformer trained with 4-stage pipeline parallelism on CPU,
recorded with the ppprof collector.

One process per stage (forked from this one), torch.distributed over gloo,
a hand-written 1F1B schedule with isend/irecv. Each rank writes
OUT/rank-NNNNN.arrows; then

    ppprof analyze OUT

Run (PPPROF_LIB names libppprof.so; the ppprof package is in
collector/python):

    go build -buildmode=c-shared -o /tmp/libppprof.so ./collector/capi
    PPPROF_LIB=/tmp/libppprof.so PYTHONPATH=collector/python \\
        python3 examples/pp_train/train.py --out /tmp/pp

--skip RANK:STEP:MB makes that rank skip one micro-batch (its forward,
backward and their P2P): the pipeline hangs, as a real job with that bug
would. The collector's watchdog then writes each rank's pending ops, and
`ppprof hang OUT` names the culprit.

--profile DIR runs the job under torch.profiler (CPU), each action
labelled as torch.distributed.pipelining labels it (record_function
PP:{stage}{F|B|SEND_F|RECV_F|SEND_B|RECV_B}{mb}), one step per
ProfilerStep#N (the first step is the profiler's warmup, not recorded), and
writes DIR/rank{r}.json; then `ppprof analyze DIR`. Without --out the
collector is off; with it, it records as well.
"""

import argparse
import contextlib
import json
import multiprocessing
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as Fn

try:
    import ppprof
    from ppprof import RECV_B, RECV_F, SEND_B, SEND_F
except ImportError:  # training without the collector needs no ppprof
    ppprof = None
    SEND_F, RECV_F, SEND_B, RECV_B = 4, 5, 6, 7

VOCAB, DIM, HEADS, SEQ, MBS = 64, 64, 2, 32, 8


class Stage(nn.Module):
    """One pipeline stage: a transformer block, with the embedding on the
    first stage and the head on the last."""

    def __init__(self, stage, stages):
        super().__init__()
        self.first, self.last = stage == 0, stage == stages - 1
        if self.first:
            self.embed = nn.Embedding(VOCAB, DIM)
            self.pos = nn.Parameter(torch.randn(SEQ, DIM) * 0.02)
        self.block = nn.TransformerEncoderLayer(DIM, HEADS, 4 * DIM, dropout=0.0, batch_first=True)
        if self.last:
            self.norm = nn.LayerNorm(DIM)
            self.head = nn.Linear(DIM, VOCAB)

    def forward(self, x):
        if self.first:
            x = self.embed(x) + self.pos
        x = self.block(x)
        if self.last:
            x = self.head(self.norm(x))
        return x


def batch(seed, step, mb):
    """Micro-batch mb of step: tokens and next-token targets (the sequence
    counts up from a random start, so the model can learn it). Every rank
    computes it the same way; only the first and last stage use it."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + mb)
    start = torch.randint(0, VOCAB, (MBS, 1), generator=g)
    seq = (start + torch.arange(SEQ + 1)) % VOCAB
    return seq[:, :-1], seq[:, 1:]


def schedule_1f1b(stage, stages, m):
    """The 1F1B order of one stage: ("F", mb) and ("B", mb) actions."""
    warmup = min(stages - stage - 1, m)
    order = [("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        order += [("F", warmup + i), ("B", i)]
    order += [("B", i) for i in range(m - warmup, m)]
    return order


class NoRecorder:
    """Stands in for ppprof.Recorder in runs without the collector."""

    def forward(self, *a):
        return _Null()

    backward = forward

    def optimizer(self, *a):
        return _Null()

    def isend(self, t, peer, *a, **k):
        return dist.isend(t, peer)

    def irecv(self, t, peer, *a, **k):
        return dist.irecv(t, peer)

    def step(self, *a):
        pass

    def close(self):
        pass


class TimedRecorder:
    """Wraps a recorder and adds up the time spent in its calls (and in
    the waits of the work handles it returns, minus the wrapped waits), to
    measure the collector's cost inside the training thread directly."""

    def __init__(self, rec):
        self.rec, self.spent = rec, 0.0

    def _timed(self, fn, *a, **k):
        t0 = time.perf_counter()
        out = fn(*a, **k)
        self.spent += time.perf_counter() - t0
        return out

    def forward(self, *a):
        return _TimedSpan(self, self.rec.forward(*a))

    def backward(self, *a):
        return _TimedSpan(self, self.rec.backward(*a))

    def optimizer(self, *a):
        return _TimedSpan(self, self.rec.optimizer(*a))

    def isend(self, t, peer, step, mb, kind):
        return self._p2p(t, peer, step, mb, kind, dist.isend)

    def irecv(self, t, peer, step, mb, kind):
        return self._p2p(t, peer, step, mb, kind, dist.irecv)

    def _p2p(self, t, peer, step, mb, kind, post):
        t0 = time.perf_counter()
        nbytes, shape, dtype = self.rec._labels(t)
        span = self.rec.issue(kind, peer, step, mb, 0, nbytes, shape, dtype)
        self.spent += time.perf_counter() - t0
        return _TimedWork(self, post(t, peer), span)

    def step(self, *a):
        self._timed(self.rec.step, *a)

    def close(self):
        self.rec.close()


class _TimedSpan:
    def __init__(self, timer, span):
        self.timer, self.span = timer, span

    def __enter__(self):
        t0 = time.perf_counter()
        self.span.__enter__()
        self.timer.spent += time.perf_counter() - t0
        return self.span

    def __exit__(self, *exc):
        t0 = time.perf_counter()
        self.span.__exit__(*exc)
        self.timer.spent += time.perf_counter() - t0
        return False


class _TimedWork:
    def __init__(self, timer, work, span):
        self.timer, self.work, self.span = timer, work, span

    def wait(self):
        self.work.wait()
        self.timer._timed(self.timer.rec.complete, self.span)

    def is_completed(self):
        return self.work.is_completed()


class _Null:
    skipped = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def die_with_parent():
    """Ask Linux to kill this rank when train.py dies, so that killing
    train.py alone leaves no rank behind."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def profiler(out, rank, steps):
    """A torch.profiler (CPU) of the whole run whose first step is the
    warmup (unless there is only one), each later step a ProfilerStep#N;
    it writes OUT/rank{rank}.json when the last step ends."""
    from torch.profiler import ProfilerActivity, profile, schedule

    warmup = 1 if steps > 1 else 0
    return profile(activities=[ProfilerActivity.CPU],
                   schedule=schedule(wait=0, warmup=warmup, active=steps - warmup, repeat=1),
                   on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "rank%d.json" % rank)))


def worker(rank, args):
    die_with_parent()
    p, m = args.world, args.microbatches
    torch.set_num_threads(1)
    torch.manual_seed(args.seed * 7919 + rank)
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank, world_size=p,
                            timeout=timedelta(minutes=30))
    if args.no_collector or not args.out:
        rec = NoRecorder()
    else:
        rec = ppprof.Recorder(args.out, rank=rank, stage=rank, job="pp_train", world_size=p, pp=p, tp=1,
                              dp=1, microbatches=m, schedule="1f1b", clock="host", strict=True,
                              watchdog_s=args.watchdog, flush_s=0.2)
    if args.time_collector:
        rec = TimedRecorder(rec)
    skip = None
    if args.skip:
        r, s, mb = (int(v) for v in args.skip.split(":"))
        if r == rank:
            skip = (s, mb)

    model = Stage(rank, p)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    prev, nxt = rank - 1, rank + 1
    first, last = rank == 0, rank == p - 1
    shape = (MBS, SEQ, DIM)
    losses, step_ms = [], []
    sends = []

    def reap():
        # Waits on the sends that already completed, so the trace shows
        # their completion near when it happened.
        keep = []
        for w in sends:
            if w.is_completed():
                w.wait()
            else:
                keep.append(w)
        sends[:] = keep

    prof, label = None, lambda action, mb: contextlib.nullcontext()
    if args.profile:
        prof = profiler(args.profile, rank, args.steps)
        label = lambda action, mb: torch.profiler.record_function("PP:%d%s%d" % (rank, action, mb))

    dist.barrier()
    if prof:
        prof.start()
    for step in range(args.steps):
        t0 = time.perf_counter()
        rec.step(step)
        stash = {}
        step_loss = 0.0
        for action, mb in schedule_1f1b(rank, p, m):
            if skip == (step, mb):
                continue  # the bug: this rank never runs micro-batch mb
            if action == "F":
                if first:
                    x, _ = batch(args.seed, step, mb)
                else:
                    x = torch.empty(shape)
                    reap()
                    with label("RECV_F", mb):
                        rec.irecv(x, prev, step, mb, kind=RECV_F).wait()
                    x.requires_grad_()
                with label("F", mb), rec.forward(step, mb):
                    y = model(x)
                    if last:
                        _, target = batch(args.seed, step, mb)
                        y = Fn.cross_entropy(y.reshape(-1, VOCAB), target.reshape(-1)) / m
                        step_loss += y.item()
                stash[mb] = (x, y)
                if not last:
                    with label("SEND_F", mb):
                        sends.append(rec.isend(y.detach(), nxt, step, mb, kind=SEND_F))
            else:
                x, y = stash.pop(mb)
                if last:
                    grad = None
                else:
                    grad = torch.empty(shape)
                    reap()
                    with label("RECV_B", mb):
                        rec.irecv(grad, nxt, step, mb, kind=RECV_B).wait()
                with label("B", mb), rec.backward(step, mb):
                    y.backward(grad)
                if not first:
                    with label("SEND_B", mb):
                        sends.append(rec.isend(x.grad, prev, step, mb, kind=SEND_B))
        for w in sends:
            w.wait()
        sends.clear()
        with rec.optimizer(step):
            opt.step()
            opt.zero_grad(set_to_none=True)
        dist.barrier()
        step_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(step_loss)
        if prof:
            prof.step()
    if prof:
        prof.stop()
    rec.close()
    if args.summary:
        out = {"rank": rank, "losses": losses, "step_ms": step_ms}
        if args.time_collector:
            out["collector_ms_per_step"] = rec.spent * 1e3 / args.steps
        path = args.summary if last else "%s.rank%d" % (args.summary, rank)
        with open(path, "w") as f:
            json.dump(out, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="trace directory (rank-NNNNN.arrows files); without it, no collector")
    ap.add_argument("--profile", metavar="DIR", help="run under torch.profiler (CPU), actions labelled PP:{stage}{action}{mb}; "
                    "writes DIR/rank{r}.json")
    ap.add_argument("--world", type=int, default=4, help="pipeline stages = processes")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip", help="RANK:STEP:MB: that rank skips that micro-batch (the job hangs)")
    ap.add_argument("--watchdog", type=float, default=60, help="collector watchdog, seconds")
    ap.add_argument("--no-collector", action="store_true", help="train without recording (for overhead)")
    ap.add_argument("--summary", help="write losses and step times (last stage) as JSON here; "
                    "other ranks write SUMMARY.rankN")
    ap.add_argument("--time-collector", action="store_true",
                    help="add up the time spent in collector calls (summary: collector_ms_per_step)")
    args = ap.parse_args()
    if not args.out and not args.profile:
        ap.error("--out or --profile is required")
    if ppprof is None and args.out and not args.no_collector:
        ap.error("the ppprof package is not importable: add collector/python to PYTHONPATH")
    for d in (args.out, args.profile):
        if d:
            os.makedirs(d, exist_ok=True)
    args.store = os.path.join(args.out or args.profile, ".store-%d" % os.getpid())
    if os.path.exists(args.store):
        os.remove(args.store)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, args)) for r in range(args.world)]
    for pr in procs:
        pr.start()
    code = 0
    for pr in procs:
        pr.join()
        code = code or pr.exitcode
    if os.path.exists(args.store):
        os.remove(args.store)
    sys.exit(1 if code else 0)


if __name__ == "__main__":
    main()
