package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// simulated writes a small simulated trace and returns its path.
func simulated(t *testing.T, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "t.arrow")
	base := []string{"simulate", "--schedule", "1f1b", "--stages", "4", "--microbatches", "8", "--steps", "2", "--p2p-latency-us", "50", "-o", out}
	if _, stderr, code := ppprof(t, append(base, args...)...); code != 0 {
		t.Fatalf("simulate exit %d: %s", code, stderr)
	}
	return out
}

func TestReportCommand(t *testing.T) {
	tr := simulated(t, "--slow-stage", "3", "--slow-factor", "1.3")
	dir := t.TempDir()
	pngPath, htmlPath := filepath.Join(dir, "r.png"), filepath.Join(dir, "r.html")
	stdout, stderr, code := ppprof(t, "report", tr, "--png", pngPath, "--html", htmlPath, "--width", "1000", "--panels", "timeline,waterfall")
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, pngPath) || !strings.Contains(stdout, htmlPath) {
		t.Errorf("stdout does not say where the reports are: %q", stdout)
	}
	b, err := os.ReadFile(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() != 1000 {
		t.Fatalf("PNG: %v, %v", err, img.Bounds())
	}
	h, err := os.ReadFile(htmlPath)
	if err != nil || !bytes.Contains(h, []byte("Utilisation factors")) {
		t.Fatalf("HTML: %v", err)
	}
	// --step picks a step; a step the trace lacks is an error.
	if _, stderr, code := ppprof(t, "report", tr, "--png", pngPath, "--step", "1"); code != 0 {
		t.Errorf("--step 1: exit %d: %s", code, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report", tr}, "nothing to write"},
		{[]string{"report", tr, "--png", pngPath, "--panels", "pie"}, "unknown panel"},
		{[]string{"report", tr, "--png", pngPath, "--step", "9"}, "step 9"},
		{[]string{"report", tr, "--png", pngPath, "--width", "10"}, "width"},
		{[]string{"report", filepath.Join(dir, "missing.arrow"), "--png", pngPath}, "missing.arrow"},
	} {
		_, stderr, code := ppprof(t, c.args...)
		if code != exitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 naming %q", c.args, code, stderr, c.want)
		}
	}
	// A failed run leaves no partial file behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".ppprof-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestReportHungTrace(t *testing.T) {
	tr := simulated(t, "--fault", "skip:rank=2,step=1,mb=3")
	htmlPath := filepath.Join(t.TempDir(), "hang.html")
	if _, stderr, code := ppprof(t, "report", tr, "--html", htmlPath, "-q"); code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr)
	}
	h, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Hang post-mortem", `class="waitfor"`} {
		if !bytes.Contains(h, []byte(want)) {
			t.Errorf("the hung trace's report lacks %q", want)
		}
	}
}

// TestReportStepStream: the report of one step of a job read a few
// pipeline replicas at a time (--stream always, and auto under a small
// memory budget: the analysis and the hang post-mortem streamed, only the
// step's events kept) is the report read whole, HTML and PNG to the byte,
// for a clean job and a hung one; --stream always needs --step N.
func TestReportStepStream(t *testing.T) {
	for _, fault := range []string{"", "skip:rank=18,step=2,mb=5"} {
		args := []string{"--schedule", "interleaved", "--dp", "3", "--tp", "2", "--jitter", "0.1", "--p2p-latency-us", "20", "--opt-ms", "1"}
		if fault != "" {
			args = append(args, "--fault", fault)
		}
		dir := fleetDir(t, args...)
		read := func(mode ...string) (html, png []byte) {
			t.Helper()
			html, png, _ = reportFiles(t, dir, append([]string{"--step", "2", "-q"}, mode...)...)
			return html, png
		}
		var modes []string
		saved := readAs
		readAs = func(m string) { modes = append(modes, m) }
		wantHTML, wantPNG := read("--stream", "never")
		if fault != "" && !bytes.Contains(wantHTML, []byte("Hang post-mortem")) {
			t.Fatalf("the hung job's report has no hang section")
		}
		for _, mode := range [][]string{{"--stream", "always"}, {"--max-memory", "64K"}} {
			modes = nil
			html, png := read(mode...)
			if !bytes.Equal(html, wantHTML) || !bytes.Equal(png, wantPNG) {
				t.Errorf("fault %q, %v: HTML the same %v, PNG the same %v", fault, mode, bytes.Equal(html, wantHTML), bytes.Equal(png, wantPNG))
			}
			if len(modes) == 0 || modes[0] != "streamed" {
				t.Errorf("fault %q, %v: read %v, want streamed", fault, mode, modes)
			}
		}
		readAs = saved
	}
	// A rank file cut short: its warning printed once, as read whole.
	dir := fleetDir(t, "--schedule", "1f1b", "--dp", "3", "--tp", "2")
	cutTail(t, filepath.Join(dir, "rank-00005.arrows"))
	var errs []string
	for _, mode := range []string{"never", "always"} {
		_, stderr, code := ppprof(t, "report", dir, "--step", "1", "--stream", mode, "--html", filepath.Join(t.TempDir(), "r.html"))
		if code != 0 {
			t.Fatalf("--stream %s, a file cut short: exit %d: %s", mode, code, stderr)
		}
		errs = append(errs, stderr)
	}
	if errs[0] != errs[1] || strings.Count(errs[1], "rank-00005.arrows") != 1 {
		t.Errorf("a file cut short: stderr streamed %q, read whole %q: want the same, the file named once", errs[1], errs[0])
	}
}

// TestExportStepStream: the exports of one step of rank files read a few
// pipeline replicas at a time (the default for --step N, and always) are
// those of the trace read whole, byte for byte: Chrome trace, pprof and
// every Parquet file.
func TestExportStepStream(t *testing.T) {
	dir := fleetDir(t, "--schedule", "1f1b", "--dp", "3", "--tp", "2", "--jitter", "0.1", "--p2p-latency-us", "20", "--opt-ms", "1")
	files := func(mode ...string) map[string][]byte {
		t.Helper()
		out := t.TempDir()
		args := []string{"export", dir, "--step", "1", "-q", "--perfetto", filepath.Join(out, "t.json"),
			"--pprof", filepath.Join(out, "p.pb.gz"), "--parquet", filepath.Join(out, "pq")}
		if _, stderr, code := ppprof(t, append(args, mode...)...); code != 0 {
			t.Fatalf("export %v: exit %d: %s", mode, code, stderr)
		}
		return filesUnder(t, out)
	}
	var modes []string
	defer func(f func(string)) { readAs = f }(readAs)
	readAs = func(m string) { modes = append(modes, m) }
	want := files("--stream", "never")
	if len(want) < 3 || len(want["t.json"]) == 0 {
		t.Fatalf("exports of the whole read: %d files", len(want))
	}
	for _, mode := range [][]string{nil, {"--stream", "always"}} {
		modes = nil
		got := files(mode...)
		if len(got) != len(want) {
			t.Errorf("%v: %d files, want %d", mode, len(got), len(want))
		}
		for name, b := range want {
			if !bytes.Equal(got[name], b) {
				t.Errorf("%v: %s differs from the whole read's", mode, name)
			}
		}
		if !slices.Equal(modes, []string{"streamed"}) {
			t.Errorf("%v: read %v, want streamed", mode, modes)
		}
	}
	if _, stderr, code := ppprof(t, "export", dir, "--step", "9", "--perfetto", filepath.Join(t.TempDir(), "t.json")); code != 1 || !strings.Contains(stderr, "no events in step 9") {
		t.Errorf("a step without events: exit %d, %q", code, stderr)
	}
}

func TestExportCommand(t *testing.T) {
	tr := simulated(t)
	dir := t.TempDir()
	prof, chrome, pq := filepath.Join(dir, "p.pb.gz"), filepath.Join(dir, "t.json"), filepath.Join(dir, "pq")
	stdout, stderr, code := ppprof(t, "export", tr, "--pprof", prof, "--perfetto", chrome, "--parquet", pq)
	if code != 0 {
		t.Fatalf("export exit %d: %s", code, stderr)
	}
	for _, p := range []string{prof, chrome, filepath.Join(pq, "step=1", "rank=3", "part-0.parquet")} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
		if !strings.Contains(stdout, filepath.Base(strings.TrimSuffix(p, "/step=1/rank=3/part-0.parquet"))) {
			t.Errorf("stdout does not name %s: %q", p, stdout)
		}
	}
	// --step 0 exports that step only.
	pq0 := filepath.Join(dir, "pq0")
	if _, stderr, code := ppprof(t, "export", tr, "--parquet", pq0, "--step", "0"); code != 0 {
		t.Fatalf("export --step 0: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(pq0, "step=1")); !os.IsNotExist(err) {
		t.Errorf("--step 0 wrote step 1: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", tr}, "nothing to write"},
		{[]string{"export", tr, "--parquet", pq}, "not empty"},
		{[]string{"export", tr, "--pprof", prof, "--step", "5"}, "no events in step 5"},
	} {
		_, stderr, code := ppprof(t, c.args...)
		if code != exitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 naming %q", c.args, code, stderr, c.want)
		}
	}
}

func TestDemoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates and draws a 256-micro-batch-op job")
	}
	dir := filepath.Join(t.TempDir(), "demo")
	stdout, stderr, code := ppprof(t, "demo", "--out", dir)
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, stderr)
	}
	for _, f := range []string{"trace.arrow", "report.png", "timeline.png", "report.html"} {
		p := filepath.Join(dir, f)
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
		if !strings.Contains(stdout, p) {
			t.Errorf("stdout does not say where %s is", f)
		}
	}
	for _, want := range []string{"interleaved", "STAGE_IMBALANCE", "stage 7", "bubble"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the demo's analysis lacks %q:\n%s", want, stdout)
		}
	}
	// The trace it wrote analyses to the same job.
	a := analyzeJSON(t, filepath.Join(dir, "trace.arrow"))
	if a.Job.PP != 8 || a.Job.MicroBatches != 32 || a.Job.Virtual != 2 || a.Job.Schedule != "interleaved" {
		t.Errorf("demo job %+v", a.Job)
	}
	// The timeline PNG is small enough for the docs.
	if fi, err := os.Stat(filepath.Join(dir, "timeline.png")); err == nil && fi.Size() > 300<<10 {
		t.Errorf("timeline.png is %d bytes, want under 300 KB", fi.Size())
	}
}

// TestDocTimelinePNG checks the committed docs/demo-timeline.png, which
// docs/report.md shows: a PNG of the demo's timeline, small enough for the
// README (regenerate it as docs/report.md says).
func TestDocTimelinePNG(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "demo-timeline.png"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 300<<10 {
		t.Errorf("docs/demo-timeline.png is %d bytes, want under 300 KB", len(b))
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("docs/demo-timeline.png: %v", err)
	}
	if img.Bounds().Dx() != 1200 {
		t.Errorf("docs/demo-timeline.png is %d px wide; ppprof demo draws it 1200 px wide", img.Bounds().Dx())
	}
}

// reportFiles runs report on dir with args, writing an HTML and a PNG
// report, and returns them and its stderr; it fails the test on a non-zero
// exit.
func reportFiles(t *testing.T, dir string, args ...string) (html, png []byte, stderr string) {
	t.Helper()
	out := t.TempDir()
	h, p := filepath.Join(out, "r.html"), filepath.Join(out, "r.png")
	_, stderr, code := ppprof(t, append([]string{"report", dir, "--html", h, "--png", p}, args...)...)
	if code != 0 {
		t.Fatalf("report %v: exit %d: %s", args, code, stderr)
	}
	var err error
	if html, err = os.ReadFile(h); err != nil {
		t.Fatal(err)
	}
	if png, err = os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	return html, png, stderr
}

// whatIfSection cuts the what-if's section out of an HTML report: the
// page without it, the section, and the section without its note.
func whatIfSection(t *testing.T, html []byte) (rest, section, plain string) {
	t.Helper()
	s := string(html)
	i := strings.Index(s, `<div id="whatif">`)
	j := strings.Index(s, "</section>\n</div>\n")
	if i < 0 || j < i {
		t.Fatalf("no what-if section")
	}
	j += len("</section>\n</div>\n")
	section = s[i:j]
	plain = regexp.MustCompile(`\n<p class="sub">[^<]*</p>`).ReplaceAllString(section, "")
	return s[:i] + s[j:], section, plain
}

// TestReportEveryStepStream: the report of every step of a job read a few
// pipeline replicas at a time (--stream always; auto when the trace would
// not fit read whole, where it was refused before) draws what the whole
// read draws, hung or not: the same PNG, the same HTML but for the
// what-if, which re-times the drawn step alone (the one report --step N
// re-times, to the byte) and says so.
func TestReportEveryStepStream(t *testing.T) {
	defer func(f func() int64, g func(string)) { machineMemory, readAs = f, g }(machineMemory, readAs)
	var modes []string
	readAs = func(m string) { modes = append(modes, m) }
	for _, tc := range []struct {
		fault string
		drawn int // the step drawn: the first with a pending op, else the median one
	}{{"", -1}, {"skip:rank=18,step=2,mb=5", 2}} {
		args := []string{"--schedule", "interleaved", "--dp", "3", "--tp", "2", "--jitter", "0.1", "--p2p-latency-us", "20", "--opt-ms", "1"}
		if tc.fault != "" {
			args = append(args, "--fault", tc.fault)
		}
		dir := fleetDir(t, args...)
		rows, _, err := ingest.CountRows([]string{dir})
		if err != nil {
			t.Fatal(err)
		}
		read := func(args ...string) (html, png []byte, stderr string) {
			t.Helper()
			return reportFiles(t, dir, args...)
		}
		machineMemory = memTotalBytes
		wantHTML, wantPNG, _ := read("--stream", "never", "-q")
		wantRest, _, wholeSection := whatIfSection(t, wantHTML)
		if tc.fault != "" && !strings.Contains(wantRest, "Hang post-mortem") {
			t.Fatalf("the hung job's report has no hang section")
		}
		// Under auto, a trace that fits the machine is read whole,
		// whatever --max-memory says: the report of every step.
		modes = nil
		if html, _, _ := read("--max-memory", "64K", "-q"); !bytes.Equal(html, wantHTML) || slices.Contains(modes, "streamed") {
			t.Errorf("fault %q, auto, fits: read %v, the same HTML %v; want it read whole", tc.fault, modes, bytes.Equal(html, wantHTML))
		}
		for _, mode := range []struct {
			name string
			args []string
			mem  int64
		}{
			{"always", []string{"--stream", "always"}, 0},
			{"auto, too large to read whole", []string{"--max-memory", "64K"}, rows*trace.RowBytes - 1},
		} {
			machineMemory = memTotalBytes
			if mode.mem > 0 {
				machineMemory = func() int64 { return mode.mem }
			}
			modes = nil
			html, png, stderr := read(mode.args...)
			if !bytes.Equal(png, wantPNG) {
				t.Errorf("fault %q, %s: the PNG differs from the whole read's", tc.fault, mode.name)
			}
			if len(modes) == 0 || modes[0] != "streamed" {
				t.Errorf("fault %q, %s: read %v, want streamed", tc.fault, mode.name, modes)
			}
			rest, section, plain := whatIfSection(t, html)
			if rest != wantRest {
				t.Errorf("fault %q, %s: the HTML differs from the whole read's outside the what-if", tc.fault, mode.name)
			}
			m := regexp.MustCompile(`step (\d+) drawn, the what-if of step (\d+)`).FindStringSubmatch(stderr)
			if m == nil {
				t.Fatalf("fault %q, %s: stderr %q names no step drawn", tc.fault, mode.name, stderr)
			}
			drawn, wi := m[1], m[2]
			// A hung step drawn is not re-timed (its ops never ended): the
			// typical complete step is.
			if tc.drawn >= 0 && (drawn != strconv.Itoa(tc.drawn) || wi == drawn) || tc.drawn < 0 && wi != drawn {
				t.Errorf("fault %q, %s: step %s drawn, the what-if of step %s; want %d drawn", tc.fault, mode.name, drawn, wi, tc.drawn)
			}
			if !strings.Contains(section, "Of step "+wi+" only") || plain == section || plain == wholeSection {
				t.Errorf("fault %q, %s: what-if section %q: want the note of step %s, and not every step's", tc.fault, mode.name, section, wi)
			}
			// That step's what-if: report --step N's, to the byte.
			machineMemory = memTotalBytes
			stepHTML, _, _ := read("--stream", "never", "--step", wi, "-q")
			if _, _, stepSection := whatIfSection(t, stepHTML); plain != stepSection {
				t.Errorf("fault %q, %s: what-if of step %s\n%s\nreport --step %s's:\n%s", tc.fault, mode.name, wi, plain, wi, stepSection)
			}
		}
	}
}
