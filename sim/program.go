package sim

import (
	"slices"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// instr is one action of a rank's program for one step: a schedule action
// plus what the faults did to it.
type instr struct {
	act   int32 // index of the action in its stage's schedule (the jitter key)
	kind  trace.Kind
	mb    int32
	chunk int32
	peer  int32 // the peer's stage for P2P actions, -1 otherwise
	flags uint8
}

const (
	flagCrash    uint8 = 1 << iota // the rank dies at this action
	flagBadShape                   // a send with a wrong shape
	flagBadDtype                   // a send with a wrong dtype
)

// basePrograms turns each stage's schedule into instructions.
func basePrograms(s *schedule.Schedule) [][]instr {
	out := make([][]instr, len(s.Actions))
	for st, acts := range s.Actions {
		prog := make([]instr, len(acts))
		for i, a := range acts {
			prog[i] = instr{act: int32(i), kind: a.Kind, mb: int32(a.MicroBatch), chunk: int32(a.Chunk), peer: int32(a.Peer)}
		}
		out[st] = prog
	}
	return out
}

// faultIndex holds a Config's faults by where they strike.
type faultIndex struct {
	inStep  map[[2]int][]Fault // (rank, step) -> skip, shape, dtype, crash, reorder
	exit    map[int]int        // rank -> first step it does not run
	optSkip map[[2]int]bool    // (rank, step) -> records OPT_SKIP
}

// indexFaults sorts fs by where they strike.
func indexFaults(fs []Fault) faultIndex {
	ix := faultIndex{inStep: map[[2]int][]Fault{}, exit: map[int]int{}, optSkip: map[[2]int]bool{}}
	for _, f := range fs {
		key := [2]int{f.Rank, f.Step}
		switch f.Kind {
		case FaultExit:
			if s, ok := ix.exit[f.Rank]; !ok || f.Step < s {
				ix.exit[f.Rank] = f.Step
			}
		case FaultOptSkip:
			ix.optSkip[key] = true
		default:
			ix.inStep[key] = append(ix.inStep[key], f)
		}
	}
	return ix
}

// applyFaults returns base as rank's program for a step with faults fs
// applied, and whether it holds an action flagged to crash. base is not
// modified. Order: skips drop actions, reorders move sends, then shape and
// dtype flag sends and crash flags the first remaining action of its
// micro-batch.
func applyFaults(base []instr, fs []Fault) ([]instr, bool) {
	if len(fs) == 0 {
		return base, false
	}
	prog := slices.Clone(base)
	for _, f := range fs {
		if f.Kind == FaultSkip {
			prog = slices.DeleteFunc(prog, func(in instr) bool { return int(in.mb) == f.MicroBatch })
		}
	}
	for _, f := range fs {
		if f.Kind == FaultReorder {
			prog = reorderSends(prog, int32(f.MicroBatch))
		}
	}
	crash := false
	for _, f := range fs {
		for i := range prog {
			in := &prog[i]
			if int(in.mb) != f.MicroBatch {
				continue
			}
			switch {
			case f.Kind == FaultShape && in.kind.IsSend():
				in.flags |= flagBadShape
			case f.Kind == FaultDtype && in.kind.IsSend():
				in.flags |= flagBadDtype
			}
		}
		if f.Kind == FaultCrash {
			if i := slices.IndexFunc(prog, func(in instr) bool { return int(in.mb) == f.MicroBatch }); i >= 0 {
				prog[i].flags |= flagCrash
				crash = true
			}
		}
	}
	return prog, crash
}

// reorderSends moves each send of micro-batch mb to just after the send of
// mb+1 of the same kind, chunk and peer, when there is one later in prog.
func reorderSends(prog []instr, mb int32) []instr {
	type key struct {
		kind        trace.Kind
		chunk, peer int32
	}
	var keys []key
	for _, in := range prog {
		if in.mb == mb && in.kind.IsSend() {
			keys = append(keys, key{in.kind, in.chunk, in.peer})
		}
	}
	for _, k := range keys {
		match := func(want int32) func(instr) bool {
			return func(in instr) bool {
				return in.mb == want && in.kind == k.kind && in.chunk == k.chunk && in.peer == k.peer
			}
		}
		i := slices.IndexFunc(prog, match(mb))
		j := slices.IndexFunc(prog, match(mb+1))
		if i < 0 || j < i {
			continue
		}
		moved := prog[i]
		copy(prog[i:j], prog[i+1:j+1])
		prog[j] = moved
	}
	return prog
}
