package report

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/ppprof/ppprof/sim"
)

// chromiumPath is Debian's chromium; .ci/run installs it.
const chromiumPath = "/usr/bin/chromium"

// TestHTMLInBrowser opens the HTML report from a file URL in headless
// Chromium: no console errors (a blocked load would be one, under the
// page's Content Security Policy), the timeline renders (a screenshot of
// it holds the F and B colours), and hovering an op shows its tooltip.
func TestHTMLInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("no browser at %s (apt-get install -y chromium; .ci/run does): %v", chromiumPath, err)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	tr, rep := simAnalysed(t, sim.Config{Job: `browser <script>alert("x")</script>`, Schedule: "interleaved", Stages: 4, MicroBatches: 8, Steps: 2,
		P2PLatencyUs: 30, P2PGbps: 400, SlowStage: 3, SlowFactor: 1.2})
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	if err := WriteHTML(&buf, tr, rep, HTMLOptions{Step: -1}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(1400, 1000),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// Subscribe before loading and read as the page runs: no message is
	// lost.
	var mu sync.Mutex
	var problems []string
	done := make(chan struct{})
	msgs := chromedp.Console(bctx)
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("console %s: %s", m.Type, m))
				mu.Unlock()
			}
		}
	}()
	if err := chromedp.Do(bctx,
		chromedp.Navigate("file://"+page),
		chromedp.WaitVisible(chromedp.CSS(`#tl-canvas[data-ready="1"]`)),
	); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	ready, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("tl").scrollIntoView(); window.ppprofTimeline.ready`))
	if err != nil || !ready {
		t.Fatalf("timeline not ready: %v", err)
	}
	idx, err := chromedp.Run(bctx, chromedp.Evaluate[int](`window.ppprofTimeline.find("F", 0, 0)`))
	if err != nil || idx < 0 {
		t.Fatalf("F of micro-batch 0 on row 0: op %d, %v", idx, err)
	}
	type point struct{ X, Y float64 }
	centre := fmt.Sprintf(`window.ppprofTimeline.center(%d)`, idx)
	at, err := chromedp.Run(bctx, chromedp.Evaluate[point](centre))
	if err != nil {
		t.Fatal(err)
	}

	// The timeline renders: its screenshot holds the F and B colours.
	shot, err := chromedp.Run(bctx, chromedp.Screenshot(chromedp.CSS("#tl-canvas")))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("decoding the screenshot: %v", err)
	}
	var nF, nB int
	bnd := img.Bounds()
	for y := bnd.Min.Y; y < bnd.Max.Y; y++ {
		for x := bnd.Min.X; x < bnd.Max.X; x++ {
			switch c := img.At(x, y); {
			case sameRGB(c, colF):
				nF++
			case sameRGB(c, colB):
				nB++
			}
		}
	}
	if bnd.Dx() < 400 || bnd.Dy() < 100 || nF < 200 || nB < 200 {
		t.Errorf("timeline screenshot %dx%d: %d F pixels, %d B pixels: not drawn?", bnd.Dx(), bnd.Dy(), nF, nB)
	}

	// Hovering the op shows its tooltip, with its labels.
	if err := chromedp.Do(bctx, chromedp.MouseEvent(chromedp.MouseMoved, at.X, at.Y)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("tl-tip").style.display === "block"`,
		chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatalf("no tooltip after hovering F0 at (%.0f, %.0f): %v", at.X, at.Y, err)
	}
	tip, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("tl-tip").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"F ", "stage 0", "micro-batch 0", "step ", "duration"} {
		if !strings.Contains(tip, want) {
			t.Errorf("tooltip %q lacks %q", tip, want)
		}
	}

	// The wheel zooms: the op moves on screen.
	wheel := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, input.DispatchMouseEvent, input.DispatchMouseEventParams{
			Type: chromedp.MouseWheel, X: at.X + 200, Y: at.Y, DeltaX: 0.001, DeltaY: -600}) // DeltaX: the protocol wants both, and drops a zero
		return err
	})
	if err := chromedp.Do(bctx, wheel, chromedp.Sleep(100*time.Millisecond)); err != nil {
		t.Fatalf("zooming: %v", err)
	}
	after, err := chromedp.Run(bctx, chromedp.Evaluate[point](centre))
	if err != nil {
		t.Fatal(err)
	}
	if after.X == at.X {
		t.Errorf("the wheel did not zoom: the op stayed at x=%.1f", at.X)
	}

	// No console errors (a load the page's CSP blocked would be one).
	// A round trip and a pause let the last messages arrive.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[int](`1`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	cancelBrowser()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
}
