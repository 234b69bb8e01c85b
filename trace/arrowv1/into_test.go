package arrowv1

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// sameInto checks that ReadInto of data, into rows of a larger trace at a
// few offsets and with the right and wrong row counts, gives exactly what
// Read gives (result, rows, metadata, error), places the rows when the
// count is right and the read succeeds, and touches no other row.
func sameInto(t *testing.T, name string, data []byte) {
	t.Helper()
	want, werr := Read(data)
	// Read is a function of its input (it once was not: arrow-go
	// byte-swapped big-endian input in place; TestReadLeavesInput).
	if _, again := Read(data); (again == nil) != (werr == nil) || werr != nil && werr.Error() != again.Error() {
		t.Fatalf("%s: Read gives %v, then %v", name, werr, again)
	}
	n, cerr := Rows(data)
	if cerr != nil || werr != nil && n > 1<<16 {
		n = 3 // (a corrupt header may claim any number of rows)
	}
	if werr == nil && int64(want.Trace.Len()) != n {
		t.Fatalf("%s: Read gave %d rows, Rows counted %d", name, want.Trace.Len(), n)
	}
	for _, c := range []struct{ off, n int }{{0, int(n)}, {5, int(n)}, {3, int(n) + 1}, {2, max(int(n)-1, 0)}} {
		what := fmt.Sprintf("%s: into [%d, %d)", name, c.off, c.off+c.n)
		const tail = 4
		dst := MakeRows(c.off + c.n + tail)
		mark := func(i int) {
			dst.Rank[i], dst.Seq[i], dst.Shape[i], dst.Group[i], dst.Flops[i] = -7, -7, trace.Intern("mark"), trace.Intern("mark"), -7
		}
		for i := 0; i < c.off; i++ {
			mark(i)
		}
		for i := c.off + c.n; i < dst.Len(); i++ {
			mark(i)
		}
		res, placed, err := ReadInto(data, dst, c.off, c.n)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("%s: error %v, Read's %v", what, err, werr)
		}
		for i := 0; i < dst.Len(); i++ {
			if i == c.off {
				i += c.n
				if i >= dst.Len() {
					break
				}
			}
			if dst.Rank[i] != -7 || dst.Seq[i] != -7 || dst.Shape[i].String() != "mark" || dst.Group[i].String() != "mark" || dst.Flops[i] != -7 {
				t.Fatalf("%s: row %d outside the range was written", what, i)
			}
		}
		if err != nil {
			if placed || res != nil {
				t.Fatalf("%s: error %v with placed %v, result %v", what, err, placed, res)
			}
			continue
		}
		// (Read's empty columns may be nil or recycled ones.)
		if d := trace.Diff(want.Trace, res.Trace); d != "" || want.Trace.Len() > 0 && !reflect.DeepEqual(want.Trace, res.Trace) {
			t.Fatalf("%s: traces differ: %s", what, d)
		}
		if placed != (c.n == want.Trace.Len()) || placed != IsRows(res.Trace, dst, c.off, c.n) {
			t.Fatalf("%s: placed %v for %d rows", what, placed, want.Trace.Len())
		}
		if placed && c.n > 0 && (cap(res.Trace.Rank) != c.n || cap(res.Trace.Shape) != c.n) {
			t.Fatalf("%s: placed columns reach past their rows", what)
		}
		a, b := *want, *res
		a.Trace, b.Trace = nil, nil
		if a != b {
			t.Fatalf("%s: result %+v, Read's %+v", what, b, a)
		}
	}
}

// TestReadIntoIsRead: ReadInto agrees with Read on what ppprof writes
// (every format, codec and batching), on foreign streams (the checked
// path, then copied into place), and on corrupted and truncated copies.
func TestReadIntoIsRead(t *testing.T) {
	everyEncoding(t, 11, 4, func(name string, _ int, data []byte, _ bool) { sameInto(t, name, data) })
	for name, data := range fuzzSeeds(t) {
		sameInto(t, name, data)
	}
}

// TestReadIntoBadRange: a range the columns do not hold, or a nil trace,
// make ReadInto Read.
func TestReadIntoBadRange(t *testing.T) {
	tr := randomTrace(newRand(3), 20, testKinds)
	data := encode(t, writers[1], tr, Options{BatchRows: 7})
	want, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	short := MakeRows(20)
	short.Flops = short.Flops[:19]
	for _, c := range []struct {
		dst    *trace.Trace
		off, n int
	}{{nil, 0, 20}, {MakeRows(20), -1, 20}, {MakeRows(20), 1, 20}, {MakeRows(20), 0, -1}, {short, 0, 20}} {
		res, placed, err := ReadInto(data, c.dst, c.off, c.n)
		if err != nil || placed || trace.Diff(want.Trace, res.Trace) != "" {
			t.Errorf("off %d n %d: placed %v, err %v", c.off, c.n, placed, err)
		}
	}
}

// FuzzReadInto: ReadInto is Read on any input.
func FuzzReadInto(f *testing.F) {
	// Inputs as FuzzRead takes them (a base encoding and an edit script):
	// raw KB-sized encodings made the fuzzer spend its time minimizing.
	in := newFuzzInputs(f)
	in.add(f)
	f.Fuzz(func(t *testing.T, sel uint64, edits []byte) {
		data, _ := in.input(t, sel, edits)
		sameInto(t, "input", data)
	})
}

// TestMakeRowsInClearsStrings reuses columns whose strings are set, at
// sizes cleared on one core and on several: the rows asked for hold "".
func TestMakeRowsInClearsStrings(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 1 << 16, 3<<16 + 5} {
		old := MakeRows(n + 7)
		for i := range old.Shape {
			old.Shape[i], old.Dtype[i], old.Group[i] = trace.Intern("s"), trace.Intern("d"), trace.Intern("g")
		}
		got := MakeRowsIn(old, n)
		if got.Len() != n {
			t.Fatalf("n %d: %d rows", n, got.Len())
		}
		for i := range n {
			if got.Shape[i] != 0 || got.Dtype[i] != 0 || got.Group[i] != 0 {
				t.Fatalf("n %d: row %d holds %q %q %q", n, i, got.Shape[i], got.Dtype[i], got.Group[i])
			}
		}
	}
}
