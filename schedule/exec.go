package schedule

import (
	"fmt"
	"math"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// execution runs a schedule's action lists under NCCL semantics: between an
// ordered pair of stages, sends and receives match in issue order; a send
// never blocks; a receive blocks its stage until its matched send has been
// issued; a compute action needs nothing else. With a cost function it also
// keeps time: compute takes its cost, P2P is free and instantaneous, and a
// receive ends when its stage reaches it or when its matched send was
// issued, whichever is later.
//
// The stages' programs must have passed checkShape (kinds, ranges, peers).
type execution struct {
	s     *Schedule
	cost  func(stage int, a Action) float64 // nil: untimed
	pos   []int                             // next action per stage
	clock []float64                         // per stage
	sends [][]issued                        // [channel], in issue order
	recvd []int                             // [channel], receives matched
	start [][]float64                       // [stage][action], when timed
	end   [][]float64
}

// channel numbers the ordered stage pair from -> to, where to is a
// neighbour of from as checkShape ensures: 2*from for the next stage (also
// when it is the previous one, p <= 2), 2*from+1 for the previous stage.
func (e *execution) channel(from, to int) int {
	if to == (from+1)%e.s.Stages {
		return 2 * from
	}
	return 2*from + 1
}

// issued is one send that has been issued.
type issued struct {
	index int     // action index on the sending stage
	at    float64 // issue time (timed runs)
}

func newExecution(s *Schedule, cost func(stage int, a Action) float64) *execution {
	p := s.Stages
	e := &execution{s: s, cost: cost, pos: make([]int, p), clock: make([]float64, p),
		sends: make([][]issued, 2*p), recvd: make([]int, 2*p)}
	if cost != nil {
		e.start = make([][]float64, p)
		e.end = make([][]float64, p)
		for st, acts := range s.Actions {
			e.start[st] = make([]float64, len(acts))
			e.end[st] = make([]float64, len(acts))
		}
	}
	return e
}

// run executes every stage as far as it can, waking a stage blocked at a
// receive when its channel gets a send, until all finish or none can
// progress; the work is linear in the number of actions. It returns a
// *MismatchError for a matched pair with different labels, a *DeadlockError
// when stages are stuck, an *UnmatchedError for sends never received, or an
// error for a bad cost.
func (e *execution) run() error {
	p := e.s.Stages
	waiting := make([]int, 2*p) // channel -> stage blocked on it, or -1
	for i := range waiting {
		waiting[i] = -1
	}
	ready := make([]int, p)
	for st := range ready {
		ready[st] = st
	}
	for len(ready) > 0 {
		st := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		for e.pos[st] < len(e.s.Actions[st]) {
			a := e.s.Actions[st][e.pos[st]]
			ok, err := e.step(st)
			if err != nil {
				return err
			}
			if !ok {
				waiting[e.channel(a.Peer, st)] = st
				break
			}
			if a.Kind.IsSend() {
				if ch := e.channel(st, a.Peer); waiting[ch] >= 0 {
					ready = append(ready, waiting[ch])
					waiting[ch] = -1
				}
			}
		}
	}
	if err := e.stuck(); err != nil {
		return err
	}
	return e.unmatched()
}

// step runs the next action of stage st; false means it blocks.
func (e *execution) step(st int) (bool, error) {
	i := e.pos[st]
	a := e.s.Actions[st][i]
	t := e.clock[st]
	startT, endT := t, t
	switch {
	case a.Kind.IsCompute():
		if e.cost != nil {
			c := e.cost(st, a)
			if c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
				return false, fmt.Errorf("stage %d action %d %v: cost %v (want finite, >= 0)", st, i, a, c)
			}
			endT = t + c
		}
	case a.Kind.IsSend():
		ch := e.channel(st, a.Peer)
		e.sends[ch] = append(e.sends[ch], issued{index: i, at: t})
	case a.Kind.IsRecv():
		ch := e.channel(a.Peer, st)
		k := e.recvd[ch]
		if k >= len(e.sends[ch]) {
			return false, nil
		}
		snd := e.sends[ch][k]
		if err := e.match(a.Peer, snd.index, st, i, k); err != nil {
			return false, err
		}
		e.recvd[ch]++
		endT = max(t, snd.at)
	}
	if e.cost != nil {
		e.start[st][i], e.end[st][i] = startT, endT
	}
	e.clock[st] = endT
	e.pos[st]++
	return true, nil
}

// match checks that the k-th send from stage from (its action si) and the
// k-th receive on stage to (its action ri) carry the same labels: the
// counterpart kind, the micro-batch and the chunk transition (the receiving
// virtual stage is the sending one plus one for SEND_F, minus one for
// SEND_B).
func (e *execution) match(from, si, to, ri, k int) error {
	snd, rcv := e.s.Actions[from][si], e.s.Actions[to][ri]
	p := e.s.Stages
	vsSnd, vsRcv := snd.Chunk*p+from, rcv.Chunk*p+to
	want := vsSnd + 1
	if snd.Kind == trace.SendB {
		want = vsSnd - 1
	}
	if snd.Kind.Counterpart() != rcv.Kind || snd.MicroBatch != rcv.MicroBatch || vsRcv != want {
		return &MismatchError{From: from, To: to, N: k, SendIndex: si, RecvIndex: ri, Send: snd, Recv: rcv}
	}
	return nil
}

// stuck reports the stages left with actions, all blocked at a receive.
func (e *execution) stuck() error {
	var d DeadlockError
	for st, acts := range e.s.Actions {
		i := e.pos[st]
		if i >= len(acts) {
			continue
		}
		a := acts[i]
		ch := e.channel(a.Peer, st)
		d.Blocked = append(d.Blocked, Blocked{Stage: st, Index: i, Action: a,
			Received: e.recvd[ch], Sent: len(e.sends[ch]), PeerDone: e.pos[a.Peer] >= len(e.s.Actions[a.Peer])})
	}
	if len(d.Blocked) == 0 {
		return nil
	}
	d.Cycle = waitCycle(d.Blocked)
	d.Unmatched = e.pending()
	return &d
}

// waitCycle finds a cycle in the wait-for graph of blocked stages (each
// waits on its receive's peer), starting from its smallest stage.
func waitCycle(bs []Blocked) []int {
	waits := map[int]int{}
	for _, b := range bs {
		waits[b.Stage] = b.Action.Peer
	}
	best := []int(nil)
	for _, b := range bs {
		seen := map[int]int{}
		path := []int{}
		for st := b.Stage; ; {
			if j, ok := seen[st]; ok {
				c := path[j:]
				lo := 0
				for x := range c {
					if c[x] < c[lo] {
						lo = x
					}
				}
				c = append(append([]int{}, c[lo:]...), c[:lo]...)
				if best == nil || c[0] < best[0] {
					best = c
				}
				break
			}
			next, ok := waits[st]
			if !ok {
				break
			}
			seen[st] = len(path)
			path = append(path, st)
			st = next
		}
	}
	return best
}

// pending lists sends issued but not received, by channel then order.
func (e *execution) pending() []Unmatched {
	var out []Unmatched
	for ch, ss := range e.sends {
		for _, snd := range ss[e.recvd[ch]:] {
			from := ch / 2
			a := e.s.Actions[from][snd.index]
			out = append(out, Unmatched{From: from, To: a.Peer, Index: snd.index, Action: a})
		}
	}
	return out
}

// unmatched reports sends never received once every stage has finished.
func (e *execution) unmatched() error {
	if u := e.pending(); len(u) > 0 {
		return &UnmatchedError{Sends: u}
	}
	return nil
}

// Blocked is a stage stuck at a receive: its Index-th action, Action, is
// its (Received+1)-th receive from Action.Peer, which has issued Sent sends
// to it. PeerDone says the peer has finished its program.
type Blocked struct {
	Stage    int
	Index    int
	Action   Action
	Received int
	Sent     int
	PeerDone bool
}

// DeadlockError says no stage can progress while some have actions left:
// every stage in Blocked waits at a receive whose matched send is never
// issued. Cycle is a wait-for cycle of stages (each waits on the next, the
// last on the first), or nil when the waits end at a finished stage.
// Unmatched lists the sends issued but not received when it stopped.
type DeadlockError struct {
	Blocked   []Blocked
	Cycle     []int
	Unmatched []Unmatched
}

// Error names the cycle, each blocked stage's action and the sends in flight.
func (e *DeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("deadlock")
	if len(e.Cycle) > 0 {
		parts := make([]string, 0, len(e.Cycle)+1)
		for _, st := range append(e.Cycle, e.Cycle[0]) {
			parts = append(parts, fmt.Sprint(st))
		}
		fmt.Fprintf(&b, ": wait-for cycle %s", strings.Join(parts, " -> "))
	}
	for i, bl := range e.Blocked {
		sep := ";"
		if i == 0 {
			sep = ":"
		}
		fmt.Fprintf(&b, "%s stage %d stuck at action %d %v (receive %d from stage %d, which ", sep, bl.Stage, bl.Index, bl.Action, bl.Received+1, bl.Action.Peer)
		if bl.PeerDone {
			fmt.Fprintf(&b, "finished after %d sends to it: missing send)", bl.Sent)
		} else {
			fmt.Fprintf(&b, "has issued %d sends to it)", bl.Sent)
		}
	}
	if len(e.Unmatched) > 0 {
		fmt.Fprintf(&b, "; %s", unmatchedString(e.Unmatched))
	}
	return b.String()
}

// Unmatched is a send issued but never received: the Index-th action of
// stage From, sent to stage To.
type Unmatched struct {
	From, To int
	Index    int
	Action   Action
}

// UnmatchedError says every stage finished but some sends were never
// received (a missing receive).
type UnmatchedError struct {
	Sends []Unmatched
}

// Error lists the sends never received.
func (e *UnmatchedError) Error() string { return unmatchedString(e.Sends) }

func unmatchedString(us []Unmatched) string {
	parts := make([]string, 0, len(us))
	for _, u := range us {
		parts = append(parts, fmt.Sprintf("stage %d action %d %v", u.From, u.Index, u.Action))
	}
	return "unmatched sends (never received): " + strings.Join(parts, ", ")
}

// MismatchError says the N-th send (from 0) from stage From to stage To and
// the N-th receive on To from From, matched by issue order as NCCL does,
// carry different labels: kind, micro-batch or chunk transition.
type MismatchError struct {
	From, To             int
	N                    int
	SendIndex, RecvIndex int // action indices on From and To
	Send, Recv           Action
}

// Error names both actions of the mismatched pair.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("order mismatch: send %d from stage %d to stage %d is action %d %v (chunk %d), but receive %d on stage %d is action %d %v (chunk %d)",
		e.N+1, e.From, e.To, e.SendIndex, e.Send, e.Send.Chunk, e.N+1, e.To, e.RecvIndex, e.Recv, e.Recv.Chunk)
}
