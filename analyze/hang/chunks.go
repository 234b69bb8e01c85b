package hang

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/ppprof/ppprof/schedule"
	"github.com/ppprof/ppprof/trace"
)

// Chunks is a trace too large to hold at once, handed to RunChunks a part
// at a time (as analyze.Chunks; ingest.Chunks implements both). A chunk is
// itself a trace: some of the whole trace's rows, with the whole trace's
// metadata (the first chunk's is taken for the whole trace's).
//
// Every row of a rank must be in the same chunk, and every row in exactly
// one chunk. A chunk's rows may come in any order (RunChunks orders them by
// (rank, seq), as Run does). Chunks holding whole pipeline replicas (the
// rank files of some data-parallel replicas, as ingest.OpenChunks groups
// them) keep P2P channels inside one chunk; any other grouping gives the
// same report, at the cost of keeping the P2P rows between ranks of
// different chunks until the end. Chunk is called once per chunk, except
// that when the metadata's schedule proves small enough to check only
// after the first chunks (a claim of more than 65536 actions), those
// chunks are read again; it must return the same rows every time.
type Chunks interface {
	NumChunks() int
	Chunk(c int) (*trace.Trace, error)
}

// Recycler is a Chunks that takes back a chunk's trace its caller is done
// with, to read a later chunk into its columns (ingest.Chunks). RunChunks
// hands back every chunk after its scan and uses nothing of it afterwards.
type Recycler interface {
	Recycle(t *trace.Trace)
}

// RunChunks diagnoses a trace delivered in chunks, one chunk held at a
// time. Its report is the one Run gives for the whole trace (the same
// values, the same JSON).
//
// Each chunk is indexed, matched and checked against the schedule as Run
// does it for the whole trace, and leaves behind only what the wait-for
// graph, the mismatches and the verdict read:
//
//   - per rank: its counts and sums (events, pending ops, last issue,
//     highest step, optimizer steps) and its frontier rows: the last
//     completed op, the ops with a null end, the op it is blocked in;
//   - per P2P channel (both ranks in the chunk): its op counts, the row of
//     its first op (channels are numbered in row order), its unmatched ops
//     (the first completed one and every pending one, all the report and
//     the lost-data check read), the first mismatched pair of each kind
//     and how many pairs show it; the partner of every pending op; for a
//     pair whose labels disagree, the answers orderSuspect's and pairCause's
//     questions about the two ranks' ops need;
//   - the collective rows of named groups (collectives are matched across
//     ranks of all chunks, at the end) and the first P2P row of each named
//     group (groups are numbered in row order);
//   - per step, the ranks of its OPT and OPT_SKIP rows;
//   - the schedule check's departures.
//
// P2P rows toward a rank the chunk does not hold are kept whole and matched
// at the end (their channels then have both sides). The rows kept make a
// small trace, in the whole trace's (rank, seq) order, on which the later
// phases of Run (collectives, lost data, wait-for graph, mismatches,
// verdict) run unchanged.
//
// An error from Chunks.Chunk ends the diagnosis with that error; so does a
// rank whose rows are in two chunks.
func RunChunks(src Chunks, opt Options) (*Report, error) {
	s := &streamer{src: src, opt: opt, maxRank: -1, latest: trace.NoTime, memo: opMemo{}, allGrouped: true,
		opts: map[int64]*optSides{}}
	rec, _ := src.(Recycler)
	n := src.NumChunks()
	for c := 0; c < n; c++ {
		if opt.Progress != nil {
			opt.Progress(c, n)
		}
		t, err := src.Chunk(c)
		if err != nil {
			return nil, err
		}
		if c == 0 {
			s.meta = t.Meta
		}
		if err := s.add(c, t); err != nil {
			return nil, err
		}
		if rec != nil && c+1 < n {
			rec.Recycle(t)
		}
	}
	return s.finish()
}

// rowKey names a row of the whole trace: its rank and its position among
// the rank's rows in (rank, seq) order. Keys order as the rows of Run's
// (ordered) trace do.
type rowKey struct {
	r trace.Rank
	k int32
}

func (x rowKey) compare(y rowKey) int { return cmp.Or(cmp.Compare(x.r, y.r), cmp.Compare(x.k, y.k)) }

// keptRows is rows of chunks kept for the end, each with its key.
type keptRows struct {
	t    trace.Trace
	keys []rowKey
}

func (k *keptRows) add(t *trace.Trace, i int, key rowKey) {
	if n := k.t.Len(); n == cap(k.t.Rank) {
		// Doubling, each column at once and in huge pages once large
		// (trace.Grow): a dump missing ranks keeps every op waiting for
		// them, millions of rows appended one at a time.
		k.t.Grow(max(n, 1024))
	}
	k.t.AppendRows(t, i, i+1)
	k.keys = append(k.keys, key)
}

// opQuery is a question hasOp (asc: ascending) asks about a rank's rows.
type opQuery struct {
	rank, peer trace.Rank
	step       int64
	mb         trace.MicroBatch
	kind       trace.Kind
	asc        bool
}

// opMemo holds the answers, found while the ranks' rows were at hand.
type opMemo map[opQuery]bool

func (m opMemo) answer(q opQuery) bool {
	v, ok := m[q]
	if !ok {
		panic(fmt.Sprintf("hang: RunChunks kept no answer for %+v", q))
	}
	return v
}

// chanRec is one channel a chunk (or the rows between chunks) matched
// whole.
type chanRec struct {
	first rowKey  // its first op
	ch    channel // src, dst, gid, op counts; extra is nil
	extra []rowKey
	mm    []pmRec // its entries of pairMM, in order
}

type pmRec struct {
	kind       MismatchKind
	send, recv rowKey
	count      int
}

// matchRec is what matching leaves behind.
type matchRec struct {
	chans   []chanRec
	partner []rowKey // pairs: a pending P2P op, its partner
	matched int
}

func (m *matchRec) merge(o matchRec) {
	m.chans = append(m.chans, o.chans...)
	m.partner = append(m.partner, o.partner...)
	m.matched += o.matched
}

// keyRun is a rank's run of rows as scanRows summed it up, with its rows
// (lastDone, block, firstSend, firstPending) as positions among the rank's
// rows; lo and hi are unused.
type keyRun = rankRun

// streamer is the state of one RunChunks.
type streamer struct {
	src  Chunks
	opt  Options
	meta trace.Meta

	events          int
	maxRank, latest int64
	runs            []keyRun
	owner           []int32 // per rank: 1 + the chunk that held it; 0 none

	kept keptRows // rows the end reads
	res  keptRows // P2P rows toward ranks of other chunks (or none)

	// Matching, both ways until the whole trace says which (channels are
	// per group only when every P2P op of the trace names its group).
	anyP2P, allGrouped bool
	byGroup, byPair    matchRec
	memo               opMemo

	// Schedule check.
	sched     *schedule.Schedule
	noSched   bool  // the metadata's schedule cannot be checked at all
	unchecked []int // chunks read before the schedule proved small enough
	divs      []Divergence
	follow    int

	opts    map[int64]*optSides
	anySkip bool
}

// add takes chunk c.
func (s *streamer) add(c int, t *trace.Trace) error {
	s.events += t.Len()
	if t.Len() == 0 {
		return nil
	}
	a, runs, maxRank, latest, err := indexChunk(t)
	if err != nil {
		return err
	}
	t = a.t // ordered
	s.maxRank, s.latest = max(s.maxRank, maxRank), max(s.latest, latest)
	for _, run := range runs {
		r := int(run.r)
		if r >= len(s.owner) {
			s.owner = append(s.owner, make([]int32, r+1-len(s.owner))...)
		}
		if s.owner[r] != 0 {
			return fmt.Errorf("hang: rank %d has rows in chunks %d and %d: a rank's rows must be in one chunk", r, s.owner[r]-1, c)
		}
		s.owner[r] = int32(c + 1)
	}

	// The schedule check, beside matching (as in Run).
	var divs []Divergence
	follow := 0
	checked := make(chan struct{})
	var checkPanic any
	sched := s.schedule(a)
	if sched == nil && !s.noSched {
		s.unchecked = append(s.unchecked, c)
	}
	go func() {
		defer func() {
			checkPanic = recover()
			close(checked)
		}()
		if sched != nil {
			divs, follow = a.compareRanks(sched)
		}
	}()

	key := func(i int) rowKey {
		r := t.Rank[i]
		return rowKey{r, int32(i - a.ranks[r].lo)}
	}
	var keep []int32
	present := func(r trace.Rank) bool { return int(r) < len(a.ranks) && a.ranks[r].present }

	// One pass over the rows: P2P rows toward ranks the chunk does not
	// hold, collective rows of named groups, the first P2P row of each
	// named group, optimizer steps.
	localGrouped, localP2P := true, false
	lastGroup := trace.Str(0)
	var groupsSeen map[trace.Str]bool
	for i, k := range t.Kind {
		switch {
		case k.IsP2P():
			localP2P = true
			if !present(t.Peer[i]) {
				s.res.add(t, i, key(i))
			}
			g := t.Group[i]
			if g == 0 {
				localGrouped = false
			} else if g != lastGroup {
				lastGroup = g
				if groupsSeen == nil {
					groupsSeen = map[trace.Str]bool{}
				}
				if !groupsSeen[g] {
					groupsSeen[g] = true
					keep = append(keep, int32(i))
				}
			}
		case k.IsCollective():
			if t.Group[i] != 0 {
				keep = append(keep, int32(i))
			}
		case isOpt(k):
			o := s.opts[t.Step[i]]
			if o == nil {
				o = &optSides{}
				s.opts[t.Step[i]] = o
			}
			if k == KindOptSkip {
				o.skip = append(o.skip, t.Rank[i])
				s.anySkip = true
			} else {
				o.opt = append(o.opt, t.Rank[i])
			}
		}
	}
	s.anyP2P = s.anyP2P || localP2P
	s.allGrouped = s.allGrouped && localGrouped

	// Each rank's frontier.
	for _, run := range runs {
		ri := run.info
		for _, i := range []int{ri.lastDone, ri.block, ri.firstSend} {
			if i >= 0 {
				keep = append(keep, int32(i))
			}
		}
		if ri.pending > 0 {
			for i := ri.firstPending; i < ri.hi; i++ {
				if t.EndNs[i] == trace.NoTime {
					keep = append(keep, int32(i))
				}
			}
		}
		rel := func(i int) int {
			if i < 0 {
				return -1
			}
			return i - ri.lo
		}
		kr := run
		kr.info.lastDone, kr.info.block, kr.info.firstSend, kr.info.firstPending = rel(ri.lastDone), rel(ri.block), rel(ri.firstSend), rel(ri.firstPending)
		s.runs = append(s.runs, kr)
	}

	// Matching: per group when the chunk's P2P ops all name one, which the
	// whole trace may still contradict, so per rank pair too when that
	// differs.
	if localP2P {
		keepRow := func(i int) { keep = append(keep, int32(i)) }
		if localGrouped {
			m, pairs, err := s.matchRows(a, t, true, key, present, keepRow)
			if err != nil {
				return err
			}
			s.byGroup.merge(m)
			if pairs {
				if m, _, err = s.matchRows(a, t, false, key, present, keepRow); err != nil {
					return err
				}
			}
			s.byPair.merge(m)
		} else {
			m, _, err := s.matchRows(a, t, false, key, present, keepRow)
			if err != nil {
				return err
			}
			s.byPair.merge(m)
		}
	}

	<-checked
	if checkPanic != nil {
		panic(checkPanic)
	}
	s.divs = append(s.divs, divs...)
	s.follow += follow

	slices.Sort(keep)
	keep = slices.Compact(keep)
	for _, i := range keep {
		s.kept.add(t, int(i), key(int(i)))
	}
	return nil
}

// indexChunk indexes chunk t as Run indexes a whole trace (ordering its
// rows first when they are not), and returns its analysis (on the ordered
// rows) with its ranks' runs of rows, its highest rank or peer and its
// latest timestamp.
func indexChunk(t *trace.Trace) (*analysis, []rankRun, int64, int64, error) {
	a := newReport(t, Options{}, t.Len())
	runs, maxRank, latest, err := a.scanRows(true)
	if err == errUnsorted {
		a = newReport(sortedCopy(t), Options{}, t.Len())
		runs, maxRank, latest, err = a.scanRows(false)
	}
	if err != nil {
		return nil, nil, 0, 0, err
	}
	if err := a.finishIndex(runs, maxRank, latest); err != nil {
		return nil, nil, 0, 0, err
	}
	return a, runs, maxRank, latest, nil
}

// schedule returns the schedule to check the ranks of chunk analysis a
// against: nil when there is none, or when it is not yet known to be small
// enough for the trace (the chunk is then checked at the end, if it
// proves so).
func (s *streamer) schedule(a *analysis) *schedule.Schedule {
	if s.sched != nil || s.noSched {
		return s.sched
	}
	j := a.rep.Job
	if j.Schedule == "" || j.PP <= 0 || j.MicroBatches <= 0 {
		s.noSched = true
		return nil
	}
	if int64(j.PP)*int64(j.MicroBatches)*int64(max(j.Virtual, 1)) > 4*int64(s.events)+1<<16 {
		return nil // the whole trace may be large enough: see finish
	}
	// Small enough for the whole trace too: what Run decides.
	s.sched = a.programSchedule(s.events, false)
	s.noSched = s.sched == nil
	return s.sched
}

// matchRows matches the P2P ops of chunk analysis a (rows t, keys key),
// per group or per rank pair, and returns what the end needs of the
// channels whose ranks are both present; pairs reports, for per-group
// matching, whether some rank pair uses several groups (per rank pair
// matching then differs). keep is called with every row the results name.
func (s *streamer) matchRows(a *analysis, t *trace.Trace, byGroup bool, key func(int) rowKey,
	present func(trace.Rank) bool, keep func(int)) (rec matchRec, pairs bool, err error) {
	tt := t
	if !byGroup && p2pGroups(t) {
		// match decides by the rows: hand it rows without groups.
		c := *t
		c.Group = make([]trace.Str, t.Len())
		tt = &c
	}
	b := &analysis{t: tt, opt: a.opt, rep: &Report{}, ranks: a.ranks}
	b.match()
	firsts, pairs, err := channelFirsts(tt, b.chans, byGroup)
	if err != nil {
		return rec, false, err
	}
	rec.matched = b.rep.Matched
	recOf := make([]int32, len(b.chans))
	for c := range b.chans {
		ch := &b.chans[c]
		recOf[c] = -1
		if !present(ch.src) || !present(ch.dst) {
			continue // its rows are kept whole: matched at the end
		}
		recOf[c] = int32(len(rec.chans))
		cr := chanRec{first: key(int(firsts[c])), ch: channel{src: ch.src, dst: ch.dst, gid: ch.gid, sends: ch.sends, recvs: ch.recvs}}
		done := false
		for _, x := range b.unmatched(ch) {
			if t.EndNs[x] != trace.NoTime {
				if done {
					continue
				}
				done = true
			}
			cr.extra = append(cr.extra, key(int(x)))
			keep(int(x))
		}
		rec.chans = append(rec.chans, cr)
	}
	for _, pm := range b.pairMM {
		c := recOf[pm.ch]
		if c < 0 {
			return rec, false, errors.New("hang: internal error: a mismatched pair on a channel the chunk does not hold whole")
		}
		sr, rr := int(pm.send), int(pm.recv)
		rec.chans[c].mm = append(rec.chans[c].mm, pmRec{kind: pm.kind, send: key(sr), recv: key(rr), count: pm.count})
		keep(sr)
		keep(rr)
		if pm.kind == OrderMismatch {
			s.answerOrder(b, sr, rr)
		}
	}
	for i := range t.Len() {
		if t.EndNs[i] != trace.NoTime {
			continue
		}
		if p := b.partner(i); p >= 0 {
			rec.partner = append(rec.partner, key(i), key(int(p)))
			keep(int(p))
		}
	}
	return rec, pairs, nil
}

// answerOrder records what orderSuspect and pairCause ask of the ranks'
// rows about the mismatched pair (s, r) of analysis b, which holds both
// ranks' P2P ops toward each other.
func (s *streamer) answerOrder(b *analysis, sr, rr int) {
	t := b.t
	src, dst := t.Rank[sr], t.Rank[rr]
	has := func(rank, peer trace.Rank, step int64, mb trace.MicroBatch, kind trace.Kind) {
		s.memo[opQuery{rank: rank, peer: peer, step: step, mb: mb, kind: kind}] = b.hasOp(rank, peer, step, mb, kind)
	}
	asc := func(rank, peer trace.Rank, step int64, kind trace.Kind) {
		s.memo[opQuery{rank: rank, peer: peer, step: step, mb: -1, kind: kind, asc: true}] = b.ascending(rank, peer, step, kind)
	}
	// orderSuspect.
	has(src, dst, t.Step[rr], t.MicroBatch[rr], t.Kind[rr].Counterpart())
	has(dst, src, t.Step[sr], t.MicroBatch[sr], t.Kind[sr].Counterpart())
	asc(src, dst, t.Step[sr], t.Kind[sr])
	asc(dst, src, t.Step[rr], t.Kind[rr])
	// pairCause, with either rank the suspect.
	step := min(t.Step[sr], t.Step[rr])
	has(src, dst, step, t.MicroBatch[rr], t.Kind[rr].Counterpart())
	has(dst, src, step, t.MicroBatch[sr], t.Kind[sr].Counterpart())
}

// channelFirsts returns the row of the first op of each channel of chans
// (match's channels of t, in the order of their first op), found from the
// rows' own ranks, peers and (byGroup) groups; pairs reports whether some
// rank pair has channels in several groups.
func channelFirsts(t *trace.Trace, chans []channel, byGroup bool) ([]int32, bool, error) {
	type id struct {
		g        trace.Str
		src, dst trace.Rank
	}
	type side struct {
		peer  trace.Rank
		recv  bool
		g     trace.Str
		first int32
	}
	first := map[id]int32{}
	var sides []side
	n := t.Len()
	rank, kind, peer, group := t.Rank[:n], t.Kind[:n], t.Peer[:n], t.Group[:n]
	flush := func(r trace.Rank) {
		for _, sd := range sides {
			c := id{sd.g, r, sd.peer}
			if sd.recv {
				c.src, c.dst = sd.peer, r
			}
			if f, ok := first[c]; !ok || sd.first < f {
				first[c] = sd.first
			}
		}
		sides = sides[:0]
	}
	for i := 0; i < n; i++ {
		if i > 0 && rank[i] != rank[i-1] {
			flush(rank[i-1])
		}
		k := kind[i]
		if !k.IsP2P() {
			continue
		}
		g := trace.Str(0)
		if byGroup {
			g = group[i]
		}
		p, recv := peer[i], k.IsRecv()
		found := false
		for _, sd := range sides {
			if sd.peer == p && sd.recv == recv && sd.g == g {
				found = true
				break
			}
		}
		if !found {
			sides = append(sides, side{peer: p, recv: recv, g: g, first: int32(i)})
		}
	}
	if n > 0 {
		flush(rank[n-1])
	}
	type chf struct {
		c     id
		first int32
	}
	list := make([]chf, 0, len(first))
	pairSet := map[[2]trace.Rank]bool{}
	for c, f := range first {
		list = append(list, chf{c, f})
		pairSet[[2]trace.Rank{c.src, c.dst}] = true
	}
	slices.SortFunc(list, func(x, y chf) int { return cmp.Compare(x.first, y.first) })
	if len(list) != len(chans) {
		return nil, false, fmt.Errorf("hang: cannot diagnose in chunks: %d P2P channels, %d as matching counts them (more than %d process groups?)", len(list), len(chans), maxGroupID)
	}
	out := make([]int32, len(list))
	for c, x := range list {
		if x.c.src != chans[c].src || x.c.dst != chans[c].dst {
			return nil, false, fmt.Errorf("hang: internal error: channel %d is %d->%d, matching has %d->%d", c, x.c.src, x.c.dst, chans[c].src, chans[c].dst)
		}
		out[c] = x.first
	}
	return out, byGroup && len(pairSet) < len(list), nil
}

// finish matches the P2P rows between chunks, builds the trace of the rows
// kept and runs the rest of Run on it.
func (s *streamer) finish() (*Report, error) {
	if s.events == 0 {
		return nil, errors.New("hang: trace has no events")
	}
	byGroup := s.anyP2P && s.allGrouped
	m := s.byPair
	if byGroup {
		m = s.byGroup
	}

	// The rows between chunks: each rank pair's P2P ops toward each other
	// are all there, so their channels are whole.
	var resRows *keptRows
	if len(s.res.keys) > 0 {
		res := sortKept(&s.res, s.meta)
		ra, err := newAnalysis(&res.t, Options{})
		if err != nil {
			return nil, err
		}
		resRows = &keptRows{}
		key := func(i int) rowKey { return res.keys[i] }
		rm, _, err := s.matchRows(ra, &res.t, byGroup, key, func(trace.Rank) bool { return true },
			func(i int) { resRows.add(&res.t, i, res.keys[i]) })
		if err != nil {
			return nil, err
		}
		m.merge(rm)
	}
	if resRows != nil {
		for i, k := range resRows.keys {
			s.kept.add(&resRows.t, i, k)
		}
	}
	kept := sortKept(&s.kept, s.meta)
	R := &kept.t
	idx := func(k rowKey) int32 {
		i, ok := slices.BinarySearchFunc(kept.keys, k, rowKey.compare)
		if !ok {
			panic(fmt.Sprintf("hang: RunChunks kept no row %+v", k))
		}
		return int32(i)
	}

	// 1. The ranks, on the kept rows.
	a := newReport(R, s.opt, s.events)
	slices.SortFunc(s.runs, func(x, y keyRun) int { return cmp.Compare(x.r, y.r) })
	for i := range s.runs {
		run := &s.runs[i]
		ri := &run.info
		lo, _ := slices.BinarySearchFunc(kept.keys, rowKey{run.r, -1 << 31}, rowKey.compare)
		hi, _ := slices.BinarySearchFunc(kept.keys, rowKey{run.r + 1, -1 << 31}, rowKey.compare)
		ri.lo, ri.hi = lo, hi
		for _, p := range []*int{&ri.lastDone, &ri.block, &ri.firstSend, &ri.firstPending} {
			if *p >= 0 {
				*p = int(idx(rowKey{run.r, int32(*p)}))
			}
		}
	}
	if err := a.finishIndex(s.runs, s.maxRank, s.latest); err != nil {
		return nil, err
	}
	a.scanRanks() // 1

	// 2. Matching, from the chunks'.
	a.allPartners = true
	a.tailPartners()
	for i := 0; i < len(m.partner); i += 2 {
		a.tail[int(idx(m.partner[i]))+a.ranks[R.Rank[idx(m.partner[i])]].tailBase] = idx(m.partner[i+1])
	}
	slices.SortFunc(m.chans, func(x, y chanRec) int { return x.first.compare(y.first) })
	a.chans = make([]channel, len(m.chans))
	for c, cr := range m.chans {
		ch := cr.ch
		ch.extra, ch.nextra = int32(len(a.extra)), int32(len(cr.extra))
		for _, k := range cr.extra {
			a.extra = append(a.extra, idx(k))
		}
		a.chans[c] = ch
		for _, pm := range cr.mm {
			a.pairMM = append(a.pairMM, pairMismatch{kind: pm.kind, ch: int32(c), send: idx(pm.send), recv: idx(pm.recv), count: pm.count})
		}
	}
	a.rep.Matched = m.matched
	a.opMemo = s.memo
	if s.anySkip {
		for _, o := range s.opts {
			slices.SortStableFunc(o.opt, func(x, y trace.Rank) int { return cmp.Compare(x, y) })
			slices.SortStableFunc(o.skip, func(x, y trace.Rank) int { return cmp.Compare(x, y) })
		}
		a.optSteps = s.opts
	}

	a.matchCollectives() // 2b
	a.markLost()         // 3

	// 4. The schedule check, from the chunks' (and those read again).
	if sched := a.programSchedule(s.events, true); sched != nil {
		for _, c := range s.unchecked {
			t, err := s.src.Chunk(c)
			if err != nil {
				return nil, err
			}
			ca, _, _, _, err := indexChunk(t)
			if err != nil {
				return nil, err
			}
			divs, follow := ca.compareRanks(sched)
			s.divs = append(s.divs, divs...)
			s.follow += follow
		}
		slices.SortFunc(s.divs, func(x, y Divergence) int { return cmp.Compare(x.Rank, y.Rank) })
		a.keepDivs(s.divs, s.follow)
	}
	a.rep.Notes = append(a.rep.Notes, a.progNotes...)

	a.buildGraph()        // 5
	a.collectMismatches() // 2, 5: the list
	a.decide()            // 6
	return a.rep, nil
}

// sortKept returns k's rows ordered by key, each once, with metadata meta.
func sortKept(k *keptRows, meta trace.Meta) *keptRows {
	order := make([]int, len(k.keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return k.keys[x].compare(k.keys[y]) })
	out := &keptRows{}
	out.t.Meta = meta
	for j, i := range order {
		if j > 0 && k.keys[i] == k.keys[order[j-1]] {
			continue
		}
		out.add(&k.t, i, k.keys[i])
	}
	return out
}
