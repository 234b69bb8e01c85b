package sim

import (
	"math"
	"strings"
	"testing"
)

func TestParseFault(t *testing.T) {
	good := []struct {
		spec string
		want Fault
	}{
		{"skip:rank=1,step=0,mb=3", Fault{FaultSkip, 1, 0, 3}},
		{"shape:rank=0,step=2,mb=0", Fault{FaultShape, 0, 2, 0}},
		{"dtype:rank=7,step=1,mb=5", Fault{FaultDtype, 7, 1, 5}},
		{"crash:mb=2,rank=3,step=4", Fault{FaultCrash, 3, 4, 2}}, // any key order
		{"exit:rank=2,step=1", Fault{FaultExit, 2, 1, -1}},
		{"reorder:rank=0,step=0,mb=1", Fault{FaultReorder, 0, 0, 1}},
		{"optskip:rank=5,step=3", Fault{FaultOptSkip, 5, 3, -1}},
		{"skip: rank = 1 , step=0,mb=3", Fault{FaultSkip, 1, 0, 3}},
	}
	for _, g := range good {
		got, err := ParseFault(g.spec)
		if err != nil || got != g.want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", g.spec, got, err, g.want)
			continue
		}
		back, err := ParseFault(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q via %q: %+v, %v", g.spec, got.String(), back, err)
		}
	}
	bad := []struct{ spec, msg string }{
		{"", "want KIND:"},
		{"skip", "want KIND:"},
		{"hang:rank=1,step=0", `unknown kind "hang"`},
		{"skip:rank=1,step=0", "missing mb="},
		{"skip:step=0,mb=1", "missing rank="},
		{"crash:rank=1,mb=1", "missing step="},
		{"exit:rank=1,step=0,mb=2", `unknown key "mb"`},
		{"skip:rank=1,step=0,mb=1,mb=2", `key "mb" given twice`},
		{"skip:rank=x,step=0,mb=1", `rank="x": want a non-negative integer`},
		{"skip:rank=-1,step=0,mb=1", `rank="-1"`},
		{"skip:rank=1,step=0,mb", `"mb": want key=value`},
		{"skip:rank=1,step=0,mb=1,color=red", `unknown key "color" (want mb, rank, step)`},
		{"optskip:rank=99999999999,step=0", "non-negative integer"},
	}
	for _, b := range bad {
		_, err := ParseFault(b.spec)
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("ParseFault(%q) error %v, want one containing %q", b.spec, err, b.msg)
		}
	}
}

func TestParseStraggler(t *testing.T) {
	good := []struct {
		spec string
		want Straggler
	}{
		{"mb=3,factor=2", Straggler{Step: -1, MicroBatch: 3, Stage: -1, Factor: 2}},
		{"mb=0,factor=1.5,stage=2", Straggler{Step: -1, MicroBatch: 0, Stage: 2, Factor: 1.5}},
		{"step=4,mb=1,factor=3,stage=0", Straggler{Step: 4, MicroBatch: 1, Stage: 0, Factor: 3}},
		{"mb=1,factor=0.5", Straggler{Step: -1, MicroBatch: 1, Stage: -1, Factor: 0.5}},
	}
	for _, g := range good {
		got, err := ParseStraggler(g.spec)
		if err != nil || got != g.want {
			t.Errorf("ParseStraggler(%q) = %+v, %v; want %+v", g.spec, got, err, g.want)
			continue
		}
		back, err := ParseStraggler(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q via %q: %+v, %v", g.spec, got.String(), back, err)
		}
	}
	bad := []struct{ spec, msg string }{
		{"", "missing mb="},
		{"factor=2", "missing mb="},
		{"mb=1", "missing factor="},
		{"mb=1,factor=0", "want a finite number > 0"},
		{"mb=1,factor=-2", "want a finite number > 0"},
		{"mb=1,factor=inf", "want a finite number > 0"},
		{"mb=1,factor=NaN", "want a finite number > 0"},
		{"mb=1,factor=x", "want a finite number > 0"},
		{"mb=1,factor=2,rank=3", `unknown key "rank" (want factor, mb, stage, step)`},
		{"mb=1,factor=2,stage=-1", `stage="-1"`},
	}
	for _, b := range bad {
		_, err := ParseStraggler(b.spec)
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("ParseStraggler(%q) error %v, want one containing %q", b.spec, err, b.msg)
		}
	}
}

func TestValidate(t *testing.T) {
	base := func() Config { return Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, DP: 2, TP: 2, Steps: 2} }
	bad := []struct {
		name string
		mod  func(c *Config)
		msg  string
	}{
		{"schedule", func(c *Config) { c.Schedule = "pipedream" }, `unknown schedule "pipedream"`},
		{"no schedule", func(c *Config) { c.Schedule = "" }, `unknown schedule ""`},
		{"stages", func(c *Config) { c.Stages = 0 }, "stages 0: want >= 1"},
		{"microbatches", func(c *Config) { c.MicroBatches = -1 }, "microbatches -1: want >= 1"},
		{"dp", func(c *Config) { c.DP = -2 }, "dp -2"},
		{"virtual on 1f1b", func(c *Config) { c.Virtual = 2 }, "only the interleaved schedule"},
		{"interleaved m", func(c *Config) { c.Schedule, c.MicroBatches = "interleaved", 1 }, "interleaved"},
		{"fwd", func(c *Config) { c.FwdMs = -1 }, "fwd_ms -1"},
		{"bwd nan", func(c *Config) { c.BwdMs = math.NaN() }, "bwd_ms NaN"},
		{"latency", func(c *Config) { c.P2PLatencyUs = -3 }, "p2p_latency_us -3"},
		{"jitter", func(c *Config) { c.Jitter = 1 }, "jitter 1: want < 1"},
		{"dtype", func(c *Config) { c.Dtype = "fp4" }, `dtype "fp4"`},
		{"slow stage", func(c *Config) { c.SlowStage = 4 }, "slow stage 4"},
		{"slow factor", func(c *Config) { c.SlowStage, c.SlowFactor = 1, -2 }, "slow_factor -2"},
		{"efficiency", func(c *Config) { c.ComputeEfficiency = 1.5 }, "compute_efficiency 1.5"},
		{"straggler mb", func(c *Config) { c.Stragglers = []Straggler{{Step: -1, MicroBatch: 8, Stage: -1, Factor: 2}} }, "straggler 0 (mb=8,factor=2): micro-batch 8 out of range"},
		{"straggler stage", func(c *Config) { c.Stragglers = []Straggler{{Step: -1, MicroBatch: 1, Stage: 4, Factor: 2}} }, "stage 4"},
		{"straggler step", func(c *Config) { c.Stragglers = []Straggler{{Step: 2, MicroBatch: 1, Stage: -1, Factor: 2}} }, "step 2"},
		{"straggler factor", func(c *Config) { c.Stragglers = []Straggler{{Step: -1, MicroBatch: 1, Stage: -1}} }, "factor 0"},
		{"fault rank", func(c *Config) { c.Faults = f("crash:rank=16,step=0,mb=0") }, "fault 0 (crash:rank=16,step=0,mb=0): rank 16 out of range: the job has ranks 0 to 15"},
		{"fault step", func(c *Config) { c.Faults = f("exit:rank=1,step=2") }, "step 2 out of range"},
		{"fault mb", func(c *Config) { c.Faults = f("skip:rank=1,step=0,mb=8") }, "micro-batch 8 out of range"},
		{"reorder last mb", func(c *Config) { c.Faults = f("reorder:rank=1,step=0,mb=7") }, "no 8 to swap with"},
		{"shape one stage", func(c *Config) { c.Stages = 1; c.Faults = f("shape:rank=0,step=0,mb=0") }, "1-stage pipeline sends nothing"},
		{"fault kind", func(c *Config) { c.Faults = []Fault{{Rank: 0}} }, "invalid fault kind"},
	}
	for _, b := range bad {
		c := base()
		b.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", b.name, err, b.msg)
		}
		if _, rerr := Run(c); rerr == nil {
			t.Errorf("%s: Run accepted an invalid config", b.name)
		}
	}
	if err := base().Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	c := Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4}.WithDefaults()
	if c.Virtual != 2 || c.Steps != 1 || c.DP != 1 || c.TP != 1 || c.FwdMs != 1 || c.BwdMs != 2 ||
		c.SlowFactor != 1 || c.Dtype != "bf16" || c.SeqLen != 4096 || c.Hidden != 4096 || c.MicroBatchSize != 1 {
		t.Errorf("interleaved defaults: %+v", c)
	}
	if v := (Config{Schedule: "gpipe"}).WithDefaults().Virtual; v != 1 {
		t.Errorf("gpipe default virtual %d, want 1", v)
	}
	tr := mustRun(t, Config{Schedule: "interleaved", Stages: 2, MicroBatches: 4})
	if tr.Meta.Virtual != 2 {
		t.Errorf("meta virtual %d, want 2", tr.Meta.Virtual)
	}
	if got := (Config{Stages: 4, DP: 2, TP: 8}).Rank(3, 1, 5); got != (3*2+1)*8+5 {
		t.Errorf("Rank(3, 1, 5) = %d", got)
	}
	if got := (Config{Stages: 4}).Rank(3, 0, 0); got != 3 {
		t.Errorf("without dp and tp, rank = stage: got %d", got)
	}
}
