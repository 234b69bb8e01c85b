package arrowv1

import (
	"bytes"
	"encoding/binary"
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
// "read" also reads every byte decompressed (sums its 64-bit words): of
// uncompressed files (--compression none), where decompressing is only
// slicing, it is the floor under any decoder that reads their columns,
// the memory bandwidth of one core (bench/run.sh prints it for the job
// uncompressed). "decode" is the decoder itself on the same files, in
// the same run: Read into the model's columns (strings, kinds,
// validation), each file's columns handed back (Recycle) for the next,
// as a streamed read does.
func BenchmarkDecompressOnly(b *testing.B) {
	files, raw := benchFiles(b)
	times := []int{trace.ColIssueNs, trace.ColStartNs, trace.ColEndNs}
	for _, tc := range []struct {
		name string
		cols []int // nil: every buffer
		read bool  // every byte read too (summed, 8 at a time)
	}{{"all", nil, false}, {"times", times, false}, {"read", nil, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var rows, out int64
			var sum uint64
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
								if tc.read {
									sum += sumWords(v)
								}
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
			if tc.read && sum == 0 && out > 0 {
				b.Fatal("every buffer read as zeros")
			}
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

// sumWords returns the sum of b's 64-bit little-endian words (its last
// bytes short of a word left out): a read of every byte, as a decoder
// reading the buffer must do at least.
func sumWords(b []byte) uint64 {
	var s0, s1, s2, s3 uint64
	for len(b) >= 32 {
		s0 += binary.LittleEndian.Uint64(b)
		s1 += binary.LittleEndian.Uint64(b[8:])
		s2 += binary.LittleEndian.Uint64(b[16:])
		s3 += binary.LittleEndian.Uint64(b[24:])
		b = b[32:]
	}
	for len(b) >= 8 {
		s0 += binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	return s0 + s1 + s2 + s3
}
