package report

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/sim"
)

// pprofTop runs `go tool pprof -top` on the profile and returns each
// function's flat and cumulative ns.
func pprofTop(t *testing.T, path string) (flat, cum map[string]int64) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to run go tool pprof: %v", err)
	}
	cmd := exec.Command(goBin, "tool", "pprof", "-top", "-unit=ns", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0", path)
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, errb.String())
	}
	// "  123ns  1.23%  4.56%  789ns  7.89%  stage 3"
	line := regexp.MustCompile(`^\s*(\d+)(?:ns)?\s+[\d.]+%\s+[\d.]+%\s+(\d+)(?:ns)?\s+[\d.]+%\s+(.+?)\s*$`)
	flat, cum = map[string]int64{}, map[string]int64{}
	for _, l := range strings.Split(out.String(), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		f, _ := strconv.ParseInt(m[1], 10, 64)
		c, _ := strconv.ParseInt(m[2], 10, 64)
		flat[m[3]], cum[m[3]] = f, c
	}
	if len(cum) == 0 {
		t.Fatalf("no rows in go tool pprof -top:\n%s", out.String())
	}
	return flat, cum
}

// TestPprofTopTotals exports a profile, runs go tool pprof -top on it, and
// checks the totals of stages, kinds and idle causes against numbers
// worked out here from the trace's columns (and, for the P2P/other split
// of steady idle, from the analysis).
func TestPprofTopTotals(t *testing.T) {
	tr, rep := simAnalysed(t, sim.Config{Schedule: "1f1b", Stages: 4, MicroBatches: 8, Steps: 2,
		P2PLatencyUs: 150, P2PGbps: 200, SlowStage: 1, SlowFactor: 1.5})
	path := filepath.Join(t.TempDir(), "ppprof.pb.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WritePprof(f, tr, analyze.Options{Step: analyze.AllSteps}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	flat, cum := pprofTop(t, path)

	// Expected, from the columns: per step the window (first start to last
	// end of F/B/W/P2P), per stage its compute time (one rank a stage, no
	// overlap), first compute start and last compute end.
	const p = 4
	type win struct{ s, e int64 }
	wins := map[int64]*win{}
	first := map[[2]int64]int64{}
	last := map[[2]int64]int64{}
	kindNs := map[string]int64{}
	stageBusy := make([]int64, p)
	for i := 0; i < tr.Len(); i++ {
		k := tr.Kind[i]
		if !k.IsCompute() && !k.IsP2P() {
			continue
		}
		w := wins[tr.Step[i]]
		if w == nil {
			w = &win{math.MaxInt64, math.MinInt64}
			wins[tr.Step[i]] = w
		}
		w.s, w.e = min(w.s, tr.StartNs[i]), max(w.e, tr.EndNs[i])
		if k.IsCompute() {
			d := tr.EndNs[i] - tr.StartNs[i]
			kindNs[k.String()] += d
			stageBusy[tr.Stage[i]] += d
			key := [2]int64{tr.Step[i], int64(tr.Stage[i])}
			if f, ok := first[key]; !ok || tr.StartNs[i] < f {
				first[key] = tr.StartNs[i]
			}
			last[key] = max(last[key], tr.EndNs[i])
		}
	}
	var windowNs, warmup, cooldown int64
	for step, w := range wins {
		windowNs += w.e - w.s
		for st := 0; st < p; st++ {
			key := [2]int64{step, int64(st)}
			warmup += first[key] - w.s
			cooldown += w.e - last[key]
		}
	}
	var busy int64
	for _, b := range stageBusy {
		busy += b
	}
	steady := int64(p)*windowNs - busy - warmup - cooldown
	var p2pWait float64
	for _, s := range rep.Stages {
		p2pWait += s.P2PWaitMs * 1e6 * float64(len(wins))
	}
	if p2pWait <= 0 {
		t.Fatal("the trace has no exposed P2P wait to test")
	}

	near := func(name string, got int64, want float64) {
		t.Helper()
		if math.Abs(float64(got)-want) > 2+1e-9*want {
			t.Errorf("%s: %d ns in go tool pprof -top, want %.0f", name, got, want)
		}
	}
	for st := 0; st < p; st++ {
		near("stage "+strconv.Itoa(st)+" (cum)", cum["stage "+strconv.Itoa(st)], float64(windowNs))
	}
	near("pipeline 0 (cum)", cum["pipeline 0"], float64(p*windowNs))
	near("F (cum)", cum["F"], float64(kindNs["F"]))
	near("B (cum)", cum["B"], float64(kindNs["B"]))
	near(FrameIdleWarmup, flat[FrameIdleWarmup], float64(warmup))
	near(FrameIdleCooldown, flat[FrameIdleCooldown], float64(cooldown))
	near(FrameIdleP2PWait, flat[FrameIdleP2PWait], p2pWait)
	near(FrameIdleOther, flat[FrameIdleOther], float64(steady)-p2pWait)
	var mbs int64
	for name, v := range flat {
		if strings.HasPrefix(name, "mb ") {
			mbs += v
		}
	}
	near("mb * (flat)", mbs, float64(busy))

	// Labels: step, rank, micro-batch.
	prof, err := profile.Parse(bytes.NewReader(mustRead(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]bool{}
	for _, s := range prof.Sample {
		if len(s.Label["step"]) != 1 || len(s.Label["rank"]) != 1 {
			t.Fatalf("sample without step or rank labels: %v", s.Label)
		}
		steps[s.Label["step"][0]] = true
		leaf := s.Location[0].Line[0].Function.Name
		if strings.HasPrefix(leaf, "mb ") && (len(s.Label["microbatch"]) != 1 || leaf != "mb "+s.Label["microbatch"][0]) {
			t.Errorf("leaf %q with microbatch label %v", leaf, s.Label["microbatch"])
		}
		if root := s.Location[len(s.Location)-1].Line[0].Function.Name; root != "pipeline 0" {
			t.Errorf("root frame %q", root)
		}
	}
	if len(steps) != 2 {
		t.Errorf("samples of steps %v, want 0 and 1", steps)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPprofNoCompleteWindow: a trace whose only step hangs has nothing to
// profile, and says so.
func TestPprofNoCompleteWindow(t *testing.T) {
	f, err := sim.ParseFault("crash:rank=1,step=0,mb=2")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sim.Run(sim.Config{Schedule: "1f1b", Stages: 2, MicroBatches: 4, Faults: []sim.Fault{f}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WritePprof(&buf, tr, analyze.Options{Step: analyze.AllSteps}); err == nil || !strings.Contains(err.Error(), "no complete") {
		t.Errorf("WritePprof of a hung step: %v", err)
	}
}
