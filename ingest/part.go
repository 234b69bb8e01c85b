package ingest

import (
	"fmt"
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
// that holds the adjacent stage. Its Seq is already assigned.
type pendingP2P struct {
	ev   trace.Event // Kind is KindInvalid while the direction is unknown, Peer NoRank while the peer is
	send bool        // a send (else a receive)
	row  int         // its row in the part's trace: there as it was read, completed or dropped by resolveParts
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
// are ordered by issue time per rank, then numbered.
type rowSet struct {
	rows    []trace.Event
	pending []int // indices into rows of pending P2P rows
	sends   []bool
}

func (s *rowSet) add(e trace.Event) { s.rows = append(s.rows, e) }

func (s *rowSet) addPending(e trace.Event, send bool) {
	s.pending = append(s.pending, len(s.rows))
	s.sends = append(s.sends, send)
	s.rows = append(s.rows, e)
}

// finish numbers the rows 0, 1, 2... per rank in issue-time order (start,
// then end break ties, then the order added) and makes them the trace, in
// that order; the pending ones are listed too, with their rows, for
// resolveParts to complete (or drop) in place. (Appended once completed,
// they had to be sorted back into place, every part copied again: 3.4 s
// of CPU for 4096 Flight Recorder dumps.)
func (s *rowSet) finish(meta trace.Meta) (*trace.Trace, []pendingP2P) {
	idx := make([]int, len(s.rows))
	for i := range idx {
		idx[i] = i
	}
	less := func(x, y *trace.Event) bool {
		if x.Rank != y.Rank {
			return x.Rank < y.Rank
		}
		if x.IssueNs != y.IssueNs {
			return x.IssueNs < y.IssueNs
		}
		return timeLess(x.StartNs, y.StartNs)
	}
	// Rows are usually added in order (a Flight Recorder dump's entries
	// are): the stable sort only when some row is out of it.
	sorted := true
	for i := 1; i < len(s.rows) && sorted; i++ {
		sorted = !less(&s.rows[i], &s.rows[i-1])
	}
	if !sorted {
		sort.SliceStable(idx, func(a, b int) bool { return less(&s.rows[idx[a]], &s.rows[idx[b]]) })
	}
	// Per row: 0 not pending, 1 a pending receive, 2 a pending send.
	pending := make([]uint8, len(s.rows))
	for k, i := range s.pending {
		pending[i] = 1 + uint8(b2u(s.sends[k]))
	}
	t := &trace.Trace{Meta: meta}
	t.Grow(len(s.rows))
	var pend []pendingP2P
	seq := int64(0)
	last := trace.Rank(-1)
	var strs trace.InternCache
	for _, i := range idx {
		e := s.rows[i]
		if e.Rank != last {
			seq, last = 0, e.Rank
		}
		e.Seq = seq
		seq++
		if pending[i] != 0 {
			pend = append(pend, pendingP2P{ev: e, send: pending[i] == 2, row: t.Len()})
		}
		t.AppendCached(e, &strs)
	}
	return t, pend
}

func b2u(b bool) uint {
	if b {
		return 1
	}
	return 0
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
