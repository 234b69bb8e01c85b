package collector

import (
	"fmt"
	"reflect"
	"runtime"
	"time"

	"github.com/ppprof/ppprof/trace"
)

// writer is the Recorder's background half: it owns the sink and the
// writer-side slot states. One goroutine runs it (Recorder.run).
type writer struct {
	r    *Recorder
	sink *sink
	buf  trace.Trace // final rows taken from the ring, not yet written
	tail trace.Trace // scratch for pending tails

	lastWrite    time.Time
	lastComps    uint64 // completed() at the last change
	lastProgress time.Time
	tailUp       bool      // a pending tail is on disk
	tailNext     uint64    // r.next when it was written
	tailComps    uint64    // completed() when it was written
	stuck        bool      // the ring is three quarters full behind an op in flight
	stuckSince   time.Time // since when
	stuckNext    uint64    // r.next then: ops before it may be abandoned after stuckGrace
	err          error     // first write error; logged once
}

// tick bounds how long the writer sleeps between looks at the ring.
func (r *Recorder) tick() time.Duration {
	t := min(r.cfg.FlushInterval, 50*time.Millisecond)
	if r.cfg.WatchdogTimeout > 0 {
		t = min(t, max(r.cfg.WatchdogTimeout/4, time.Millisecond))
	}
	return max(t, time.Millisecond)
}

// run is the writer goroutine. With a CUDA clock it locks its OS thread and
// makes the device current there, for event queries and re-anchoring.
func (r *Recorder) run(s *sink, started chan<- error) {
	defer close(r.done)
	if r.cuda != nil {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := r.cuda.api.bindThread(); err != nil {
			s.close(&trace.Trace{}, 0)
			started <- err
			return
		}
		r.precreateEvents()
	}
	now := time.Now()
	w := &writer{r: r, sink: s, lastWrite: now, lastProgress: now}
	started <- nil
	t := time.NewTicker(r.tick())
	defer t.Stop()
	for {
		select {
		case <-r.wake:
			w.cycle(false)
		case <-t.C:
			w.cycle(false)
		case req := <-r.reqs:
			switch req.kind {
			case reqFlush:
				w.cycle(true)
				req.reply <- w.err
			case reqDump:
				w.cycle(true)
				w.dump("dump requested")
				req.reply <- w.err
			case reqClose:
				req.reply <- w.finish()
				return
			case reqHold:
				req.reply <- nil
				<-req.hold
			}
		}
	}
}

// precreateEvents creates the events of the first slots ahead of use, so
// the first lap of the ring rarely creates events on the hot path.
func (r *Recorder) precreateEvents() {
	n := min(len(r.dev), 1024)
	for i := 0; i < n; i++ {
		d := &r.dev[i]
		var err error
		if d.startEv, err = r.cuda.api.eventCreate(); err != nil {
			d.startEv = 0
			return
		}
		if d.endEv, err = r.cuda.api.eventCreate(); err != nil {
			d.endEv = 0
			return
		}
	}
}

// cycle is one look at the ring: resolve device times, take final rows,
// write a batch when one is due (or when force), and run the watchdog.
func (w *writer) cycle(force bool) {
	r := w.r
	now := time.Now()
	if r.cuda != nil {
		w.resolve()
		if err := r.cuda.maybeReanchor(); err != nil {
			w.fail(fmt.Errorf("re-anchoring the cuda clock: %w", err))
		}
	}
	w.take(now)
	due := w.buf.Len() >= int(r.batchN) || (w.buf.Len() > 0 && now.Sub(w.lastWrite) >= r.cfg.FlushInterval)
	if force || due {
		w.write()
		w.lastWrite = now
	}
	comps := w.completed()
	if comps != w.lastComps {
		w.lastComps, w.lastProgress = comps, now
	}
	outstanding := r.ctl.head.Load() < r.ctl.next.Load()
	switch {
	case w.tailUp && !outstanding:
		w.check(w.sink.writeTail(&trace.Trace{}))
		w.tailUp = false
	case w.tailUp && (comps != w.tailComps || r.ctl.next.Load() != w.tailNext):
		w.dump("") // things moved: rewrite the tail so it stays true
	case !w.tailUp && outstanding && r.cfg.WatchdogTimeout > 0 && now.Sub(w.lastProgress) >= r.cfg.WatchdogTimeout:
		w.dump(fmt.Sprintf("no op completed for %v", now.Sub(w.lastProgress).Round(time.Millisecond)))
		r.watchdogs.Add(1)
	}
	w.check(w.sink.setDropped(r.ctl.dropped.Load()))
}

// resolve turns the device events of ended ops into host times, in seq
// order from the head, skipping ops whose events are not complete yet.
func (w *writer) resolve() {
	r := w.r
	next := r.ctl.next.Load()
	pending := 0
	for seq := r.ctl.head.Load(); seq < next && pending < 256; seq++ {
		s := &r.slots[seq&r.mask]
		if s.tag.Load() != tagOf(seq, stEnded) {
			continue
		}
		if !w.resolveSlot(s, &r.dev[seq&r.mask]) {
			pending++
			continue
		}
		s.tag.Store(tagOf(seq, stDone))
	}
}

// completed counts the ops taken from the ring or complete in it: it
// changes whenever an op completes, which is what the watchdog watches.
func (w *writer) completed() uint64 {
	r := w.r
	head, next := r.ctl.head.Load(), r.ctl.next.Load()
	n := head
	for seq := head; seq < next; seq++ {
		if r.slots[seq&r.mask].tag.Load() == tagOf(seq, stDone) {
			n++
		}
	}
	return n
}

// resolveSlot reads an ended slot's device times if its events completed.
// On a CUDA error the op keeps its host times.
func (w *writer) resolveSlot(s *slot, d *devSlot) bool {
	api := w.r.cuda.api
	endHost := s.flags&flagEndHost != 0
	ev := d.endEv
	if endHost {
		ev = d.startEv
	}
	done, err := api.eventQuery(ev)
	if err == nil && !done {
		return false
	}
	if err == nil && !endHost {
		done, err = api.eventQuery(d.startEv) // may be on another stream
		if err == nil && !done {
			return false
		}
	}
	var start, end int64
	if err == nil {
		start, err = w.r.cuda.hostTime(d.startEv)
	}
	if err == nil && !endHost {
		end, err = w.r.cuda.hostTime(d.endEv)
	}
	if err != nil {
		w.r.ctl.devErrs.Add(1)
		s.startNs = s.issueNs
		return true
	}
	s.startNs = start
	if !endHost {
		s.endNs = end
	}
	if s.endNs < s.startNs {
		s.endNs = s.startNs // clock mapping jitter across a re-anchor; never an invalid row
	}
	return true
}

// stuckGrace is how long the op at the head must have held back a ring
// three quarters full before it is abandoned. Without it a producer
// descheduled between Begin and End (or a device a little behind the host)
// lost an op that was about to complete: CI saw it with four goroutines on
// two cores.
const stuckGrace = 250 * time.Millisecond

// take moves final rows from the head of the ring into buf and advances
// the head. When the buffer has been three quarters full for stuckGrace
// with the same op in flight at the head, it also takes that op and the
// ops issued before the wait began that are still in flight, as pending
// rows, so that recording never stops for one op that does not complete.
func (w *writer) take(now time.Time) {
	r := w.r
	head, next := r.ctl.head.Load(), r.ctl.next.Load()
	full := func(head uint64) bool { return next-head >= r.size/4*3 }
	for ; head < next; head++ {
		s := &r.slots[head&r.mask]
		tag := s.tag.Load()
		if tag == tagOf(head, stDone) {
			w.buf.Append(w.row(head, s, true))
			continue
		}
		if !full(head) {
			break
		}
		if !w.stuck || head >= w.stuckNext {
			// The wait begins: ops issued until now may be abandoned
			// once it has lasted stuckGrace.
			w.stuck, w.stuckSince, w.stuckNext = true, now, next
			break
		}
		if now.Sub(w.stuckSince) < stuckGrace || !w.abandon(head, s, tag) {
			break
		}
		w.buf.Append(w.row(head, s, false))
		r.abandoned.Add(1)
	}
	if w.stuck && head >= w.stuckNext {
		w.stuck = false
	}
	r.ctl.head.Store(head)
}

// abandon moves an open or ended slot to stAbandoned, so a later End
// leaves it alone. It fails for a slot not published yet or in mid-End.
func (w *writer) abandon(seq uint64, s *slot, tag uint64) bool {
	switch tag {
	case tagOf(seq, stOpen), tagOf(seq, stEnded):
		return s.tag.CompareAndSwap(tag, tagOf(seq, stAbandoned))
	}
	return false
}

// row builds the event of slot s holding seq. complete says the op's end
// times are final; otherwise it is written as pending (null end), with the
// device start time when its start event has completed.
func (w *writer) row(seq uint64, s *slot, complete bool) trace.Event {
	r := w.r
	e := trace.Event{
		Rank:       r.cfg.Rank,
		Pipeline:   r.cfg.Pipeline,
		Stage:      r.cfg.Stage,
		TPRank:     r.cfg.TPRank,
		Chunk:      s.chunk,
		Step:       s.step,
		MicroBatch: s.mb,
		Kind:       s.kind,
		Seq:        int64(seq),
		IssueNs:    s.issueNs,
		StartNs:    s.startNs,
		EndNs:      trace.NoTime,
		Peer:       s.peer,
		Bytes:      s.bytes,
		Tokens:     s.tokens,
		Flops:      s.flops,
		GroupSeq:   trace.NoGroupSeq,
	}
	if s.flags&flagGoStrings != 0 {
		ls := &r.strs[seq&r.mask]
		e.Shape, e.Dtype = ls.shape, ls.dtype
	} else if s.shape != 0 || s.dtype != 0 {
		e.Shape, e.Dtype = labelName(s.shape), labelName(s.dtype)
	}
	if complete {
		e.Kind = s.endKind
		e.EndNs = s.endNs
		e.MemBytes = s.memBytes
		return e
	}
	if s.flags&flagHostOnly == 0 && s.startNs == trace.NoTime {
		ev := r.dev[seq&r.mask].startEv
		if done, err := r.cuda.api.eventQuery(ev); err == nil && done {
			if t, err := r.cuda.hostTime(ev); err == nil {
				e.StartNs = t
			}
		}
	}
	return e
}

// write commits buf as final rows.
func (w *writer) write() {
	if w.buf.Len() == 0 {
		return
	}
	n := w.buf.Len()
	err := w.sink.commit(&w.buf)
	if err == nil {
		w.tailUp = false // commit truncated it
		w.r.written.Add(uint64(n))
		err = w.sink.syncMaybe()
	}
	w.check(err)
	resetTrace(&w.buf)
}

// dump writes the ready rows, then every op not yet final as the pending
// tail, and logs the pending ops when why is not empty.
func (w *writer) dump(why string) {
	r := w.r
	w.write()
	resetTrace(&w.tail)
	head, next := r.ctl.head.Load(), r.ctl.next.Load()
	var pending []int // rows of tail that are pending
	for seq := head; seq < next; seq++ {
		s := &r.slots[seq&r.mask]
		tag := s.tag.Load()
		switch tag {
		case tagOf(seq, stDone):
			w.tail.Append(w.row(seq, s, true))
		case tagOf(seq, stOpen), tagOf(seq, stEnding), tagOf(seq, stEnded):
			pending = append(pending, w.tail.Len())
			w.tail.Append(w.row(seq, s, false))
		}
	}
	err := w.sink.writeTail(&w.tail)
	if err == nil {
		err = w.sink.syncMaybe()
	}
	w.check(err)
	w.tailUp = w.tail.Len() > 0
	w.tailNext, w.tailComps = next, w.completed()
	if why != "" {
		w.report(why, pending)
	}
}

// report logs the pending ops of the tail just written.
func (w *writer) report(why string, pending []int) {
	r := w.r
	fmt.Fprintf(r.log, "ppprof: rank %d (stage %d): %s; %d op(s) pending, written to %s\n",
		r.cfg.Rank, r.cfg.Stage, why, len(pending), r.path)
	now := r.clock.Now()
	for i, row := range pending {
		if i == 8 {
			fmt.Fprintf(r.log, "  ... and %d more\n", len(pending)-i)
			break
		}
		e := w.tail.At(row)
		peer := ""
		if e.Peer != trace.NoRank {
			peer = fmt.Sprintf(" peer %d", e.Peer)
		}
		fmt.Fprintf(r.log, "  seq %d %s%s step %d mb %d chunk %d, issued %v ago\n",
			e.Seq, e.Kind, peer, e.Step, e.MicroBatch, e.Chunk, time.Duration(now-e.IssueNs).Round(time.Millisecond))
	}
}

// finish is Close's writer half: every op still in the ring is written
// (in flight: as pending), then the end-of-stream marker.
func (w *writer) finish() error {
	r := w.r
	if r.cuda != nil {
		// Give ended ops a moment to complete on the device.
		deadline := time.Now().Add(time.Second)
		for {
			w.resolve()
			if !w.anyEnded() || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	w.take(time.Now())
	head, next := r.ctl.head.Load(), r.ctl.next.Load()
	for seq := head; seq < next; seq++ {
		s := &r.slots[seq&r.mask]
		for spins := 0; ; spins++ {
			tag := s.tag.Load()
			if tag == tagOf(seq, stDone) {
				w.buf.Append(w.row(seq, s, true))
				break
			}
			if w.abandon(seq, s, tag) {
				w.buf.Append(w.row(seq, s, false))
				break
			}
			// Mid-End, or claimed and not yet published: it takes
			// nanoseconds, unless the producer was descheduled.
			if spins > 10000 {
				r.ctl.dropped.Add(1)
				break
			}
			runtime.Gosched()
		}
	}
	r.ctl.head.Store(next)
	n := w.buf.Len()
	err := w.sink.close(&w.buf, r.ctl.dropped.Load())
	if err == nil {
		r.written.Add(uint64(n))
	}
	for r.ctl.inflight.Load() != 0 {
		runtime.Gosched() // a hot-path call that began before Close
	}
	if r.cuda != nil {
		for i := range r.dev {
			d := &r.dev[i]
			if d.startEv != 0 {
				r.cuda.api.eventDestroy(d.startEv)
			}
			if d.endEv != 0 {
				r.cuda.api.eventDestroy(d.endEv)
			}
			d.startEv, d.endEv = 0, 0
		}
	}
	r.mem.free()
	if err != nil {
		return fmt.Errorf("collector: closing %s: %w", r.path, err)
	}
	if w.err != nil {
		return fmt.Errorf("collector: writing %s: %w", r.path, w.err)
	}
	return nil
}

func (w *writer) anyEnded() bool {
	r := w.r
	for seq, next := r.ctl.head.Load(), r.ctl.next.Load(); seq < next; seq++ {
		if r.slots[seq&r.mask].tag.Load() == tagOf(seq, stEnded) {
			return true
		}
	}
	return false
}

// check records a write error; the first one is logged.
func (w *writer) check(err error) {
	if err != nil {
		w.fail(err)
	}
}

func (w *writer) fail(err error) {
	if w.err == nil {
		w.err = err
		fmt.Fprintf(w.r.log, "ppprof: rank %d: %v (recording continues; later writes may fail)\n", w.r.cfg.Rank, err)
	}
}

// resetTrace empties t, keeping its columns' capacity. It resets every
// slice field, so a column added to the model is not left behind.
func resetTrace(t *trace.Trace) {
	v := reflect.ValueOf(t).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Slice {
			f.SetLen(0)
		}
	}
}
