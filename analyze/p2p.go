package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// P2P summarises point-to-point traffic over the complete (step, pipeline)
// windows. Per-step numbers are per pipeline replica: sums over complete
// windows divided by their number.
type P2P struct {
	BytesPerStep      float64    // bytes sent over all boundaries per step per pipeline replica (sum of SEND bytes)
	ModelBytesPerStep float64    // sum of the boundaries' models; 0 when some boundary's model is unknown
	ExposedMs         float64    // mean per window of exposed P2P wait summed over stages: the sum of StageSummary.P2PWaitMs (steady gaps only)
	Boundaries        []Boundary // one per (from stage, to stage, direction), sorted by Kind, From, To

	// exposedNs is each boundary's exposed receive wait in ns, summed over
	// complete windows. analyzeStats fills it (it owns the steady gaps) and
	// analyzeP2P reads it, so Run must call analyzeStats first.
	exposedNs map[boundaryKey]float64
	// windows holds, by window, what analyzeStats gathered while it had
	// the window's transfers at hand: the sends' per-boundary sums.
	// analyzeP2P uses and drops it (it computes them when absent).
	windows []statsWindow
}

// Boundary is the traffic across one stage boundary in one direction. In an
// interleaved job (v chunks per stage) the boundary s -> s+1 carries the
// activations of v chunks and the wrap-around boundary p-1 -> 0 those of
// v-1 (chunk c of stage p-1 feeds chunk c+1 of stage 0); gradients mirror
// this (s+1 -> s carries v chunks, 0 -> p-1 carries v-1).
type Boundary struct {
	From, To     int
	Kind         string  // "activation" (SEND_F) or "gradient" (SEND_B)
	BytesPerStep float64 // measured: sum of the SEND rows' bytes per window (all TP ranks' sends included)
	SendsPerStep float64 // SEND rows per window
	// ModelBytesPerStep is m x chunks x TP x V: the transfers the schedule
	// implies (m micro-batches times the chunks crossing this boundary, for
	// each TP rank of the sending stage) times V, the mean payload the
	// sends' shapes and dtypes give (product of the shape's dimensions times
	// the dtype's size: 2 for bf16/fp16, 4 for fp32, 8 for fp64, 1 for
	// fp8/int8). 0 when some send's shape or dtype is unknown, or when the
	// boundary joins stages that are not neighbours.
	ModelBytesPerStep float64
	// GBps is the achieved bandwidth: bytes over the summed transfer
	// durations of the sends, in GB/s (1e9 bytes/s, not GiB). A transfer
	// starts when both sides have started (the later of the send's and the
	// matched receive's start) and ends when the receive ends; latency is
	// included, so it is below the link's bandwidth. 0 when transfers take
	// no time.
	GBps float64
	// ExposedMs is the mean per window of the receiving stage's exposed
	// wait on this boundary's transfers: the part of its receives'
	// transfer phases that falls in the stage's steady gaps (see
	// StageSummary.P2PWaitMs). Receives from two boundaries that overlap
	// in time count in both, so boundaries can sum to more than
	// P2P.ExposedMs.
	ExposedMs float64
}

// Boundary kinds.
const (
	boundaryActivation = "activation"
	boundaryGradient   = "gradient"
)

// boundaryKey names a boundary: from and to stages and the direction (0
// activation, 1 gradient).
type boundaryKey struct {
	from, to int32
	dir      uint8
}

func (k boundaryKey) kind() string {
	if k.dir == 0 {
		return boundaryActivation
	}
	return boundaryGradient
}

// p2pDir returns the direction of a P2P kind: 0 for SEND_F/RECV_F
// (activations), 1 for SEND_B/RECV_B (gradients).
func p2pDir(k trace.Kind) uint8 {
	if k == trace.SendF || k == trace.RecvF {
		return 0
	}
	return 1
}

// neighbour returns the stage at the other end of a P2P op on stage st of a
// p-stage pipeline when its peer's stage is unknown: activations flow to
// st+1 (the last stage's wrap to stage 0), gradients to st-1 (stage 0's
// wrap to p-1).
func neighbour(st int32, k trace.Kind, p int) int32 {
	P := int32(max(p, 1))
	switch k {
	case trace.SendF, trace.RecvB:
		return (st + 1) % P
	default:
		return (st - 1 + P) % P
	}
}

// transfer is one matched send/receive pair of a window, or one side of it
// when the other is not in the window. Times are ns; startNs is NoTime when
// some side never started, endNs NoTime when the transfer never ended.
type transfer struct {
	send, recv     int // rows; -1 when that side is missing
	startNs, endNs int64
}

// p2pBucket is the sends (or the receives) of one ordered (src, dst) rank
// pair, in issue order.
type p2pBucket struct {
	src, dst trace.Rank
	ops      []int // rows
}

// p2pSide gathers one side's ops (sends or receives) into buckets.
type p2pSide struct {
	buckets []p2pBucket // [:n] in use; the rest keep their capacity
	n       int
	first   int // buckets[first:n] belong to the current rank's run
}

func (sd *p2pSide) reset() { sd.n, sd.first = 0, 0 }

// newRank starts the run of a new rank: its buckets are looked up among
// buckets[first:n] only, a handful.
func (sd *p2pSide) newRank() { sd.first = sd.n }

func (sd *p2pSide) add(src, dst trace.Rank, row int) {
	for k := sd.first; k < sd.n; k++ {
		if b := &sd.buckets[k]; b.src == src && b.dst == dst {
			b.ops = append(b.ops, row)
			return
		}
	}
	if sd.n == len(sd.buckets) {
		sd.buckets = append(sd.buckets, p2pBucket{})
	}
	b := &sd.buckets[sd.n]
	b.src, b.dst, b.ops = src, dst, append(b.ops[:0], row)
	sd.n++
}

// sort orders the buckets by (src, dst).
func (sd *p2pSide) sort() {
	slices.SortFunc(sd.buckets[:sd.n], func(a, b p2pBucket) int {
		return cmp.Or(cmp.Compare(a.src, b.src), cmp.Compare(a.dst, b.dst))
	})
}

// p2pScratch holds buffers matchTransfers reuses between windows.
type p2pScratch struct {
	sends, recvs p2pSide
	order        []int
	out          []transfer
}

// matchTransfers pairs the sends and receives among rows as NCCL does: for
// each ordered (sender, receiver) rank pair, the k-th send in the sender's
// issue order with the k-th receive in the receiver's. A pair's transfer
// starts at the later of the two starts and ends at the receive's end;
// an unmatched op is its own transfer. The result is in (sender, receiver,
// issue) order, unmatched ops after their pair's matched ones; it aliases
// sc and is valid until the next call.
//
// Rows in (rank, seq) order, as ingest and sim leave them, are bucketed by
// rank pair in one pass; other orders are sorted first.
func matchTransfers(t *trace.Trace, rows []int, sc *p2pScratch) []transfer {
	return matchTransfersIn(t, rows, false, sc)
}

// matchTransfersIn is matchTransfers for rows known to be in (rank, seq)
// order when sorted is true (no check).
func matchTransfersIn(t *trace.Trace, rows []int, sorted bool, sc *p2pScratch) []transfer {
	sc.sends.reset()
	sc.recvs.reset()
	sc.out = sc.out[:0]
	if !sorted {
		rows = sc.rankSeqOrder(t, rows)
	}
	for k, i := range rows {
		if k == 0 || t.Rank[i] != t.Rank[rows[k-1]] {
			sc.sends.newRank()
			sc.recvs.newRank()
		}
		switch {
		case t.Kind[i].IsSend():
			sc.sends.add(t.Rank[i], t.Peer[i], i)
		case t.Kind[i].IsRecv():
			sc.recvs.add(t.Peer[i], t.Rank[i], i)
		}
	}
	sc.sends.sort()
	sc.recvs.sort()
	ss, rs := sc.sends.buckets[:sc.sends.n], sc.recvs.buckets[:sc.recvs.n]
	for len(ss) > 0 || len(rs) > 0 {
		var c int
		switch {
		case len(ss) == 0:
			c = 1
		case len(rs) == 0:
			c = -1
		default:
			c = cmp.Or(cmp.Compare(ss[0].src, rs[0].src), cmp.Compare(ss[0].dst, rs[0].dst))
		}
		var sends, recvs []int
		switch {
		case c < 0:
			sends, ss = ss[0].ops, ss[1:]
		case c > 0:
			recvs, rs = rs[0].ops, rs[1:]
		default:
			sends, recvs, ss, rs = ss[0].ops, rs[0].ops, ss[1:], rs[1:]
		}
		n := min(len(sends), len(recvs))
		for k := 0; k < n; k++ {
			s, r := sends[k], recvs[k]
			tr := transfer{send: s, recv: r, startNs: trace.NoTime, endNs: t.EndNs[r]}
			if t.StartNs[s] != trace.NoTime && t.StartNs[r] != trace.NoTime {
				tr.startNs = max(t.StartNs[s], t.StartNs[r])
			}
			sc.out = append(sc.out, tr)
		}
		for _, s := range sends[n:] {
			sc.out = append(sc.out, single(t, s, true))
		}
		for _, r := range recvs[n:] {
			sc.out = append(sc.out, single(t, r, false))
		}
	}
	return sc.out
}

// rankSeqOrder returns rows in (rank, seq) order: rows itself when it
// already is, else a sorted copy that aliases sc.
func (sc *p2pScratch) rankSeqOrder(t *trace.Trace, rows []int) []int {
	less := func(a, b int) int {
		return cmp.Or(cmp.Compare(t.Rank[a], t.Rank[b]), cmp.Compare(t.Seq[a], t.Seq[b]), cmp.Compare(a, b))
	}
	for k := 1; k < len(rows); k++ {
		if less(rows[k-1], rows[k]) > 0 {
			sc.order = append(sc.order[:0], rows...)
			slices.SortFunc(sc.order, less)
			return sc.order
		}
	}
	return rows
}

func single(t *trace.Trace, row int, send bool) transfer {
	tr := transfer{send: row, recv: -1, startNs: t.StartNs[row], endNs: t.EndNs[row]}
	if !send {
		tr.send, tr.recv = -1, row
	}
	return tr
}

// durNs returns the transfer's duration, or -1 when it has none (never
// started or ended, or ended before it started).
func (tr transfer) durNs() int64 {
	if tr.startNs == trace.NoTime || tr.endNs == trace.NoTime || tr.endNs < tr.startNs {
		return -1
	}
	return tr.endNs - tr.startNs
}

// sendKey returns the boundary a transfer with a send belongs to.
func sendKey(t *trace.Trace, tr transfer, p int) boundaryKey {
	s := tr.send
	k := boundaryKey{from: int32(t.Stage[s]), dir: p2pDir(t.Kind[s])}
	if tr.recv >= 0 {
		k.to = int32(t.Stage[tr.recv])
	} else {
		k.to = neighbour(k.from, t.Kind[s], p)
	}
	return k
}

// recvKey returns the boundary a transfer with a receive belongs to.
func recvKey(t *trace.Trace, tr transfer, p int) boundaryKey {
	r := tr.recv
	k := boundaryKey{to: int32(t.Stage[r]), dir: p2pDir(t.Kind[r])}
	if tr.send >= 0 {
		k.from = int32(t.Stage[tr.send])
	} else {
		k.from = neighbour(k.to, t.Kind[r], p)
	}
	return k
}

// p2pAcc accumulates one boundary over the complete windows.
type p2pAcc struct {
	bytes      float64
	sends      int
	durNs      float64
	shapeBytes float64 // sum of V over sends with a known shape and dtype
	shapeN     int
	maxTP      int32
}

// p2pWinAcc is one boundary's sends in one window.
type p2pWinAcc struct {
	key        boundaryKey
	bytes      int64
	sends      int
	durNs      int64
	shapeBytes float64
	shapeN     int
	maxTP      int32
}

// p2pWindowSends appends to out the per-boundary sums of the sends among
// trs (one window's transfers), boundaries in the order first met.
func p2pWindowSends(t *trace.Trace, trs []transfer, p int, out []p2pWinAcc) []p2pWinAcc {
	// Consecutive sends mostly carry the same shape: parse it once.
	lastShape, lastDtype, lastV, lastOK := trace.Str(0), trace.Str(0), 0.0, false
	a := -1
	for _, tr := range trs {
		if tr.send < 0 {
			continue
		}
		k := sendKey(t, tr, p)
		if a < 0 || out[a].key != k {
			a = -1
			for j := range out {
				if out[j].key == k {
					a = j
					break
				}
			}
			if a < 0 {
				a = len(out)
				out = append(out, p2pWinAcc{key: k})
			}
		}
		acc := &out[a]
		s := tr.send
		acc.bytes += max(t.Bytes[s], 0)
		acc.sends++
		acc.maxTP = max(acc.maxTP, t.TPRank[s])
		if d := tr.durNs(); d > 0 {
			acc.durNs += d
		}
		if t.Shape[s] != lastShape || t.Dtype[s] != lastDtype {
			lastShape, lastDtype = t.Shape[s], t.Dtype[s]
			lastV, lastOK = payloadBytes(lastShape.String(), lastDtype.String())
		}
		if lastOK {
			acc.shapeBytes += lastV
			acc.shapeN++
		}
	}
	return out
}

// analyzeP2P fills Report.P2P from the SEND rows of the complete windows
// (matched to their receives) and the exposure analyzeStats measured. The
// per-window sums come from analyzeStats when it ran (else they are made
// here, in parallel); they are added up in window order.
func analyzeP2P(ix *index, rep *Report) {
	out := &rep.P2P
	wins := out.windows
	out.windows = nil
	if len(wins) != len(ix.windows) {
		wins = make([]statsWindow, len(ix.windows))
		scs := make([]p2pScratch, workers(len(ix.windows)))
		ix.forWindows(func(k int) bool { return replayable(ix.windows[k]) }, func(w, k int) {
			g := ix.windows[k]
			wins[k].sends = p2pWindowSends(g.t, matchTransfers(g.t, g.rows, &scs[w]), ix.p, nil)
		})
	}
	acc := map[boundaryKey]*p2pAcc{}
	windows := 0
	for k, g := range ix.windows {
		if !g.measured.Complete || g.measured.EndNs <= g.measured.StartNs {
			continue
		}
		windows++
		for _, x := range wins[k].sends {
			a := acc[x.key]
			if a == nil {
				a = &p2pAcc{}
				acc[x.key] = a
			}
			a.bytes += float64(x.bytes)
			a.sends += x.sends
			a.durNs += float64(x.durNs)
			a.shapeBytes += x.shapeBytes
			a.shapeN += x.shapeN
			a.maxTP = max(a.maxTP, x.maxTP)
		}
	}
	if windows == 0 {
		return
	}
	for k := range out.exposedNs {
		if acc[k] == nil {
			acc[k] = &p2pAcc{}
		}
	}
	keys := make([]boundaryKey, 0, len(acc))
	for k := range acc {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b boundaryKey) int {
		return cmp.Or(cmp.Compare(a.dir, b.dir), cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to))
	})
	nw := float64(windows)
	modelKnown := true
	for _, k := range keys {
		a := acc[k]
		b := Boundary{From: int(k.from), To: int(k.to), Kind: k.kind(),
			BytesPerStep: a.bytes / nw, SendsPerStep: float64(a.sends) / nw,
			ExposedMs: out.exposedNs[k] / nw / 1e6}
		if a.durNs > 0 {
			b.GBps = a.bytes / a.durNs
		}
		b.ModelBytesPerStep = modelBytes(k, a, rep.Job, ix.p)
		if b.ModelBytesPerStep == 0 && a.sends > 0 {
			modelKnown = false
		}
		out.BytesPerStep += b.BytesPerStep
		out.ModelBytesPerStep += b.ModelBytesPerStep
		out.Boundaries = append(out.Boundaries, b)
	}
	if !modelKnown {
		out.ModelBytesPerStep = 0
	}
	out.ExposedMs = 0
	for _, s := range rep.Stages {
		out.ExposedMs += s.P2PWaitMs
	}
}

// modelBytes returns m x chunks x TP x V for boundary k (see
// Boundary.ModelBytesPerStep), or 0 when unknown.
func modelBytes(k boundaryKey, a *p2pAcc, job Job, p int) float64 {
	if a.sends == 0 || a.shapeN != a.sends || job.MicroBatches <= 0 {
		return 0
	}
	v := max(job.Virtual, 1)
	chunks := 0
	from, to, P := int(k.from), int(k.to), max(p, job.PP)
	switch {
	case k.dir == 0 && to == from+1, k.dir == 1 && to == from-1:
		chunks = v
	case k.dir == 0 && from == P-1 && to == 0, k.dir == 1 && from == 0 && to == P-1:
		chunks = v - 1
	}
	if chunks == 0 {
		return 0
	}
	tp := job.TP
	if tp <= 0 {
		tp = int(a.maxTP) + 1
	}
	return float64(job.MicroBatches*chunks*tp) * a.shapeBytes / float64(a.shapeN)
}

// dtypeBytes maps dtype names, as runtimes write them, to element sizes.
var dtypeBytes = map[string]float64{
	"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2,
	"fp32": 4, "float32": 4, "float": 4, "tf32": 4,
	"fp64": 8, "float64": 8, "double": 8,
	"fp8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "e4m3": 1, "e5m2": 1,
	"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "int32": 4, "int64": 8,
}

// payloadBytes returns V, the bytes a tensor of shape ("4096x2x8192") and
// dtype ("bf16", also "torch.bfloat16") holds, and whether both are known
// and sane. Dimensions may be separated by x, X, ',' or '*', and wrapped in
// brackets; every dimension must be an integer >= 0.
func payloadBytes(shape, dtype string) (float64, bool) {
	size, ok := dtypeBytes[strings.ToLower(strings.TrimPrefix(strings.TrimSpace(dtype), "torch."))]
	if !ok {
		return 0, false
	}
	shape = strings.Trim(strings.TrimSpace(shape), "[]() ")
	if shape == "" {
		return 0, false
	}
	n := 1.0
	for _, d := range strings.FieldsFunc(shape, func(r rune) bool { return r == 'x' || r == 'X' || r == ',' || r == '*' }) {
		x, err := strconv.ParseInt(strings.TrimSpace(d), 10, 64)
		if err != nil || x < 0 {
			return 0, false
		}
		n *= float64(x)
	}
	if math.IsInf(n, 0) {
		return 0, false
	}
	return n * size, true
}

// p2pExposedShare is the share of the step above which exposed P2P wait
// is reported (P2P_EXPOSED).
const p2pExposedShare = 0.05

// p2pMismatchTolerance is the relative difference between measured and
// model bytes above which P2P_BYTES_MISMATCH is reported.
const p2pMismatchTolerance = 0.01

// p2pFindings reports exposed P2P wait (P2P_EXPOSED, warning) when the stage
// that waits most on transfers waits more than 5% of the step, and a
// boundary whose bytes differ from the model by more than 1%
// (P2P_BYTES_MISMATCH, info).
func p2pFindings(_ *index, rep *Report) []Finding {
	var out []Finding
	worst, worstMs := -1, 0.0
	for i, s := range rep.Stages {
		if s.P2PWaitMs > worstMs {
			worst, worstMs = i, s.P2PWaitMs
		}
	}
	if step := rep.StepMs; worst >= 0 && step > 0 && worstMs > p2pExposedShare*step {
		msg := fmt.Sprintf("stage %d waits %s ms per step on P2P transfers in its steady phase (%.1f%% of the %s ms step; %s ms over all stages)",
			rep.Stages[worst].Stage, p2pNum(worstMs), 100*worstMs/step, p2pNum(step), p2pNum(rep.P2P.ExposedMs))
		var wb *Boundary
		for i := range rep.P2P.Boundaries {
			if b := &rep.P2P.Boundaries[i]; b.ExposedMs > 0 && (wb == nil || b.ExposedMs > wb.ExposedMs) {
				wb = b
			}
		}
		if wb != nil {
			msg += fmt.Sprintf("; worst boundary %d->%d (%s) %s ms", wb.From, wb.To, wb.Kind, p2pNum(wb.ExposedMs))
			if wb.GBps > 0 {
				msg += fmt.Sprintf(" at %s GB/s", p2pNum(wb.GBps))
			}
		}
		out = append(out, Finding{Severity: "warning", Code: CodeP2PExposed, Message: msg, ImpactMs: worstMs})
	}
	var mb *Boundary
	var mRel float64
	n := 0
	for i := range rep.P2P.Boundaries {
		b := &rep.P2P.Boundaries[i]
		if b.ModelBytesPerStep <= 0 {
			continue
		}
		rel := math.Abs(b.BytesPerStep-b.ModelBytesPerStep) / b.ModelBytesPerStep
		if rel <= p2pMismatchTolerance {
			continue
		}
		n++
		if mb == nil || rel > mRel {
			mb, mRel = b, rel
		}
	}
	if mb != nil {
		out = append(out, Finding{Severity: "info", Code: CodeP2PBytesMismatch,
			Message: fmt.Sprintf("boundary %d->%d (%s) moves %s MB per step, %.0f%% of the %s MB its shapes and the schedule imply (%d boundaries differ by more than %.0f%%)",
				mb.From, mb.To, mb.Kind, p2pNum(mb.BytesPerStep/1e6), 100*mb.BytesPerStep/mb.ModelBytesPerStep, p2pNum(mb.ModelBytesPerStep/1e6), n, 100*p2pMismatchTolerance)})
	}
	return out
}

// p2pNum formats a quantity for a finding's message: three significant
// digits below 100, whole numbers above (no exponents).
func p2pNum(x float64) string {
	if math.Abs(x) >= 100 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}
