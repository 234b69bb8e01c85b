package sim

// channel holds the posted but unmatched sends and receives of one ordered
// (src, dst) rank pair; they match in issue order, as NCCL's do.
type channel struct {
	sends, recvs []ref
	hung         bool // a byte mismatch: nothing on this pair completes any more
}

// channel returns the channel of the ordered rank pair (src, dst).
func (e *engine) channel(src, dst int32) *channel {
	key := int64(src)*int64(len(e.ranks)) + int64(dst)
	ch := e.chans[key]
	if ch == nil {
		ch = &channel{}
		e.chans[key] = ch
	}
	return ch
}

// transfer is a matched send/recv pair whose completion waits for the
// sender's crash-or-not to be known.
type transfer struct {
	send, recv ref
	start, end int64
}

// post queues a send (isSend) or receive x on ch, matching it with the
// oldest unmatched op of the other side if there is one.
func (e *engine) post(ch *channel, x ref, isSend bool) {
	mine, theirs := &ch.recvs, &ch.sends
	if isSend {
		mine, theirs = theirs, mine
	}
	if ch.hung || len(*theirs) == 0 {
		*mine = append(*mine, x)
		return
	}
	y := (*theirs)[0]
	*theirs = (*theirs)[1:]
	if isSend {
		e.match(ch, x, y)
	} else {
		e.match(ch, y, x)
	}
}

// match pairs a send with the receive it meets in issue order. The transfer
// starts when both are posted. Byte counts that differ hang the pair (and
// every later op on it), as NCCL would; a sender that has crashed, or might
// still crash in this step, decides whether the transfer completes.
func (e *engine) match(ch *channel, send, recv ref) {
	so, ro := e.opAt(send), e.opAt(recv)
	start := max(so.issue, ro.issue)
	if dead := e.crashedAt(send, recv); dead != nil {
		// One side is the op its rank died in: the transfer never ends.
		if start <= dead.crashT {
			so.start, ro.start = start, start
		}
		return
	}
	if so.bytes != ro.bytes {
		ch.hung = true
		so.start, ro.start = start, start
		return
	}
	t := transfer{send: send, recv: recv, start: start, end: start + e.cost.transfer(so.bytes)}
	sender := e.ranks[send.rank]
	switch {
	case sender.crashed:
		e.settleAfterCrash(t, sender.crashT)
	case sender.crashPending:
		sender.deferred = append(sender.deferred, t)
	default:
		e.complete(t)
	}
}

// crashedAt returns the rank whose crash op is send or recv, or nil.
func (e *engine) crashedAt(send, recv ref) *rankState {
	for _, x := range [2]ref{send, recv} {
		if r := e.ranks[x.rank]; r.crashed && int(x.op) == r.crashOp {
			return r
		}
	}
	return nil
}

// complete finishes a matched transfer: both rows get its times, the
// receiver resumes at its end, the sender counts one send done.
func (e *engine) complete(t transfer) {
	so, ro := e.opAt(t.send), e.opAt(t.recv)
	so.start, so.end = t.start, t.end
	ro.start, ro.end = t.start, t.end
	s := e.ranks[t.send.rank]
	s.unfinished--
	s.sendEnd = max(s.sendEnd, t.end)
	if s.unfinished == 0 && s.phase == phWaitSends {
		e.wake(s)
	}
	r := e.ranks[t.recv.rank]
	r.waitingRecv = false
	r.t = t.end
	r.pc++
	e.wake(r)
}

// settleAfterCrash completes a transfer whose sender died at crashT if it
// was over by then; otherwise both ops stay pending, started if the
// transfer had begun.
func (e *engine) settleAfterCrash(t transfer, crashT int64) {
	if t.end <= crashT {
		e.complete(t)
		return
	}
	if t.start <= crashT {
		e.opAt(t.send).start = t.start
		e.opAt(t.recv).start = t.start
	}
}

// crash kills r at action in: the action is recorded started and never
// ended, nothing of r is posted any more, and the sends r matched while its
// crash was pending complete only if they were over by now.
func (e *engine) crash(r *rankState, in instr) {
	i := e.record(r, in)
	o := &r.ops[i]
	o.start = r.t
	r.crashed, r.crashPending, r.crashT, r.crashOp = true, false, r.t, i
	r.phase = phCrashed
	for _, d := range r.deferred {
		e.settleAfterCrash(d, r.crashT)
	}
	r.deferred = nil
	// A P2P op the rank died in was posted: it pairs (in order) with its
	// peer's op, which then never completes either.
	me := ref{int32(r.id), int32(i)}
	switch {
	case in.kind.IsSend():
		e.post(e.channel(me.rank, o.peer), me, true)
	case in.kind.IsRecv():
		e.post(e.channel(o.peer, me.rank), me, false)
	}
}

// resolveDeferred is called when no rank can run. Ranks holding deferred
// sends are blocked before their crash action; the deferred transfer that
// ends first completes (the sender cannot crash before it ends: whatever
// lets the sender run again follows from it). It reports whether there was
// one.
func (e *engine) resolveDeferred() bool {
	var best *rankState
	bi := -1
	for _, r := range e.ranks {
		for i, d := range r.deferred {
			if bi < 0 || d.end < best.deferred[bi].end {
				best, bi = r, i
			}
		}
	}
	if bi < 0 {
		return false
	}
	d := best.deferred[bi]
	best.deferred = append(best.deferred[:bi], best.deferred[bi+1:]...)
	e.complete(d)
	return true
}
