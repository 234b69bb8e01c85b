package sim

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/ppprof/ppprof/trace"
)

// Fleet simulates the job c describes, as Run does, one step and one
// pipeline replica at a time, so that a fleet-sized job (thousands of ranks,
// hundreds of millions of events) never has to be held in memory: emit
// receives the rows as they are made, and the caller writes them out.
//
// Each (step, replica) is simulated alone, with the engine Run uses, on a
// one-replica, one-step copy of c whose random draws are seeded by
// FleetSeed(c.Seed, step, replica): replicas have their own jitter and
// sequence lengths. The TP ranks of a stage are copies of its TP rank 0,
// as in Run (the engine draws jitter per stage, so they run in lockstep).
// Steps are joined as in Run: OPT is a barrier over every rank of the job,
// it starts at the latest arrival and lasts OptMs, and the next step starts
// at its end. Without jitter and sequence-length draws (which Run makes
// from one stream for the whole job) the rows are exactly Run's.
//
// emit is called from the calling goroutine, with the rows of one replica
// for one step (every rank of it, in rank order, OPT rows excepted), and
// then, once every replica of the step is done, with the step's OPT rows;
// each rank's rows therefore arrive in seq order. rows is valid until emit
// returns. Global ranks, pipelines, steps, seq and times are the job's, and
// so is rows.Meta (the metadata Run would write).
// Replicas are simulated on up to GOMAXPROCS goroutines; the rows do not
// depend on it.
//
// Faults apply to their step: the faulted rank's TP lane of its replica is
// simulated with them (the other lanes are the replica's healthy copies),
// as Run's ranks are (a TP lane's P2P stays in the lane). When some rank
// never reaches the optimizer step of a step (a fault hung its replica),
// the job is hung: the OPT rows of that step stay posted with no start,
// and no later step runs, as in Run. One difference: a rank that skips its
// optimizer step (OPT_SKIP) starts the next step with the others, OptMs
// after Run would start it. SlowRanks are refused; Stragglers
// apply to their step (every step for Step -1).
// It returns the trace metadata (as Run's) and the number of rows emitted.
func Fleet(c Config, emit func(rows *trace.Trace) error) (trace.Meta, int64, error) {
	c = c.WithDefaults()
	if _, err := c.prepare(); err != nil {
		return trace.Meta{}, 0, err
	}
	if len(c.SlowRanks) > 0 {
		return trace.Meta{}, 0, fmt.Errorf("fleet: slow workers are not supported (use Run)")
	}
	if err := c.Validate(); err != nil {
		return trace.Meta{}, 0, err
	}
	// Faults by (step, replica, TP lane), on the lane's one-replica,
	// one-step job: its rank is the stage, its step 0.
	type lane struct{ step, replica, tp int }
	faults := map[lane][]Fault{}
	for _, f := range c.Faults {
		l := lane{f.Step, f.Rank / c.TP % c.DP, f.Rank % c.TP}
		f.Rank, f.Step = f.Rank/(c.DP*c.TP), 0
		faults[l] = append(faults[l], f)
	}
	meta := trace.Meta{
		Schema: trace.SchemaMajor, Job: c.Job, WorldSize: c.Stages * c.DP * c.TP,
		PP: c.Stages, TP: c.TP, DP: c.DP, Virtual: c.Virtual, MicroBatches: c.MicroBatches,
		Schedule: c.Schedule, Device: c.Device, PeakFlops: c.PeakFlops, Clock: trace.ClockVirtual,
	}
	world := c.Stages * c.DP * c.TP
	seq := make([]int64, world) // next seq of each rank
	optNs := int64(0)
	if c.OptMs > 0 {
		optNs = int64(c.OptMs*1e6 + 0.5)
	}
	var shift int64 // start of the current step, ns
	var total int64
	workers := max(1, min(runtime.GOMAXPROCS(0), c.DP))
	for step := 0; step < c.Steps; step++ {
		opts := &trace.Trace{Meta: meta}
		opts.Grow(world)
		barrier := int64(-1)
		err := inOrder(c.DP, workers, func(d int) ([]*trace.Trace, error) {
			// One run per TP lane that has faults, one for the others.
			lanes := make([]*trace.Trace, c.TP)
			var healthy *trace.Trace
			for tp := range lanes {
				fs := faults[lane{step, d, tp}]
				if len(fs) == 0 && healthy != nil {
					lanes[tp] = healthy
					continue
				}
				local, err := fleetReplica(c, step, d, fs)
				if err != nil {
					return nil, err
				}
				lanes[tp] = local
				if len(fs) == 0 {
					healthy = local
				}
			}
			return lanes, nil
		}, func(d int, lanes []*trace.Trace) error {
			rows := fleetRows(c, lanes, step, d, shift, seq)
			rows.Meta = meta
			// Hold the OPT rows back: their start is the barrier over all
			// replicas.
			keep := 0
			for i := range rows.Len() {
				if k := rows.Kind[i]; k == trace.Opt || k == KindOptSkip {
					barrier = max(barrier, rows.StartNs[i])
					opts.AppendRows(rows, i, i+1)
					continue
				}
				if keep != i {
					moveRow(rows, keep, i)
				}
				keep++
			}
			rows = rows.Slice(0, keep)
			total += int64(rows.Len())
			return emit(rows)
		})
		if err != nil {
			return meta, total, err
		}
		// Every rank posts one optimizer step a step: when one did not,
		// the barrier never completes and the job is hung.
		hung := opts.Len() < world
		for i := range opts.Len() {
			switch {
			case hung:
				opts.StartNs[i], opts.EndNs[i] = trace.NoTime, trace.NoTime
			case opts.Kind[i] == KindOptSkip:
				opts.StartNs[i], opts.EndNs[i] = barrier, barrier
			default:
				opts.StartNs[i], opts.EndNs[i] = barrier, barrier+optNs
			}
		}
		opts.SortByRankSeq()
		total += int64(opts.Len())
		if err := emit(opts); err != nil {
			return meta, total, err
		}
		if hung {
			break
		}
		shift = barrier + optNs
	}
	return meta, total, nil
}

// FleetSeed is the seed of the random draws of replica d in step s of a
// fleet simulation seeded with seed (SplitMix64 of the three).
func FleetSeed(seed int64, step, replica int) int64 {
	x := uint64(seed) ^ uint64(step)<<32 ^ uint64(replica)
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return int64(x ^ x>>31)
}

// fleetReplica simulates replica d of step s alone, with faults (ranks
// and steps of the one-replica job): one TP rank per stage, times from 0,
// seq from 0.
func fleetReplica(c Config, step, d int, faults []Fault) (*trace.Trace, error) {
	one := c
	one.Steps, one.DP, one.TP = 1, 1, 1
	one.Faults = faults
	one.Seed = FleetSeed(c.Seed, step, d)
	one.Stragglers = nil
	for _, s := range c.Stragglers {
		if s.Step == -1 || s.Step == step {
			s.Step = 0
			one.Stragglers = append(one.Stragglers, s)
		}
	}
	return Run(one)
}

// fleetRows turns the rows of one-replica, one-TP-rank, one-step runs
// (lanes[tp], one per TP lane; healthy lanes share one) into the job's:
// global ranks and peers, replica d, step s, times shifted by shift, seq
// continued from seq (which it advances).
func fleetRows(c Config, lanes []*trace.Trace, step, d int, shift int64, seq []int64) *trace.Trace {
	out := &trace.Trace{Meta: lanes[0].Meta}
	out.Grow(lanes[0].Len() * c.TP)
	global := func(stage int32, tp int) trace.Rank {
		return trace.Rank((int(stage)*c.DP+d)*c.TP + tp)
	}
	// Each lane's rows of each stage (its local rank), [lo, hi).
	type span struct{ lo, hi int }
	spans := make([][]span, c.TP)
	for tp, local := range lanes {
		spans[tp] = make([]span, c.Stages)
		for lo := 0; lo < local.Len(); {
			hi := lo
			for hi < local.Len() && local.Rank[hi] == local.Rank[lo] {
				hi++
			}
			spans[tp][local.Stage[lo]] = span{lo, hi}
			lo = hi
		}
	}
	for stage := range c.Stages {
		for tp := range c.TP {
			local, sp := lanes[tp], spans[tp][stage]
			r := global(int32(stage), tp)
			from := out.Len()
			out.AppendRows(local, sp.lo, sp.hi)
			for i := from; i < out.Len(); i++ {
				out.Rank[i] = r
				out.Pipeline[i] = int32(d)
				out.TPRank[i] = int32(tp)
				out.Step[i] = int64(step)
				out.Seq[i] += seq[r]
				out.IssueNs[i] += shift
				if out.StartNs[i] != trace.NoTime {
					out.StartNs[i] += shift
				}
				if out.EndNs[i] != trace.NoTime {
					out.EndNs[i] += shift
				}
				if p := out.Peer[i]; p != trace.NoRank {
					out.Peer[i] = global(int32(p), tp) // one replica, one TP rank: the local rank is the stage
				}
			}
			seq[r] += int64(sp.hi - sp.lo)
		}
	}
	return out
}

// moveRow copies row from of t over row to.
func moveRow(t *trace.Trace, to, from int) {
	t.Rank[to], t.Pipeline[to], t.Stage[to], t.TPRank[to], t.Chunk[to] = t.Rank[from], t.Pipeline[from], t.Stage[from], t.TPRank[from], t.Chunk[from]
	t.Step[to], t.MicroBatch[to], t.Kind[to], t.Seq[to] = t.Step[from], t.MicroBatch[from], t.Kind[from], t.Seq[from]
	t.IssueNs[to], t.StartNs[to], t.EndNs[to], t.Peer[to], t.Bytes[to] = t.IssueNs[from], t.StartNs[from], t.EndNs[from], t.Peer[from], t.Bytes[from]
	t.Shape[to], t.Dtype[to], t.Tokens[to], t.Flops[to], t.MemBytes[to] = t.Shape[from], t.Dtype[from], t.Tokens[from], t.Flops[from], t.MemBytes[from]
	t.Group[to], t.GroupSeq[to] = t.Group[from], t.GroupSeq[from]
}

// inOrder runs produce(k) for k in [0, n) on up to workers goroutines, at most
// 2*workers ahead of consume, and calls consume(k, result) on the calling
// goroutine in order of k. It stops at the first error.
func inOrder[T any](n, workers int, produce func(k int) (T, error), consume func(k int, v T) error) error {
	type result struct {
		v   T
		err error
	}
	slots := make([]chan result, n)
	for k := range slots {
		slots[k] = make(chan result, 1)
	}
	sem := make(chan struct{}, 2*workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				v, err := produce(k)
				slots[k] <- result{v, err}
			}
		}()
	}
	go func() {
		defer close(next)
		for k := range n {
			select {
			case sem <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case next <- k:
			case <-stop:
				return
			}
		}
	}()
	var err error
	for k := range n {
		r := <-slots[k]
		<-sem
		if err = r.err; err == nil {
			err = consume(k, r.v)
		}
		if err != nil {
			break
		}
	}
	close(stop)
	wg.Wait()
	return err
}
