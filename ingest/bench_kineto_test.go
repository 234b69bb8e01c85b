package ingest

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ppprof/ppprof/trace"
)

// writeLargeKineto writes a synthetic Kineto trace of about size bytes to
// path: rank 0 of a 4-stage pipeline running steps of 8 micro-batches, each
// F and B a PP annotation (host and device) wrapping many aten ops, their
// kernel launches and kernels, and each P2P a record_param_comms with its
// NCCL kernel. It returns the number of PP annotations written.
func writeLargeKineto(tb testing.TB, path string, size int64) int {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var n int64
	put := func(s string) {
		k, _ := w.WriteString(s)
		n += int64(k)
	}
	put(`{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 4}, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [` + "\n")
	ts, ext, corr, annos := 1000.0, 1, 1, 0
	first := true
	ev := func(cat, name string, tid int, t, dur float64, args string) {
		if !first {
			put(",\n")
		}
		first = false
		put(`{"ph": "X", "cat": "` + cat + `", "name": "` + name + `", "pid": 7, "tid": ` + strconv.Itoa(tid) +
			`, "ts": ` + strconv.FormatFloat(t, 'f', 3, 64) + `, "dur": ` + strconv.FormatFloat(dur, 'f', 3, 64) + `, "args": {` + args + `}}`)
	}
	for step := 0; n < size; step++ {
		for mb := 0; mb < 8 && n < size; mb++ {
			for _, action := range []string{"F", "SEND_F", "B", "RECV_B"} {
				name := fmt.Sprintf("PP:0%s%d", action, mb)
				start := ts
				ext++
				id := ext
				if action == "SEND_F" || action == "RECV_B" {
					coll, peer := "send", `"Dst Rank": 1`
					if action == "RECV_B" {
						coll, peer = "recv", `"Src Rank": 1`
					}
					ext++
					ev("cpu_op", "record_param_comms", 1, ts+1, 5, fmt.Sprintf(`"External id": %d, "Collective name": "%s", "Process Group Name": "3", "Process Group Ranks": "[0, 1, 2, 3]", "In msg nelems": 16777216, "dtype": "BFloat16", "Seq": %d, %s, "Comms Id": 10159970886766084423`, ext, coll, step*8+mb, peer))
					ev("kernel", "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", 20, ts+8, 300, fmt.Sprintf(`"External id": %d, "correlation": %d`, ext, corr))
					corr++
					ts += 320
				} else {
					for op := 0; op < 60; op++ {
						ext++
						ev("cpu_op", "aten::linear", 1, ts, 20, fmt.Sprintf(`"External id": %d, "Input Dims": [[4096, 1, 5120], [5120, 5120], [5120]], "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"], "Sequence number": %d, "Fwd thread id": 0`, ext, ext))
						ev("cuda_runtime", "cudaLaunchKernel", 1, ts+2, 4, fmt.Sprintf(`"External id": %d, "cbid": 211, "correlation": %d`, ext, corr))
						ev("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1", 7, ts+6, 15, fmt.Sprintf(`"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": %d, "registers per thread": 168, "grid": [132, 1, 1], "block": [384, 1, 1]`, ext, corr))
						corr++
						ts += 21
					}
				}
				ev("user_annotation", name, 1, start, ts-start, fmt.Sprintf(`"External id": %d`, id))
				ev("gpu_user_annotation", name, 7, start+5, ts-start, fmt.Sprintf(`"External id": %d`, id))
				annos++
				ts += 3
			}
		}
	}
	put("\n]}\n")
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return annos
}

// BenchmarkKinetoLarge reads a synthetic Kineto trace of about 1 GB
// (PPPROF_BENCH_MB overrides the size) generated on the fly into a
// temporary file, reporting throughput (MB/s) and the peak heap during the
// read (sampled every millisecond): the decode streams, so the peak stays
// far below the file size. Only run with -bench.
func BenchmarkKinetoLarge(b *testing.B) {
	benchKinetoLarge(b, ReadFile)
}

// BenchmarkKinetoLargeSlow is BenchmarkKinetoLarge on the generic decoder
// the fast path replaced (readKinetoSlow), for the ratio of the two in one
// run.
func BenchmarkKinetoLargeSlow(b *testing.B) {
	benchKinetoLarge(b, func(path string) (*trace.Trace, FileInfo, []Warning, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, FileInfo{}, nil, err
		}
		defer f.Close()
		p, err := readKinetoSlow(path, f, kinetoOpts{mapper: newMapper(nil), kineto: true})
		if err != nil {
			return nil, FileInfo{}, nil, err
		}
		return finishOne(p)
	})
}

// heapInUse returns the bytes of heap spans in use (runtime.MemStats'
// HeapInuse: live and not yet swept objects, and the unused space of their
// spans), read without stopping the world.
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	var n uint64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			n += v.Value.Uint64()
		}
	}
	return n
}

func benchKinetoLarge(b *testing.B, read func(string) (*trace.Trace, FileInfo, []Warning, error)) {
	mb := int64(1024)
	if s := os.Getenv("PPPROF_BENCH_MB"); s != "" {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 {
			mb = v
		}
	}
	path := filepath.Join(b.TempDir(), "rank0.pt.trace.json")
	annos := writeLargeKineto(b, path, mb<<20)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ResetTimer()
	var peak atomic.Uint64
	cpu0 := benchCPUSeconds()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		done := make(chan struct{})
		go func() {
			// runtime/metrics, not runtime.ReadMemStats: ReadMemStats
			// stops the world, and every millisecond that cost a fifth
			// of the CPU this benchmark reports (the reader's goroutine
			// waiting in asyncPreempt, futex and osyield).
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
					if h := heapInUse(); h > peak.Load() {
						peak.Store(h)
					}
				}
			}
		}()
		tr, _, _, err := read(path)
		close(done)
		if err != nil {
			b.Fatal(err)
		}
		if tr.Len() < annos {
			b.Fatalf("%d rows for %d annotations", tr.Len(), annos)
		}
	}
	b.StopTimer()
	if cpu := benchCPUSeconds() - cpu0; cpu > 0 {
		// Throughput per CPU-second the process used (the reader, the
		// GC, the heap sampler), which a busy machine disturbs less than
		// the wall-clock MB/s.
		b.ReportMetric(float64(st.Size())/(1<<20)*float64(b.N)/cpu, "MB/cpu-s")
	}
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(st.Size())/(1<<20), "file-MB")
}

// BenchmarkKinetoShared reads the Kineto samples of ../shared/data
// (decompressed in memory first) on the fast and the generic path. It
// skips when the samples are missing.
func BenchmarkKinetoShared(b *testing.B) {
	paths, _ := filepath.Glob("../../shared/data/kineto/*.json.gz")
	if len(paths) == 0 {
		b.Skip("../shared/data not present")
	}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(zr)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		if len(data) < 1<<20 {
			continue
		}
		for _, fast := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/fast=%v", filepath.Base(path), fast), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				cpu0 := benchCPUSeconds()
				for i := 0; i < b.N; i++ {
					if _, err := kfRead(data, true, fast, nil); err != nil {
						b.Fatal(err)
					}
				}
				if cpu := benchCPUSeconds() - cpu0; cpu > 0 {
					b.ReportMetric(float64(len(data))/(1<<20)*float64(b.N)/cpu, "MB/cpu-s")
				}
			})
		}
	}
}
