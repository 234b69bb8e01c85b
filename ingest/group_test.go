package ingest

import (
	"strings"
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
