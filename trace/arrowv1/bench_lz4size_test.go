package arrowv1

import (
	"bytes"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pierrec/lz4/v4"

	"github.com/ppprof/ppprof/trace"
)

// lz4Len is the length of buf as Arrow IPC holds it LZ4-compressed at
// level: the 8-byte uncompressed length, then an LZ4 frame as arrow-go
// writes one (independent 64 KiB blocks, no checksums), or buf itself
// when that is shorter. It fails the benchmark if the frame does not
// decode back to buf.
func lz4Len(b *testing.B, buf []byte, level lz4.CompressionLevel, w *lz4.Writer, out *growBuf, check []byte) int {
	if len(buf) == 0 {
		return 0
	}
	out.b = out.b[:0]
	w.Reset(out)
	if err := w.Apply(lz4.ChecksumOption(false), lz4.BlockSizeOption(lz4.Block64Kb), lz4.CompressionLevelOption(level)); err != nil {
		b.Fatal(err)
	}
	if _, err := w.Write(buf); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if !lz4Frame(out.b, check[:len(buf)]) || string(check[:len(buf)]) != string(buf) {
		b.Fatal("LZ4 frame does not decode back to its input")
	}
	return 8 + min(len(out.b), len(buf))
}

type growBuf struct{ b []byte }

func (g *growBuf) Write(p []byte) (int, error) { g.b = append(g.b, p...); return len(p), nil }

// BenchmarkLZ4Levels measures how small LZ4 can make the files, the
// figure behind the on-disk target (docs/performance.md, "Targets"): every
// buffer of every record batch, decompressed and compressed again as
// Arrow IPC holds it (one LZ4 frame per buffer, 64 KiB independent
// blocks), at LZ4's default level and at its highest (the HC
// compressor's level 9: the same format, any LZ4 decoder reads it; it
// searches for longer matches at many times the CPU). Bytes per event
// are reported with the files' framing (metadata, padding: what is not
// in a buffer) added back: "written" is the files as they are, "lz4" and
// "lz4hc" the same files re-encoded; the "hc-" metrics are the HC bytes
// of some columns alone. "rank-files" reads PPPROF_BENCH_DIR's rank
// files (every files/64-th, as written: the same record batches) or
// BenchmarkDecode's trace as one stream; "one-stream" the first 64 of
// those rank files (a pipeline's ranks: with the fleet's layout, 8
// stages of 8 TP ranks) written as one stream of DefaultBatchRows-row
// batches, as ppprof convert writes a job. "lz4-MB/s" and "lz4hc-MB/s"
// are each level's compression speed (uncompressed bytes a second, one
// core, with the frames' check that they decode back). Run with
// -benchtime 1x.
func BenchmarkLZ4Levels(b *testing.B) {
	files, raw := benchFiles(b)
	b.Run("rank-files", func(b *testing.B) { lz4Levels(b, files, raw, max(1, len(files)/64)) })
	b.Run("one-stream", func(b *testing.B) {
		t := &trace.Trace{}
		for _, data := range raw[:min(64, len(raw))] {
			res, err := Read(data)
			if err != nil {
				b.Fatal(err)
			}
			t.Meta = res.Trace.Meta
			t.AppendRows(res.Trace, 0, res.Trace.Len())
		}
		var buf bytes.Buffer
		if err := writeStream(&buf, t, Options{Compression: LZ4}, memory.DefaultAllocator); err != nil {
			b.Fatal(err)
		}
		fr, err := framesOf(buf.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		lz4Levels(b, [][]frame{fr}, [][]byte{buf.Bytes()}, 1)
	})
}

// lz4Levels is BenchmarkLZ4Levels on every step-th of files.
func lz4Levels(b *testing.B, files [][]frame, raw [][]byte, step int) {
	colOf := func(plan *fastPlan, k int) int { // the v1 column of buffer k
		for i := len(plan.fields) - 1; i >= 0; i-- {
			if k >= plan.fields[i].buf {
				return plan.fields[i].col
			}
		}
		return -1
	}
	var rows, written, framing, fast, hc, hcSeq, hcTimes, hcOffsets int64
	var sc fastScratch
	defer sc.release()
	w := lz4.NewWriter(nil)
	var out growBuf
	check := make([]byte, 1<<20)
	var fastTime, hcTime time.Duration // compressing (and checking) at each level
	var in int64                       // bytes compressed at each
	for b.Loop() {
		rows, written, framing, fast, hc, hcSeq, hcTimes, hcOffsets = 0, 0, 0, 0, 0, 0, 0, 0
		fastTime, hcTime, in = 0, 0, 0
		for f := 0; f < len(files); f += step {
			frames := files[f]
			written += int64(len(raw[f]))
			framing += int64(len(raw[f]))
			plan, ok := planFor(frames[0])
			if !ok {
				b.Fatal("not a file ppprof's decoder reads")
			}
			for i := 1; i < len(frames); i++ {
				fr := &frames[i]
				for _, bf := range fr.info.buffers {
					framing -= bf[1]
				}
				if fr.info.header != headerRecordBatch {
					fast += sumBuffers(fr) // dictionaries: as they are
					hc += sumBuffers(fr)
					continue
				}
				bc, ok := plan.cols(fr, &sc)
				if !ok {
					b.Fatal("record batch does not match its schema")
				}
				rows += int64(bc.n)
				for k := range fr.info.buffers {
					v, ok := bc.bb.read(k, nil, &sc, 1)
					if !ok {
						b.Fatal("buffer does not decompress")
					}
					if len(v) > len(check) {
						check = make([]byte, len(v))
					}
					t0 := time.Now()
					fast += int64(lz4Len(b, v, lz4.Fast, w, &out, check))
					t1 := time.Now()
					n := int64(lz4Len(b, v, lz4.Level9, w, &out, check))
					fastTime, hcTime, in = fastTime+t1.Sub(t0), hcTime+time.Since(t1), in+int64(len(v))
					hc += n
					col := colOf(plan, k)
					isOffsets := (col == trace.ColShape || col == trace.ColDtype || col == trace.ColGroup) && k == plan.fields[plan.col[col]].buf+1
					switch {
					case col == trace.ColSeq:
						hcSeq += n
					case col == trace.ColIssueNs || col == trace.ColStartNs || col == trace.ColEndNs:
						hcTimes += n
					case isOffsets:
						hcOffsets += n
					}
				}
			}
		}
	}
	per := func(n int64) float64 { return float64(n) / float64(rows) }
	b.ReportMetric(per(written), "written-B/event")
	b.ReportMetric(per(framing+fast), "lz4-B/event")
	b.ReportMetric(per(framing+hc), "lz4hc-B/event")
	b.ReportMetric(per(hcSeq), "hc-seq-B/event")
	b.ReportMetric(per(hcTimes), "hc-times-B/event")
	b.ReportMetric(per(hcOffsets), "hc-str-offsets-B/event")
	b.ReportMetric(per(framing), "framing-B/event")
	b.ReportMetric(float64(in)/fastTime.Seconds()/1e6, "lz4-MB/s")
	b.ReportMetric(float64(in)/hcTime.Seconds()/1e6, "lz4hc-MB/s")
}

// sumBuffers is the bytes of fr's buffers as stored.
func sumBuffers(fr *frame) int64 {
	n := int64(0)
	for _, bf := range fr.info.buffers {
		n += bf[1]
	}
	return n
}
