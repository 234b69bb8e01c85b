package trace

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"unsafe"
)

// TestStr: the zero Str is "", equal strings are one id, ids give their
// strings back, on many goroutines at once; JSON carries the string.
func TestStr(t *testing.T) {
	if Intern("") != 0 || Str(0).String() != "" || InternBytes(nil) != 0 {
		t.Fatal(`"" is not the zero Str`)
	}
	a, b := Intern("4096x1x8192"), InternBytes([]byte("4096x1x8192"))
	if a == 0 || a != b || a.String() != "4096x1x8192" {
		t.Fatalf("Intern %d, InternBytes %d, String %q", a, b, a.String())
	}
	if c := Intern("bf16"); c == a || c.String() != "bf16" {
		t.Fatalf("two strings, ids %d and %d", a, c)
	}
	if s := Str(1 << 31).String(); s != "" {
		t.Fatalf("an id never given out reads %q", s)
	}

	// Goroutines interning overlapping sets of new strings: every string
	// one id, whoever met it first.
	const workers, per = 8, 500
	ids := make([][]Str, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				s := fmt.Sprintf("str-test-%d", (i*7+w*per/2)%per)
				ids[w] = append(ids[w], Intern(s))
				if got := ids[w][i].String(); got != s {
					t.Errorf("worker %d: %q came back as %q", w, s, got)
				}
			}
		})
	}
	wg.Wait()
	seen := map[string]Str{}
	for w := range workers {
		for i, id := range ids[w] {
			s := fmt.Sprintf("str-test-%d", (i*7+w*per/2)%per)
			if prev, ok := seen[s]; ok && prev != id {
				t.Fatalf("%q has ids %d and %d", s, prev, id)
			}
			seen[s] = id
		}
	}

	type row struct{ Shape Str }
	out, err := json.Marshal(row{a})
	if err != nil || string(out) != `{"Shape":"4096x1x8192"}` {
		t.Fatalf("JSON %s, %v", out, err)
	}
	var back row
	if err := json.Unmarshal([]byte(`{"Shape":"2x2"}`), &back); err != nil || back.Shape.String() != "2x2" {
		t.Fatalf("from JSON: %q, %v", back.Shape.String(), err)
	}
	// The table keeps its own copy of a new string: one met in a buffer
	// that is then overwritten (a recycled decode buffer) reads the same.
	buf := []byte("str-test-aliased")
	id := Intern(unsafe.String(&buf[0], len(buf)))
	copy(buf, "XXXXXXXXXXXXXXXX")
	if got := id.String(); got != "str-test-aliased" {
		t.Fatalf("a string interned from a buffer changed with it: %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { InternBytes([]byte("4096x1x8192")) }); n != 0 {
		t.Errorf("InternBytes of a known string allocates %v times", n)
	}
}

// TestAppendCached: rows appended through an InternCache are the rows
// Append makes, whatever the order of repeated, new and empty strings.
func TestAppendCached(t *testing.T) {
	strs := []string{"", "[4096, 5120]", "bf16", "pp0", "[4096, 5120]", "", "fp32", "pp0", "pp1"}
	var a, b Trace
	var c InternCache
	for i := range 500 {
		e := Event{Rank: Rank(i % 7), Kind: SendF, Seq: int64(i), Shape: strs[i%len(strs)], Dtype: strs[(i/3)%len(strs)], Group: strs[(i*5/7)%len(strs)]}
		a.Append(e)
		b.AppendCached(e, &c)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("AppendCached made other rows than Append")
	}
	for i := range a.Len() {
		if a.At(i) != b.At(i) {
			t.Fatalf("row %d: %+v, Append's %+v", i, b.At(i), a.At(i))
		}
	}
}
