//go:build unix

package ingest

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// TestReadArrowFromPipe checks that an Arrow stream read from a named pipe
// (which cannot be mapped nor read again from its start) keeps the bytes
// sniffed first.
func TestReadArrowFromPipe(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 0))
	tr := randomTrace(rng, 2, 20)
	tr.SortByRankSeq()
	var buf bytes.Buffer
	if err := arrowv1.WriteStream(&buf, tr, arrowv1.Options{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rank.arrows")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip(err)
	}
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(buf.Bytes())
		f.Close()
	}()
	got, _, _, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(tr, got); d != "" {
		t.Error(d)
	}
}
