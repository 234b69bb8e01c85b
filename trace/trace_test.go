package trace

import (
	"errors"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func ev(rank Rank, seq int64, k Kind, start, end int64) Event {
	return Event{Rank: rank, Stage: Stage(rank), Kind: k, Seq: seq, MicroBatch: 0,
		IssueNs: start, StartNs: start, EndNs: end, Peer: NoRank, GroupSeq: NoGroupSeq}
}

func TestKindNames(t *testing.T) {
	for k := F; k < numWellKnown; k++ {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", k.String(), got, err, k)
		}
	}
	data, err := ParseKind("DATA")
	if err != nil {
		t.Fatal(err)
	}
	if data < numWellKnown || data.String() != "DATA" || !data.Valid() {
		t.Errorf("DATA = %d %q valid=%v", data, data, data.Valid())
	}
	again, _ := ParseKind("DATA")
	if again != data {
		t.Errorf("interning gave %d then %d", data, again)
	}
	if KindInvalid.Valid() || Kind(60000).Valid() {
		t.Error("invalid kinds reported valid")
	}
	for _, bad := range []string{"", "has space", "<script>", strings.Repeat("x", MaxKindNameLen+1), "é"} {
		if _, err := ParseKind(bad); err == nil {
			t.Errorf("ParseKind(%q) accepted", bad)
		}
	}
	if SendF.Counterpart() != RecvF || RecvB.Counterpart() != SendB || F.Counterpart() != KindInvalid {
		t.Error("Counterpart wrong")
	}
	if !B.IsCompute() || SendB.IsCompute() || !RecvF.IsP2P() || Opt.IsP2P() {
		t.Error("kind classes wrong")
	}
	for _, k := range []Kind{AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Barrier, Reduce, Gather, Scatter, Collective} {
		if !k.IsCollective() || k.IsP2P() || k.IsCompute() {
			t.Errorf("%s: collective %v p2p %v compute %v", k, k.IsCollective(), k.IsP2P(), k.IsCompute())
		}
		if got, _ := ParseKind(k.String()); got != k {
			t.Errorf("ParseKind(%q) = %v", k.String(), got)
		}
	}
	if Opt.IsCollective() || data.IsCollective() || SendF.IsCollective() {
		t.Error("non-collectives reported collective")
	}
}

func TestValidate(t *testing.T) {
	good := func() *Trace {
		tr := &Trace{}
		tr.Append(ev(0, 1, F, 0, 10))
		e := ev(0, 2, SendF, 10, 12)
		e.Peer = 1
		tr.Append(e)
		tr.Append(ev(1, 1, F, 12, 20))
		tr.Append(ev(0, 3, B, 30, NoTime)) // pending: a legal state
		return tr
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("valid trace rejected: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(*Trace)
		column string
		row    int
	}{
		{"negative rank", func(t *Trace) { t.Rank[2] = -1 }, "rank", 2},
		{"seq not increasing", func(t *Trace) { t.Seq[1] = 1 }, "seq", 1},
		{"end before start", func(t *Trace) { t.EndNs[0] = -5 }, "end_ns", 0},
		{"end without start", func(t *Trace) { t.StartNs[0] = NoTime }, "start_ns", 0},
		{"send without peer", func(t *Trace) { t.Peer[1] = NoRank }, "peer", 1},
		{"send to itself", func(t *Trace) { t.Peer[1] = 0 }, "peer", 1},
		{"invalid kind", func(t *Trace) { t.Kind[2] = KindInvalid }, "kind", 2},
		{"stage changes", func(t *Trace) { t.Stage[1] = 5 }, "stage", 1},
		{"bad microbatch", func(t *Trace) { t.MicroBatch[0] = -2 }, "microbatch", 0},
		{"negative bytes", func(t *Trace) { t.Bytes[1] = -1 }, "bytes", 1},
		{"null issue", func(t *Trace) { t.IssueNs[0] = NoTime }, "issue_ns", 0},
		{"bad group_seq", func(t *Trace) { t.GroupSeq[2] = -2 }, "group_seq", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := good()
			c.mutate(tr)
			err := tr.Validate()
			var re *RowError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a *RowError", err)
			}
			if re.Column != c.column || re.Row != c.row {
				t.Errorf("got row %d column %s (%v), want row %d column %s", re.Row, re.Column, err, c.row, c.column)
			}
		})
	}
	withGroup := good()
	withGroup.Group[1], withGroup.GroupSeq[1] = Intern("pp"), 0
	if err := withGroup.Validate(); err != nil {
		t.Errorf("group and group_seq 0 rejected: %v", err)
	}
	for _, col := range []string{"group", "group_seq"} {
		short := good()
		if col == "group" {
			short.Group = short.Group[:1]
		} else {
			short.GroupSeq = short.GroupSeq[:3]
		}
		if err := short.Validate(); err == nil || !strings.Contains(err.Error(), col) {
			t.Errorf("ragged %s: got %v", col, err)
		}
	}
	short := good()
	short.Dtype = short.Dtype[:1]
	if err := short.Validate(); err == nil || !strings.Contains(err.Error(), "dtype") {
		t.Errorf("ragged columns: got %v", err)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	m := Meta{Schema: 1, Job: "j", WorldSize: 8, PP: 4, TP: 1, DP: 2, Virtual: 2, MicroBatches: 16,
		Schedule: "interleaved", Device: "H100", PeakFlops: 989e12, Clock: ClockCUDAEvent,
		ClockOffsetNs: -42, DroppedEvents: 3, Extra: map[string]string{"user.note": "x"}}
	got, err := ParseMeta(m.Map())
	if err != nil {
		t.Fatal(err)
	}
	a, b := &Trace{Meta: m}, &Trace{Meta: got}
	if d := Diff(a, b); d != "" {
		t.Error(d)
	}
	for _, c := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{}, "not a ppprof trace"},
		{map[string]string{KeySchema: "x"}, "not a schema version"},
		{map[string]string{KeySchema: "1", KeyPP: "-3"}, "non-negative"},
		{map[string]string{KeySchema: "1", KeyPeakFlops: "NaN"}, "finite"},
	} {
		if _, err := ParseMeta(c.kv); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseMeta(%v) = %v, want error containing %q", c.kv, err, c.want)
		}
	}
	_, err = ParseMeta(map[string]string{KeySchema: "2.1"})
	var ve *SchemaVersionError
	if !errors.As(err, &ve) || ve.Got != 2 {
		t.Errorf("schema 2.1: got %v, want SchemaVersionError{2}", err)
	}
	if _, err := ParseMeta(map[string]string{KeySchema: "1.7"}); err != nil {
		t.Errorf("minor version refused: %v", err)
	}
}

func TestMerge(t *testing.T) {
	a, b := &Trace{Meta: Meta{Schema: 1, PP: 2, DroppedEvents: 2}}, &Trace{Meta: Meta{Schema: 1, PP: 2, DroppedEvents: 5}}
	b.Append(ev(1, 1, F, 5, 6))
	b.Append(ev(1, 2, B, 7, 9))
	a.Append(ev(0, 1, F, 0, 1))
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 3 || m.Rank[0] != 0 || m.Rank[1] != 1 || m.Seq[2] != 2 {
		t.Errorf("merged rows out of order: ranks %v seqs %v", m.Rank, m.Seq)
	}
	if m.Meta.DroppedEvents != 7 || m.Meta.PP != 2 {
		t.Errorf("merged meta %+v", m.Meta)
	}
	b.Meta.PP = 3
	_, err = Merge(a, b)
	var mc *MetaConflictError
	if !errors.As(err, &mc) || mc.Key != KeyPP || mc.APart != 0 || mc.BPart != 1 {
		t.Errorf("conflict: got %v", err)
	}
}

func TestSortAndSlice(t *testing.T) {
	tr := &Trace{}
	tr.Append(ev(2, 5, F, 0, 1))
	tr.Append(ev(0, 9, F, 0, 1))
	g := ev(2, 1, B, 0, 1)
	g.Group, g.GroupSeq = "pp", 7
	tr.Append(g)
	tr.SortByRankSeq()
	want := []struct {
		r Rank
		s int64
	}{{0, 9}, {2, 1}, {2, 5}}
	for i, w := range want {
		if tr.Rank[i] != w.r || tr.Seq[i] != w.s {
			t.Fatalf("row %d = rank %d seq %d, want %d %d", i, tr.Rank[i], tr.Seq[i], w.r, w.s)
		}
	}
	s := tr.Slice(1, 3)
	if s.Len() != 2 || s.At(0).Kind != B || s.At(0).Group != "pp" || s.At(0).GroupSeq != 7 || s.GroupSeq[1] != NoGroupSeq {
		t.Errorf("slice: %+v", s.At(0))
	}
	var cp Trace
	cp.Grow(2)
	cp.AppendRows(tr, 1, 3)
	if d := Diff(s, &cp); d != "" {
		t.Errorf("AppendRows: %s", d)
	}
	if got := tr.Ranks(); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("Ranks = %v", got)
	}
}

// TestRowBytes: RowBytes is the sum of the columns' element sizes.
func TestRowBytes(t *testing.T) {
	var tr Trace
	tr.Append(Event{})
	v := reflect.ValueOf(tr)
	n := 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice {
			n += int(f.Type().Elem().Size())
		}
	}
	if n != RowBytes {
		t.Errorf("columns take %d bytes a row, RowBytes says %d", n, RowBytes)
	}
}

// TestStepRows: the rows of one step, in order, from runs of several
// ranks; none for a step absent; metadata kept.
func TestStepRows(t *testing.T) {
	tr := &Trace{Meta: Meta{Job: "j"}}
	steps := []int64{0, 0, 1, 1, 2, 0, 1, 1, 2, 1}
	for i, s := range steps {
		tr.Append(Event{Rank: Rank(i / 5), Step: s, Seq: int64(i), Kind: F, MicroBatch: NoMicroBatch, Peer: NoRank, GroupSeq: NoGroupSeq})
	}
	got := tr.StepRows(1)
	if got.Meta.Job != "j" || got.Len() != 5 {
		t.Fatalf("%d rows, job %q: want 5, j", got.Len(), got.Meta.Job)
	}
	for k, want := range []int64{2, 3, 6, 7, 9} {
		if got.Seq[k] != want || got.Step[k] != 1 {
			t.Errorf("row %d: seq %d step %d, want seq %d step 1", k, got.Seq[k], got.Step[k], want)
		}
	}
	if n := tr.StepRows(7).Len(); n != 0 {
		t.Errorf("absent step: %d rows", n)
	}
}

// TestDropRows checks DropRows against the rows kept, one by one, with
// At: random traces and masks (none dropped, all, runs of either), the
// last ones large enough for the columns to be done on every core.
func TestDropRows(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for iter := range 210 {
		n := rng.Intn(300)
		if iter >= 200 {
			n = 1<<16 + rng.Intn(5000)
		}
		tr := randomTrace(rng, n)
		drop := make([]bool, n)
		p := [...]float64{0, 1, 0.05, 0.5, 0.95}[iter%5]
		for i := range drop {
			drop[i] = rng.Float64() < p
		}
		var want []Event
		for i := range n {
			if !drop[i] {
				want = append(want, tr.At(i))
			}
		}
		tr.DropRows(drop)
		if tr.Len() != len(want) {
			t.Fatalf("iteration %d: %d rows, want %d", iter, tr.Len(), len(want))
		}
		for i, e := range want {
			got := tr.At(i)
			if math.Float64bits(got.Flops) == math.Float64bits(e.Flops) {
				got.Flops, e.Flops = 0, 0 // NaN: no FLOPs recorded
			}
			if got != e {
				t.Fatalf("iteration %d, row %d: %+v, want %+v", iter, i, got, e)
			}
		}
		for _, l := range []int{len(tr.Pipeline), len(tr.Stage), len(tr.TPRank), len(tr.Chunk), len(tr.Step), len(tr.MicroBatch),
			len(tr.Kind), len(tr.Seq), len(tr.IssueNs), len(tr.StartNs), len(tr.EndNs), len(tr.Peer), len(tr.Bytes), len(tr.Shape),
			len(tr.Dtype), len(tr.Tokens), len(tr.Flops), len(tr.MemBytes), len(tr.Group), len(tr.GroupSeq)} {
			if l != tr.Len() {
				t.Fatalf("iteration %d: a column of %d rows, the trace %d", iter, l, tr.Len())
			}
		}
	}
}

// BenchmarkDropRows drops every other run of 500 rows of a 4M-row trace
// (what a wrapped Flight Recorder ring's window drop does to a job's
// merged rows), in place; its columns on every core.
func BenchmarkDropRows(b *testing.B) {
	const n = 4 << 20
	base := randomTrace(rand.New(rand.NewSource(1)), n)
	drop := make([]bool, n)
	for i := range drop {
		drop[i] = i/500%2 == 1
	}
	ident := make([]int, n)
	for i := range ident {
		ident[i] = i
	}
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		tr := base.Permute(ident) // a fresh copy of base's rows
		b.StartTimer()
		tr.DropRows(drop)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestValidateTimes: on traces whose other columns are valid, with
// random times (null, equal, out of order, at the extremes),
// ValidateTimes returns what Validate returns, the same row and column.
func TestValidateTimes(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	times := []int64{NoTime, 0, 1, 5, -3, math.MaxInt64, math.MinInt64 + 1}
	for range 3000 {
		tr := &Trace{}
		for i := range 1 + rng.Intn(6) {
			e := ev(Rank(i%2), int64(i), F, 0, 0)
			e.IssueNs, e.StartNs, e.EndNs = times[rng.Intn(len(times))], times[rng.Intn(len(times))], times[rng.Intn(len(times))]
			if rng.Intn(3) > 0 { // mostly valid rows
				e.IssueNs, e.StartNs, e.EndNs = 1, 2, 3
			}
			tr.Append(e)
		}
		want, got := tr.Validate(), tr.ValidateTimes()
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("ValidateTimes %v, Validate %v (issue %v start %v end %v)", got, want, tr.IssueNs, tr.StartNs, tr.EndNs)
		}
	}
}
