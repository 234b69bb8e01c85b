package ingest

import (
	"sort"

	"github.com/ppprof/ppprof/trace"
)

// resolveParts completes what single files cannot, once every file is read:
//
//  1. Flight Recorder pipelines: ranks joined by their pipeline and
//     tensor-parallel groups form one pipeline replica; replicas are
//     numbered by their lowest rank;
//  2. Kineto and plain Chrome traces: ranks of different files that claim
//     the same stage (and TP rank) are different replicas: the k-th such
//     rank, by rank, gets pipeline k;
//  3. pending P2P rows: a direction from the peer's stage (SEND_F when the
//     peer is the next stage, SEND_B when the previous; around the ring for
//     interleaved schedules), or a peer from the stage adjacency (the rank
//     holding the next or previous stage of the same pipeline and TP rank).
//
// What is inferred is said in each file's warnings; rows that cannot be
// completed are left out and counted.
func resolveParts(parts []*part) {
	frPipelines(parts)
	splitReplicas(parts)

	// The place of every rank, from the rows.
	type place struct {
		stage trace.Stage
		pipe  int32
		tp    int32
	}
	places := map[trace.Rank]place{}
	note := func(r trace.Rank, st trace.Stage, pipe, tp int32) {
		if _, ok := places[r]; !ok {
			places[r] = place{st, pipe, tp}
		}
	}
	for _, p := range parts {
		// Once per run of one rank's rows (a file of ppprof's holds one
		// rank): note keeps a rank's first place, so the rows after the
		// first of a run cannot change it.
		t := p.t
		for i := 0; i < t.Len(); i++ {
			if i > 0 && t.Rank[i] == t.Rank[i-1] {
				continue
			}
			note(t.Rank[i], t.Stage[i], t.Pipeline[i], t.TPRank[i])
		}
		if p.fr != nil && p.fr.stage >= 0 {
			note(p.fr.rank, p.fr.stage, p.fr.pipeline, p.fr.tp)
		}
	}
	// A dump's pipeline group also places the ranks whose dumps were not
	// read: the group's i-th rank holds stage i of the same pipeline.
	for _, p := range parts {
		if p.fr == nil {
			continue
		}
		if g, ok := p.fr.groups[p.fr.ppGroup]; ok {
			for i, r := range g.Ranks {
				note(r, trace.Stage(i), p.fr.pipeline, p.fr.tp)
			}
		}
	}
	type slot struct {
		pipe  int32
		stage trace.Stage
		tp    int32
	}
	bySlot := map[slot]trace.Rank{}
	stages := map[int32]int{} // pipeline -> stage count
	for r, pl := range places {
		s := slot{pl.pipe, pl.stage, pl.tp}
		if old, ok := bySlot[s]; !ok || r < old {
			bySlot[s] = r
		}
		stages[pl.pipe] = max(stages[pl.pipe], int(pl.stage)+1)
	}
	for _, p := range parts {
		if p.t.Meta.PP > 0 {
			for pipe := range stages {
				stages[pipe] = max(stages[pipe], p.t.Meta.PP)
			}
		}
	}

	send, recv := trace.MustKind("SEND"), trace.MustKind("RECV")
	for _, p := range parts {
		var byAdjacency, byStages, ambiguous, offPipeline, noPeer, noPlace int
		var drop []bool // pending rows not read
		skip := func(row int) {
			if drop == nil {
				drop = make([]bool, p.t.Len())
			}
			drop[row] = true
		}
		t := p.t
		for _, q := range p.pending {
			e := t.At(q.row)
			n := stages[e.Pipeline]
			switch {
			case e.Kind == trace.KindInvalid: // peer known, direction unknown
				pp, ok := places[e.Peer]
				if !ok {
					noPlace++
					skip(q.row)
					continue
				}
				if pp.pipe != e.Pipeline || n < 2 || pp.stage == e.Stage {
					e.Kind = recv
					if q.send {
						e.Kind = send
					}
					offPipeline++
					break
				}
				d := ((int(pp.stage)-int(e.Stage))%n + n) % n
				var forward bool
				if q.send {
					forward = d <= n/2
				} else {
					forward = d >= n-n/2
				}
				switch {
				case q.send && forward:
					e.Kind = trace.SendF
				case q.send:
					e.Kind = trace.SendB
				case forward:
					e.Kind = trace.RecvF
				default:
					e.Kind = trace.RecvB
				}
				if n == 2 || (d != 1 && d != n-1) {
					ambiguous++
				}
				byStages++
			case e.Peer == trace.NoRank: // direction known, peer unknown
				next := e.Kind == trace.SendF || e.Kind == trace.RecvB
				st := int(e.Stage) - 1
				if next {
					st = int(e.Stage) + 1
				}
				if n > 0 {
					st = (st%n + n) % n
				}
				r, ok := bySlot[slot{e.Pipeline, trace.Stage(st), e.TPRank}]
				if !ok {
					r, ok = bySlot[slot{e.Pipeline, trace.Stage(st), 0}]
				}
				if !ok || r == e.Rank {
					noPeer++
					skip(q.row)
					continue
				}
				e.Peer = r
				byAdjacency++
			}
			// Its row, completed where it lies (its Seq places it).
			t.Kind[q.row], t.Peer[q.row] = e.Kind, e.Peer
		}
		if drop != nil {
			p.t.DropRows(drop)
		}
		p.pending = nil
		if byAdjacency > 0 {
			p.warnf("peers of %s inferred from stage adjacency (the trace names none): the rank of the next or previous stage of the same pipeline", plural(byAdjacency, "P2P op"))
		}
		if byStages > 0 {
			p.warnf("direction (SEND_F/SEND_B, RECV_F/RECV_B) of %s inferred from the peer's stage", plural(byStages, "P2P op"))
		}
		if ambiguous > 0 {
			p.warnf("%s between stages that are not neighbours, or in a 2-stage pipeline: their forward/backward label is a guess (consistent on both sides)", plural(ambiguous, "P2P op"))
		}
		if offPipeline > 0 {
			p.warnf("%s with a peer outside the rank's pipeline (or on its own stage) kept as SEND/RECV", plural(offPipeline, "P2P op"))
		}
		if noPeer > 0 {
			p.warnf("%s without a peer: no rank holds the adjacent stage in the files read (name every rank's file); not read", plural(noPeer, "P2P op"))
		}
		if noPlace > 0 {
			p.warnf("%s whose peer is a rank of no file read: its direction is unknown; not read", plural(noPlace, "P2P op"))
		}
	}
}

// frPipelines numbers the pipeline replicas of Flight Recorder ranks: the
// ranks connected through pipeline groups and TP groups are one replica.
func frPipelines(parts []*part) {
	parent := map[trace.Rank]trace.Rank{}
	var find func(trace.Rank) trace.Rank
	find = func(r trace.Rank) trace.Rank {
		p, ok := parent[r]
		if !ok || p == r {
			parent[r] = r
			return r
		}
		root := find(p)
		parent[r] = root
		return root
	}
	union := func(rs []trace.Rank) {
		for _, r := range rs[1:] {
			a, b := find(rs[0]), find(r)
			if a != b {
				if a < b {
					parent[b] = a
				} else {
					parent[a] = b
				}
			}
		}
	}
	any := false
	for _, p := range parts {
		if p.fr == nil {
			continue
		}
		any = true
		for _, name := range []string{p.fr.ppGroup, p.fr.tpGroup} {
			if g, ok := p.fr.groups[name]; ok && len(g.Ranks) > 0 {
				union(g.Ranks)
			}
		}
		find(p.fr.rank)
	}
	if !any {
		return
	}
	roots := map[trace.Rank]bool{}
	for r := range parent {
		roots[find(r)] = true
	}
	order := make([]trace.Rank, 0, len(roots))
	for r := range roots {
		order = append(order, r)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	index := map[trace.Rank]int32{}
	for i, r := range order {
		index[r] = int32(i)
	}
	for _, p := range parts {
		if p.fr == nil {
			continue
		}
		pipe := index[find(p.fr.rank)]
		p.fr.pipeline = pipe
		for i := range p.t.Pipeline { // the pending rows' too
			p.t.Pipeline[i] = pipe
		}
		if len(order) > 1 {
			p.t.Meta.DP = len(order)
		}
	}
}

// splitReplicas gives ranks of different Kineto or Chrome files that claim
// the same (pipeline, stage, TP rank) their own pipelines, in rank order.
func splitReplicas(parts []*part) {
	type slot struct {
		pipe  int32
		stage trace.Stage
		tp    int32
	}
	claims := map[slot][]trace.Rank{}
	seen := map[trace.Rank]bool{}
	for _, p := range parts {
		if !p.external || p.fr != nil || p.info.Format == FormatMegatron {
			continue
		}
		for i := 0; i < p.t.Len(); i++ {
			r := p.t.Rank[i]
			if seen[r] {
				continue
			}
			seen[r] = true
			s := slot{p.t.Pipeline[i], p.t.Stage[i], p.t.TPRank[i]}
			claims[s] = append(claims[s], r)
		}
	}
	newPipe := map[trace.Rank]int32{}
	for s, rs := range claims {
		if len(rs) < 2 {
			continue
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
		for k, r := range rs {
			newPipe[r] = s.pipe + int32(k)
		}
	}
	if len(newPipe) == 0 {
		return
	}
	for _, p := range parts {
		changed := false
		for i := 0; i < p.t.Len(); i++ {
			if v, ok := newPipe[p.t.Rank[i]]; ok {
				p.t.Pipeline[i] = v
				changed = true
			}
		}
		if changed {
			p.warnf("several files claim the same stage: their ranks are taken as pipeline replicas in rank order")
		}
	}
}
