package ingest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// TestRoundTrip writes random valid traces as CSV and JSONL and reads them
// back: the rows must come back exactly.
func TestRoundTrip(t *testing.T) {
	codecs := []struct {
		name  string
		write func(*bytes.Buffer, *trace.Trace) error
		read  func(*bytes.Buffer) (*trace.Trace, error)
	}{
		{"csv", func(b *bytes.Buffer, t *trace.Trace) error { return WriteCSV(b, t) }, func(b *bytes.Buffer) (*trace.Trace, error) { return ReadCSV(b) }},
		{"jsonl", func(b *bytes.Buffer, t *trace.Trace) error { return WriteJSONL(b, t) }, func(b *bytes.Buffer) (*trace.Trace, error) { return ReadJSONL(b) }},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 200; i++ {
				want := randomTrace(rng, 1+rng.IntN(4), 30)
				var buf bytes.Buffer
				if err := c.write(&buf, want); err != nil {
					t.Fatal(err)
				}
				text := buf.String()
				got, err := c.read(&buf)
				if err != nil {
					t.Fatalf("trace %d: %v\n%s", i, err, text)
				}
				if d := trace.Diff(want, got); d != "" {
					t.Fatalf("trace %d: %s\n%s", i, d, text)
				}
			}
		})
	}
}

// TestTextOrder checks that rows listed out of (rank, seq) order come back
// ordered, and that a repeated seq names both lines.
func TestTextOrder(t *testing.T) {
	in := "kind,rank,stage,step,seq,start_ns,end_ns\n" +
		"F,1,1,0,2,20,30\n" +
		"F,0,0,0,5,10,20\n" +
		"B,1,1,0,1,0,10\n"
	got, err := ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for i := 0; i < got.Len(); i++ {
		order = append(order, int64(got.Rank[i])*100+got.Seq[i])
	}
	if want := []int64{5, 101, 102}; !equalInts(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	_, err = ReadCSV(strings.NewReader(in + "W,1,1,0,2,30,40\n"))
	want := `line 5, column "seq": rank 1: seq 2 again (also on line 2): seq must be unique per rank`
	if err == nil || err.Error() != want {
		t.Errorf("duplicate seq: got %v, want %s", err, want)
	}
	var re *trace.RowError
	if !errors.As(err, &re) {
		t.Errorf("duplicate seq: %T does not unwrap to *trace.RowError", err)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReadCSVErrors checks that every kind of bad CSV is an error naming
// the line and, where one is at fault, the column.
func TestReadCSVErrors(t *testing.T) {
	const hdr = "rank,stage,step,kind,seq,start_ns,end_ns\n"
	tests := []struct{ name, in, want string }{
		{"empty", "", "line 1: no header row"},
		{"missing column", "rank,stage,step,kind,start_ns\n", `line 1: header lacks required column(s) "seq", "end_ns" (header: "rank,stage,step,kind,start_ns")`},
		{"duplicate column", "rank,stage,step,kind,seq,start_ns,end_ns,rank\n", `line 1: header names column "rank" twice (fields 1 and 8)`},
		{"not an integer", hdr + "0,0,0,F,0,0,10\n0,0,0,F,1,10,abc\n", `line 3, column "end_ns": "abc" is not an integer`},
		{"float in int column", hdr + "0,0,0,F,0,0,1.5\n", `line 2, column "end_ns": "1.5" is not an integer`},
		{"int32 overflow", hdr + "3000000000,0,0,F,0,0,1\n", `line 2, column "rank": "3000000000" is out of range for int32`},
		{"empty required", hdr + ",0,0,F,0,0,1\n", `line 2, column "rank": null, but the column is required`},
		{"empty kind", hdr + "0,0,0,,0,0,1\n", `line 2, column "kind": null, but the column is required`},
		{"bad kind", hdr + "0,0,0,F F,0,0,1\n", `line 2, column "kind": kind "F F": character ' ' not allowed`},
		{"bad flops", "rank,stage,step,kind,seq,start_ns,end_ns,flops\n0,0,0,F,0,0,1,lots\n", `line 2, column "flops": "lots" is not a number`},
		{"infinite flops", "rank,stage,step,kind,seq,start_ns,end_ns,flops\n0,0,0,F,0,0,1,1e999\n", `line 2, column "flops": "1e999" is not a finite number`},
		{"no time at all", hdr + "0,0,0,F,0,,\n", `line 2, column "issue_ns": null, and start_ns and end_ns are null too: no time to take the issue time from`},
		{"end before start", hdr + "0,0,0,F,0,0,10\n0,0,0,F,1,30,20\n", `line 3, column "end_ns": rank 0: end 20 before start 30`},
		{"end without start", hdr + "0,0,0,F,0,,20\n", `line 2, column "start_ns": rank 0: null start with end 20: an op cannot end without starting`},
		{"send without peer", hdr + "0,0,0,SEND_F,0,0,1\n", `line 2, column "peer": rank 0: SEND_F without a peer`},
		{"stage changes", hdr + "0,0,0,F,0,0,1\n0,1,0,F,1,1,2\n", `line 3, column "stage": rank 0: stage 1, but the rank's earlier rows say stage 0`},
		{"field count", hdr + "0,0,0,F,0,0\n", `line 2: wrong number of fields (the header has a different number)`},
		{"stray quote", hdr + "0,0,0,F,0,\"0\"x,1\n", `line 2: a quoted field is not closed, or has a stray '"' inside`},
		{"open quote", hdr + "0,0,0,F,0,0,\"1\n", `line 2: a quoted field is not closed, or has a stray '"' inside`},
		{"bare quote", hdr + "0,0,0,F\"x,0,0,1\n", `line 2: bare " in non-quoted-field`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadCSV(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("no error; read %d events", got.Len())
			}
			if err.Error() != tc.want {
				t.Errorf("got  %s\nwant %s", err, tc.want)
			}
		})
	}
}

// TestReadJSONLErrors checks that bad JSONL is an error naming the line and
// column.
func TestReadJSONLErrors(t *testing.T) {
	const ok = `{"rank":0,"stage":0,"step":0,"kind":"F","seq":0,"start_ns":0,"end_ns":1}` + "\n"
	tests := []struct{ name, in, want string }{
		{"syntax", ok + "\n" + `{"rank":0,` + "\n", `line 3: invalid JSON: the line ends inside a JSON value`},
		{"bad token", `{"rank":0,}` + "\n", `line 1: invalid JSON: invalid character '}' looking for beginning of object key string (at byte 11 of the line)`},
		{"array", "[1,2]\n", `line 1: want a JSON object, got an array`},
		{"two values", ok[:len(ok)-1] + " {}\n", `line 1: more than one JSON value on the line (JSONL holds one object per line)`},
		{"missing required", `{"rank":0,"stage":0,"kind":"F","seq":0}`, `line 1, column "step": missing, but the column is required`},
		{"null required", `{"rank":null,"stage":0,"step":0,"kind":"F","seq":0,"start_ns":0}`, `line 1, column "rank": null, but the column is required`},
		{"string not int", `{"rank":"zero","stage":0,"step":0,"kind":"F","seq":0,"start_ns":0}`, `line 1, column "rank": "zero" is not an integer`},
		{"float not int", `{"rank":0,"stage":0,"step":0,"kind":"F","seq":0,"start_ns":1.5}`, `line 1, column "start_ns": "1.5" is not an integer`},
		{"bool", `{"rank":0,"stage":0,"step":true,"kind":"F","seq":0,"start_ns":0}`, `line 1, column "step": want an integer, got true`},
		{"number kind", `{"rank":0,"stage":0,"step":0,"kind":3,"seq":0,"start_ns":0}`, `line 1, column "kind": want a string, got the number 3`},
		{"object shape", `{"rank":0,"stage":0,"step":0,"kind":"F","seq":0,"start_ns":0,"shape":{}}`, `line 1, column "shape": want a string, got an object`},
		{"huge", `{"rank":0,"stage":0,"step":0,"kind":"F","seq":9223372036854775808,"start_ns":0}`, `line 1, column "seq": "9223372036854775808" is out of range for int64`},
		{"validate", ok + `{"rank":0,"stage":0,"step":0,"kind":"F","seq":1,"start_ns":5,"end_ns":4}`, `line 2, column "end_ns": rank 0: end 4 before start 5`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadJSONL(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("no error; read %d events", got.Len())
			}
			if err.Error() != tc.want {
				t.Errorf("got  %s\nwant %s", err, tc.want)
			}
		})
	}
}

// TestJSONLExact checks that int64 values beyond float64's 53 bits, and
// integers written as strings, are read exactly, and that null and missing
// times are null.
func TestJSONLExact(t *testing.T) {
	in := `{"rank":0,"stage":0,"step":0,"kind":"F","seq":9007199254740993,"issue_ns":"9223372036854775807","start_ns":null}` + "\n" +
		`{"rank":0,"stage":0,"step":0,"kind":"F","seq":9007199254740995,"issue_ns":1}` + "\n"
	got, err := ReadJSONL(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq[0] != 9007199254740993 || got.IssueNs[0] != 9223372036854775807 {
		t.Errorf("seq %d issue %d: not exact", got.Seq[0], got.IssueNs[0])
	}
	for i := 0; i < 2; i++ {
		if got.StartNs[i] != trace.NoTime || got.EndNs[i] != trace.NoTime {
			t.Errorf("row %d: start %d end %d, want null", i, got.StartNs[i], got.EndNs[i])
		}
	}
}

// TestGPipe2Fixture reads the hand-made 2-stage GPipe fixture in both text
// formats and checks the numbers its README states.
func TestGPipe2Fixture(t *testing.T) {
	csvData, err := os.ReadFile("testdata/gpipe2.csv")
	if err != nil {
		t.Fatal(err)
	}
	fromCSV, err := ReadCSV(bytes.NewReader(csvData))
	if err != nil {
		t.Fatal(err)
	}
	jsonData, err := os.ReadFile("testdata/gpipe2.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	fromJSONL, err := ReadJSONL(bytes.NewReader(jsonData))
	if err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(fromCSV, fromJSONL); d != "" {
		t.Fatalf("csv and jsonl twins differ: %s", d)
	}
	tr := fromCSV
	if tr.Len() != 18 {
		t.Fatalf("%d events, want 18", tr.Len())
	}
	busy := map[trace.Stage]int64{}
	var first, last int64 = 1 << 62, 0
	for i := 0; i < tr.Len(); i++ {
		if tr.IssueNs[i] != tr.StartNs[i] {
			t.Errorf("row %d: issue %d, want start %d (default)", i, tr.IssueNs[i], tr.StartNs[i])
		}
		if tr.Stage[i] != trace.Stage(tr.Rank[i]) {
			t.Errorf("row %d: rank %d stage %d", i, tr.Rank[i], tr.Stage[i])
		}
		k := tr.Kind[i]
		if k == trace.Opt {
			if tr.MicroBatch[i] != trace.NoMicroBatch || tr.Peer[i] != trace.NoRank {
				t.Errorf("row %d: OPT with micro-batch %d peer %d", i, tr.MicroBatch[i], tr.Peer[i])
			}
			continue
		}
		first, last = min(first, tr.StartNs[i]), max(last, tr.EndNs[i])
		if k.IsCompute() {
			busy[tr.Stage[i]] += tr.EndNs[i] - tr.StartNs[i]
		}
	}
	if busy[0] != 6e6 || busy[1] != 6e6 {
		t.Errorf("busy %v, want 6 ms per stage", busy)
	}
	if first != 0 || last != 9e6 {
		t.Errorf("step window %d..%d, want 0..9 ms", first, last)
	}
}

// TestHang2Fixture reads the hung fixture: pending ops have null ends, the
// op never started has a null start and keeps its issue time.
func TestHang2Fixture(t *testing.T) {
	f, err := os.Open("testdata/hang2.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for i := 0; i < tr.Len(); i++ {
		if !tr.Completed(i) {
			pending = append(pending, tr.Kind[i].String())
		}
	}
	if strings.Join(pending, " ") != "SEND_F SEND_B" {
		t.Errorf("pending %v, want [SEND_F SEND_B]", pending)
	}
	last := tr.Len() - 1
	if tr.Started(last) || tr.IssueNs[last] != 4e6 {
		t.Errorf("last row: started %v issue %d, want never started, issued at 4 ms", tr.Started(last), tr.IssueNs[last])
	}
}
