package arrowv1

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/ppprof/ppprof/trace"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the committed seed corpus in testdata/fuzz/FuzzRead")

// fuzzSeeds are small inputs of every shape Read handles, by descriptive
// name: the committed seed corpus is written from them (see
// TestFuzzSeedCorpus) and FuzzRead adds them too.
func fuzzSeeds(tb testing.TB) map[string][]byte {
	// Small seeds keep the fuzzer fast: it minimizes every new input it
	// finds, running Read over and over, so bytes cost time.
	rng := rand.New(rand.NewSource(1))
	small := randomTrace(rng, 4, testKinds)
	small.Meta = trace.Meta{Job: "fuzz", Extra: map[string]string{"k": "v"}}
	seeds := map[string][]byte{}
	for _, w := range writers {
		for _, codec := range codecs {
			data := encode(tb, w, small, Options{Compression: codec, BatchRows: 2})
			name := fmt.Sprintf("%s-%s-2-batches", w.name, codecName(codec))
			seeds[name] = data
			ends, _ := messageEnds(tb, data, map[Format]int{FormatFile: fileStreamStart, FormatStream: 0}[w.format])
			cut := (ends[len(ends)-3] + ends[len(ends)-2]) / 2
			seeds[name+"-cut-in-last-batch"] = data[:cut]
			seeds[name+"-cut-after-schema"] = data[:ends[0]]
		}
	}
	seeds["file-none-empty"] = encode(tb, writers[0], small.Slice(0, 0), Options{})
	seeds["file-none-no-footer"] = seeds["file-none-2-batches"][:len(seeds["file-none-2-batches"])-20]
	seeds["stream-legacy-framing"] = legacyFraming(tb, seeds["stream-none-2-batches"])
	seeds["stream-foreign-views-dicts"] = foreignStream(tb, v1meta, [][2]int{{0, 3}},
		withCol(withCol(minimalCols(),
			col{"kind", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint8, ValueType: arrow.BinaryTypes.String}, strs("F", "B", "DATA")}),
			col{"shape", arrow.BinaryTypes.StringView, strs("4096x2x8192", nil, "a long shape string, not inlined")})...)
	return seeds
}

// legacyFraming drops the continuation markers of a stream.
func legacyFraming(tb testing.TB, data []byte) []byte {
	ends, _ := messageEnds(tb, data, 0)
	var out []byte
	pos := 0
	for _, e := range ends {
		out = append(out, data[pos+4:e]...)
		pos = e
	}
	return out
}

// FuzzRead checks that Read never panics, that what it returns passes
// Validate and accounts for its bytes, and that a trace it returns can be
// written and read back unchanged.
func FuzzRead(f *testing.F) {
	for _, data := range fuzzSeeds(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Read(data)
		rows, rerr := Rows(data) // never panics; counts what Read reads
		if err != nil {
			if res != nil {
				t.Fatalf("error %v with a result", err)
			}
			return
		}
		if rerr != nil || rows != int64(res.Trace.Len()) {
			t.Fatalf("Read gave %d events, Rows %d (%v)", res.Trace.Len(), rows, rerr)
		}
		head, hrows, herr := ReadHead(data)
		if herr != nil || hrows != rows || head.Batches != res.Batches || head.Trace.Len() > res.Trace.Len() {
			t.Fatalf("ReadHead: %v, %d rows; Read: %d rows", herr, hrows, rows)
		}
		if res.Trace == nil {
			t.Fatal("nil trace without an error")
		}
		if err := res.Trace.Validate(); err != nil {
			t.Fatalf("result fails Validate: %v", err)
		}
		if res.BytesTotal != int64(len(data)) || res.BytesUsed < 0 || res.BytesUsed > res.BytesTotal || res.Batches < 0 {
			t.Fatalf("bad accounting: %+v for %d bytes", *res, len(data))
		}
		if res.Format == FormatUnknown {
			t.Fatal("success with an unknown format")
		}
		var buf bytes.Buffer
		if err := WriteStream(&buf, res.Trace, Options{}); err != nil {
			t.Fatalf("writing back: %v", err)
		}
		again, err := Read(buf.Bytes())
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		if d := trace.Diff(res.Trace, again.Trace); d != "" {
			t.Fatalf("round trip of a read trace differs: %s", d)
		}
	})
}

// committedSeeds are the seeds written to testdata/fuzz/FuzzRead: one of
// each kind of input, kept few and small.
var committedSeeds = []string{
	"stream-none-2-batches",
	"stream-none-2-batches-cut-after-schema",
	"file-lz4-2-batches",
	"file-none-empty",
	"file-none-no-footer",
	"streamwriter-zstd-2-batches",
	"streamwriter-none-2-batches-cut-in-last-batch",
	"stream-legacy-framing",
	"stream-foreign-views-dicts",
}

// TestFuzzSeedCorpus checks that the committed seed corpus exists and
// rewrites it with -update-corpus.
func TestFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		seeds := fuzzSeeds(t)
		for _, name := range committedSeeds {
			data, ok := seeds[name]
			if !ok {
				t.Fatalf("no seed %s", name)
			}
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range committedSeeds {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("seed corpus: %v (run go test -run TestFuzzSeedCorpus -update-corpus)", err)
		}
	}
}
