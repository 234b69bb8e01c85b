//go:build unix

package arrowv1

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestDecodeWorkersFaultAsCaller cuts a mapped file short after it is
// framed and before its record batches are decoded, so that the decoder's
// workers touch pages the file no longer has. The caller asks for a panic
// on such faults (debug.SetPanicOnFault, as ingest does around mapped
// reads): the fast path must give up (ok false), its workers faulting as
// the caller does, instead of one of them taking the process down with
// "unexpected fault address".
func TestDecodeWorkersFaultAsCaller(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	rng := rand.New(rand.NewSource(5))
	tr := randomTrace(rng, 1<<14, testKinds)
	for i := range tr.Seq {
		tr.Seq[i] = int64(i)
		tr.Rank[i], tr.Stage[i], tr.Pipeline[i], tr.TPRank[i] = 2, 1, 0, 0
		if tr.Kind[i].IsP2P() {
			tr.Peer[i] = 3
		}
	}
	var buf bytes.Buffer
	if err := WriteStream(&buf, tr, Options{Compression: LZ4, BatchRows: 512}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rank-00002.arrows")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, release, err := MapFileSparse(f)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	frames, err := framesOf(data)
	if err != nil {
		t.Fatal(err)
	}
	// The schema and the dictionaries lie within the page kept (the
	// caller reads them), and record batches past it (only the workers
	// read those).
	const kept = 4096
	beyond := 0
	for _, fr := range frames[1:] {
		switch {
		case fr.info.header != headerRecordBatch && fr.end > kept:
			t.Fatalf("a dictionary batch ends at %d: past the page kept", fr.end)
		case fr.info.header == headerRecordBatch && fr.start >= kept:
			beyond++
		}
	}
	if beyond < 4 {
		t.Fatalf("%d record batches past the page kept: too few", beyond)
	}
	if err := os.Truncate(path, kept); err != nil {
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	_, _, ok := fastReadInto(frames, len(data), nil)
	if ok {
		t.Fatal("decoded a file cut short under its mapping")
	}
}
