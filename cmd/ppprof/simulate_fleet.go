package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// fleetOptions are the simulate flags of the fleet path (--fleet).
type fleetOptions struct {
	on        bool
	batchRows int
}

// simulateFleet runs sim.Fleet on c and writes one Arrow stream per rank
// into the existing directory dir, rank-NNNNN.arrows, as a collector would,
// without holding the trace: each rank's rows are buffered up to batchRows
// and written as a record batch.
func simulateFleet(opts *simulateOptions, c sim.Config, aopt arrowv1.Options) error {
	if fi, err := os.Stat(opts.out); err != nil || !fi.IsDir() {
		return fmt.Errorf("--fleet writes one stream per rank: -o must be an existing directory")
	}
	if opts.fleet.batchRows <= 0 {
		return fmt.Errorf("--fleet-batch-rows %d: want > 0", opts.fleet.batchRows)
	}
	aopt.BatchRows = opts.fleet.batchRows
	rs := &rankStreams{dir: opts.out, opt: aopt, flushRows: opts.fleet.batchRows}
	began := time.Now()
	prog := newProgress(opts.stderr, "simulate", int64(c.WithDefaults().Steps), "steps", opts.quiet)
	steps := int64(0)
	_, n, err := sim.Fleet(c, func(rows *trace.Trace) error {
		if k := rows.Kind; rows.Len() > 0 && (k[0] == trace.Opt || k[0] == sim.KindOptSkip) {
			steps++ // the step's OPT rows come last
			prog.set(steps)
		}
		return rs.add(rows)
	})
	if cerr := rs.close(); err == nil {
		err = cerr
	}
	prog.done()
	if err != nil {
		return fmt.Errorf("simulate --fleet: %w", err)
	}
	if !opts.quiet {
		fmt.Fprintf(opts.stderr, "simulate: %d events, %d ranks in %s (%.1fs)\n", n, len(rs.ranks), opts.out, time.Since(began).Seconds())
	}
	return nil
}

// rankStreams writes rows into one Arrow stream per rank.
//
// What it holds grows with the ranks, not with the trace: each rank's rows
// not yet written, packed (trace.Pack: some 10 bytes a row instead of the
// model's 122). A 16384-rank job's buffers took 7.9 GB as model rows (2048
// rows a rank, and a 64 KiB write buffer each); the flushing goroutines
// unpack a rank's rows and write them through a buffer of their own. No
// file stays open between two writes: a job of more ranks than the
// process may open files (often 4096 or 20000) is written all the same.
type rankStreams struct {
	dir       string
	opt       arrowv1.Options
	flushRows int
	ranks     []*rankStream // by rank; nil until the rank's first rows
}

// rankStream is one rank's file and its rows not yet written.
type rankStream struct {
	path  string
	out   *switchWriter // the stream's writer: the file, or a flushing goroutine's buffer over it, while open
	sw    *arrowv1.StreamWriter
	parts []*trace.Packed // the rows not yet written, in order
	n     int             // rows in parts
}

// switchWriter is an io.Writer whose target changes: a StreamWriter keeps
// the writer it was made with, and a rank's writes go through whichever
// goroutine's buffer flushes it.
type switchWriter struct{ w io.Writer }

func (s *switchWriter) Write(p []byte) (int, error) {
	if s.w == nil {
		return 0, errors.New("rank stream written while its file is closed")
	}
	return s.w.Write(p)
}

// add buffers rows (each rank's in seq order, ranks in runs) and writes
// the ranks whose buffers are full, in parallel.
func (rs *rankStreams) add(rows *trace.Trace) error {
	var full []*rankStream
	for lo := 0; lo < rows.Len(); {
		r := rows.Rank[lo]
		hi := lo + 1
		for hi < rows.Len() && rows.Rank[hi] == r {
			hi++
		}
		s, err := rs.stream(r, rows.Meta)
		if err != nil {
			return err
		}
		s.parts = append(s.parts, trace.Pack(rows.Slice(lo, hi)))
		s.n += hi - lo
		if s.n >= rs.flushRows {
			full = append(full, s)
		}
		lo = hi
	}
	return flushAll(full)
}

// stream returns rank r's stream, creating its file.
func (rs *rankStreams) stream(r trace.Rank, meta trace.Meta) (*rankStream, error) {
	for int(r) >= len(rs.ranks) {
		rs.ranks = append(rs.ranks, nil)
	}
	if s := rs.ranks[r]; s != nil {
		return s, nil
	}
	path := filepath.Join(rs.dir, fmt.Sprintf("rank-%05d.arrows", r))
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	out := &switchWriter{w: f}
	sw, err := arrowv1.NewStreamWriter(out, meta, rs.opt) // the schema, written at once
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	out.w = nil
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	s := &rankStream{path: path, out: out, sw: sw}
	rs.ranks[r] = s
	return s, nil
}

// open points the stream's writer at its file, opened to append, through
// bw when not nil; done flushes bw and closes the file.
func (s *rankStream) open(bw *bufio.Writer) (done func() error, err error) {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	s.out.w = f
	if bw != nil {
		bw.Reset(f)
		s.out.w = bw
	}
	return func() error {
		var err error
		if bw != nil {
			err = bw.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		s.out.w = nil
		return err
	}, nil
}

// flushScratch is a flushing goroutine's memory, reused from rank to rank.
type flushScratch struct {
	rows, part *trace.Trace
	bw         *bufio.Writer
}

// flush writes the buffered rows as record batches and empties the buffer.
func (s *rankStream) flush(sc *flushScratch) error {
	if s.n == 0 {
		return nil
	}
	if sc.rows == nil {
		sc.rows, sc.bw = &trace.Trace{}, bufio.NewWriterSize(nil, 64<<10)
	}
	truncate(sc.rows)
	for _, p := range s.parts {
		sc.part = p.Unpack(sc.part)
		sc.rows.AppendRows(sc.part, 0, sc.part.Len())
	}
	clear(s.parts)
	s.parts, s.n = s.parts[:0], 0
	done, err := s.open(sc.bw)
	if err == nil {
		err = s.sw.Write(sc.rows)
		if derr := done(); err == nil {
			err = derr
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	return nil
}

// flushAll flushes ss on up to GOMAXPROCS goroutines (each stream on one).
func flushAll(ss []*rankStream) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan *rankStream)
	for range min(runtime.GOMAXPROCS(0), len(ss)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sc flushScratch
			for s := range next {
				if err := s.flush(&sc); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, s := range ss {
		next <- s
	}
	close(next)
	wg.Wait()
	return first
}

// close flushes and closes every stream (end-of-stream marker, file).
func (rs *rankStreams) close() error {
	var live []*rankStream
	for _, s := range rs.ranks {
		if s != nil {
			live = append(live, s)
		}
	}
	err := flushAll(live)
	for _, s := range live {
		// The end-of-stream marker.
		done, e := s.open(nil)
		if e == nil {
			e = s.sw.Close()
			if derr := done(); e == nil {
				e = derr
			}
		}
		if err == nil && e != nil {
			err = fmt.Errorf("writing %s: %w", s.path, e)
		}
	}
	return err
}

// truncate empties every column of t, keeping their capacity.
func truncate(t *trace.Trace) {
	t.Rank, t.Pipeline, t.Stage, t.TPRank, t.Chunk = t.Rank[:0], t.Pipeline[:0], t.Stage[:0], t.TPRank[:0], t.Chunk[:0]
	t.Step, t.MicroBatch, t.Kind, t.Seq = t.Step[:0], t.MicroBatch[:0], t.Kind[:0], t.Seq[:0]
	t.IssueNs, t.StartNs, t.EndNs, t.Peer, t.Bytes = t.IssueNs[:0], t.StartNs[:0], t.EndNs[:0], t.Peer[:0], t.Bytes[:0]
	t.Shape, t.Dtype, t.Tokens, t.Flops, t.MemBytes = t.Shape[:0], t.Dtype[:0], t.Tokens[:0], t.Flops[:0], t.MemBytes[:0]
	t.Group, t.GroupSeq = t.Group[:0], t.GroupSeq[:0]
}
