// Package schedule builds pipeline schedules (GPipe, 1F1B, interleaved 1F1B,
// ZB-H1) as per-stage ordered action lists and states their theory.
package schedule

import (
	"fmt"

	"github.com/ppprof/ppprof/trace"
)

// The schedule names accepted by New, as on the command line and in the
// trace metadata key "schedule".
const (
	GPipeName       = "gpipe"
	OneFOneBName    = "1f1b"
	InterleavedName = "interleaved"
	ZBH1Name        = "zb-h1"
)

// Names lists the schedules New builds.
var Names = []string{GPipeName, OneFOneBName, InterleavedName, ZBH1Name}

// Action is one step of one stage's program.
type Action struct {
	Kind       trace.Kind // F, B, W, SEND_F, RECV_F, SEND_B, RECV_B
	MicroBatch int        // 0 <= MicroBatch < MicroBatches
	Chunk      int        // model chunk on this stage, 0 <= Chunk < Virtual
	Peer       int        // the peer's stage for P2P actions, -1 otherwise
}

// String renders a in the notation of the golden tests: kind, micro-batch,
// "c" and the chunk when not 0, "@" and the peer stage for P2P actions
// ("F3", "SEND_B2c1@0").
func (a Action) String() string {
	s := fmt.Sprintf("%s%d", a.Kind, a.MicroBatch)
	if a.Chunk != 0 {
		s += fmt.Sprintf("c%d", a.Chunk)
	}
	if a.Peer >= 0 {
		s += fmt.Sprintf("@%d", a.Peer)
	}
	return s
}

// Schedule is a pipeline schedule: for each of Stages stages, the actions it
// issues in order for one step of MicroBatches micro-batches.
//
// P2P actions follow one convention across schedules: a receive comes right
// before the compute that consumes it, a send right after the compute that
// produced it. A send never blocks its stage; a receive blocks until the data
// is there. Validate checks a schedule against these rules, Replay times it,
// TheoreticalBubble and LiveBound state its theory.
type Schedule struct {
	Name          string
	Stages        int        // p, the number of physical stages (pipeline ranks)
	MicroBatches  int        // m
	Virtual       int        // v, model chunks per stage; 1 unless interleaved
	SplitBackward bool       // B is backward-input and W backward-weight
	Actions       [][]Action // Actions[stage], in issue order
}

// New builds the schedule named name for p stages, m micro-batches and v
// chunks per stage (v is ignored, and may be 0, except for interleaved).
func New(name string, p, m, v int) (*Schedule, error) {
	if p < 1 {
		return nil, fmt.Errorf("schedule %s: %d stages (want >= 1)", name, p)
	}
	if m < 1 {
		return nil, fmt.Errorf("schedule %s: %d micro-batches (want >= 1)", name, m)
	}
	switch name {
	case GPipeName:
		return GPipe(p, m), nil
	case OneFOneBName:
		return OneFOneB(p, m), nil
	case InterleavedName:
		return Interleaved(p, m, v)
	case ZBH1Name:
		return ZBH1(p, m)
	}
	return nil, fmt.Errorf("unknown schedule %q (want one of %v)", name, Names)
}

// builder appends a stage's actions with the P2P convention of Schedule.
type builder struct {
	p, v int // stages, chunks per stage
	acts []Action
}

// virtualStage numbers model pieces in pipeline order: chunk c of stage s is
// virtual stage c*p + s.
func (b *builder) virtualStage(stage, chunk int) int { return chunk*b.p + stage }

func (b *builder) last() int { return b.p*b.v - 1 }

// fwd appends RECV_F, F, SEND_F for micro-batch mb of chunk on stage.
func (b *builder) fwd(stage, chunk, mb int) {
	vs := b.virtualStage(stage, chunk)
	if vs > 0 {
		b.acts = append(b.acts, Action{Kind: trace.RecvF, MicroBatch: mb, Chunk: chunk, Peer: (vs - 1) % b.p})
	}
	b.acts = append(b.acts, Action{Kind: trace.F, MicroBatch: mb, Chunk: chunk, Peer: -1})
	if vs < b.last() {
		b.acts = append(b.acts, Action{Kind: trace.SendF, MicroBatch: mb, Chunk: chunk, Peer: (vs + 1) % b.p})
	}
}

// bwd appends RECV_B, B, SEND_B for micro-batch mb of chunk on stage.
func (b *builder) bwd(stage, chunk, mb int) {
	vs := b.virtualStage(stage, chunk)
	if vs < b.last() {
		b.acts = append(b.acts, Action{Kind: trace.RecvB, MicroBatch: mb, Chunk: chunk, Peer: (vs + 1) % b.p})
	}
	b.acts = append(b.acts, Action{Kind: trace.B, MicroBatch: mb, Chunk: chunk, Peer: -1})
	if vs > 0 {
		b.acts = append(b.acts, Action{Kind: trace.SendB, MicroBatch: mb, Chunk: chunk, Peer: (vs - 1) % b.p})
	}
}

// wgt appends W for micro-batch mb of chunk (no communication).
func (b *builder) wgt(chunk, mb int) {
	b.acts = append(b.acts, Action{Kind: trace.W, MicroBatch: mb, Chunk: chunk, Peer: -1})
}

// GPipe runs every forward, then every backward, on each stage.
func GPipe(p, m int) *Schedule {
	s := &Schedule{Name: GPipeName, Stages: p, MicroBatches: m, Virtual: 1, Actions: make([][]Action, p)}
	for st := 0; st < p; st++ {
		b := &builder{p: p, v: 1}
		for mb := 0; mb < m; mb++ {
			b.fwd(st, 0, mb)
		}
		for mb := 0; mb < m; mb++ {
			b.bwd(st, 0, mb)
		}
		s.Actions[st] = b.acts
	}
	return s
}

// OneFOneB is the 1F1B schedule (PipeDream-flush): stage s runs p-s-1
// warm-up forwards, then alternates one forward and one backward, then
// drains the remaining backwards.
func OneFOneB(p, m int) *Schedule {
	s := &Schedule{Name: OneFOneBName, Stages: p, MicroBatches: m, Virtual: 1, Actions: make([][]Action, p)}
	for st := 0; st < p; st++ {
		b := &builder{p: p, v: 1}
		warm := min(p-st-1, m)
		for mb := 0; mb < warm; mb++ {
			b.fwd(st, 0, mb)
		}
		for i := 0; i < m-warm; i++ {
			b.fwd(st, 0, warm+i)
			b.bwd(st, 0, i)
		}
		for mb := m - warm; mb < m; mb++ {
			b.bwd(st, 0, mb)
		}
		s.Actions[st] = b.acts
	}
	return s
}
