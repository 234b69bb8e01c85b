package sim

import (
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// TestSlowRank: a slow rank multiplies the compute of its stage in its own
// replica only, on every TP rank of the stage, in every step.
func TestSlowRank(t *testing.T) {
	c := Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, Steps: 2, DP: 2, TP: 2,
		SlowRanks: []SlowRank{{Pipeline: 1, Stage: 2, Factor: 1.5}}}
	tr := mustRun(t, c)
	for i := 0; i < tr.Len(); i++ {
		k := tr.Kind[i]
		if !k.IsCompute() {
			continue
		}
		want := int64(1e6)
		if k == trace.B {
			want = 2e6
		}
		if tr.Pipeline[i] == 1 && tr.Stage[i] == 2 {
			want = want * 3 / 2
		}
		if d := tr.EndNs[i] - tr.StartNs[i]; d != want {
			t.Fatalf("row %d: pipeline %d stage %d %s took %d ns, want %d", i, tr.Pipeline[i], tr.Stage[i], k, d, want)
		}
	}
}

func TestParseSlowRank(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want SlowRank
		err  string
	}{
		{"pipeline=1,stage=2,factor=1.5", SlowRank{1, 2, 1.5}, ""},
		{"stage=0,factor=2", SlowRank{0, 0, 2}, ""},
		{"pipeline=1,factor=2", SlowRank{}, "stage"},
		{"stage=1", SlowRank{}, "factor"},
		{"stage=1,factor=-1", SlowRank{}, "factor"},
		{"stage=1,factor=2,rank=3", SlowRank{}, "unknown key"},
	} {
		got, err := ParseSlowRank(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want one mentioning %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
		if back, err := ParseSlowRank(got.String()); err != nil || back != got {
			t.Errorf("%q: round trip %+v, %v", tc.spec, back, err)
		}
	}
}

func TestSlowRankCheck(t *testing.T) {
	for _, s := range []SlowRank{{2, 0, 2}, {0, 3, 2}, {-1, 0, 2}, {0, 0, 0}} {
		c := Config{Schedule: "1f1b", Stages: 3, MicroBatches: 4, DP: 2, SlowRanks: []SlowRank{s}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "slow rank") {
			t.Errorf("%+v: err %v, want a slow rank error", s, err)
		}
	}
}
