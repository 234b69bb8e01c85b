package report

import (
	"encoding/json"
	"io"
	"math"

	"github.com/ppprof/ppprof/analyze"
)

// The JSON contract of `analyze --format json` (DESIGN.md "Contracts"). Keys
// are stable; new keys may be added. Unknown numbers are null, never 0.
type jsonReport struct {
	Schema      string          `json:"schema"`
	Job         jsonJob         `json:"job"`
	StepMs      float64         `json:"step_ms"`
	StepMsWorst float64         `json:"step_ms_worst"`
	Utilization jsonUtilization `json:"utilization"`
	Bubble      jsonBubble      `json:"bubble"`
	Stages      []jsonStage     `json:"stages"`
	Imbalance   jsonImbalance   `json:"imbalance"`
	Stragglers  []jsonStraggler `json:"stragglers"`
	P2P         jsonP2P         `json:"p2p"`
	Memory      []jsonMemory    `json:"memory"`
	Overhead    []jsonOverhead  `json:"overhead"`
	Schedule    jsonSchedule    `json:"schedule"`
	Steps       []jsonStep      `json:"steps"`
	Findings    []jsonFinding   `json:"findings"`
}

type jsonJob struct {
	WorldSize    int    `json:"world_size"`
	PP           int    `json:"pp"`
	TP           int    `json:"tp"`
	DP           int    `json:"dp"`
	Virtual      int    `json:"virtual"`
	MicroBatches int    `json:"microbatches"`
	Steps        int    `json:"steps"`
	Schedule     string `json:"schedule"`
	Events       int    `json:"events"`
}

type jsonUtilization struct {
	Pipeline float64  `json:"pipeline"`
	Bubble   float64  `json:"bubble"`
	Balance  float64  `json:"balance"`
	Compute  *float64 `json:"compute"`
	MFU      *float64 `json:"mfu"`
}

type jsonBubble struct {
	Measured    float64  `json:"measured"`
	Theoretical *float64 `json:"theoretical"`
	Warmup      float64  `json:"warmup"`
	Cooldown    float64  `json:"cooldown"`
	Steady      float64  `json:"steady"`
	SteadyP2P   float64  `json:"steady_p2p"`
	SteadyOther float64  `json:"steady_other"`
	Gap         *jsonGap `json:"gap"`
}

type jsonGap struct {
	Gap           float64 `json:"gap"`
	P2P           float64 `json:"p2p"`
	Overhead      float64 `json:"overhead"`
	Jitter        float64 `json:"jitter"`
	Imbalance     float64 `json:"imbalance"`
	Other         float64 `json:"other"`
	UniformBubble float64 `json:"uniform_bubble"`
}

type jsonDist struct {
	N        int     `json:"n"`
	MeanMs   float64 `json:"mean_ms"`
	MedianMs float64 `json:"median_ms"`
	P95Ms    float64 `json:"p95_ms"`
	MinMs    float64 `json:"min_ms"`
	MaxMs    float64 `json:"max_ms"`
}

type jsonStage struct {
	Stage                int      `json:"stage"`
	Rank                 int      `json:"rank"`
	FwdMs                float64  `json:"fwd_ms"`
	BwdMs                float64  `json:"bwd_ms"`
	BusyMs               float64  `json:"busy_ms"`
	IdleMs               float64  `json:"idle_ms"`
	Bubble               float64  `json:"bubble"`
	PeakLiveMicroBatches int      `json:"peak_live_microbatches"`
	LiveBound            *int     `json:"live_bound"`
	PeakActivationBytes  *int64   `json:"peak_activation_bytes"`
	WarmupMs             float64  `json:"warmup_ms"`
	CooldownMs           float64  `json:"cooldown_ms"`
	SteadyMs             float64  `json:"steady_ms"`
	P2PWaitMs            float64  `json:"p2p_wait_ms"`
	OtherWaitMs          float64  `json:"other_wait_ms"`
	F                    jsonDist `json:"f"`
	B                    jsonDist `json:"b"`
	W                    jsonDist `json:"w"`
}

type jsonImbalance struct {
	SlowestStage     *int     `json:"slowest_stage"`
	BusyMs           float64  `json:"busy_ms"`
	MeanBusyMs       float64  `json:"mean_busy_ms"`
	ExcessMs         float64  `json:"excess_ms"`
	ExcessFrac       float64  `json:"excess_frac"`
	SlowestStageByFB *int     `json:"slowest_stage_by_fb"`
	FBMs             float64  `json:"fb_ms"`
	MeanFBMs         float64  `json:"mean_fb_ms"`
	BalancedStepMs   *float64 `json:"balanced_step_ms"`
	MeasuredStepMs   float64  `json:"measured_step_ms"`
}

type jsonStraggler struct {
	Step       int64   `json:"step"`
	Pipeline   int     `json:"pipeline"`
	Stage      int     `json:"stage"`
	Rank       int     `json:"rank"`
	Chunk      int     `json:"chunk"`
	MicroBatch int     `json:"microbatch"`
	Kind       string  `json:"kind"`
	DurMs      float64 `json:"dur_ms"`
	TypicalMs  float64 `json:"typical_ms"`
	ExpectedMs float64 `json:"expected_ms"`
	Factor     float64 `json:"factor"`
	Tokens     int64   `json:"tokens"`
	Class      string  `json:"class"`
	DelayMs    float64 `json:"delay_ms"`
}

type jsonP2P struct {
	BytesPerStep      float64        `json:"bytes_per_step"`
	ModelBytesPerStep *float64       `json:"model_bytes_per_step"`
	ExposedMs         float64        `json:"exposed_ms"`
	Boundaries        []jsonBoundary `json:"boundaries"`
}

type jsonBoundary struct {
	From              int      `json:"from"`
	To                int      `json:"to"`
	Kind              string   `json:"kind"`
	BytesPerStep      float64  `json:"bytes_per_step"`
	SendsPerStep      float64  `json:"sends_per_step"`
	ModelBytesPerStep *float64 `json:"model_bytes_per_step"`
	GBps              *float64 `json:"gbps"`
	ExposedMs         float64  `json:"exposed_ms"`
}

type jsonMemory struct {
	Stage               int             `json:"stage"`
	Peak                int             `json:"peak"`
	Bound               *int            `json:"bound"`
	PeakActivationBytes *int64          `json:"peak_activation_bytes"`
	PeakMemBytes        *int64          `json:"peak_mem_bytes"`
	LiveRank            int             `json:"live_rank"`
	LiveStep            int64           `json:"live_step"`
	Live                []jsonLivePoint `json:"live"`
}

type jsonLivePoint struct {
	AtNs  int64 `json:"at_ns"`
	Live  int   `json:"live"`
	Bytes int64 `json:"bytes"`
}

type jsonOverhead struct {
	Kind   string  `json:"kind"`
	MeanMs float64 `json:"mean_ms"`
	MaxMs  float64 `json:"max_ms"`
	Steps  int     `json:"steps"`
}

type jsonSchedule struct {
	Identified      *string         `json:"identified"`
	Virtual         int             `json:"virtual"`
	Candidates      []jsonCandidate `json:"candidates"`
	DeviationCount  int             `json:"deviation_count"`
	Deviations      []jsonDeviation `json:"deviations"`
	ViolationCount  int             `json:"violation_count"`
	ViolationCounts map[string]int  `json:"violation_counts"`
	Violations      []jsonViolation `json:"violations"`
}

type jsonCandidate struct {
	Name      string  `json:"name"`
	Virtual   int     `json:"virtual"`
	Ops       int     `json:"ops"`
	Deviating int     `json:"deviating"`
	Fraction  float64 `json:"fraction"`
}

type jsonDeviation struct {
	Step  int64  `json:"step"`
	Rank  int    `json:"rank"`
	Stage int    `json:"stage"`
	Index int    `json:"index"`
	Want  string `json:"want"`
	Got   string `json:"got"`
}

type jsonViolation struct {
	Code       string `json:"code"`
	Step       int64  `json:"step"`
	Pipeline   int    `json:"pipeline"`
	Stage      int    `json:"stage"`
	Rank       int    `json:"rank"`
	Ranks      []int  `json:"ranks"`
	MicroBatch int    `json:"microbatch"`
	Op         string `json:"op"`
	Message    string `json:"message"`
}

type jsonStep struct {
	Step      int64   `json:"step"`
	Pipeline  int32   `json:"pipeline"`
	WindowMs  float64 `json:"window_ms"`
	Complete  bool    `json:"complete"`
	Bubble    float64 `json:"bubble"`
	Balance   float64 `json:"balance"`
	UPipeline float64 `json:"pipeline_utilization"`
}

type jsonFinding struct {
	Severity string  `json:"severity"`
	Code     string  `json:"code"`
	Message  string  `json:"message"`
	ImpactMs float64 `json:"impact_ms"`
}

func writeJSON(w io.Writer, rep *analyze.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(toJSON(rep))
}

func toJSON(rep *analyze.Report) jsonReport {
	j := rep.Job
	out := jsonReport{
		Schema: analyze.SchemaID,
		Job: jsonJob{WorldSize: j.WorldSize, PP: j.PP, TP: j.TP, DP: j.DP, Virtual: j.Virtual,
			MicroBatches: j.MicroBatches, Steps: j.Steps, Schedule: j.Schedule, Events: j.Events},
		StepMs:      finite(rep.StepMs),
		StepMsWorst: finite(rep.StepMsWorst),
		Utilization: jsonUtilization{Pipeline: finite(rep.Utilization.Pipeline), Bubble: finite(rep.Utilization.Bubble),
			Balance: finite(rep.Utilization.Balance), Compute: finitePtr(rep.Utilization.Compute), MFU: finitePtr(rep.Utilization.MFU)},
		Bubble:     toJSONBubble(rep.Bubble),
		Stages:     []jsonStage{},
		Imbalance:  toJSONImbalance(rep.Imbalance),
		Stragglers: []jsonStraggler{},
		P2P:        toJSONP2P(rep.P2P),
		Memory:     []jsonMemory{},
		Overhead:   []jsonOverhead{},
		Schedule:   toJSONSchedule(rep.Schedule),
		Steps:      []jsonStep{},
		Findings:   []jsonFinding{},
	}
	for _, s := range rep.Stages {
		out.Stages = append(out.Stages, jsonStage{Stage: int(s.Stage), Rank: int(s.Rank), FwdMs: finite(s.FwdMs),
			BwdMs: finite(s.BwdMs), BusyMs: finite(s.BusyMs), IdleMs: finite(s.IdleMs), Bubble: finite(s.Bubble),
			PeakLiveMicroBatches: s.PeakLiveMicroBatches, LiveBound: positive(s.LiveBound),
			PeakActivationBytes: positive(s.PeakActivationBytes),
			WarmupMs:            finite(s.WarmupMs), CooldownMs: finite(s.CooldownMs), SteadyMs: finite(s.SteadyMs),
			P2PWaitMs: finite(s.P2PWaitMs), OtherWaitMs: finite(s.OtherWaitMs),
			F: toJSONDist(s.F), B: toJSONDist(s.B), W: toJSONDist(s.W)})
	}
	for _, s := range rep.Stragglers {
		out.Stragglers = append(out.Stragglers, jsonStraggler{Step: s.Step, Pipeline: s.Pipeline, Stage: s.Stage,
			Rank: s.Rank, Chunk: s.Chunk, MicroBatch: s.MicroBatch, Kind: s.Kind, DurMs: finite(s.DurMs),
			TypicalMs: finite(s.TypicalMs), ExpectedMs: finite(s.ExpectedMs), Factor: finite(s.Factor),
			Tokens: s.Tokens, Class: s.Class, DelayMs: finite(s.DelayMs)})
	}
	for _, m := range rep.Memory.Stages {
		jm := jsonMemory{Stage: m.Stage, Peak: m.Peak, Bound: positive(m.Bound),
			PeakActivationBytes: positive(m.PeakActivationBytes), PeakMemBytes: positive(m.PeakMemBytes),
			LiveRank: m.LiveRank, LiveStep: m.LiveStep, Live: []jsonLivePoint{}}
		for _, p := range m.Live {
			jm.Live = append(jm.Live, jsonLivePoint(p))
		}
		out.Memory = append(out.Memory, jm)
	}
	for _, o := range rep.Overhead {
		out.Overhead = append(out.Overhead, jsonOverhead{Kind: o.Kind, MeanMs: finite(o.MeanMs), MaxMs: finite(o.MaxMs), Steps: o.Steps})
	}
	for _, s := range rep.Steps {
		out.Steps = append(out.Steps, jsonStep{Step: s.Step, Pipeline: s.Pipeline, WindowMs: finite(s.WindowMs()),
			Complete: s.Complete, Bubble: finite(s.Bubble), Balance: finite(s.Balance), UPipeline: finite(s.UPipeline)})
	}
	for _, f := range rep.Findings {
		out.Findings = append(out.Findings, jsonFinding{Severity: f.Severity, Code: f.Code, Message: f.Message, ImpactMs: finite(f.ImpactMs)})
	}
	return out
}

func toJSONBubble(b analyze.Bubble) jsonBubble {
	out := jsonBubble{Measured: finite(b.Measured), Theoretical: finitePtr(b.Theoretical), Warmup: finite(b.Warmup),
		Cooldown: finite(b.Cooldown), Steady: finite(b.Steady), SteadyP2P: finite(b.SteadyP2P), SteadyOther: finite(b.SteadyOther)}
	if g := b.Gap; g != nil {
		out.Gap = &jsonGap{Gap: finite(g.Gap), P2P: finite(g.P2P), Overhead: finite(g.Overhead), Jitter: finite(g.Jitter),
			Imbalance: finite(g.Imbalance), Other: finite(g.Other), UniformBubble: finite(g.UniformBubble)}
	}
	return out
}

func toJSONDist(d analyze.Dist) jsonDist {
	return jsonDist{N: d.N, MeanMs: finite(d.MeanMs), MedianMs: finite(d.MedianMs), P95Ms: finite(d.P95Ms),
		MinMs: finite(d.MinMs), MaxMs: finite(d.MaxMs)}
}

func toJSONImbalance(im analyze.Imbalance) jsonImbalance {
	out := jsonImbalance{BusyMs: finite(im.BusyMs), MeanBusyMs: finite(im.MeanBusyMs), ExcessMs: finite(im.ExcessMs),
		ExcessFrac: finite(im.ExcessFrac), FBMs: finite(im.FBMs), MeanFBMs: finite(im.MeanFBMs),
		MeasuredStepMs: finite(im.MeasuredStepMs), BalancedStepMs: positive(im.BalancedStepMs)}
	if im.SlowestStage >= 0 {
		s := im.SlowestStage
		out.SlowestStage = &s
	}
	if im.SlowestStageByFB >= 0 {
		s := im.SlowestStageByFB
		out.SlowestStageByFB = &s
	}
	return out
}

func toJSONP2P(p analyze.P2P) jsonP2P {
	out := jsonP2P{BytesPerStep: finite(p.BytesPerStep), ModelBytesPerStep: positive(p.ModelBytesPerStep),
		ExposedMs: finite(p.ExposedMs), Boundaries: []jsonBoundary{}}
	for _, b := range p.Boundaries {
		out.Boundaries = append(out.Boundaries, jsonBoundary{From: b.From, To: b.To, Kind: b.Kind,
			BytesPerStep: finite(b.BytesPerStep), SendsPerStep: finite(b.SendsPerStep),
			ModelBytesPerStep: positive(b.ModelBytesPerStep), GBps: positive(b.GBps), ExposedMs: finite(b.ExposedMs)})
	}
	return out
}

func toJSONSchedule(c analyze.Conformance) jsonSchedule {
	out := jsonSchedule{Virtual: c.Virtual, DeviationCount: c.DeviationCount, ViolationCount: c.ViolationCount,
		ViolationCounts: map[string]int{}, Candidates: []jsonCandidate{}, Deviations: []jsonDeviation{}, Violations: []jsonViolation{}}
	if c.Identified != "" {
		id := c.Identified
		out.Identified = &id
	}
	for k, v := range c.ViolationCounts {
		out.ViolationCounts[k] = v
	}
	for _, m := range c.Candidates {
		out.Candidates = append(out.Candidates, jsonCandidate{Name: m.Name, Virtual: m.Virtual, Ops: m.Ops,
			Deviating: m.Deviating, Fraction: finite(m.Fraction)})
	}
	for _, d := range c.Deviations {
		out.Deviations = append(out.Deviations, jsonDeviation(d))
	}
	for _, v := range c.Violations {
		ranks := v.Ranks
		if ranks == nil {
			ranks = []int{}
		}
		out.Violations = append(out.Violations, jsonViolation{Code: v.Code, Step: v.Step, Pipeline: v.Pipeline,
			Stage: v.Stage, Rank: v.Rank, Ranks: ranks, MicroBatch: v.MicroBatch, Op: v.Op, Message: v.Message})
	}
	return out
}

// finite maps NaN and infinities (which JSON cannot carry) to 0.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// finitePtr is nil for nil, NaN and infinities.
func finitePtr(x *float64) *float64 {
	if x == nil || math.IsNaN(*x) || math.IsInf(*x, 0) {
		return nil
	}
	return x
}

// positive returns a pointer to x, or nil when x is zero or negative: the
// analysis uses 0 for "unknown" in these fields.
func positive[T int | int64 | float64](x T) *T {
	if x <= 0 {
		return nil
	}
	if f, ok := any(x).(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return nil
	}
	return &x
}
