package collector

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// TestRecordAndRead records every kind of op with a virtual clock and
// checks the file holds exactly those rows, in seq order, with the
// metadata the Recorder was given.
func TestRecordAndRead(t *testing.T) {
	clk := NewVirtualClock(1000)
	r := newTestRecorder(t, Config{
		Rank: 3, Stage: 1, Pipeline: 1, TPRank: 0, Clock: clk,
		Meta: trace.Meta{Job: "unit", WorldSize: 4, PP: 2, DP: 2, MicroBatches: 2, Schedule: "1f1b"},
	})
	f := r.Begin(Op{Kind: trace.F, Step: 0, MicroBatch: 0, Tokens: 64, Flops: 1e9})
	clk.Advance(10)
	r.EndOn(f, 0, 4096)
	send := r.Issue(Op{Kind: trace.SendF, Step: 0, MicroBatch: 0, Peer: 5, Bytes: 256, Shape: "4x16", Dtype: "fp32"})
	clk.Advance(5)
	recv := r.Issue(Op{Kind: trace.RecvB, Step: 0, MicroBatch: 0, Peer: 5})
	clk.Advance(7)
	r.Complete(send)
	clk.Advance(1)
	r.Complete(recv)
	b := r.Begin(Op{Kind: trace.B, Step: 0, MicroBatch: 0})
	clk.Advance(20)
	r.End(b)
	opt := r.OptimizerBegin(0, 0)
	clk.Advance(3)
	r.OptimizerEnd(opt, true)
	opt = r.OptimizerBegin(1, 0)
	clk.Advance(3)
	r.OptimizerEnd(opt, false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	tr, info, warns := readRank(t, r.Path())
	if len(warns) != 0 || info.Truncated {
		t.Errorf("a closed file reads with warnings %v (truncated %v)", warns, info.Truncated)
	}
	if filepath.Base(r.Path()) != "rank-00003.arrows" {
		t.Errorf("file name %s", filepath.Base(r.Path()))
	}
	m := tr.Meta
	if m.Clock != trace.ClockVirtual || m.Job != "unit" || m.WorldSize != 4 || m.PP != 2 || m.Schedule != "1f1b" || m.DroppedEvents != 0 {
		t.Errorf("metadata %+v", m)
	}
	type want struct {
		kind       string
		peer       trace.Rank
		mb         trace.MicroBatch
		issue, end int64
	}
	wants := []want{
		{"F", -1, 0, 1000, 1010},
		{"SEND_F", 5, 0, 1010, 1022},
		{"RECV_B", 5, 0, 1015, 1023},
		{"B", -1, 0, 1023, 1043},
		{"OPT_SKIP", -1, -1, 1043, 1046},
		{"OPT", -1, -1, 1046, 1049},
	}
	if tr.Len() != len(wants) {
		t.Fatalf("%d rows, want %d: %v", tr.Len(), len(wants), rowsOf(tr))
	}
	for i, w := range wants {
		e := tr.At(i)
		got := want{e.Kind.String(), e.Peer, e.MicroBatch, e.IssueNs, e.EndNs}
		if got != w || e.Seq != int64(i) || e.Rank != 3 || e.Stage != 1 || e.Pipeline != 1 || e.StartNs != e.IssueNs {
			t.Errorf("row %d: %+v, want %+v", i, e, w)
		}
	}
	if e := tr.At(0); e.Tokens != 64 || e.Flops != 1e9 || e.MemBytes != 4096 {
		t.Errorf("F row labels: %+v", e)
	}
	if e := tr.At(1); e.Bytes != 256 || e.Shape != "4x16" || e.Dtype != "fp32" {
		t.Errorf("SEND_F row labels: %+v", e)
	}
	st := r.Stats()
	if st.Recorded != 6 || st.Written != 6 || st.Dropped != 0 || st.Rejected != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestRejected checks that ops that would make an invalid row are refused
// (and counted), so that one bad call cannot make the whole file unreadable.
func TestRejected(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 2})
	bad := []struct {
		op  Op
		p2p bool
		err error
	}{
		{Op{Kind: trace.SendF, Peer: 1}, false, ErrBadKind},
		{Op{Kind: trace.F}, true, ErrBadKind},
		{Op{Kind: trace.Kind(999)}, false, ErrBadKind},
		{Op{Kind: trace.SendF, Peer: -1}, true, ErrBadPeer},
		{Op{Kind: trace.SendF, Peer: 2}, true, ErrBadPeer},
		{Op{Kind: trace.F, Step: -1}, false, ErrBadLabel},
		{Op{Kind: trace.F, MicroBatch: -2}, false, ErrBadLabel},
		{Op{Kind: trace.F, Chunk: -1}, false, ErrBadLabel},
		{Op{Kind: trace.F, Bytes: -1}, false, ErrBadLabel},
		{Op{Kind: trace.F, Flops: -1}, false, ErrBadLabel},
		{Op{Kind: trace.F, Shape: "\xff"}, false, ErrBadLabel},
	}
	for i, c := range bad {
		if err := CheckOp(c.op, 2, c.p2p); !errors.Is(err, c.err) {
			t.Errorf("case %d: CheckOp = %v, want %v", i, err, c.err)
		}
		var s Span
		if c.p2p {
			s = r.Issue(c.op)
		} else {
			s = r.Begin(c.op)
		}
		if s != NoSpan {
			t.Errorf("case %d: recorded an invalid op", i)
		}
		r.End(s) // ending NoSpan is a no-op
	}
	good := r.Begin(Op{Kind: trace.MustKind("DATA"), MicroBatch: -1})
	r.End(good)
	r.End(good) // a second End is ignored
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Rejected != int64(len(bad)) || st.Recorded != 1 {
		t.Errorf("stats %+v", st)
	}
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 1 || tr.Kind[0].String() != "DATA" {
		t.Errorf("rows %v", rowsOf(tr))
	}
}

// TestPendingAtClose: ops in flight at Close are written once, with a null
// end, after the completed ops.
func TestPendingAtClose(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 1, Clock: NewVirtualClock(0)})
	recv := r.Issue(Op{Kind: trace.RecvF, Step: 2, MicroBatch: 7, Peer: 0})
	f := r.Begin(Op{Kind: trace.F, Step: 2, MicroBatch: 6})
	r.End(f)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r.Complete(recv) // after Close: ignored
	if s := r.Begin(Op{Kind: trace.F}); s != NoSpan {
		t.Error("Begin after Close recorded")
	}
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 2 {
		t.Fatalf("rows %v", rowsOf(tr))
	}
	if tr.Kind[0] != trace.RecvF || tr.Completed(0) || tr.Seq[0] != 0 || tr.MicroBatch[0] != 7 {
		t.Errorf("pending recv row %+v", tr.At(0))
	}
	if tr.Kind[1] != trace.F || !tr.Completed(1) {
		t.Errorf("F row %+v", tr.At(1))
	}
}

// TestDropsCounted fills the buffer while the writer is held: the ops
// beyond its capacity are dropped, Begin returns at once, and the count
// reaches the file's dropped_events metadata (patched in place, so it is
// there before Close too).
func TestDropsCounted(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 0, BufferEvents: 16, Clock: NewVirtualClock(0)})
	release := hold(t, r)
	for i := 0; i < 40; i++ {
		r.End(r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)}))
	}
	if st := r.Stats(); st.Recorded != 16 || st.Dropped != 24 {
		t.Fatalf("with the writer held: %+v, want 16 recorded and 24 dropped", st)
	}
	release()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ := readRank(t, r.Path())
	if tr.Len() != 16 || tr.Meta.DroppedEvents != 24 {
		t.Errorf("before Close: %d rows, dropped_events %d; want 16 and 24", tr.Len(), tr.Meta.DroppedEvents)
	}
	// There is room again.
	r.End(r.Begin(Op{Kind: trace.B}))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	tr, _, _ = readRank(t, r.Path())
	if tr.Len() != 17 || tr.Meta.DroppedEvents != 24 {
		t.Errorf("after Close: %d rows, dropped_events %d; want 17 and 24", tr.Len(), tr.Meta.DroppedEvents)
	}
}

// TestAbandonWhenFull: one op that never completes must not stop
// recording. Once the buffer has been three quarters full behind it for
// stuckGrace, it is written as pending and the ops behind it flow again;
// its late End is ignored.
func TestAbandonWhenFull(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 0, BufferEvents: 16, Clock: NewVirtualClock(0)})
	stuck := r.Issue(Op{Kind: trace.SendF, Peer: 1})
	for i := 0; i < 200; i++ {
		s := r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)})
		r.End(s)
		if i%8 == 7 {
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if i == 15 {
			time.Sleep(stuckGrace + 50*time.Millisecond) // the ring is full since the flush above
		}
	}
	r.Complete(stuck)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	if st.Abandoned != 1 {
		t.Errorf("abandoned %d, want 1 (stats %+v)", st.Abandoned, st)
	}
	tr, _, _ := readRank(t, r.Path())
	if uint64(tr.Len()) != st.Recorded || int64(tr.Len())+st.Dropped != 201 {
		t.Errorf("%d rows, stats %+v", tr.Len(), st)
	}
	if tr.Kind[0] != trace.SendF || tr.Completed(0) {
		t.Errorf("the stuck send: %+v", tr.At(0))
	}
	if last := tr.Len() - 1; tr.MicroBatch[last] != 199 || !tr.Completed(last) {
		t.Errorf("recording did not flow again: last row %+v", tr.At(last))
	}
}

// TestSlowOpNotAbandoned: an op in flight at the head of a ring three
// quarters full that completes within stuckGrace (a producer descheduled
// between Begin and End) is written with its times, not abandoned.
func TestSlowOpNotAbandoned(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 0, BufferEvents: 16, Clock: NewVirtualClock(0)})
	slow := r.Begin(Op{Kind: trace.F, MicroBatch: 0})
	for i := 1; i < 14; i++ {
		r.End(r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)}))
	}
	if err := r.Flush(); err != nil { // 14 of 16 slots: the wait begins
		t.Fatal(err)
	}
	r.End(slow)
	for i := 14; i < 40; i++ {
		r.End(r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)}))
		if i%4 == 3 {
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	tr, _, _ := readRank(t, r.Path())
	if st.Abandoned != 0 || st.Dropped != 0 || tr.Len() != 40 {
		t.Fatalf("%d rows, stats %+v; want 40 rows, none abandoned or dropped", tr.Len(), st)
	}
	for i := 0; i < tr.Len(); i++ {
		if !tr.Completed(i) || tr.MicroBatch[i] != trace.MicroBatch(i) {
			t.Errorf("row %d: %+v", i, tr.At(i))
		}
	}
}

// TestConcurrentProducers records from several goroutines: every op is
// written once, seqs are distinct and increasing.
func TestConcurrentProducers(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 0, BufferEvents: 1 << 12, BatchEvents: 64})
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				s := r.Begin(Op{Kind: trace.F, Step: int64(w), MicroBatch: trace.MicroBatch(i)})
				r.End(s)
			}
		}(w)
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	st := r.Stats()
	tr, _, _ := readRank(t, r.Path())
	if uint64(tr.Len()) != st.Recorded || int64(tr.Len())+st.Dropped != workers*each {
		t.Fatalf("%d rows, stats %+v", tr.Len(), st)
	}
	perWorker := map[int64]int{}
	for i := 0; i < tr.Len(); i++ {
		if !tr.Completed(i) {
			t.Fatalf("row %d pending", i)
		}
		if i > 0 && tr.Seq[i] <= tr.Seq[i-1] {
			t.Fatalf("seq not increasing at row %d", i)
		}
		perWorker[tr.Step[i]]++
	}
	if st.Dropped == 0 {
		for w := int64(0); w < workers; w++ {
			if perWorker[w] != each {
				t.Errorf("worker %d: %d rows", w, perWorker[w])
			}
		}
	}
}

// TestBatchesWhileRunning: with small batches, the file holds the
// completed ops before Close; a reader sees a stream not closed yet.
func TestBatchesWhileRunning(t *testing.T) {
	r := newTestRecorder(t, Config{Rank: 0, BatchEvents: 10, FlushInterval: time.Hour})
	for i := 0; i < 35; i++ {
		r.End(r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)}))
	}
	// Batches are written by the writer on its own, each once at least 10
	// events are ready: whatever the interleaving, at most 9 stay behind.
	deadline := time.Now().Add(10 * time.Second)
	for r.Stats().Written < 26 {
		if time.Now().After(deadline) {
			t.Fatalf("batches not written: %+v", r.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	tr, info, warns := readRank(t, r.Path())
	if tr.Len() < 26 || !info.Truncated || len(warns) == 0 || !strings.Contains(warns[0].Message, "not closed") {
		t.Errorf("open file: %d rows, truncated %v, warnings %v", tr.Len(), info.Truncated, warns)
	}
}

// TestCompressionAndFsync: the sink options give a file ppprof reads.
func TestCompressionAndFsync(t *testing.T) {
	for _, c := range []string{"lz4", "zstd"} {
		r := newTestRecorder(t, Config{Rank: 0, Compression: arrowv1.Compression(c), Fsync: true})
		for i := 0; i < 100; i++ {
			r.End(r.Begin(Op{Kind: trace.F, MicroBatch: trace.MicroBatch(i)}))
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if tr, _, _ := readRank(t, r.Path()); tr.Len() != 100 {
			t.Errorf("%s: %d rows", c, tr.Len())
		}
	}
	if _, err := New(Config{Dir: t.TempDir(), Compression: "gzip"}); err == nil {
		t.Error("unknown compression accepted")
	}
}

// TestConfigErrors: bad configurations are refused with a reason.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []Config{
		{},
		{Dir: dir, Rank: -1},
		{Dir: dir, Stage: -1},
		{Dir: dir, BufferEvents: -1},
		{Dir: dir, FlushInterval: -1},
	} {
		if r, err := New(c); err == nil {
			r.Close()
			t.Errorf("config %+v accepted", c)
		}
	}
	// The directory is created.
	sub := filepath.Join(dir, "a", "b")
	r, err := New(Config{Dir: sub, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := os.Stat(filepath.Join(sub, "rank-00000.arrows")); err != nil {
		t.Error(err)
	}
}

// TestDirectoryOfRanks: several ranks' files in one directory open as one
// job with ingest.Open, dropped counts summed.
func TestDirectoryOfRanks(t *testing.T) {
	dir := t.TempDir()
	for rank := 0; rank < 3; rank++ {
		r := newTestRecorder(t, Config{Dir: dir, Rank: trace.Rank(rank), Stage: trace.Stage(rank),
			Meta: trace.Meta{Job: "j", PP: 3, WorldSize: 3}})
		r.End(r.Begin(Op{Kind: trace.F}))
		r.ctl.dropped.Add(int64(rank)) // as if the buffer had overflowed
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ingest.Open([]string{dir}, ingest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Trace.Len() != 3 || res.Trace.Meta.DroppedEvents != 3 || len(res.Warnings) != 0 {
		t.Errorf("%d events, dropped %d, warnings %v", res.Trace.Len(), res.Trace.Meta.DroppedEvents, res.Warnings)
	}
}

func ExampleRecorder() {
	dir, _ := os.MkdirTemp("", "ppprof")
	defer os.RemoveAll(dir)
	r, err := New(Config{Dir: dir, Rank: 0, Stage: 0, Meta: trace.Meta{Job: "example", PP: 1}})
	if err != nil {
		panic(err)
	}
	s := r.Begin(Op{Kind: trace.F, Step: 0, MicroBatch: 0})
	// ... the forward of micro-batch 0 ...
	r.End(s)
	send := r.Issue(Op{Kind: trace.SendF, Step: 0, MicroBatch: 0, Peer: 1, Bytes: 4096})
	// ... the send's wait returns ...
	r.Complete(send)
	if err := r.Close(); err != nil {
		panic(err)
	}
	fmt.Println(filepath.Base(r.Path()))
	// Output: rank-00000.arrows
}

// TestResetTrace: every column is emptied (a column added to the model
// must not keep the previous batch's rows).
func TestResetTrace(t *testing.T) {
	var tr trace.Trace
	tr.Append(trace.Event{Kind: trace.F, GroupSeq: trace.NoGroupSeq, Group: "g"})
	resetTrace(&tr)
	v := reflect.ValueOf(tr)
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.Len() != 0 {
			t.Errorf("column %s keeps %d rows", v.Type().Field(i).Name, f.Len())
		}
	}
}

// TestSlotSize: a slot is two cache lines, as the hot path's cost assumes.
func TestSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(slot{}); n != 128 {
		t.Errorf("slot is %d bytes, want 128", n)
	}
}
