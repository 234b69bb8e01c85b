package ingest

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// TestGroupColumns checks the group and group_seq columns of CSV and JSONL:
// absent, they default to "" and -1; present, they are read as written,
// group_seq 0 included.
func TestGroupColumns(t *testing.T) {
	csvOld := "rank,stage,step,kind,seq,start_ns,end_ns\n0,0,0,F,1,0,5\n"
	csvNew := "rank,stage,step,kind,seq,start_ns,end_ns,group,group_seq\n0,0,0,ALL_REDUCE,1,0,5,dp,0\n0,0,0,F,2,5,6,,\n"
	jsonOld := `{"rank":0,"stage":0,"step":0,"kind":"F","seq":1,"start_ns":0,"end_ns":5}` + "\n"
	jsonNew := `{"rank":0,"stage":0,"step":0,"kind":"ALL_REDUCE","seq":1,"start_ns":0,"end_ns":5,"group":"dp","group_seq":0}` + "\n" +
		`{"rank":0,"stage":0,"step":0,"kind":"F","seq":2,"start_ns":5,"end_ns":6,"group":null,"group_seq":null}` + "\n"
	for _, c := range []struct {
		name, in string
		csv      bool
		groups   []string
		seqs     []int64
	}{
		{"csv without", csvOld, true, []string{""}, []int64{trace.NoGroupSeq}},
		{"csv with", csvNew, true, []string{"dp", ""}, []int64{0, trace.NoGroupSeq}},
		{"jsonl without", jsonOld, false, []string{""}, []int64{trace.NoGroupSeq}},
		{"jsonl with", jsonNew, false, []string{"dp", ""}, []int64{0, trace.NoGroupSeq}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tr *trace.Trace
			var err error
			if c.csv {
				tr, err = ReadCSV(strings.NewReader(c.in))
			} else {
				tr, err = ReadJSONL(strings.NewReader(c.in))
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range c.groups {
				if tr.Group[i].String() != c.groups[i] || tr.GroupSeq[i] != c.seqs[i] {
					t.Errorf("row %d: group %q seq %d, want %q %d", i, tr.Group[i], tr.GroupSeq[i], c.groups[i], c.seqs[i])
				}
			}
		})
	}
	if _, err := ReadCSV(strings.NewReader("rank,stage,step,kind,seq,start_ns,end_ns,group_seq\n0,0,0,F,1,0,5,-2\n")); err == nil || !strings.Contains(err.Error(), "group_seq") {
		t.Errorf("group_seq -2: got %v", err)
	}
}

// TestRankListsOnce: rankLists parses a long list once and hands the same
// ranks to every dump, from any goroutine; short lists, malformed lists
// and a nil cache parse as parseRankList does.
func TestRankListsOnce(t *testing.T) {
	var b strings.Builder
	b.WriteByte('[')
	for r := range 5000 {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r))
	}
	b.WriteByte(']')
	long := b.String()
	var l rankLists
	got := make([][]trace.Rank, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = l.parse(strings.Clone(long)) })
	}
	wg.Wait()
	want := parseRankList(long)
	if len(want) != 5000 || want[4999] != 4999 {
		t.Fatalf("parseRankList: %d ranks", len(want))
	}
	for i, g := range got {
		if !slices.Equal(g, want) {
			t.Fatalf("goroutine %d: %d ranks", i, len(g))
		}
	}
	if again := l.parse(long); &again[0] != &l.parse(long)[0] || len(l.seen) != 1 {
		t.Errorf("a list parsed again, or kept twice (%d kept)", len(l.seen))
	}
	var none *rankLists
	for _, s := range []string{"[0, 1, 2]", "[1, x]", "[...]", long[:300], long} {
		if g, w := none.parse(s), parseRankList(s); !slices.Equal(g, w) || (g == nil) != (w == nil) {
			t.Errorf("%.20q: %v, want %v", s, g, w)
		}
		if g, w := l.parse(s), parseRankList(s); !slices.Equal(g, w) || (g == nil) != (w == nil) {
			t.Errorf("%.20q, cached: %v, want %v", s, g, w)
		}
	}
}
