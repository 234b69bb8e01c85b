package arrowv1

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/ppprof/ppprof/trace"
)

// TestDefaults reads a stream with only the required columns and checks
// the documented defaults, the issue_ns fallback included.
func TestDefaults(t *testing.T) {
	data := foreignStream(t, map[string]string{"ppprof.schema": "1", "job": "j", "x.extra": "kept"}, oneBatch, minimalCols()...)
	res, err := read(data, checked(t))
	if err != nil {
		t.Fatal(err)
	}
	want := &trace.Trace{Meta: trace.Meta{Schema: 1, Job: "j", Extra: map[string]string{"x.extra": "kept"}}}
	base := trace.Event{Rank: 2, Stage: 1, MicroBatch: -1, Peer: -1, GroupSeq: trace.NoGroupSeq}
	for _, e := range []struct {
		step, seq, issue, start, end int64
		kind                         trace.Kind
	}{
		{0, 1, 100, 100, 150, trace.F},
		{0, 2, 200, 200, trace.NoTime, trace.B},
		// No issue, start or end: the rank's previous issue time.
		{1, 5, 200, trace.NoTime, trace.NoTime, trace.MustKind("DATA")},
	} {
		ev := base
		ev.Step, ev.Seq, ev.IssueNs, ev.StartNs, ev.EndNs, ev.Kind = e.step, e.seq, e.issue, e.start, e.end, e.kind
		want.Append(ev)
	}
	if d := trace.Diff(want, res.Trace); d != "" {
		t.Fatal(d)
	}
}

// TestNullsTakeDefaults checks that nulls in optional columns read as the
// column's default.
func TestNullsTakeDefaults(t *testing.T) {
	cols := minimalCols()
	cols = withCol(cols, col{"microbatch", arrow.PrimitiveTypes.Int32, ints(3, nil, nil)})
	cols = withCol(cols, col{"peer", arrow.PrimitiveTypes.Int32, ints(nil, 4, nil)})
	cols = withCol(cols, col{"issue_ns", arrow.PrimitiveTypes.Int64, ints(nil, 7, nil)})
	cols = withCol(cols, col{"shape", arrow.BinaryTypes.String, strs(nil, "2x2", nil)})
	cols = withCol(cols, col{"flops", arrow.PrimitiveTypes.Float64, []any{nil, 1.5, nil}})
	cols = withCol(cols, col{"tokens", arrow.PrimitiveTypes.Int64, ints(nil, 9, nil)})
	cols = withCol(cols, col{"group", arrow.BinaryTypes.String, strs("pp", nil, nil)})
	cols = withCol(cols, col{"group_seq", arrow.PrimitiveTypes.Int64, ints(nil, 0, 12)})
	res, err := read(foreignStream(t, v1meta, oneBatch, cols...), checked(t))
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Trace
	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("microbatch[1]", tr.MicroBatch[1], trace.NoMicroBatch)
	check("peer[0]", tr.Peer[0], trace.NoRank)
	check("peer[1]", tr.Peer[1], trace.Rank(4))
	check("issue[0]", tr.IssueNs[0], int64(100))
	check("issue[1]", tr.IssueNs[1], int64(7))
	check("issue[2]", tr.IssueNs[2], int64(7))
	check("shape[0]", tr.Shape[0].String(), "")
	check("shape[1]", tr.Shape[1].String(), "2x2")
	check("flops[2]", tr.Flops[2], 0.0)
	check("tokens[0]", tr.Tokens[0], int64(0))
	check("group[0]", tr.Group[0].String(), "pp")
	check("group[1]", tr.Group[1].String(), "")
	check("group_seq[0]", tr.GroupSeq[0], trace.NoGroupSeq)
	check("group_seq[1]", tr.GroupSeq[1], int64(0))
	check("group_seq[2]", tr.GroupSeq[2], int64(12))
}

// TestStringColumnTypes reads kind, shape and dtype in every accepted
// string layout, with extra columns of other types present.
func TestStringColumnTypes(t *testing.T) {
	kinds := strs("F", "B", "DATA")
	for _, kt := range []arrow.DataType{
		arrow.BinaryTypes.String,
		arrow.BinaryTypes.LargeString,
		arrow.BinaryTypes.StringView,
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String},
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: arrow.BinaryTypes.String},
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint64, ValueType: arrow.BinaryTypes.String},
	} {
		t.Run(kt.String(), func(t *testing.T) {
			cols := withCol(minimalCols(), col{"kind", kt, kinds})
			cols = withCol(cols, col{"shape", kt, strs("4x4", nil, "4x4")})
			cols = withCol(cols, col{"dtype", kt, strs("bf16", "bf16", "")})
			cols = withCol(cols, col{"x_list", arrow.ListOf(arrow.PrimitiveTypes.Int64), []any{nil, nil, nil}})
			cols = withCol(cols, col{"x_view", arrow.BinaryTypes.StringView, strs("a", "long string, not inlined in the view", nil)})
			cols = withCol(cols, col{"x_small", arrow.PrimitiveTypes.Int8, ints(1, 2, 3)})
			res, err := read(foreignStream(t, v1meta, [][2]int{{0, 1}, {1, 3}}, cols...), checked(t))
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Trace
			if tr.Kind[2] != trace.MustKind("DATA") || tr.Shape[0].String() != "4x4" || tr.Shape[1] != 0 || tr.Dtype[1].String() != "bf16" || tr.Dtype[2] != 0 {
				t.Errorf("kinds %v shapes %q dtypes %q", tr.Kind, tr.Shape, tr.Dtype)
			}
			if res.Batches != 2 {
				t.Errorf("batches %d, want 2", res.Batches)
			}
		})
	}
}

// TestInterning checks that equal strings decoded from different rows and
// batches are one id (trace.Str) standing for the string.
func TestInterning(t *testing.T) {
	rng := newRand(1)
	tr := randomTrace(rng, 500, testKinds)
	for i := range tr.Shape {
		tr.Shape[i] = trace.Intern("4096x2x8192")
	}
	res, err := Read(encode(t, writers[1], tr, Options{BatchRows: 100}))
	if err != nil {
		t.Fatal(err)
	}
	want := trace.Intern("4096x2x8192")
	for i, s := range res.Trace.Shape {
		if s != want || s.String() != "4096x2x8192" {
			t.Fatalf("shape of row %d is %d (%q), want %d", i, s, s.String(), want)
		}
	}
}
