package collector

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/trace"
)

// newTestRecorder opens a Recorder on a temporary directory with a virtual
// clock unless cfg says otherwise, and closes it when the test ends.
func newTestRecorder(t *testing.T, cfg Config) *Recorder {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// readRank reads a rank file the way ppprof does.
func readRank(t *testing.T, path string) (*trace.Trace, ingest.FileInfo, []ingest.Warning) {
	t.Helper()
	tr, info, warns, err := ingest.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", filepath.Base(path), err)
	}
	return tr, info, warns
}

// hold blocks r's writer until the returned function is called.
func hold(t *testing.T, r *Recorder) (release func()) {
	t.Helper()
	req := request{kind: reqHold, reply: make(chan error, 1), hold: make(chan struct{})}
	r.reqs <- req
	<-req.reply
	done := false
	release = func() {
		if !done {
			done = true
			close(req.hold)
		}
	}
	t.Cleanup(release)
	return release
}

// rowsOf lists the rows of tr as events, in order.
func rowsOf(tr *trace.Trace) []trace.Event {
	out := make([]trace.Event, tr.Len())
	for i := range out {
		out[i] = tr.At(i)
	}
	return out
}
