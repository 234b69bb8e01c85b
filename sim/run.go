package sim

import "github.com/ppprof/ppprof/trace"

// KindOptSkip is the free-form kind an optskip fault records instead of OPT.
var KindOptSkip = trace.MustKind("OPT_SKIP")

// Run simulates the job c describes and returns its trace: every rank's
// rows sorted by (rank, seq), times in virtual ns from 0, metadata filled
// in. The same Config always gives the same trace. A faulted run is not an
// error: its trace ends the way the real job would (see the package
// comment). Run returns an error only for an invalid Config.
func Run(c Config) (*trace.Trace, error) {
	c = c.WithDefaults()
	s, err := c.prepare()
	if err != nil {
		return nil, err
	}
	e := newEngine(c, s)
	e.run()
	return e.trace(), nil
}

// trace assembles the rows of every rank, in rank order.
func (e *engine) trace() *trace.Trace {
	c := e.c
	t := &trace.Trace{Meta: trace.Meta{
		Schema: trace.SchemaMajor, Job: c.Job, WorldSize: len(e.ranks),
		PP: c.Stages, TP: c.TP, DP: c.DP, Virtual: c.Virtual, MicroBatches: c.MicroBatches,
		Schedule: c.Schedule, Device: c.Device, PeakFlops: c.PeakFlops, Clock: trace.ClockVirtual,
	}}
	n := 0
	for _, r := range e.ranks {
		n += len(r.ops)
	}
	t.Grow(n)
	for _, r := range e.ranks {
		for i, o := range r.ops {
			t.Append(trace.Event{
				Rank: trace.Rank(r.id), Pipeline: int32(r.pipe), Stage: trace.Stage(r.stage),
				TPRank: int32(r.tp), Chunk: o.chunk, Step: o.step, MicroBatch: trace.MicroBatch(o.mb),
				Kind: o.kind, Seq: int64(i), IssueNs: o.issue, StartNs: o.start, EndNs: o.end,
				Peer: trace.Rank(o.peer), Bytes: o.bytes, Shape: o.shape, Dtype: o.dtype,
				Tokens: o.tokens, Flops: o.flops, GroupSeq: trace.NoGroupSeq,
			})
		}
	}
	return t
}
