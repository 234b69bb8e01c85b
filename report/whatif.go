package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/ppprof/ppprof/analyze"
)

// WriteWhatIf renders a what-if result to w as text or JSON (the contract
// of `whatif --format json`: DESIGN.md "Contracts"). Markdown is the text
// with Markdown headings and lists.
func WriteWhatIf(w io.Writer, res *analyze.WhatIf, f Format) error {
	switch f {
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(whatIfJSONOf(res))
	case Text, "", Markdown:
		t := &textWriter{md: f == Markdown}
		writeWhatIfText(t, res)
		_, err := io.WriteString(w, t.b.String())
		return err
	}
	return fmt.Errorf("whatif: unknown format %q (want text, json or markdown)", f)
}

// The JSON of `whatif --format json`. The keys of DESIGN.md (schema,
// step_ms, scenarios[].name/step_ms/speedup/detail) are fixed; the others
// may grow. A scenario that cannot be predicted has null step_ms and
// speedup, and its detail says why.
type whatIfJSON struct {
	Schema       string             `json:"schema"`
	StepMs       float64            `json:"step_ms"`
	ReplayStepMs float64            `json:"replay_step_ms"`
	Steps        int                `json:"steps"`
	SkippedSteps int                `json:"skipped_steps"`
	SkipReason   string             `json:"skip_reason,omitempty"`
	Job          whatIfJSONJob      `json:"job"`
	Scenarios    []whatIfJSONScen   `json:"scenarios"`
	Verdict      whatIfJSONVerdict  `json:"verdict"`
	CriticalPath whatIfJSONCritical `json:"critical_path"`
}

type whatIfJSONJob struct {
	Schedule     string `json:"schedule"`
	Virtual      int    `json:"virtual"`
	PP           int    `json:"pp"`
	MicroBatches int    `json:"microbatches"`
	DP           int    `json:"dp"`
}

type whatIfJSONScen struct {
	Name      string   `json:"name"`
	StepMs    *float64 `json:"step_ms"`
	Speedup   *float64 `json:"speedup"`
	SavedMs   *float64 `json:"saved_ms"`
	Available bool     `json:"available"`
	Detail    string   `json:"detail"`
}

type whatIfJSONVerdict struct {
	Kind             string  `json:"kind"`
	Stage            int     `json:"stage"`
	StageFactor      float64 `json:"stage_factor"`
	EveryReplica     bool    `json:"every_replica"`
	WorkerPipeline   int     `json:"worker_pipeline"`
	WorkerStage      int     `json:"worker_stage"`
	WorkerRanks      []int   `json:"worker_ranks"`
	WorkerFactor     float64 `json:"worker_factor"`
	WorkerLinkFactor float64 `json:"worker_link_factor"`
	BalancedSavedMs  float64 `json:"balanced_saved_ms"`
	WorkerSavedMs    float64 `json:"worker_saved_ms"`
	Message          string  `json:"message"`
}

type whatIfJSONCritical struct {
	Steps        int                   `json:"steps"`
	LengthMs     float64               `json:"length_ms"`
	ComputeMs    float64               `json:"compute_ms"`
	P2PMs        float64               `json:"p2p_ms"`
	CollectiveMs float64               `json:"collective_ms"`
	OtherMs      float64               `json:"other_ms"`
	WaitMs       float64               `json:"wait_ms"`
	Stages       []whatIfJSONPathStage `json:"stages"`
	Kinds        []whatIfJSONPathKind  `json:"kinds"`
	MicroBatches []whatIfJSONPathMB    `json:"microbatches"`
	PathStep     int64                 `json:"path_step"`
	Path         []whatIfJSONPathOp    `json:"path"`
}

type whatIfJSONPathStage struct {
	Stage     int     `json:"stage"`
	ComputeMs float64 `json:"compute_ms"`
	P2PMs     float64 `json:"p2p_ms"`
}

type whatIfJSONPathKind struct {
	Kind string  `json:"kind"`
	Ms   float64 `json:"ms"`
	Ops  float64 `json:"ops"`
}

type whatIfJSONPathMB struct {
	MicroBatch int     `json:"microbatch"`
	Ms         float64 `json:"ms"`
	Ops        float64 `json:"ops"`
}

type whatIfJSONPathOp struct {
	Rank       int     `json:"rank"`
	Pipeline   int     `json:"pipeline"`
	Stage      int     `json:"stage"`
	Chunk      int     `json:"chunk"`
	MicroBatch int     `json:"microbatch"`
	Kind       string  `json:"kind"`
	StartMs    float64 `json:"start_ms"`
	EndMs      float64 `json:"end_ms"`
	WaitMs     float64 `json:"wait_ms"`
}

// whatIfNum returns &x, or nil for a value JSON cannot carry.
func whatIfNum(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

func whatIfJSONOf(res *analyze.WhatIf) whatIfJSON {
	out := whatIfJSON{Schema: analyze.WhatIfSchema, StepMs: res.StepMs, ReplayStepMs: res.ReplayStepMs,
		Steps: res.Steps, SkippedSteps: res.SkippedSteps, SkipReason: res.SkipReason,
		Job:       whatIfJSONJob{Schedule: res.Schedule, Virtual: res.Virtual, PP: res.Stages, MicroBatches: res.MicroBatches, DP: res.Replicas},
		Scenarios: []whatIfJSONScen{}}
	for _, sc := range res.Scenarios {
		j := whatIfJSONScen{Name: sc.Name, Available: sc.Available, Detail: sc.Detail}
		if sc.Available {
			j.StepMs, j.Speedup, j.SavedMs = whatIfNum(sc.StepMs), whatIfNum(sc.Speedup), whatIfNum(sc.SavedMs)
		}
		out.Scenarios = append(out.Scenarios, j)
	}
	v := res.Verdict
	out.Verdict = whatIfJSONVerdict{Kind: v.Kind, Stage: v.Stage, StageFactor: v.StageFactor, EveryReplica: v.EveryReplica,
		WorkerPipeline: v.WorkerPipeline, WorkerStage: v.WorkerStage, WorkerRanks: v.WorkerRanks, WorkerFactor: v.WorkerFactor,
		WorkerLinkFactor: v.WorkerLinkFactor, BalancedSavedMs: v.BalancedSavedMs, WorkerSavedMs: v.WorkerSavedMs, Message: v.Message}
	if out.Verdict.WorkerRanks == nil {
		out.Verdict.WorkerRanks = []int{}
	}
	cp := res.CriticalPath
	c := whatIfJSONCritical{Steps: cp.Steps, LengthMs: cp.LengthMs, ComputeMs: cp.ComputeMs, P2PMs: cp.P2PMs,
		CollectiveMs: cp.CollectiveMs, OtherMs: cp.OtherMs, WaitMs: cp.WaitMs, PathStep: cp.PathStep,
		Stages: []whatIfJSONPathStage{}, Kinds: []whatIfJSONPathKind{}, MicroBatches: []whatIfJSONPathMB{}, Path: []whatIfJSONPathOp{}}
	for _, s := range cp.Stages {
		c.Stages = append(c.Stages, whatIfJSONPathStage(s))
	}
	for _, k := range cp.Kinds {
		c.Kinds = append(c.Kinds, whatIfJSONPathKind(k))
	}
	for _, m := range cp.MicroBatches {
		c.MicroBatches = append(c.MicroBatches, whatIfJSONPathMB(m))
	}
	for _, op := range cp.Path {
		c.Path = append(c.Path, whatIfJSONPathOp(op))
	}
	out.CriticalPath = c
	return out
}

// maxTextPathMicroBatches bounds the critical micro-batches the text
// lists; JSON has them all.
const maxTextPathMicroBatches = 8

func writeWhatIfText(t *textWriter, res *analyze.WhatIf) {
	sched := res.Schedule
	if sched == "" {
		sched = "schedule unknown"
	}
	t.title(fmt.Sprintf("ppprof what-if: %s, PP %d, v=%d, %d micro-batches, DP %d; %d step(s) replayed",
		sched, res.Stages, res.Virtual, res.MicroBatches, res.Replicas, res.Steps))
	t.line("measured step %s ms; replayed with measured durations %s ms", msf(res.StepMs), msf(res.ReplayStepMs))
	if res.SkippedSteps > 0 {
		t.line("%d step(s) not replayed: %s", res.SkippedSteps, res.SkipReason)
	}

	t.section("Scenarios (predicted step time)")
	t.table([]string{"scenario", "step ms", "speedup", "saves ms"}, func(row func(...string)) {
		for _, sc := range res.Scenarios {
			if !sc.Available {
				row(sc.Name, "-", "-", "-")
				continue
			}
			row(sc.Name, msf(sc.StepMs), fmt.Sprintf("%.3gx", sc.Speedup), msf(sc.SavedMs))
		}
	})
	t.b.WriteString("\n")
	for _, sc := range res.Scenarios {
		t.line("%s: %s", sc.Name, sc.Detail)
	}

	t.section("Slow worker or slow stage")
	t.line("%s", res.Verdict.Message)

	cp := res.CriticalPath
	t.section("Critical path (mean per step)")
	t.line("%s ms = compute %s + P2P %s + OPT/collectives %s + other %s + waits %s",
		msf(cp.LengthMs), msf(cp.ComputeMs), msf(cp.P2PMs), msf(cp.CollectiveMs), msf(cp.OtherMs), msf(cp.WaitMs))
	var parts []string
	for _, s := range cp.Stages {
		parts = append(parts, fmt.Sprintf("%d: %s + %s P2P", s.Stage, msf(s.ComputeMs), msf(s.P2PMs)))
	}
	t.line("by stage (compute + P2P received, ms): %s", strings.Join(parts, "; "))
	parts = parts[:0]
	for _, k := range cp.Kinds {
		parts = append(parts, fmt.Sprintf("%s %s ms (%.3g ops)", k.Kind, msf(k.Ms), k.Ops))
	}
	t.line("by kind: %s", strings.Join(parts, ", "))
	parts = parts[:0]
	for i, m := range cp.MicroBatches {
		if i == maxTextPathMicroBatches {
			parts = append(parts, fmt.Sprintf("... %d more", len(cp.MicroBatches)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%d (%s ms)", m.MicroBatch, msf(m.Ms)))
	}
	if len(parts) > 0 {
		t.line("critical micro-batches: %s", strings.Join(parts, ", "))
	}
	t.line("step %d's path: %d ops (--format json lists them)", cp.PathStep, len(cp.Path))
}

// msf prints ms with 4 significant digits, or whole ms from 1000 on (no
// exponent).
func msf(x float64) string {
	if math.Abs(x) >= 1000 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.4g", x)
}
