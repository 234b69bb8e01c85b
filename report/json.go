package report

import (
	"encoding/json"
	"io"
	"math"

	"github.com/ppprof/ppprof/analyze"
)

// The JSON contract of `analyze --format json` (DESIGN.md "Contracts"). Keys
// are stable; new keys may be added.
type jsonReport struct {
	Schema      string          `json:"schema"`
	Job         jsonJob         `json:"job"`
	StepMs      float64         `json:"step_ms"`
	Utilization jsonUtilization `json:"utilization"`
	Bubble      jsonBubble      `json:"bubble"`
	Stages      []jsonStage     `json:"stages"`
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
}

type jsonStage struct {
	Stage                int     `json:"stage"`
	Rank                 int     `json:"rank"`
	FwdMs                float64 `json:"fwd_ms"`
	BwdMs                float64 `json:"bwd_ms"`
	BusyMs               float64 `json:"busy_ms"`
	IdleMs               float64 `json:"idle_ms"`
	Bubble               float64 `json:"bubble"`
	PeakLiveMicroBatches int     `json:"peak_live_microbatches"`
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
	out := jsonReport{
		Schema: analyze.SchemaID,
		Job: jsonJob{WorldSize: rep.Job.WorldSize, PP: rep.Job.PP, TP: rep.Job.TP, DP: rep.Job.DP,
			Virtual: rep.Job.Virtual, MicroBatches: rep.Job.MicroBatches, Steps: rep.Job.Steps,
			Schedule: rep.Job.Schedule, Events: rep.Job.Events},
		StepMs: finite(rep.StepMs),
		Utilization: jsonUtilization{Pipeline: finite(rep.Utilization.Pipeline), Bubble: finite(rep.Utilization.Bubble),
			Balance: finite(rep.Utilization.Balance), Compute: rep.Utilization.Compute, MFU: rep.Utilization.MFU},
		Bubble: jsonBubble{Measured: finite(rep.Bubble.Measured), Theoretical: rep.Bubble.Theoretical,
			Warmup: finite(rep.Bubble.Warmup), Cooldown: finite(rep.Bubble.Cooldown), Steady: finite(rep.Bubble.Steady)},
		Stages:   []jsonStage{},
		Steps:    []jsonStep{},
		Findings: []jsonFinding{},
	}
	for _, s := range rep.Stages {
		out.Stages = append(out.Stages, jsonStage{Stage: int(s.Stage), Rank: int(s.Rank), FwdMs: finite(s.FwdMs),
			BwdMs: finite(s.BwdMs), BusyMs: finite(s.BusyMs), IdleMs: finite(s.IdleMs), Bubble: finite(s.Bubble),
			PeakLiveMicroBatches: s.PeakLiveMicroBatches})
	}
	for _, s := range rep.Steps {
		out.Steps = append(out.Steps, jsonStep{Step: s.Step, Pipeline: s.Pipeline, WindowMs: finite(s.WindowMs()),
			Complete: s.Complete, Bubble: finite(s.Bubble), Balance: finite(s.Balance), UPipeline: finite(s.UPipeline)})
	}
	for _, f := range rep.Findings {
		out.Findings = append(out.Findings, jsonFinding{Severity: f.Severity, Code: f.Code, Message: f.Message, ImpactMs: finite(f.ImpactMs)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// finite maps NaN and infinities (which JSON cannot carry) to 0.
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}
