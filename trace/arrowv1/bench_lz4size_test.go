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
func lz4Len(b testing.TB, buf []byte, level lz4.CompressionLevel, w *lz4.Writer, out *growBuf, check []byte) int {
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

// lz4Sizes are BenchmarkLZ4Levels' measures of some files: bytes in all
// (rows, the files, their framing, their buffers at each level, some
// columns' HC bytes) and each level's compression time.
type lz4Sizes struct {
	rows, written, framing, fast, hc, hcSeq, hcTimes, hcOffsets int64
	in                                                          int64 // bytes compressed at each level
	fastTime, hcTime                                            time.Duration
}

// lz4Levels is BenchmarkLZ4Levels on every step-th of files.
func lz4Levels(b *testing.B, files [][]frame, raw [][]byte, step int) {
	var z lz4Sizes
	for b.Loop() {
		z = measureLZ4(b, files, raw, step)
	}
	per := func(n int64) float64 { return float64(n) / float64(z.rows) }
	b.ReportMetric(per(z.written), "written-B/event")
	b.ReportMetric(per(z.framing+z.fast), "lz4-B/event")
	b.ReportMetric(per(z.framing+z.hc), "lz4hc-B/event")
	b.ReportMetric(per(z.hcSeq), "hc-seq-B/event")
	b.ReportMetric(per(z.hcTimes), "hc-times-B/event")
	b.ReportMetric(per(z.hcOffsets), "hc-str-offsets-B/event")
	b.ReportMetric(per(z.framing), "framing-B/event")
	b.ReportMetric(float64(z.in)/z.fastTime.Seconds()/1e6, "lz4-MB/s")
	b.ReportMetric(float64(z.in)/z.hcTime.Seconds()/1e6, "lz4hc-MB/s")
}

// measureLZ4 re-encodes every buffer of every step-th of files at LZ4's
// default level and at HC level 9 (lz4Len).
func measureLZ4(tb testing.TB, files [][]frame, raw [][]byte, step int) (z lz4Sizes) {
	colOf := func(plan *fastPlan, k int) int { // the v1 column of buffer k
		for i := len(plan.fields) - 1; i >= 0; i-- {
			if k >= plan.fields[i].buf {
				return plan.fields[i].col
			}
		}
		return -1
	}
	var sc fastScratch
	defer sc.release()
	w := lz4.NewWriter(nil)
	var out growBuf
	check := make([]byte, 1<<20)
	for f := 0; f < len(files); f += step {
		frames := files[f]
		z.written += int64(len(raw[f]))
		z.framing += int64(len(raw[f]))
		plan, ok := planFor(frames[0])
		if !ok {
			tb.Fatal("not a file ppprof's decoder reads")
		}
		for i := 1; i < len(frames); i++ {
			fr := &frames[i]
			for _, bf := range fr.info.buffers {
				z.framing -= bf[1]
			}
			if fr.info.header != headerRecordBatch {
				z.fast += sumBuffers(fr) // dictionaries: as they are
				z.hc += sumBuffers(fr)
				continue
			}
			bc, ok := plan.cols(fr, &sc)
			if !ok {
				tb.Fatal("record batch does not match its schema")
			}
			z.rows += int64(bc.n)
			for k := range fr.info.buffers {
				v, ok := bc.bb.read(k, nil, &sc, 1)
				if !ok {
					tb.Fatal("buffer does not decompress")
				}
				if len(v) > len(check) {
					check = make([]byte, len(v))
				}
				t0 := time.Now()
				z.fast += int64(lz4Len(tb, v, lz4.Fast, w, &out, check))
				t1 := time.Now()
				n := int64(lz4Len(tb, v, lz4.Level9, w, &out, check))
				z.fastTime, z.hcTime, z.in = z.fastTime+t1.Sub(t0), z.hcTime+time.Since(t1), z.in+int64(len(v))
				z.hc += n
				col := colOf(plan, k)
				isOffsets := (col == trace.ColShape || col == trace.ColDtype || col == trace.ColGroup) && k == plan.fields[plan.col[col]].buf+1
				switch {
				case col == trace.ColSeq:
					z.hcSeq += n
				case col == trace.ColIssueNs || col == trace.ColStartNs || col == trace.ColEndNs:
					z.hcTimes += n
				case isOffsets:
					z.hcOffsets += n
				}
			}
		}
	}
	return z
}

// sumBuffers is the bytes of fr's buffers as stored.
func sumBuffers(fr *frame) int64 {
	n := int64(0)
	for _, bf := range fr.info.buffers {
		n += bf[1]
	}
	return n
}

// TestLZ4Levels checks what BenchmarkLZ4Levels' figures rest on, on one
// rank's 20,000 rows of BenchmarkDecode's trace written as ppprof writes
// a rank's stream (LZ4, 2048-row batches): re-encoding every buffer at
// the default level gives back the file's size within 0.1% (the measure
// is faithful to how arrow-go compresses), HC is no larger, and the seq
// column (0, 1, 2, ...) costs at least 4 bytes a row even at HC level 9,
// the floor docs/performance.md argues for a column counting by one.
func TestLZ4Levels(t *testing.T) {
	tr := benchTrace().Slice(0, 20000)
	for i := range tr.Len() {
		if tr.Rank[i] != tr.Rank[0] || tr.Seq[i] != int64(i) {
			t.Fatalf("row %d: rank %d seq %d: want one rank counting from 0", i, tr.Rank[i], tr.Seq[i])
		}
	}
	var buf bytes.Buffer
	if err := writeStream(&buf, tr, Options{Compression: LZ4, BatchRows: 2048}, memory.DefaultAllocator); err != nil {
		t.Fatal(err)
	}
	fr, err := framesOf(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	z := measureLZ4(t, [][]frame{fr}, [][]byte{buf.Bytes()}, 1)
	if z.rows != int64(tr.Len()) {
		t.Fatalf("measured %d rows, want %d", z.rows, tr.Len())
	}
	per := func(n int64) float64 { return float64(n) / float64(z.rows) }
	t.Logf("written %.2f, lz4 %.2f, lz4hc %.2f B/event; HC seq %.3f, times %.2f", per(z.written), per(z.framing+z.fast), per(z.framing+z.hc), per(z.hcSeq), per(z.hcTimes))
	if d := z.framing + z.fast - z.written; d < -z.written/1000 || d > z.written/1000 {
		t.Errorf("re-encoded at the default level: %d bytes, the file %d: not within 0.1%%", z.framing+z.fast, z.written)
	}
	if z.hc > z.fast {
		t.Errorf("HC %d bytes > default level %d", z.hc, z.fast)
	}
	if per(z.hcSeq) < 4 {
		t.Errorf("seq at HC level 9: %.3f B/row, below the 4 argued as LZ4's floor", per(z.hcSeq))
	}
}
