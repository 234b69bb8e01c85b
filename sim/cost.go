package sim

import (
	"fmt"
	"math"
	"math/rand"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// costModel turns a defaulted Config into durations (ns), FLOPs, token
// counts and activation shapes. Its random draws (sequence lengths, jitter)
// are all made up front in one fixed order, so they do not depend on the
// order the simulator visits ranks in, nor on the faults.
type costModel struct {
	p, v, m, dp   int
	fwd, bwd, wgt float64 // nominal ns of one chunk of one micro-batch at SeqLen
	embed, loss   float64 // extra forward ns of the first and last virtual stage
	slowStage     int
	slowFactor    float64
	stragglers    []Straggler
	slowRanks     []SlowRank

	seqLen, mbs, hidden int64
	dtype               string
	dsize               int64
	shape               string // activation shape at SeqLen
	bytes               int64  // activation bytes at SeqLen

	seqLens []int64 // VarSeqLen: [(step*dp+pipe)*m+mb]; nil otherwise

	jitter    []float64 // [(step*dp+pipe)*perSP + stageOff[stage] + action]; nil if no jitter
	stageOff  []int
	perSP     int
	latNs     float64 // P2P latency, ns
	nsPerByte float64 // P2P ns per byte, 0 for infinite bandwidth
	flopsPerN float64 // FLOPs per nominal ns, 0 if PeakFlops is unknown
}

// newCostModel precomputes the costs of the defaulted c on schedule s and
// makes every random draw.
func newCostModel(c Config, s *schedule.Schedule) *costModel {
	v := float64(c.Virtual)
	cm := &costModel{
		p: c.Stages, v: c.Virtual, m: c.MicroBatches, dp: c.DP,
		fwd:        c.FwdMs * 1e6 / v,
		embed:      c.EmbedMs * 1e6,
		loss:       c.LossMs * 1e6,
		slowStage:  c.SlowStage,
		slowFactor: c.SlowFactor,
		stragglers: c.Stragglers,
		slowRanks:  c.SlowRanks,
		seqLen:     int64(c.SeqLen), mbs: int64(c.MicroBatchSize), hidden: int64(c.Hidden),
		dtype: c.Dtype, dsize: dtypeSize[c.Dtype],
		latNs:     c.P2PLatencyUs * 1e3,
		flopsPerN: c.ComputeEfficiency * c.PeakFlops / 1e9,
	}
	switch {
	case !s.SplitBackward:
		cm.bwd = (c.BwdMs + c.WgradMs) * 1e6 / v
	case c.WgradMs == 0:
		cm.bwd = c.BwdMs / 2 * 1e6 / v
		cm.wgt = c.BwdMs / 2 * 1e6 / v
	default:
		cm.bwd = c.BwdMs * 1e6 / v
		cm.wgt = c.WgradMs * 1e6 / v
	}
	if c.P2PGbps > 0 {
		cm.nsPerByte = 8 / c.P2PGbps
	}
	cm.shape, cm.bytes = cm.activation(cm.seqLen, cm.dtype, 1)

	rng := rand.New(rand.NewSource(c.Seed))
	if c.VarSeqLen {
		cm.seqLens = make([]int64, c.Steps*c.DP*c.MicroBatches)
		for i := range cm.seqLens {
			n := int64(math.Round(float64(c.SeqLen) * (0.5 + rng.Float64())))
			cm.seqLens[i] = max(n, 1)
		}
	}
	if c.Jitter > 0 {
		cm.stageOff = make([]int, c.Stages)
		for st, acts := range s.Actions {
			cm.stageOff[st] = cm.perSP
			cm.perSP += len(acts)
		}
		cm.jitter = make([]float64, c.Steps*c.DP*cm.perSP)
		for sp := 0; sp < c.Steps*c.DP; sp++ {
			for st, acts := range s.Actions {
				for i, a := range acts {
					if a.Kind.IsCompute() {
						cm.jitter[sp*cm.perSP+cm.stageOff[st]+i] = 1 + c.Jitter*(2*rng.Float64()-1)
					}
				}
			}
		}
	}
	return cm
}

// seqLenOf returns the sequence length of micro-batch mb of pipeline pipe
// in step step.
func (cm *costModel) seqLenOf(step, pipe, mb int) int64 {
	if cm.seqLens == nil {
		return cm.seqLen
	}
	return cm.seqLens[(step*cm.dp+pipe)*cm.m+mb]
}

// compute returns the duration (ns), FLOPs and tokens of compute op in (the
// act-th action of stage's schedule) for pipeline pipe in step step.
func (cm *costModel) compute(step, pipe, stage int, in instr) (dur int64, flops float64, tokens int64) {
	var base float64
	switch in.kind {
	case trace.F:
		base = cm.fwd
		if stage == 0 && in.chunk == 0 {
			base += cm.embed
		}
		if stage == cm.p-1 && int(in.chunk) == cm.v-1 {
			base += cm.loss
		}
	case trace.B:
		base = cm.bwd
	case trace.W:
		base = cm.wgt
	}
	sl := cm.seqLenOf(step, pipe, int(in.mb))
	nominal := base * float64(sl) / float64(cm.seqLen)
	f := 1.0
	if stage == cm.slowStage {
		f *= cm.slowFactor
	}
	for _, s := range cm.stragglers {
		if (s.Step < 0 || s.Step == step) && s.MicroBatch == int(in.mb) && (s.Stage < 0 || s.Stage == stage) {
			f *= s.Factor
		}
	}
	f *= slowRankFactor(cm.slowRanks, pipe, stage)
	if cm.jitter != nil {
		f *= cm.jitter[(step*cm.dp+pipe)*cm.perSP+cm.stageOff[stage]+int(in.act)]
	}
	return int64(math.Round(nominal * f)), nominal * cm.flopsPerN, sl * cm.mbs
}

// activation returns the shape string and bytes of a micro-batch's
// activations with first dimension seqLen*dimFactor, in dtype.
func (cm *costModel) activation(seqLen int64, dtype string, dimFactor int64) (string, int64) {
	first := seqLen * dimFactor
	return fmt.Sprintf("%dx%dx%d", first, cm.mbs, cm.hidden), first * cm.mbs * cm.hidden * dtypeSize[dtype]
}

// p2p returns the shape, dtype and bytes that a P2P op of micro-batch mb of
// pipeline pipe in step step carries; badShape doubles the first dimension
// and badDtype swaps the dtype (fp32, or bf16 when the job uses fp32).
func (cm *costModel) p2p(step, pipe, mb int, badShape, badDtype bool) (shape, dtype string, bytes int64) {
	dtype = cm.dtype
	if badDtype {
		dtype = "fp32"
		if cm.dtype == "fp32" {
			dtype = "bf16"
		}
	}
	if cm.seqLens == nil && !badShape && !badDtype {
		return cm.shape, dtype, cm.bytes
	}
	dim := int64(1)
	if badShape {
		dim = 2
	}
	shape, bytes = cm.activation(cm.seqLenOf(step, pipe, mb), dtype, dim)
	return shape, dtype, bytes
}

// transfer returns the time in ns to move n bytes: latency + n/bandwidth.
func (cm *costModel) transfer(n int64) int64 {
	return int64(math.Round(cm.latNs + float64(n)*cm.nsPerByte))
}
