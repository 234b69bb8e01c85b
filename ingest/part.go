package ingest

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// part is one file as its reader left it, before the steps that need every
// file (peers by stage adjacency, Flight Recorder pipelines, clock
// alignment) and the merge.
type part struct {
	t       *trace.Trace
	info    FileInfo
	warns   []Warning
	pending []pendingP2P // P2P rows that need another file's ranks to complete
	comms   *Comms
	// external marks formats written by other tools (Kineto, Megatron,
	// Chrome, Flight Recorder): one file is one clock domain that may be
	// aligned against the others. Collector formats are never shifted.
	external bool
	fr       *frSide // Flight Recorder: what stage derivation needs
	// headOnly is set after a read of an Arrow file's first record batch
	// only (readOpts.head): t holds that batch, fileRows counts the file's
	// rows.
	headOnly bool
	fileRows int64
	// into: the rows of a merged trace an Arrow file was read into
	// (place.go); t is then those rows unless something replaced it.
	into *rowRange
}

// pendingP2P is a P2P op a reader could not complete alone: its direction
// (SEND_F or SEND_B...) needs the peer's stage, or its peer needs the rank
// that holds the adjacent stage. Its Seq is already assigned. The op is
// its row of the part's trace (its Kind KindInvalid while the direction is
// unknown, its Peer NoRank while the peer is), not a copy: a copy of each
// (an Event, 176 bytes) was 1.1 GB of a 16384-rank job's Flight Recorder
// dumps, held until every file was read.
type pendingP2P struct {
	send bool // a send (else a receive)
	row  int  // its row in the part's trace: there as it was read, completed or dropped by resolveParts
}

// warnf adds a warning about the part's file.
func (p *part) warnf(format string, args ...any) {
	p.warns = append(p.warns, Warning{Path: p.info.Path, Message: fmt.Sprintf(format, args...)})
}

// counter counts names for a warning that lists the most frequent.
type counter map[string]int

// summary says "12 (## forward ## x3, nccl:wait x2, ...)", the 5 most
// frequent names first.
func (c counter) summary() string {
	total := 0
	names := make([]string, 0, len(c))
	for n, k := range c {
		total += k
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if c[names[i]] != c[names[j]] {
			return c[names[i]] > c[names[j]]
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%d (", total)
	for i, n := range names {
		if i == 5 {
			fmt.Fprintf(&b, ", and %d more names", len(names)-5)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		shown := n
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		fmt.Fprintf(&b, "%q x%d", shown, c[n])
	}
	b.WriteString(")")
	return b.String()
}

func (c counter) total() int {
	n := 0
	for _, k := range c {
		n += k
	}
	return n
}

// rowSet collects one file's rows before their seq numbers are known: rows
// are ordered by issue time per rank, then numbered. They go into the
// part's columns as they are added (no Event kept per row: 150 bytes a row
// written and read again), and are sorted only when some row came out of
// order.
type rowSet struct {
	t        trace.Trace
	arena    *trace.ColumnArena // where grow takes room (nil: the heap)
	strs     trace.InternCache
	unsorted bool  // some row was added before the one added last
	pending  []int // rows of pending P2P rows, as added
	sends    []bool
}

// grow makes room for n more rows.
func (s *rowSet) grow(n int) { s.t.GrowIn(n, s.arena) }

func (s *rowSet) add(e trace.Event) {
	if n := s.t.Len(); n > 0 && !s.unsorted {
		s.unsorted = rowLess(e.Rank, e.IssueNs, e.StartNs, s.t.Rank[n-1], s.t.IssueNs[n-1], s.t.StartNs[n-1])
	}
	s.t.AppendCached(e, &s.strs)
}

func (s *rowSet) addPending(e trace.Event, send bool) {
	s.pending = append(s.pending, s.t.Len())
	s.sends = append(s.sends, send)
	s.add(e)
}

// rowLess orders rows by rank, then issue time, then start time (null
// last).
func rowLess(r1 trace.Rank, issue1, start1 int64, r2 trace.Rank, issue2, start2 int64) bool {
	if r1 != r2 {
		return r1 < r2
	}
	if issue1 != issue2 {
		return issue1 < issue2
	}
	return timeLess(start1, start2)
}

// finish numbers the rows 0, 1, 2... per rank in issue-time order (start,
// then the order added break ties) and makes them the trace, in that
// order; the pending ones are listed too, in row order, with their rows,
// for resolveParts to complete (or drop) in place. (Appended once
// completed, they had to be sorted back into place, every part copied
// again: 3.4 s of CPU for 4096 Flight Recorder dumps.)
func (s *rowSet) finish(meta trace.Meta) (*trace.Trace, []pendingP2P) {
	t := new(trace.Trace)
	*t = s.t
	s.t = trace.Trace{}
	t.Meta = meta
	n := t.Len()
	rows := s.pending // the pending rows' rows in t
	if s.unsorted {
		// Rows are usually added in order (a Flight Recorder dump's
		// entries are): the stable sort only when some row is out of it.
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			x, y := idx[a], idx[b]
			return rowLess(t.Rank[x], t.IssueNs[x], t.StartNs[x], t.Rank[y], t.IssueNs[y], t.StartNs[y])
		})
		t = t.Permute(idx)
		t.Meta = meta
		at := make([]int, n) // at[added] = row
		for k, i := range idx {
			at[i] = k
		}
		rows = make([]int, len(s.pending))
		for k, i := range s.pending {
			rows[k] = at[i]
		}
	}
	seq := int64(0)
	last := trace.Rank(-1)
	for i, r := range t.Rank {
		if r != last {
			seq, last = 0, r
		}
		t.Seq[i] = seq
		seq++
	}
	pend := make([]pendingP2P, len(rows))
	for k, i := range rows {
		pend[k] = pendingP2P{send: s.sends[k], row: i}
	}
	slices.SortFunc(pend, func(a, b pendingP2P) int { return cmp.Compare(a.row, b.row) })
	if len(pend) == 0 {
		pend = nil
	}
	return t, pend
}

// timeLess orders times with null (NoTime) last.
func timeLess(a, b int64) bool {
	if a == trace.NoTime {
		return false
	}
	if b == trace.NoTime {
		return true
	}
	return a < b
}
