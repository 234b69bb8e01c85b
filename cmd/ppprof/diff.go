package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/internal/gate"
	"github.com/spf13/cobra"
)

// defaultDiffGates apply when `diff` gets no --fail-on: a regression of more
// than 5% in step time or 0.02 in bubble fails the build.
var defaultDiffGates = []string{"step_ms>5%", "bubble>0.02"}

type diffOptions struct {
	base, cur string
	failOn    []string
	format    string
	quiet     bool
	stream    string // --stream, as for analyze
	memory    string // --max-memory, as for analyze
	stdout    io.Writer
	stderr    io.Writer
}

func newCmdDiff(stdout, stderr io.Writer) *cobra.Command {
	opts := &diffOptions{stdout: stdout, stderr: stderr}
	cmd := &cobra.Command{
		Use:   "diff BASE NEW",
		Short: "Compare two analyses factor by factor; fail on regressions",
		Long: `diff compares two traces' analyses factor by factor. BASE and NEW are each
a trace (file, directory or glob) or a saved 'analyze --format json' output.

Each --fail-on threshold applies to the change from BASE to NEW: 'step_ms>5%'
fails when the step time grew by more than 5 percent, 'bubble>0.02' when the
bubble grew by more than 0.02. Without --fail-on, the defaults are
` + strings.Join(defaultDiffGates, " and ") + `. Exit 3 when one is crossed.

A trace is analysed as analyze analyses it: --stream and --max-memory as
there (a trace too large to analyse whole is streamed).`,
		Args: cobra.ExactArgs(2),
		RunE: readingArgs(func(args []string) error {
			opts.base, opts.cur = args[0], args[1]
			return diffRun(opts)
		}),
	}
	cmd.Flags().StringArrayVar(&opts.failOn, "fail-on", nil, "threshold on the change, e.g. 'step_ms>5%' or 'bubble>0.02' (repeatable)")
	cmd.Flags().StringVar(&opts.format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVarP(&opts.quiet, "quiet", "q", false, "do not print warnings about the input")
	cmd.Flags().StringVar(&opts.stream, "stream", "auto", "read a trace a few pipeline replicas at a time (for traces larger than memory): auto, always or never, as for analyze")
	cmd.Flags().StringVar(&opts.memory, "max-memory", "", "memory the analyses may plan for, e.g. 8G or 512M (default: the machine's RAM), as for analyze")
	return cmd
}

// diffRows are the numbers a diff shows, in order: JSON path and label.
var diffRows = [][2]string{
	{"step_ms", "step time, ms"},
	{"utilization.pipeline", "pipeline utilisation"},
	{"bubble.measured", "bubble"},
	{"bubble.theoretical", "bubble, theory"},
	{"utilization.balance", "balance"},
	{"utilization.compute", "compute efficiency"},
	{"utilization.mfu", "MFU"},
	{"p2p.exposed_ms", "exposed P2P, ms"},
}

// diffLoad returns the analysis values of path: a saved analysis JSON as it
// is, anything else read as a trace and analysed as analyze does (--stream,
// --max-memory: under auto a trace too large to analyse whole is streamed).
func diffLoad(path string, opts *diffOptions) (gate.Values, error) {
	if data, ok := readAnalysisJSON(path); ok {
		vals, err := gate.Flatten(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return vals, nil
	}
	aopts := &analyzeOptions{paths: []string{path}, quiet: opts.quiet, stream: opts.stream, memory: opts.memory, stdout: io.Discard, stderr: opts.stderr}
	plan, err := planStream(aopts.paths, aopts.stream, aopts.memory, false)
	if err != nil {
		return nil, err
	}
	var rep *analyze.Report
	if plan.stream {
		rep, err = analyzeStreamed(aopts, analyze.AllSteps, plan)
	} else {
		rep, err = analyzeWhole(aopts, analyze.AllSteps)
	}
	if err != nil {
		return nil, err
	}
	vals, _, err := analysisValues(rep)
	return vals, err
}

// maxAnalysisJSON is the largest file diff reads to see whether it is a
// saved analysis (the 302M-event fleet trace's is 1.2 MB): a larger file
// is a trace, which is not read into memory to find out.
const maxAnalysisJSON = 256 << 20

// readAnalysisJSON returns the contents of path when it is a saved
// analysis (ppprof analyze --format json).
func readAnalysisJSON(path string) ([]byte, bool) {
	st, err := os.Stat(ingest.Local(path))
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxAnalysisJSON {
		return nil, false
	}
	data, err := os.ReadFile(ingest.Local(path))
	if err != nil || !looksLikeAnalysis(data) {
		return nil, false
	}
	return data, true
}

func looksLikeAnalysis(data []byte) bool {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	var head struct {
		Schema string `json:"schema"`
	}
	return json.Unmarshal(data, &head) == nil && head.Schema == analyze.SchemaID
}

type diffChange struct {
	Name     string   `json:"name"`
	Base     *float64 `json:"base"`
	New      *float64 `json:"new"`
	Delta    *float64 `json:"delta"`
	DeltaPct *float64 `json:"delta_pct"`
}

type diffCrossing struct {
	Threshold string  `json:"threshold"`
	Change    float64 `json:"change"`
}

func diffRun(opts *diffOptions) error {
	if opts.format != "text" && opts.format != "json" {
		return fmt.Errorf("--format: unknown format %q (want text or json)", opts.format)
	}
	exprs := opts.failOn
	if len(exprs) == 0 {
		exprs = defaultDiffGates
	}
	gates, err := parseGates(exprs)
	if err != nil {
		return err
	}
	base, err := diffLoad(opts.base, opts)
	if err != nil {
		return err
	}
	cur, err := diffLoad(opts.cur, opts)
	if err != nil {
		return err
	}
	var changes []diffChange
	paths := diffPaths(base, cur)
	for _, p := range paths {
		c := diffChange{Name: p, Base: base[p], New: cur[p]}
		if c.Base != nil && c.New != nil {
			d := *c.New - *c.Base
			c.Delta = &d
			if *c.Base != 0 {
				pct := 100 * d / math.Abs(*c.Base)
				c.DeltaPct = &pct
			}
		}
		changes = append(changes, c)
	}
	var crossed []diffCrossing
	var lines []string
	for _, g := range gates {
		hit, d, err := g.EvalDiff(base, cur)
		if err != nil {
			return err
		}
		if hit {
			crossed = append(crossed, diffCrossing{g.Text, d})
			unit := ""
			if g.Percent {
				unit = "%"
			}
			lines = append(lines, fmt.Sprintf("%s (%s changed by %+.6g%s)", g.Text, g.Path, d, unit))
		}
	}
	if opts.format == "json" {
		out := struct {
			Schema  string         `json:"schema"`
			Base    string         `json:"base"`
			New     string         `json:"new"`
			Changes []diffChange   `json:"changes"`
			Crossed []diffCrossing `json:"crossed"`
		}{"ppprof.diff/v1", opts.base, opts.cur, changes, crossed}
		if out.Crossed == nil {
			out.Crossed = []diffCrossing{}
		}
		enc := json.NewEncoder(opts.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		writeDiffText(opts.stdout, opts, changes)
	}
	return gateError(lines, opts.stderr)
}

// diffPaths lists the headline numbers, then every stage's busy time.
func diffPaths(base, cur gate.Values) []string {
	var out []string
	for _, r := range diffRows {
		if _, ok := base[r[0]]; ok {
			out = append(out, r[0])
		} else if _, ok := cur[r[0]]; ok {
			out = append(out, r[0])
		}
	}
	var stages []string
	for k := range cur {
		if strings.HasPrefix(k, "stages.") && strings.HasSuffix(k, ".busy_ms") {
			stages = append(stages, k)
		}
	}
	sort.Slice(stages, func(i, j int) bool {
		return len(stages[i]) < len(stages[j]) || len(stages[i]) == len(stages[j]) && stages[i] < stages[j]
	})
	return append(out, stages...)
}

func writeDiffText(w io.Writer, opts *diffOptions, changes []diffChange) {
	fmt.Fprintf(w, "base: %s\nnew:  %s\n\n", opts.base, opts.cur)
	fmt.Fprintf(w, "%-28s %14s %14s %14s %9s\n", "", "base", "new", "change", "%")
	num := func(p *float64) string {
		if p == nil {
			return "unknown"
		}
		return fmt.Sprintf("%.6g", *p)
	}
	for _, c := range changes {
		label := c.Name
		for _, r := range diffRows {
			if r[0] == c.Name {
				label = r[1]
			}
		}
		pct := ""
		if c.DeltaPct != nil {
			pct = fmt.Sprintf("%+.2f", *c.DeltaPct)
		}
		delta := ""
		if c.Delta != nil {
			delta = fmt.Sprintf("%+.6g", *c.Delta)
		}
		fmt.Fprintf(w, "%-28s %14s %14s %14s %9s\n", label, num(c.Base), num(c.New), delta, pct)
	}
}
