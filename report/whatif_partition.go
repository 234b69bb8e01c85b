package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ppprof/ppprof/partition"
)

// PartitionSchema is the value of the "schema" key of the JSON partition.
const PartitionSchema = "ppprof.partition/v1"

// WritePartition renders a layer split to w as text, Markdown or JSON.
func WritePartition(w io.Writer, res *partition.Result, f Format) error {
	switch f {
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(partitionJSONOf(res))
	case Text, "", Markdown:
		t := &textWriter{md: f == Markdown}
		writePartitionText(t, res)
		_, err := io.WriteString(w, t.b.String())
		return err
	}
	return fmt.Errorf("partition: unknown format %q (want text, json or markdown)", f)
}

type partitionJSON struct {
	Schema        string               `json:"schema"`
	Stages        int                  `json:"stages"`
	Schedule      string               `json:"schedule"`
	MicroBatches  int                  `json:"microbatches"`
	MemLimitBytes int64                `json:"mem_limit_bytes"`
	Sizes         []int                `json:"sizes"`
	BottleneckMs  float64              `json:"bottleneck_ms"`
	StepMs        float64              `json:"step_ms"`
	Split         []partitionJSONStage `json:"split"`
	Even          partitionJSONEven    `json:"even"`
}

type partitionJSONStage struct {
	Stage     int     `json:"stage"`
	First     int     `json:"first"`
	Last      int     `json:"last"`
	FirstName string  `json:"first_name"`
	LastName  string  `json:"last_name"`
	FwdMs     float64 `json:"fwd_ms"`
	BwdMs     float64 `json:"bwd_ms"`
	CostMs    float64 `json:"cost_ms"`
	ActBytes  int64   `json:"act_bytes"`
	LiveBound int     `json:"live_bound"`
	MemBytes  int64   `json:"mem_bytes"`
}

type partitionJSONEven struct {
	Sizes        []int   `json:"sizes"`
	BottleneckMs float64 `json:"bottleneck_ms"`
	StepMs       float64 `json:"step_ms"`
	FitsMemory   bool    `json:"fits_memory"`
}

func partitionJSONOf(res *partition.Result) partitionJSON {
	out := partitionJSON{Schema: PartitionSchema, Stages: res.Stages, Schedule: res.Schedule, MicroBatches: res.MicroBatches,
		MemLimitBytes: res.MemLimitBytes, Sizes: res.Sizes(), BottleneckMs: res.BottleneckMs, StepMs: res.StepMs,
		Split: []partitionJSONStage{},
		Even:  partitionJSONEven{Sizes: res.Even.Sizes, BottleneckMs: res.Even.BottleneckMs, StepMs: res.Even.StepMs, FitsMemory: res.Even.FitsMemory}}
	for _, s := range res.Split {
		out.Split = append(out.Split, partitionJSONStage(s))
	}
	return out
}

func writePartitionText(t *textWriter, res *partition.Result) {
	lim := "no memory limit"
	if res.MemLimitBytes > 0 {
		lim = "at most " + bytesStr(float64(res.MemLimitBytes)) + " of activations per stage"
	}
	t.title(fmt.Sprintf("ppprof partition: %d stages, %s, %d micro-batches, %s", res.Stages, res.Schedule, res.MicroBatches, lim))
	sizes := make([]string, len(res.Split))
	for i, n := range res.Sizes() {
		sizes[i] = fmt.Sprint(n)
	}
	t.line("layers per stage: %s", strings.Join(sizes, ", "))
	t.line("slowest stage %.4g ms per micro-batch (F + B); predicted step %.4g ms (%s replayed, free P2P, no optimizer)",
		res.BottleneckMs, res.StepMs, res.Schedule)
	ev := res.Even
	evs := make([]string, len(ev.Sizes))
	for i, n := range ev.Sizes {
		evs[i] = fmt.Sprint(n)
	}
	fits := ""
	if res.MemLimitBytes > 0 && !ev.FitsMemory {
		fits = ", over the memory limit"
	}
	t.line("even split by layer count (%s): slowest stage %.4g ms, step %.4g ms%s", strings.Join(evs, ", "), ev.BottleneckMs, ev.StepMs, fits)

	t.section("Stages")
	t.table([]string{"stage", "layers", "first", "last", "F ms", "B ms", "F+B ms", "act/mb", "live", "act mem"}, func(row func(...string)) {
		for _, s := range res.Split {
			row(fmt.Sprint(s.Stage), fmt.Sprint(s.Last-s.First+1), s.FirstName, s.LastName,
				fmt.Sprintf("%.4g", s.FwdMs), fmt.Sprintf("%.4g", s.BwdMs), fmt.Sprintf("%.4g", s.CostMs),
				bytesStr(float64(s.ActBytes)), fmt.Sprint(s.LiveBound), bytesStr(float64(s.MemBytes)))
		}
	})
}
