// Command benchtable measures ppprof's throughput on a fleet trace and prints
// one table: the machine's limits (reading the files from page cache,
// scanning their pages) beside Arrow decoding, ingest, analysis on one core
// and on all, end to end in a fresh process (analyze, and whatif), hang
// diagnosis, memory per event and the per-event cost at 256 versus 4096
// ranks.
//
// Run it through bench/run.sh, which builds ppprof, writes the fleet trace
// and adds the Kineto and collector benchmarks. Every figure is the median
// of -runs runs (min and max beside it).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/analyze/hang"
	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/internal/freshmem"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

func main() {
	dir := flag.String("dir", "", "directory of per-rank Arrow streams (ppprof simulate --fleet -o DIR)")
	bin := flag.String("ppprof", "", "ppprof binary, for the end-to-end run in a fresh process")
	runs := flag.Int("runs", 5, "runs per measurement; the median is reported")
	only := flag.String("only", "", "comma-separated sections to run (fresh,read,decode,open,analyze,e2e,stream,whatif,export,hang,scale,disk); all when empty")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	footer := flag.Bool("footer", true, "print the load average after the table (bench/run.sh adds rows first)")
	flag.Parse()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	b := &bench{dir: *dir, bin: *bin, runs: *runs, procs: runtime.GOMAXPROCS(0)}
	want := func(s string) bool { return *only == "" || slices.Contains(strings.Split(*only, ","), s) }
	b.header()
	if b.dir == "" && want("fresh") {
		b.freshMemory()
	}
	if b.dir != "" {
		b.files()
		// The fresh processes run before this one touches much memory
		// (the fresh-memory row's 2.5 GiB, the decodes): a child's peak
		// RSS (wait4's ru_maxrss) counts the peak its parent had reached
		// when it started it, on Linux (exec records the old address
		// space's high-water mark), so they must be started while this
		// process is small (childPeak says when one was not). Their rows
		// are printed in their place below.
		var e2eRows, streamRows, whatIfRows, exportRows func()
		if want("e2e") && b.bin != "" {
			e2eRows = b.e2e(false)
		}
		if want("whatif") && b.bin != "" {
			whatIfRows = b.whatIf()
		}
		if want("stream") && b.bin != "" {
			streamRows = b.e2e(true)
		}
		if want("export") && b.bin != "" {
			exportRows = b.exportParquet()
		}
		if want("fresh") {
			b.freshMemory()
		}
		if want("read") {
			b.read()
		}
		if want("decode") {
			b.decode()
		}
		if want("open") || want("analyze") {
			b.openAndAnalyze(want("analyze"))
		}
		if e2eRows != nil {
			e2eRows()
		}
		if streamRows != nil {
			streamRows()
		}
		if whatIfRows != nil {
			whatIfRows()
		}
		if exportRows != nil {
			exportRows()
		}
		if want("disk") {
			b.disk()
		}
	}
	if want("hang") {
		b.hang()
	}
	if want("scale") {
		b.scale()
	}
	if *footer {
		b.footer()
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchtable:", err)
	os.Exit(1)
}

// bench holds what the sections share.
type bench struct {
	dir, bin   string
	runs       int
	procs      int
	paths      []string
	bytes      int64
	events     int64
	readSecs   float64 // median time to read the files from page cache
	decodeSecs float64 // median time to decode them (all cores)
}

// header prints the machine and the table head.
func (b *bench) header() {
	host, _ := os.Hostname()
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	fmt.Printf("machine: %s, %s, %d cores (GOMAXPROCS %d), %s, %s/%s, %s\n", host, cpu, runtime.NumCPU(), b.procs,
		memTotal(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if r := freshmem.Reporting(); r != "" {
		// Memory any process frees goes back to the host at once, and
		// costs a fresh page's price when touched again (fresh, below).
		fmt.Printf("free page reporting: on (%s)\n", r)
	}
	fmt.Printf("load average at start: %s\n", loadAvg())
	fmt.Printf("figures: median of %d runs [min-max]\n\n", b.runs)
	fmt.Printf("| %-44s | %-30s | %s |\n", "measurement", "median [min-max]", "notes")
	fmt.Printf("| %s | %s | %s |\n", strings.Repeat("-", 44), strings.Repeat("-", 30), "-----")
}

// freshMemory measures what memory costs the first time it is touched, in 4 KiB
// pages and in huge pages: 256 MiB mapped and one byte a page written,
// b.runs times each, every mapping kept until all are measured (memory
// unmapped a moment before may still be backed by the host, and cheap).
// Every figure below that touches memory of its own pays this
// (docs/performance.md, "Memory is time here"); it moves with the host's
// hour and with what ran just before.
func (b *bench) freshMemory() {
	const n = 256 << 20
	var kept []freshmem.Touched
	defer func() {
		for _, m := range kept {
			freshmem.Release(m)
		}
	}()
	perGiB := func(huge bool) (stats, bool) {
		var secs []float64
		for range b.runs {
			m, err := freshmem.Touch(n, huge)
			if err != nil {
				return stats{}, false
			}
			kept = append(kept, m)
			secs = append(secs, m.Took.Seconds()*(1<<30)/n)
		}
		return statsOf(secs), true
	}
	small, ok := perGiB(false)
	if !ok {
		return
	}
	hugeNote := "huge pages not measured (madvise refused)"
	if huge, ok := perGiB(true); ok {
		hugeNote = fmt.Sprintf("huge pages %.2f s/GiB [%.2f-%.2f]", huge.med, huge.lo, huge.hi)
	}
	row(fmt.Sprintf("touch fresh memory (%d MiB), 1 core", n>>20), fmt.Sprintf("%.2f s/GiB [%.2f-%.2f]", small.med, small.lo, small.hi),
		"4 KiB pages; "+hugeNote+"; what the figures below pay for memory they touch first (go run ./bench/faultcost)")
}

func (b *bench) footer() {
	fmt.Printf("\nload average at end: %s\n", loadAvg())
}

// row prints one line of the table.
func row(name, value, note string) {
	fmt.Printf("| %-44s | %-30s | %s |\n", name, value, note)
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown memory"
	}
	var kb int64
	fmt.Sscanf(strings.TrimPrefix(strings.Split(string(data), "\n")[0], "MemTotal:"), "%d", &kb)
	return fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
}

// stats is a median with its range, of seconds.
type stats struct{ med, lo, hi float64 }

// measure runs f b.runs times (after one warm-up run when warm) and
// returns the median, min and max of its wall time in seconds.
func (b *bench) measure(warm bool, f func()) stats {
	if warm {
		f()
	}
	var secs []float64
	for range b.runs {
		runtime.GC()
		t := time.Now()
		f()
		secs = append(secs, time.Since(t).Seconds())
	}
	return statsOf(secs)
}

// statsOf returns the median, min and max of xs (not empty).
func statsOf(xs []float64) stats {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return stats{xs[len(xs)/2], xs[0], xs[len(xs)-1]}
}

// rate formats n per second for s as "123.4M/s [a-b]".
func rate(n float64, s stats, unit string) string {
	return fmt.Sprintf("%s %s [%s-%s]", si(n/s.med), unit, si(n/s.hi), si(n/s.lo))
}

// si formats x with a k, M or G suffix.
func si(x float64) string {
	switch {
	case x >= 1e9:
		return fmt.Sprintf("%.2fG", x/1e9)
	case x >= 1e6:
		return fmt.Sprintf("%.1fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.1f", x)
}

// withProcs runs f with GOMAXPROCS set to n.
func withProcs(n int, f func()) {
	old := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(old)
	f()
}

// files lists the fleet trace and counts its events (one decode).
func (b *bench) files() {
	paths, err := filepath.Glob(filepath.Join(b.dir, "rank-*.arrows"))
	if err != nil || len(paths) == 0 {
		fail(fmt.Errorf("no rank-*.arrows in %s", b.dir))
	}
	b.paths = paths
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			fail(err)
		}
		b.bytes += st.Size()
	}
	b.events = b.countRows()
	row("trace", fmt.Sprintf("%s events, %d ranks", si(float64(b.events)), len(paths)),
		fmt.Sprintf("%s, %.1f MB on disk", b.dir, float64(b.bytes)/1e6))
}

// parallel calls f(i) for every file on GOMAXPROCS goroutines, each with
// its own worker index.
func (b *bench) parallel(f func(w, i int)) {
	nw := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	next := make(chan int)
	for w := range nw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(w, i)
			}
		}()
	}
	for i := range b.paths {
		next <- i
	}
	close(next)
	wg.Wait()
}

// read measures the machine's limits on the same bytes: reading the files
// from page cache into a buffer, and scanning their memory-mapped pages
// (summing every 8-byte word).
func (b *bench) read() {
	bufs := make([][]byte, runtime.GOMAXPROCS(0))
	s := b.measure(true, func() {
		b.parallel(func(w, i int) {
			f, err := os.Open(b.paths[i])
			if err != nil {
				fail(err)
			}
			defer f.Close()
			if bufs[w] == nil {
				bufs[w] = make([]byte, 1<<20)
			}
			for {
				if _, err := f.Read(bufs[w]); err == io.EOF {
					break
				} else if err != nil {
					fail(err)
				}
			}
		})
	})
	b.readSecs = s.med
	row("read files from page cache (read(2))", rate(float64(b.bytes), s, "B/s"), rate(float64(b.events), s, "events/s")+", all cores")
	var sink [64]uint64
	s = b.measure(true, func() {
		b.parallel(func(w, i int) {
			f, err := os.Open(b.paths[i])
			if err != nil {
				fail(err)
			}
			st, err := f.Stat()
			if err != nil {
				fail(err)
			}
			data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
			f.Close()
			if err != nil {
				fail(err)
			}
			words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(data))), len(data)/8)
			var x uint64
			for _, v := range words {
				x += v
			}
			sink[w%64] += x
			syscall.Munmap(data)
		})
	})
	row("mmap the files, sum their 8-byte words", rate(float64(b.bytes), s, "B/s"), rate(float64(b.events), s, "events/s")+", all cores")
	b.writeModel()
}

// writeModel measures the most a decoder that writes ppprof's model can
// do on one core: clearing the columns of 1M rows (122 MB, memory already
// faulted in), the stores alone, with nothing read or computed.
func (b *bench) writeModel() {
	const rows = 1 << 20
	mb := modelBytes()
	cols := make([]byte, rows*mb)
	clear(cols) // fault the pages in
	s := b.measure(true, func() { clear(cols) })
	row("write the model's columns (1M rows), 1 core", rate(float64(len(cols)), s, "B/s"),
		rate(float64(rows), s, "events/s")+fmt.Sprintf(" at %d B/event: the most any decoder into the model does", mb))
}

// decodeFile decodes file i of the trace (MapFile, arrowv1.Read).
func (b *bench) decodeFile(i int) *trace.Trace {
	f, err := os.Open(b.paths[i])
	if err != nil {
		fail(err)
	}
	data, release, err := arrowv1.MapFile(f)
	f.Close()
	if err != nil {
		fail(err)
	}
	res, err := arrowv1.Read(data)
	release()
	if err != nil {
		fail(fmt.Errorf("%s: %w", b.paths[i], err))
	}
	return res.Trace
}

// decodeAll decodes every file on all cores and returns the events. The
// traces are kept until all are decoded, as ingest keeps them: dropping
// each at once would leave a tiny live heap and have the garbage collector
// run after every few files.
func (b *bench) decodeAll() int64 {
	var n atomic.Int64
	keep := make([]*trace.Trace, len(b.paths))
	b.parallel(func(_, i int) {
		keep[i] = b.decodeFile(i)
		n.Add(int64(keep[i].Len()))
	})
	return n.Load()
}

// decodeRecycled decodes every file on all cores as a streamed reader
// does: each file's columns handed back (arrowv1.Recycle) once it is
// decoded, so later files decode into memory already faulted in. It
// returns the events.
func (b *bench) decodeRecycled() int64 {
	var n atomic.Int64
	b.parallel(func(_, i int) {
		t := b.decodeFile(i)
		n.Add(int64(t.Len()))
		arrowv1.Recycle(t)
	})
	return n.Load()
}

// countRows counts the events of the files from their batch headers
// (arrowv1.Rows), decoding nothing: the process stays small until the
// fresh processes have run (see main).
func (b *bench) countRows() int64 {
	var n int64
	for _, p := range b.paths {
		data, err := os.ReadFile(p)
		if err != nil {
			fail(err)
		}
		rows, err := arrowv1.Rows(data)
		if err != nil {
			fail(fmt.Errorf("%s: %w", p, err))
		}
		n += rows
	}
	return n
}

// decode measures arrowv1.Read over the mapped files, on one core and all.
func (b *bench) decode() {
	var one stats
	withProcs(1, func() { one = b.measure(true, func() { b.decodeAll() }) })
	row("Arrow decode (MapFile + arrowv1.Read), 1 core", rate(float64(b.events), one, "events/s"), rate(float64(b.bytes), one, "B/s")+" of input")
	all := b.measure(true, func() { b.decodeAll() })
	b.decodeSecs = all.med
	note := fmt.Sprintf("%.1fx one core", one.med/all.med)
	if b.readSecs > 0 {
		note += fmt.Sprintf("; %.1fx the page-cache read", all.med/b.readSecs)
	}
	row(fmt.Sprintf("Arrow decode, %d cores", b.procs), rate(float64(b.events), all, "events/s"), note)
	// The same decoder into columns handed back after each file: what it
	// costs without the page faults of fresh memory (kept traces need
	// 122 bytes of fresh memory an event).
	var rec stats
	withProcs(1, func() { rec = b.measure(true, func() { b.decodeRecycled() }) })
	row("Arrow decode into recycled columns, 1 core", rate(float64(b.events), rec, "events/s"),
		fmt.Sprintf("Read + Recycle per file: %.1fx the kept decode on one core", one.med/rec.med))
}

// openAndAnalyze measures ingest.Open of the directory, the memory its
// trace holds, and analyze.Run on it on one core and all.
func (b *bench) openAndAnalyze(analysis bool) {
	var res *ingest.Result
	open := b.measure(false, func() {
		res = nil
		runtime.GC()
		var err error
		if res, err = ingest.Open([]string{b.dir}, ingest.Options{}); err != nil {
			fail(err)
		}
	})
	n := float64(res.Trace.Len())
	note := "decode, sort, validate, merge"
	if b.decodeSecs > 0 {
		note += fmt.Sprintf("; %.1fx the decode", open.med/b.decodeSecs)
	}
	row(fmt.Sprintf("ingest.Open (dir of %d files), %d cores", len(b.paths), b.procs), rate(n, open, "events/s"), note)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	row("in-memory model (trace.Trace)", fmt.Sprintf("%.1f B/event", float64(ms.HeapAlloc)/n),
		fmt.Sprintf("heap after Open and GC; columns alone %d B/event", modelBytes()))
	b.packed(res.Trace)
	if !analysis {
		return
	}
	t := res.Trace
	var one stats
	var alloc uint64
	withProcs(1, func() {
		one = b.measure(true, func() {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := analyze.Run(t, analyze.Options{Step: analyze.AllSteps}); err != nil {
				fail(err)
			}
			runtime.ReadMemStats(&after)
			alloc = after.TotalAlloc - before.TotalAlloc
		})
	})
	row("analyze.Run, 1 core", rate(n, one, "events/s"), fmt.Sprintf("allocates %.0f B/event", float64(alloc)/n))
	all := b.measure(true, func() {
		if _, err := analyze.Run(t, analyze.Options{Step: analyze.AllSteps}); err != nil {
			fail(err)
		}
	})
	note = fmt.Sprintf("%.2fx one core", one.med/all.med)
	if b.decodeSecs > 0 {
		note += fmt.Sprintf("; %.1fx the decode, %.1fx the page-cache read", all.med/b.decodeSecs, all.med/b.readSecs)
	}
	row(fmt.Sprintf("analyze.Run, %d cores", b.procs), rate(n, all, "events/s"), note)
}

// packed measures trace.Pack and Unpack of t: the packed model's size and
// how fast a trace is packed and given back (what a streamed analysis does
// instead of reading a chunk again).
func (b *bench) packed(t *trace.Trace) {
	n := float64(t.Len())
	var p *trace.Packed
	pack := b.measure(true, func() { p = trace.Pack(t) })
	row("packed model (trace.Pack)", fmt.Sprintf("%.1f B/event", float64(p.Bytes())/n),
		fmt.Sprintf("packed at %s, %d cores", rate(n, pack, "events/s"), b.procs))
	dst := p.Unpack(nil)
	var one stats
	withProcs(1, func() { one = b.measure(true, func() { p.Unpack(dst) }) })
	row("trace.Unpack, 1 core", rate(n, one, "events/s"), "into columns already allocated")
	all := b.measure(true, func() { p.Unpack(dst) })
	note := fmt.Sprintf("%.2fx one core", one.med/all.med)
	if b.decodeSecs > 0 {
		note += fmt.Sprintf("; %.1fx as fast as the decode", b.decodeSecs/all.med)
	}
	row(fmt.Sprintf("trace.Unpack, %d cores", b.procs), rate(n, all, "events/s"), note)
}

// modelBytes is the size of one row of trace.Trace's columns.
func modelBytes() int {
	var t trace.Trace
	t.Append(trace.Event{})
	n := 0
	for _, s := range []int{
		int(unsafe.Sizeof(t.Rank[0])), int(unsafe.Sizeof(t.Pipeline[0])), int(unsafe.Sizeof(t.Stage[0])),
		int(unsafe.Sizeof(t.TPRank[0])), int(unsafe.Sizeof(t.Chunk[0])), int(unsafe.Sizeof(t.Step[0])),
		int(unsafe.Sizeof(t.MicroBatch[0])), int(unsafe.Sizeof(t.Kind[0])), int(unsafe.Sizeof(t.Seq[0])),
		int(unsafe.Sizeof(t.IssueNs[0])), int(unsafe.Sizeof(t.StartNs[0])), int(unsafe.Sizeof(t.EndNs[0])),
		int(unsafe.Sizeof(t.Peer[0])), int(unsafe.Sizeof(t.Bytes[0])), int(unsafe.Sizeof(t.Shape[0])),
		int(unsafe.Sizeof(t.Dtype[0])), int(unsafe.Sizeof(t.Tokens[0])), int(unsafe.Sizeof(t.Flops[0])),
		int(unsafe.Sizeof(t.MemBytes[0])), int(unsafe.Sizeof(t.Group[0])), int(unsafe.Sizeof(t.GroupSeq[0])),
	} {
		n += s
	}
	return n
}

// e2e runs `ppprof analyze DIR` in a fresh process: wall time and peak
// resident memory. streamed reads the trace a few replicas at a time with
// a memory budget of 2 GB (--max-memory 2G: chunks of one replica, read
// once, packed, and unpacked by each pass while the packed chunks fit in
// 0.8 GB, the others read again), what a trace larger than memory costs. It measures at once and returns
// what prints its rows (after the read and decode rows, for the ratios).
func (b *bench) e2e(streamed bool) func() {
	args := []string{"analyze", b.dir, "--format", "json", "-q", "--stream", "never"}
	if streamed {
		args = []string{"analyze", b.dir, "--format", "json", "-q", "--stream", "always", "--max-memory", "2G"}
	}
	s, rss := b.fresh(args, func(out []byte) bool {
		var a struct {
			Schema string `json:"schema"`
		}
		return json.Unmarshal(out, &a) == nil && a.Schema == analyze.SchemaID
	})
	return func() {
		n := float64(b.events)
		note := fmt.Sprintf("%.1f s; peak RSS %s", s.med, gb(rss))
		if rss >= 0 {
			note += fmt.Sprintf(" = %.0f B/event (%.0f MB per million events)", float64(rss)/n, float64(rss)/n)
		}
		if streamed {
			row(fmt.Sprintf("ppprof analyze --stream always --max-memory 2G, %d cores", b.procs), rate(n, s, "events/s"), note)
			return
		}
		row(fmt.Sprintf("ppprof analyze --stream never DIR (fresh process), %d cores", b.procs), rate(n, s, "events/s"), note)
		if b.readSecs > 0 && b.decodeSecs > 0 {
			row("  ... as a ratio", fmt.Sprintf("%.1fx read, %.1fx decode", s.med/b.readSecs, s.med/b.decodeSecs), "end to end over the page-cache read and the decode alone")
		}
	}
}

// whatIf runs `ppprof whatif DIR` in a fresh process, three runs at most
// (each re-times every step of the whole job once per scenario): wall
// time and peak resident memory. Like e2e it measures at once and returns
// what prints its row.
func (b *bench) whatIf() func() {
	runs := b.runs
	b.runs = min(runs, 3)
	var whole []byte
	s, rss := b.fresh([]string{"whatif", b.dir, "--format", "json", "-q"}, func(out []byte) bool {
		var w struct {
			Schema string `json:"schema"`
			Steps  int    `json:"steps"`
		}
		whole = bytes.Clone(out)
		return json.Unmarshal(out, &w) == nil && w.Schema == analyze.WhatIfSchema && w.Steps > 0
	})
	// The same read a few whole steps at a time (what a trace too large
	// to read whole gets): the same prediction, to the byte.
	ss, srss := b.fresh([]string{"whatif", b.dir, "--format", "json", "-q", "--stream", "always"}, func(out []byte) bool {
		return bytes.Equal(out, whole)
	})
	b.runs = runs
	return func() {
		n := float64(b.events)
		row(fmt.Sprintf("ppprof whatif DIR (fresh process), %d cores", b.procs), rate(n, s, "events/s"),
			fmt.Sprintf("%.1f s, %d runs; peak RSS %s; the analysis up to the schedule, then every step's graph built and re-timed (measured), then re-timed per scenario (built again but for the last step each core built)",
				s.med, min(runs, 3), gb(rss)))
		row(fmt.Sprintf("... --stream always, %d cores", b.procs), rate(n, ss, "events/s"),
			fmt.Sprintf("%.1f s, %.2fx read whole; peak RSS %s; a few whole steps of every rank at a time, each chunk read once and held packed; the same JSON to the byte",
				ss.med, ss.med/s.med, gb(srss)))
	}
}

// exportParquet runs `ppprof export DIR --parquet OUT` in a fresh process,
// in both layouts (a file per step and rank, the default; a file per step
// and chunk read), three runs at most each, each into a new directory
// under the temporary directory, all removed once measured: wall time,
// peak resident memory, files and bytes written. (Removed only at the
// end: ext4 without a journal, as on the hosts of docs/performance.md,
// skips inodes freed in the last minutes when it allocates one, and
// creating a file near many such took 0.9 ms instead of 0.02: "Beyond one
// machine".)
func (b *bench) exportParquet() func() {
	root, err := os.MkdirTemp("", "ppprof-bench-parquet-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(root)
	runs := b.runs
	n := min(runs, 3)
	b.runs = n
	defer func() { b.runs = runs }()
	var rows []func()
	k := 0
	for _, layout := range []struct{ flag, files string }{{"step,rank", "one per step and rank"}, {"step", "one per step and chunk"}} {
		rss := int64(-1)
		floor := selfPeak()
		first := k
		s := b.measure(false, func() {
			out := filepath.Join(root, strconv.Itoa(k))
			k++
			cmd := exec.Command(b.bin, "export", b.dir, "--parquet", out, "--parquet-partition", layout.flag, "-q")
			cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
			if err := cmd.Run(); err != nil {
				fail(fmt.Errorf("ppprof export: %w", err))
			}
			rss = max(rss, childPeak(cmd, floor))
		})
		var files, size int64
		filepath.WalkDir(filepath.Join(root, strconv.Itoa(first)), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					files++
					size += fi.Size()
				}
			}
			return nil
		})
		rows = append(rows, func() {
			row(fmt.Sprintf("ppprof export DIR --parquet OUT --parquet-partition %s (fresh process), %d cores", layout.flag, b.procs), rate(float64(b.events), s, "events/s"),
				fmt.Sprintf("%.1f s, %d runs; peak RSS %s; %d files (%s), %.1f B/event; streamed a pipeline replica at a time",
					s.med, n, gb(rss), files, layout.files, float64(size)/float64(b.events)))
		})
	}
	return func() {
		for _, r := range rows {
			r()
		}
	}
}

// fresh measures `ppprof ARGS` in a fresh process, b.runs times: the
// wall time and the largest peak resident memory. ok checks its output.
func (b *bench) fresh(args []string, ok func(out []byte) bool) (stats, int64) {
	rss := int64(-1)
	floor := selfPeak()
	s := b.measure(false, func() {
		cmd := exec.Command(b.bin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		if err := cmd.Run(); err != nil {
			fail(fmt.Errorf("ppprof %s: %w", args[0], err))
		}
		if !ok(out.Bytes()) {
			fail(fmt.Errorf("ppprof %s: unexpected output", args[0]))
		}
		rss = max(rss, childPeak(cmd, floor))
	})
	return s, rss
}

// childPeak is the peak resident memory of the finished command cmd, in
// bytes, or -1 when it cannot be told from what this process had reached
// when it started cmd, floor (selfPeak): a child's ru_maxrss is at least
// that (exec keeps the old address space's high-water mark), so a peak at
// or below it is this process's, not the child's. (The tables of the
// thirty-first and thirty-second sessions printed 2.69 GB, this
// process's after the fresh-memory row, for children that peaked at
// 0.4-0.5 GB.)
func childPeak(cmd *exec.Cmd, floor int64) int64 {
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return -1
	}
	if peak := ru.Maxrss * 1024; peak > floor {
		return peak
	}
	return -1
}

// selfPeak is this process's peak resident memory so far (VmHWM), in
// bytes; 0 when unknown.
func selfPeak() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// gb formats a peak from childPeak: "n/a" when it could not be measured.
func gb(rss int64) string {
	if rss < 0 {
		return "n/a (below this process's own)"
	}
	return fmt.Sprintf("%.2f GB", float64(rss)/1e9)
}

// disk reports the fleet trace's bytes per event, and those of a sample of
// its ranks re-encoded without compression and with ZSTD.
func (b *bench) disk() {
	row("on disk, as written (LZ4)", fmt.Sprintf("%.1f B/event", float64(b.bytes)/float64(b.events)), "simulate --fleet --compression lz4")
	t := &trace.Trace{}
	sample := min(64, len(b.paths))
	for i := range sample {
		ft := b.decodeFile(i)
		t.Meta = ft.Meta
		t.AppendRows(ft, 0, ft.Len())
	}
	for _, c := range []arrowv1.Compression{arrowv1.None, arrowv1.LZ4, arrowv1.ZSTD} {
		var buf bytes.Buffer
		if err := arrowv1.WriteStream(&buf, t, arrowv1.Options{Compression: c}); err != nil {
			fail(err)
		}
		name := string(c)
		if c == arrowv1.None {
			name = "none"
		}
		row(fmt.Sprintf("on disk, %d ranks re-encoded (%s)", sample, name), fmt.Sprintf("%.1f B/event", float64(buf.Len())/float64(t.Len())),
			fmt.Sprintf("one stream, %d-row batches", arrowv1.DefaultBatchRows))
	}
}

// hang measures hang.Run on BenchmarkRun4096's job: a 4096-rank 1F1B
// (PP 16 x TP 8 x DP 32), 32 micro-batches, 2 steps, one skipped
// micro-batch. Ops are the P2P sends and receives matched.
func (b *bench) hang() {
	c := sim.Config{Schedule: "1f1b", Stages: 16, TP: 8, DP: 32, MicroBatches: 32, Steps: 2,
		Faults: []sim.Fault{{Kind: sim.FaultSkip, Rank: 5*32*8 + 3, Step: 1, MicroBatch: 16}}}
	t, err := sim.Run(c)
	if err != nil {
		fail(err)
	}
	p2p := 0
	for _, k := range t.Kind {
		if k.IsP2P() {
			p2p++
		}
	}
	n := float64(t.Len())
	run := func() {
		rep, err := hang.Run(t, hang.Options{})
		if err != nil || rep.Verdict != hang.VerdictDeadlock {
			fail(fmt.Errorf("hang: %v %v", err, rep))
		}
	}
	var one stats
	withProcs(1, func() { one = b.measure(true, run) })
	row("hang.Run, 4096-rank hang, 1 core", rate(n, one, "events/s"), rate(float64(p2p), one, "P2P ops/s")+fmt.Sprintf(", %s events", si(n)))
	all := b.measure(true, run)
	row(fmt.Sprintf("hang.Run, 4096-rank hang, %d cores", b.procs), rate(n, all, "events/s"), rate(float64(p2p), all, "P2P ops/s"))
}

// scale compares analyze.Run's cost per event at 256 and 4096 ranks, on
// in-memory fleet traces of the same shape (PP 16 x TP 8, interleaved v=2,
// 64 micro-batches) and the same number of events: DP 2 over 16 steps
// against DP 32 over 1 step (32 windows each).
func (b *bench) scale() {
	mk := func(dp, steps int) *trace.Trace {
		c := sim.Config{Schedule: "interleaved", Stages: 16, TP: 8, DP: dp, MicroBatches: 64, Steps: steps,
			Jitter: 0.05, P2PLatencyUs: 10, P2PGbps: 400, OptMs: 2, Seed: 1}
		t := &trace.Trace{}
		if _, _, err := sim.Fleet(c, func(rows *trace.Trace) error {
			t.Meta = rows.Meta
			t.AppendRows(rows, 0, rows.Len())
			return nil
		}); err != nil {
			fail(err)
		}
		t.SortByRankSeq()
		return t
	}
	// The two shapes run in turns (after a warm-up run of each), so that
	// both see the same phases of a noisy host: measured one after the
	// other, this host's drift alone moved the ratio from 1.07x to 1.27x
	// between runs on unchanged code. The ratio is the median of the
	// runs' ratios, each of one pair run back to back.
	shapes := [][2]int{{2, 16}, {32, 1}}
	ts := []*trace.Trace{mk(2, 16), mk(32, 1)}
	run := func(t *trace.Trace) float64 {
		runtime.GC()
		start := time.Now()
		if _, err := analyze.Run(t, analyze.Options{Step: analyze.AllSteps}); err != nil {
			fail(err)
		}
		return time.Since(start).Seconds()
	}
	for _, t := range ts {
		run(t)
	}
	secs := make([][]float64, len(ts))
	var ratios []float64
	// At least 11 pairs: a pair's ratio ranged from 0.91 to 1.36 over 5
	// pairs on this host (a run takes half a second).
	for range max(b.runs, 11) {
		for k, t := range ts {
			secs[k] = append(secs[k], run(t))
		}
		ratios = append(ratios, secs[1][len(secs[1])-1]/float64(ts[1].Len())/(secs[0][len(secs[0])-1]/float64(ts[0].Len())))
	}
	for k, shape := range shapes {
		s := statsOf(secs[k])
		row(fmt.Sprintf("analyze.Run, %d ranks (DP %d, %d steps), %d cores", 16*8*shape[0], shape[0], shape[1], b.procs),
			rate(float64(ts[k].Len()), s, "events/s"), fmt.Sprintf("%.1f ns/event", s.med/float64(ts[k].Len())*1e9))
	}
	r := statsOf(ratios)
	row("  per-event cost, 4096 / 256 ranks", fmt.Sprintf("%.2fx [%.2f-%.2f]", r.med, r.lo, r.hi), fmt.Sprintf("target <= 1.2x; median of %d pairs' ratios, the two shapes run in turns", len(ratios)))
}
