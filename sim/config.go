package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/ppprof/ppprof/schedule"
)

// Config describes one simulated job: the schedule, the parallel layout, the
// cost model and the faults to inject. A zero field takes the default its
// comment states; WithDefaults returns the config with them filled in.
type Config struct {
	Schedule     string // gpipe, 1f1b, interleaved or zb-h1 (schedule.Names)
	Stages       int    // p, pipeline stages, >= 1
	MicroBatches int    // m, micro-batches per step, >= 1
	Virtual      int    // v, model chunks per stage; 0 means 2 for interleaved, 1 otherwise; must be 1 for the other schedules
	Steps        int    // optimizer steps; 0 means 1
	DP           int    // pipeline replicas (data-parallel degree); 0 means 1
	TP           int    // tensor-parallel ranks per stage; 0 means 1

	// Compute costs of one micro-batch on one whole stage, in ms. One chunk
	// of an interleaved stage costs 1/v of them.
	FwdMs float64 // forward; 0 means 1
	BwdMs float64 // backward; 0 means 2. With WgradMs > 0 it is the backward-input part only
	// WgradMs is the backward-weight cost in ms. For schedules that record W
	// separately (zb-h1), 0 splits BwdMs half and half between B and W; for
	// the others B costs BwdMs + WgradMs.
	WgradMs float64
	OptMs   float64 // optimizer step, ms (0: an instantaneous OPT)
	EmbedMs float64 // extra forward cost of the first virtual stage (stage 0, chunk 0), ms
	LossMs  float64 // extra forward cost of the last virtual stage (stage p-1, chunk v-1), ms

	// P2P cost: a transfer of n bytes takes P2PLatencyUs + n*8/P2PGbps ns.
	P2PLatencyUs float64 // per-transfer latency, µs; 0 with P2PGbps 0 is free communication
	P2PGbps      float64 // bandwidth in Gbit/s (1e9 bits per second); 0 means infinite

	// Activation shape sent between stages: "SeqLen x MicroBatchSize x
	// Hidden" elements of Dtype; bytes = SeqLen*MicroBatchSize*Hidden*size.
	Hidden         int    // hidden size; 0 means 4096
	SeqLen         int    // tokens per sequence; 0 means 4096
	MicroBatchSize int    // sequences per micro-batch; 0 means 1
	Dtype          string // bf16, fp16, fp32, fp64, fp8 or int8; "" means bf16

	// VarSeqLen draws each micro-batch's sequence length (per step, pipeline
	// and micro-batch, seeded) uniformly in [SeqLen/2, 3*SeqLen/2]; its
	// compute costs scale by length/SeqLen and its activations' first
	// dimension is that length.
	VarSeqLen bool

	SlowStage  int         // stage whose compute SlowFactor multiplies, in every pipeline; -1 none
	SlowFactor float64     // compute multiplier of SlowStage; 0 means 1
	Stragglers []Straggler // slow micro-batches; factors of all that match multiply
	SlowRanks  []SlowRank  // slow workers of one replica (slowrank.go); factors of all that match multiply
	// Jitter is the relative variation of compute: each compute duration is
	// multiplied by a factor drawn uniformly in [1-Jitter, 1+Jitter], per
	// (step, pipeline, stage, op) and shared by the stage's TP ranks. In [0, 1).
	Jitter float64
	Seed   int64 // seeds math/rand for Jitter and VarSeqLen

	Faults []Fault // faults to inject (see ParseFault)

	Job       string  // job name, for the metadata
	Device    string  // device name, for the metadata
	PeakFlops float64 // peak FLOP/s of one device; 0 leaves the flops column 0 (unknown)
	// ComputeEfficiency is the fraction of PeakFlops an op achieves at its
	// nominal cost; it sets the flops column: flops = ComputeEfficiency *
	// PeakFlops * nominal seconds, where nominal is the op's cost before the
	// slow-stage, straggler and jitter factors (so those show as lower
	// efficiency). 0 means 0.5.
	ComputeEfficiency float64
}

// Defaults applied by WithDefaults.
const (
	DefaultFwdMs             = 1.0
	DefaultBwdMs             = 2.0
	DefaultHidden            = 4096
	DefaultSeqLen            = 4096
	DefaultDtype             = "bf16"
	DefaultComputeEfficiency = 0.5
)

// dtypeSize is the size in bytes of one element of each dtype Config accepts.
var dtypeSize = map[string]int64{
	"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8": 1, "int8": 1,
}

// WithDefaults returns c with every zero field that has a default set to it.
func (c Config) WithDefaults() Config {
	if c.Virtual == 0 {
		c.Virtual = 1
		if c.Schedule == schedule.InterleavedName {
			c.Virtual = 2
		}
	}
	def := func(x *int, v int) {
		if *x == 0 {
			*x = v
		}
	}
	deff := func(x *float64, v float64) {
		if *x == 0 {
			*x = v
		}
	}
	def(&c.Steps, 1)
	def(&c.DP, 1)
	def(&c.TP, 1)
	def(&c.Hidden, DefaultHidden)
	def(&c.SeqLen, DefaultSeqLen)
	def(&c.MicroBatchSize, 1)
	deff(&c.FwdMs, DefaultFwdMs)
	deff(&c.BwdMs, DefaultBwdMs)
	deff(&c.SlowFactor, 1)
	deff(&c.ComputeEfficiency, DefaultComputeEfficiency)
	if c.Dtype == "" {
		c.Dtype = DefaultDtype
	}
	return c
}

// WorldSize returns the number of ranks, Stages*DP*TP, after defaults.
func (c Config) WorldSize() int {
	c = c.WithDefaults()
	return c.Stages * c.DP * c.TP
}

// Rank returns the global rank of TP rank tp of stage in pipeline replica
// pipeline, numbered as Megatron does: (stage*DP + pipeline)*TP + tp.
func (c Config) Rank(stage, pipeline, tp int) int {
	c = c.WithDefaults()
	return (stage*c.DP+pipeline)*c.TP + tp
}

// Validate reports the first problem with c (after defaults): a bad size or
// cost, an unknown schedule or dtype, a straggler or fault out of range.
// Schedule-specific constraints (e.g. interleaved wants m divisible by p) are
// checked by building the schedule.
func (c Config) Validate() error {
	_, err := c.WithDefaults().prepare()
	return err
}

// prepare validates a defaulted config and builds its schedule.
func (c Config) prepare() (*schedule.Schedule, error) {
	if !slices.Contains(schedule.Names, c.Schedule) {
		return nil, fmt.Errorf("unknown schedule %q (want one of %v)", c.Schedule, schedule.Names)
	}
	ints := []struct {
		name string
		v    int
	}{
		{"stages", c.Stages}, {"microbatches", c.MicroBatches}, {"virtual", c.Virtual},
		{"steps", c.Steps}, {"dp", c.DP}, {"tp", c.TP}, {"hidden", c.Hidden},
		{"seq_len", c.SeqLen}, {"micro_batch_size", c.MicroBatchSize},
	}
	for _, x := range ints {
		if x.v < 1 {
			return nil, fmt.Errorf("%s %d: want >= 1", x.name, x.v)
		}
	}
	if c.Schedule != schedule.InterleavedName && c.Virtual != 1 {
		return nil, fmt.Errorf("virtual %d: only the interleaved schedule has more than one chunk per stage", c.Virtual)
	}
	if int64(c.Stages)*int64(c.DP)*int64(c.TP) > math.MaxInt32 {
		return nil, fmt.Errorf("world size %d x %d x %d: too large", c.Stages, c.DP, c.TP)
	}
	floats := []struct {
		name string
		v    float64
	}{
		{"fwd_ms", c.FwdMs}, {"bwd_ms", c.BwdMs}, {"wgrad_ms", c.WgradMs}, {"opt_ms", c.OptMs},
		{"embed_ms", c.EmbedMs}, {"loss_ms", c.LossMs}, {"p2p_latency_us", c.P2PLatencyUs},
		{"p2p_gbps", c.P2PGbps}, {"slow_factor", c.SlowFactor}, {"peak_flops", c.PeakFlops},
		{"jitter", c.Jitter}, {"compute_efficiency", c.ComputeEfficiency},
	}
	for _, x := range floats {
		if x.v < 0 || math.IsNaN(x.v) || math.IsInf(x.v, 0) {
			return nil, fmt.Errorf("%s %v: want a finite number >= 0", x.name, x.v)
		}
	}
	if c.Jitter >= 1 {
		return nil, fmt.Errorf("jitter %v: want < 1 (a relative variation)", c.Jitter)
	}
	if c.ComputeEfficiency > 1 {
		return nil, fmt.Errorf("compute_efficiency %v: want <= 1", c.ComputeEfficiency)
	}
	if _, ok := dtypeSize[c.Dtype]; !ok {
		return nil, fmt.Errorf("dtype %q: want one of bf16, fp16, fp32, fp64, fp8, int8", c.Dtype)
	}
	if c.SlowStage < -1 || c.SlowStage >= c.Stages {
		return nil, fmt.Errorf("slow stage %d: want -1 (none) or a stage in [0, %d)", c.SlowStage, c.Stages)
	}
	for i, s := range c.Stragglers {
		if err := s.check(c); err != nil {
			return nil, fmt.Errorf("straggler %d (%s): %w", i, s, err)
		}
	}
	for i, s := range c.SlowRanks {
		if err := s.check(c); err != nil {
			return nil, fmt.Errorf("slow rank %d (%s): %w", i, s, err)
		}
	}
	for i, f := range c.Faults {
		if err := f.check(c); err != nil {
			return nil, fmt.Errorf("fault %d (%s): %w", i, f, err)
		}
	}
	s, err := schedule.New(c.Schedule, c.Stages, c.MicroBatches, c.Virtual)
	if err != nil {
		return nil, err
	}
	return s, nil
}
