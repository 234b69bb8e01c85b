package arrowv1

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// BenchmarkDecompressOnly measures the floor under any decoder of
// compressed files: decompressing every buffer of every record batch into
// one reused, cache-resident scratch buffer, keeping nothing and checking
// nothing but what decompression checks. The files are framed before the
// clock starts. With PPPROF_BENCH_DIR set, the rank files there (as
// ppprof simulate --fleet writes them; bench/run.sh runs it on its fleet
// trace); else the million-event trace of BenchmarkDecode, LZ4. Run it
// with -cpu 1: it is one goroutine, a per-core figure. "times" decompresses
// only the issue, start and end columns, which any analysis of time reads;
// "decode" is the decoder itself on the same files, in the same run: Read
// into the model's columns (strings, kinds, validation), each file's
// columns handed back (Recycle) for the next, as a streamed read does.
func BenchmarkDecompressOnly(b *testing.B) {
	files, raw := benchFiles(b)
	times := []int{trace.ColIssueNs, trace.ColStartNs, trace.ColEndNs}
	for _, tc := range []struct {
		name string
		cols []int // nil: every buffer
	}{{"all", nil}, {"times", times}} {
		b.Run(tc.name, func(b *testing.B) {
			var rows, out int64
			var sc fastScratch
			defer sc.release()
			run := func() {
				rows, out = 0, 0
				for _, frames := range files {
					plan, ok := planFor(frames[0])
					if !ok {
						b.Fatal("not a file ppprof's decoder reads")
					}
					for i := 1; i < len(frames); i++ {
						fr := &frames[i]
						if fr.info.header != headerRecordBatch {
							continue
						}
						bc, ok := plan.cols(fr, &sc)
						if !ok {
							b.Fatal("record batch does not match its schema")
						}
						rows += int64(bc.n)
						if tc.cols == nil {
							for k := range fr.info.buffers {
								v, ok := bc.bb.read(k, nil, &sc, 1)
								if !ok {
									b.Fatal("buffer does not decompress")
								}
								out += int64(len(v))
							}
							continue
						}
						for _, c := range tc.cols {
							if fi := plan.col[c]; fi >= 0 {
								v, ok := bc.bb.read(plan.fields[fi].buf+1, nil, &sc, 1)
								if !ok {
									b.Fatal("buffer does not decompress")
								}
								out += int64(len(v))
							}
						}
					}
				}
			}
			run() // scratch grown, caches warm
			runtime.GC()
			b.ResetTimer()
			for b.Loop() {
				run()
			}
			s := b.Elapsed().Seconds()
			b.ReportMetric(float64(rows)*float64(b.N)/s, "events/s")
			b.ReportMetric(float64(out)/float64(rows), "out-B/event")
		})
	}
	b.Run("decode", func(b *testing.B) {
		var rows int64
		run := func() {
			rows = 0
			for _, data := range raw {
				res, err := Read(data)
				if err != nil {
					b.Fatal(err)
				}
				rows += int64(res.Trace.Len())
				Recycle(res.Trace)
			}
		}
		run()
		runtime.GC()
		b.ResetTimer()
		for b.Loop() {
			run()
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// benchFiles returns the files the size and decompression benchmarks
// read, framed, and their bytes: with PPPROF_BENCH_DIR set, the rank
// files there (as ppprof simulate --fleet writes them); else the
// million-event trace of BenchmarkDecode, as one LZ4 stream.
func benchFiles(b *testing.B) (files [][]frame, raw [][]byte) {
	if dir := os.Getenv("PPPROF_BENCH_DIR"); dir != "" {
		paths, err := filepath.Glob(filepath.Join(dir, "rank-*.arrows"))
		if err != nil || len(paths) == 0 {
			b.Fatalf("PPPROF_BENCH_DIR %s: no rank-*.arrows files (%v)", dir, err)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				b.Fatal(err)
			}
			fr, err := framesOf(data)
			if err != nil {
				b.Fatalf("%s: %v", p, err)
			}
			files = append(files, fr)
			raw = append(raw, data)
		}
		return files, raw
	}
	var buf bytes.Buffer
	if err := writeStream(&buf, benchTrace(), Options{Compression: LZ4}, memory.DefaultAllocator); err != nil {
		b.Fatal(err)
	}
	fr, err := framesOf(buf.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	return [][]frame{fr}, [][]byte{buf.Bytes()}
}
