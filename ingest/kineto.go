package ingest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// This file reads Kineto (torch.profiler) traces and plain Chrome traces
// into the model. The steps, in order:
//
//  1. stream the events, keeping only what can become a row: annotations a
//     rule matches, ProfilerStep spans, NCCL/Gloo operations (the
//     record_param_comms op with its args, or the "nccl:" annotation of
//     older PyTorch), NCCL kernels and kernel launches (to give those
//     operations device times);
//  2. pair host annotations with their gpu_user_annotation (same External
//     id): the device span wins, the host start is the issue time;
//  3. turn NCCL operations into P2P or collective rows, a P2P op inside a
//     PP:xSEND_Fy annotation taking its labels from it;
//  4. give every row its rank, stage, chunk and step, and number the rows.

// kinetoOpts configures one Chrome-trace read.
type kinetoOpts struct {
	mapper *mapper
	kineto bool // the content was sniffed as Kineto (annotations only) rather than a plain Chrome trace (every event)
}

// kAnno is an annotation a rule matched.
type kAnno struct {
	m        *match
	name     string
	ts, end  int64
	ext      int64
	tid      int32
	gpu      bool
	used     bool // a P2P annotation that an NCCL op took its labels from
	hostOnly bool
}

// kSpan is a time span with an id.
type kSpan struct {
	n       int64
	ts, end int64
	tid     int32
}

// kComm is one NCCL or Gloo operation as the host saw it.
type kComm struct {
	name        string // collective name or annotation name ("allreduce", "nccl:send 0->1")
	ts, end     int64
	tid         int32
	ext         int64
	group, desc string
	ranks       []trace.Rank // group ranks; nil when unknown
	peerGlobal  int64        // Src Rank / Dst Rank; -1 when absent
	peerLocal   int64        // the group-local peer ("Rank" of a P2P op, or the name's a->b); -1 when absent
	nelems      int64        // -1 when unknown
	dtype       string
	esize       int64
	seq         int64
	shape       string
}

// kKernel is a GPU kernel that belongs to an NCCL operation.
type kKernel struct {
	ts, end   int64
	ext, corr int64
}

// kLaunch is a kernel launch on a host thread.
type kLaunch struct {
	ts   int64
	corr int64
}

// kinetoState is what the streaming pass keeps.
type kinetoState struct {
	opt       kinetoOpts
	annos     []kAnno
	steps     []kSpan
	rpcs      []kComm // record_param_comms with a Collective name
	ncclAnnos []kComm // "nccl:..." / "gloo:..." host annotations
	gpuNCCL   map[int64]kSpan
	kernels   []kKernel
	launches  map[int32][]kLaunch
	tids      map[string]int32
	unmapped  counter         // annotations no rule matched
	gpuAnnos  map[int64]kSpan // gpu_user_annotation of matched names, by External id
	procNames map[string]string
	badTimes  int
}

// tid interns a thread key.
func (s *kinetoState) tid(pid, tid []byte) int32 {
	k := rawKey(pid) + "/" + rawKey(tid)
	if v, ok := s.tids[k]; ok {
		return v
	}
	v := int32(len(s.tids))
	s.tids[k] = v
	return v
}

var profilerStepRe = regexp.MustCompile(`^ProfilerStep#(\d+)$`)

// visit is step 1: keep what may become a row.
func (s *kinetoState) visit(e *chromeEvent) error {
	if e.Ph == "M" {
		if e.Name == "process_name" {
			var a struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(e.Args, &a) == nil && len(s.procNames) < 1024 {
				s.procNames[rawKey(e.Pid)] = a.Name
			}
		}
		return nil
	}
	if e.Ph != "X" {
		return nil // flows, instants, counters
	}
	ts, ok := parseMicros(e.Ts)
	if !ok {
		s.badTimes++
		return nil
	}
	dur, ok := parseMicros(e.Dur)
	if !ok || dur < 0 {
		dur = 0
	}
	end := ts + dur
	switch e.Cat {
	case "cuda_runtime", "cuda_driver":
		if strings.Contains(e.Name, "Launch") {
			var a struct {
				Corr json.RawMessage `json:"correlation"`
			}
			if json.Unmarshal(e.Args, &a) == nil {
				if c, ok := rawInt(a.Corr); ok {
					t := s.tid(e.Pid, e.Tid)
					s.launches[t] = append(s.launches[t], kLaunch{ts: ts, corr: c})
				}
			}
		}
		return nil
	case "kernel":
		args := argMap(e.Args)
		if !strings.HasPrefix(e.Name, "nccl") && args["Collective name"] == nil {
			return nil
		}
		s.kernels = append(s.kernels, kKernel{ts: ts, end: end, ext: argInt(args, "External id", -1), corr: argInt(args, "correlation", -1)})
		return nil
	case "cpu_op":
		if e.Name != "record_param_comms" {
			if !s.opt.kineto {
				break // a plain Chrome trace: rules see every event
			}
			return nil
		}
		args := argMap(e.Args)
		coll := argString(args, "Collective name")
		if coll == "" {
			return nil // older PyTorch: the nccl: annotation carries the op
		}
		c := kComm{name: coll, ts: ts, end: end, tid: s.tid(e.Pid, e.Tid), ext: argInt(args, "External id", -1),
			group: argString(args, "Process Group Name"), desc: argString(args, "Process Group Description"),
			peerGlobal: -1, peerLocal: -1, nelems: argInt(args, "In msg nelems", -1), seq: argInt(args, "Seq", -1)}
		c.dtype, c.esize = normDtype(argString(args, "dtype"))
		c.ranks = parseRankList(argString(args, "Process Group Ranks"))
		if isSendName(coll) {
			c.peerGlobal = argInt(args, "Dst Rank", -1)
		} else {
			c.peerGlobal = argInt(args, "Src Rank", -1)
		}
		if _, p2p, _, _ := collectiveKind(coll); p2p {
			c.peerLocal = argInt(args, "Rank", -1)
		}
		c.shape = firstShape(args)
		s.rpcs = append(s.rpcs, c)
		return nil
	case "gpu_user_annotation":
		args := argMap(e.Args)
		ext := argInt(args, "External id", -1)
		if isCommName(e.Name) {
			if ext >= 0 {
				s.gpuNCCL[ext] = kSpan{ts: ts, end: end}
			}
			return nil
		}
		m := s.opt.mapper.lookup(e.Name)
		if m == nil {
			return nil // the host annotation counts it as unmapped
		}
		s.annos = append(s.annos, kAnno{m: m, name: e.Name, ts: ts, end: end, ext: ext, tid: s.tid(e.Pid, e.Tid), gpu: true})
		return nil
	case "user_annotation", "":
		if e.Cat == "" && s.opt.kineto {
			return nil
		}
		if sm := profilerStepRe.FindStringSubmatch(e.Name); sm != nil {
			n, _ := strconv.ParseInt(sm[1], 10, 64)
			s.steps = append(s.steps, kSpan{n: n, ts: ts, end: end})
			return nil
		}
		if isCommName(e.Name) {
			args := argMap(e.Args)
			c := kComm{name: e.Name, ts: ts, end: end, tid: s.tid(e.Pid, e.Tid), ext: argInt(args, "External id", -1),
				peerGlobal: -1, peerLocal: -1, nelems: -1, seq: -1}
			if self, peer, ok := p2pPeersFromName(e.Name); ok {
				_ = self
				c.peerLocal = peer
			}
			c.shape, c.nelems, c.dtype, c.esize = inputOf(args)
			s.ncclAnnos = append(s.ncclAnnos, c)
			return nil
		}
	default:
		if s.opt.kineto {
			return nil // kernels, memcpy, python functions...: not annotations
		}
	}
	m := s.opt.mapper.lookup(e.Name)
	if m == nil {
		if e.Cat == "user_annotation" || !s.opt.kineto {
			if len(s.unmapped) < 4096 || s.unmapped[e.Name] > 0 {
				s.unmapped[e.Name]++
			} else {
				s.unmapped["(other names)"]++
			}
		}
		return nil
	}
	args := argMap(e.Args)
	s.annos = append(s.annos, kAnno{m: m, name: e.Name, ts: ts, end: end, ext: argInt(args, "External id", -1), tid: s.tid(e.Pid, e.Tid)})
	return nil
}

// isCommName reports whether an annotation names a communication op:
// "nccl:all_reduce", "gloo:send", "nccl:recv 3<-0".
func isCommName(n string) bool {
	return strings.HasPrefix(n, "nccl:") || strings.HasPrefix(n, "gloo:") || strings.HasPrefix(n, "mpi:") || strings.HasPrefix(n, "ucc:")
}

// firstShape returns the first input's dims from a Kineto op's "Input
// Dims" as "AxB", or "".
func firstShape(args map[string]json.RawMessage) string {
	var dims [][]int64
	if json.Unmarshal(args["Input Dims"], &dims) != nil || len(dims) == 0 {
		return ""
	}
	return shapeString(dims[0])
}

// inputOf reads an annotation's first input: shape, elements, dtype and
// element size (elements -1 and size 0 when unknown).
func inputOf(args map[string]json.RawMessage) (shape string, n int64, dtype string, size int64) {
	var dims [][]int64
	var types []string
	n = -1
	if json.Unmarshal(args["Input Dims"], &dims) != nil || len(dims) == 0 || len(dims[0]) == 0 {
		return "", -1, "", 0
	}
	shape = shapeString(dims[0])
	n = elems(dims[0])
	if json.Unmarshal(args["Input type"], &types) == nil && len(types) > 0 {
		dtype, size = normDtype(types[0])
	}
	return shape, n, dtype, size
}

// distributedInfo is Kineto's distributedInfo object.
type distributedInfo struct {
	Rank      *int64 `json:"rank"`
	WorldSize int64  `json:"world_size"`
	PGConfig  []struct {
		Name  string          `json:"pg_name"`
		Desc  string          `json:"pg_desc"`
		Ranks json.RawMessage `json:"ranks"`
	} `json:"pg_config"`
}

var fileRankRes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)rank[-_]?(\d+)`),
	regexp.MustCompile(`(?i)worker[-_]?(\d+)`),
	regexp.MustCompile(`(?i)(?:^|[-_.])(\d+)\.pt\.trace`),
}

// rankFromName reads a rank from a file name such as rank3.pt.trace.json,
// trace_rank-3.json.gz or worker3_step_12.pt.trace.json.
func rankFromName(path string) (trace.Rank, bool) {
	base := filepath.Base(path)
	for _, re := range fileRankRes {
		if m := re.FindStringSubmatch(base); m != nil {
			v, err := strconv.ParseInt(m[1], 10, 32)
			if err == nil {
				return trace.Rank(v), true
			}
		}
	}
	return 0, false
}

// readKineto reads a Kineto trace or a plain Chrome trace from r (already
// decompressed) into a part. It decodes with the fast scanner of
// kineto_scan.go, which hands anything unusual to the generic decoder.
func readKineto(path string, r io.Reader, opt kinetoOpts) (*part, error) {
	return readKinetoWith(path, r, opt, decodeKinetoFast)
}

// readKinetoSlow is readKineto on the generic streaming decoder
// (decodeChrome and visit) alone: the reference the fast path must match
// row for row, warning for warning and error for error.
func readKinetoSlow(path string, r io.Reader, opt kinetoOpts) (*part, error) {
	return readKinetoWith(path, r, opt, func(r io.Reader, s *kinetoState) (chromeHeader, error) {
		return decodeChrome(r, s.visit)
	})
}

// readKinetoWith is readKineto with step 1's decoder given: decode streams
// r, calling s.visit (or doing what it would do) for every event.
func readKinetoWith(path string, r io.Reader, opt kinetoOpts, decode func(io.Reader, *kinetoState) (chromeHeader, error)) (*part, error) {
	s := &kinetoState{opt: opt, gpuNCCL: map[int64]kSpan{}, launches: map[int32][]kLaunch{},
		tids: map[string]int32{}, unmapped: counter{}, gpuAnnos: map[int64]kSpan{}, procNames: map[string]string{}}
	h, err := decode(r, s)
	if err != nil {
		return nil, err
	}
	p := &part{external: true, comms: &Comms{}}
	p.info.Path = path
	if h.truncated {
		p.info.Truncated = true
		p.warnf("truncated trace: the JSON ends inside %s; kept the %d events before the cut", h.lost, h.events)
	}

	// The time base: Kineto's ts are microseconds after baseTimeNanoseconds
	// when the trace states it (PyTorch 2.x), else epoch microseconds.
	var base int64
	if len(h.baseTimeNs) > 0 {
		if v, ok := rawInt(h.baseTimeNs); ok {
			base = v
		}
	}
	meta := trace.Meta{Schema: trace.SchemaMajor, Device: h.deviceName}
	if opt.kineto || h.kineto {
		meta.Clock = trace.ClockHost
	}

	// The rank: distributedInfo, else the file name.
	rank, rankKnown := trace.Rank(0), false
	var di distributedInfo
	if len(h.distributedInfo) > 0 && json.Unmarshal(h.distributedInfo, &di) == nil {
		if di.Rank != nil && *di.Rank >= 0 && *di.Rank < 1<<31 {
			rank, rankKnown = trace.Rank(*di.Rank), true
		}
		if di.WorldSize > 0 && di.WorldSize < 1<<31 {
			meta.WorldSize = int(di.WorldSize)
		}
		for _, g := range di.PGConfig {
			p.comms.addGroup(GroupInfo{Name: g.Name, Desc: g.Desc, Ranks: rawRankList(g.Ranks)})
		}
	}
	if !rankKnown {
		if r, ok := rankFromName(path); ok {
			rank, rankKnown = r, true
			p.warnf("rank %d taken from the file name (the trace has no distributedInfo.rank)", r)
		}
	}

	var rows rowSet
	s.buildRows(p, &rows, base, rank, rankKnown)
	if s.badTimes > 0 {
		p.warnf("%d events without a usable ts ignored", s.badTimes)
	}
	if n := s.unmapped.total(); n > 0 {
		p.warnf("annotations that no rule maps, not read: %s; map them with --map KIND=REGEXP", s.unmapped.summary())
	}
	if rows.t.Len() == 0 {
		p.warnf("nothing in the trace maps to pipeline events: no PP:<stage><action><mb> annotations, NCCL operations or --map matches")
	}
	p.t, p.pending = rows.finish(meta)
	return p, nil
}

// buildRows is steps 2 to 4.
func (s *kinetoState) buildRows(p *part, rows *rowSet, base int64, rank trace.Rank, rankKnown bool) {
	shift := func(ns int64) int64 { return base + ns }

	// 2. Pair host and device annotations by External id.
	gpuByExt := map[int64]int{}
	for i, a := range s.annos {
		if a.gpu && a.ext >= 0 {
			gpuByExt[a.ext] = i
		}
	}
	hostExt := map[int64]bool{}
	type ev struct {
		a                 *kAnno
		issue, start, end int64
	}
	var evs []ev
	for i := range s.annos {
		a := &s.annos[i]
		if a.gpu {
			continue
		}
		e := ev{a: a, issue: a.ts, start: a.ts, end: a.end}
		if g, ok := gpuByExt[a.ext]; ok && a.ext >= 0 {
			hostExt[a.ext] = true
			e.start, e.end = s.annos[g].ts, s.annos[g].end
		}
		evs = append(evs, e)
	}
	for i := range s.annos {
		a := &s.annos[i]
		if a.gpu && !hostExt[a.ext] {
			evs = append(evs, ev{a: a, issue: a.ts, start: a.ts, end: a.end})
		}
	}

	// Steps: ProfilerStep#N spans (host time), else repetition (step 4).
	sort.Slice(s.steps, func(i, j int) bool { return s.steps[i].ts < s.steps[j].ts })
	stepOf := func(hostTs int64) int64 {
		i := sort.Search(len(s.steps), func(i int) bool { return s.steps[i].ts > hostTs }) - 1
		if i >= 0 && hostTs <= s.steps[i].end {
			return s.steps[i].n
		}
		if i >= 0 {
			return s.steps[i].n // between spans: the last step begun
		}
		if len(s.steps) > 0 {
			return s.steps[0].n
		}
		return 0
	}

	// Stages on this rank, for chunks of interleaved schedules.
	stageSet := map[int64]bool{}
	for _, e := range evs {
		if e.a.m.hasStage && !e.a.m.hasChunk {
			stageSet[e.a.m.stage] = true
		}
	}
	stagesSorted := make([]int64, 0, len(stageSet))
	for st := range stageSet {
		stagesSorted = append(stagesSorted, st)
	}
	sort.Slice(stagesSorted, func(i, j int) bool { return stagesSorted[i] < stagesSorted[j] })
	perStageRank := !rankKnown && len(stagesSorted) > 1
	physical := int64(-1)
	if len(stagesSorted) > 0 && !perStageRank {
		physical = stagesSorted[0]
	}
	chunkOf := func(st int64) int32 {
		if perStageRank {
			return 0
		}
		return int32(sort.Search(len(stagesSorted), func(i int) bool { return stagesSorted[i] >= st }))
	}
	stageFromRank, compute := false, false
	label := func(e *trace.Event, m *match) {
		e.Rank, e.Stage, e.Chunk = rank, 0, 0
		switch {
		case m.hasStage && m.hasChunk:
			e.Stage, e.Chunk = trace.Stage(m.stage), int32(m.chunk)
		case m.hasStage && perStageRank:
			e.Rank, e.Stage = trace.Rank(m.stage), trace.Stage(m.stage)
		case m.hasStage:
			e.Stage, e.Chunk = trace.Stage(physical), chunkOf(m.stage)
		case physical >= 0:
			e.Stage = trace.Stage(physical)
		default:
			e.Stage = trace.Stage(rank)
			stageFromRank = true
		}
		if m.hasMB {
			e.MicroBatch = trace.MicroBatch(m.mb)
		}
	}
	if !rankKnown && !perStageRank && len(evs)+len(s.rpcs)+len(s.ncclAnnos) > 0 {
		p.warnf("no rank in the trace (no distributedInfo.rank, none in the file name): rank 0 assumed")
	}
	if perStageRank {
		p.warnf("no rank in the trace: each stage's events taken as one rank, rank = stage (as in PiPPy's pipe visualizer)")
	}

	// 3. NCCL operations: record_param_comms when it carries the collective
	// (PyTorch >= 2.1), else the nccl:/gloo: annotations.
	comms := s.rpcs
	fromRPC := len(comms) > 0
	if !fromRPC {
		comms = s.ncclAnnos
	}
	kByExt := map[int64][]int{}
	kByCorr := map[int64]int{}
	for i, k := range s.kernels {
		if k.ext >= 0 {
			kByExt[k.ext] = append(kByExt[k.ext], i)
		}
		if k.corr >= 0 {
			kByCorr[k.corr] = i
		}
	}
	for _, ls := range s.launches {
		sort.Slice(ls, func(i, j int) bool { return ls[i].ts < ls[j].ts })
	}
	device := func(c *kComm) (int64, int64, bool) {
		if c.ext >= 0 {
			if ks := kByExt[c.ext]; len(ks) > 0 && fromRPC {
				st, en := int64(math.MaxInt64), int64(math.MinInt64)
				for _, i := range ks {
					st, en = min(st, s.kernels[i].ts), max(en, s.kernels[i].end)
				}
				return st, en, true
			}
			if g, ok := s.gpuNCCL[c.ext]; ok {
				return g.ts, g.end, true
			}
		}
		ls := s.launches[c.tid]
		i := sort.Search(len(ls), func(i int) bool { return ls[i].ts >= c.ts })
		st, en, found := int64(math.MaxInt64), int64(math.MinInt64), false
		for ; i < len(ls) && ls[i].ts <= c.end; i++ {
			if k, ok := kByCorr[ls[i].corr]; ok {
				st, en, found = min(st, s.kernels[k].ts), max(en, s.kernels[k].end), true
			}
		}
		return st, en, found
	}

	// PP P2P annotations by thread, for NCCL ops inside them.
	p2pAnnos := map[int32][]int{}
	for i := range evs {
		if evs[i].a.m.kind.IsP2P() && !evs[i].a.gpu {
			p2pAnnos[evs[i].a.tid] = append(p2pAnnos[evs[i].a.tid], i)
		}
	}
	for _, l := range p2pAnnos {
		sort.Slice(l, func(a, b int) bool { return evs[l[a]].issue < evs[l[b]].issue })
	}
	enclosing := func(c *kComm, send bool) int {
		l := p2pAnnos[c.tid]
		j := sort.Search(len(l), func(j int) bool { return evs[l[j]].issue > c.ts }) - 1
		for ; j >= 0; j-- {
			a := evs[l[j]]
			if a.a.end < c.ts {
				continue
			}
			if a.a.m.kind.IsSend() == send {
				return l[j]
			}
		}
		return -1
	}
	skipped, unknown := counter{}, counter{}
	var noPeer int
	for i := range comms {
		c := &comms[i]
		kind, p2p, skip, known := collectiveKind(c.name)
		if skip {
			skipped[c.name]++
			continue
		}
		if !known {
			unknown[c.name]++
		}
		e := trace.Event{Rank: rank, Stage: trace.Stage(max(physical, 0)), MicroBatch: trace.NoMicroBatch, Peer: trace.NoRank,
			IssueNs: shift(c.ts), StartNs: shift(c.ts), EndNs: shift(c.end), Group: c.group, GroupSeq: c.seq,
			Shape: c.shape, Dtype: c.dtype, Step: stepOf(c.ts)}
		if physical < 0 {
			e.Stage = 0
		}
		if ds, de, ok := device(c); ok {
			e.StartNs, e.EndNs = shift(ds), shift(de)
			if e.StartNs < e.IssueNs {
				e.IssueNs = e.StartNs // clocks of host and device differ a little
			}
		}
		if c.nelems >= 0 && c.esize > 0 && c.nelems <= math.MaxInt64/c.esize {
			e.Bytes = c.nelems * c.esize
		}
		if c.group != "" && len(c.ranks) > 0 {
			p.comms.addGroup(GroupInfo{Name: c.group, Desc: c.desc, Ranks: c.ranks})
		}
		if !p2p {
			e.Kind = kind
			rows.add(e)
			continue
		}
		send := isSendName(c.name)
		switch {
		case c.peerGlobal >= 0 && c.peerGlobal < 1<<31:
			e.Peer = trace.Rank(c.peerGlobal)
		case c.peerLocal >= 0 && c.peerLocal < int64(len(c.ranks)):
			e.Peer = c.ranks[c.peerLocal]
		case c.peerLocal >= 0 && (c.group == "" || c.group == "0" || c.desc == "default_pg") && c.ranks == nil:
			e.Peer = trace.Rank(c.peerLocal) // the default group: group ranks are global ranks
		}
		if e.Peer == rank {
			e.Peer = trace.NoRank // a peer that is the rank itself says nothing
		}
		if j := enclosing(c, send); j >= 0 {
			a := evs[j]
			a.a.used = true
			label(&e, a.a.m)
			e.Kind = a.a.m.kind
			e.Step = stepOf(a.a.ts)
			if a.a.m.hasStep {
				e.Step = a.a.m.step
			}
			if e.Peer != trace.NoRank {
				rows.add(e)
			} else {
				rows.addPending(e, send)
			}
			continue
		}
		if e.Peer == trace.NoRank {
			noPeer++
			continue
		}
		rows.addPending(e, send) // direction from the peer's stage, once every file is read
	}
	if skipped.total() > 0 {
		p.warnf("communication records that are not operations, not read: %s", skipped.summary())
	}
	if unknown.total() > 0 {
		p.warnf("collectives of unknown type kept as COLLECTIVE: %s", unknown.summary())
	}
	if noPeer > 0 {
		p.warnf("%s without a peer (no Src/Dst Rank, no group-local rank that maps through the group's ranks) and outside any PP send/recv annotation: not read", plural(noPeer, "P2P operation"))
	}

	// Annotation rows.
	for _, x := range evs {
		a := x.a
		if a.used {
			continue
		}
		e := trace.Event{MicroBatch: trace.NoMicroBatch, Peer: trace.NoRank, GroupSeq: trace.NoGroupSeq, Kind: a.m.kind,
			IssueNs: shift(x.issue), StartNs: shift(x.start), EndNs: shift(x.end), Step: stepOf(a.ts)}
		if e.StartNs < e.IssueNs {
			e.IssueNs = e.StartNs
		}
		label(&e, a.m)
		if a.m.hasStep {
			e.Step = a.m.step
		}
		if e.Kind.IsCompute() {
			compute = true
		}
		if e.Kind.IsP2P() {
			rows.addPending(e, e.Kind.IsSend()) // the peer is the rank of the adjacent stage
			continue
		}
		rows.add(e)
	}
	// One stage per rank: the lowest stage index its annotations name, else
	// (annotations without stages) the rank, else (no pipeline information
	// at all: a data-parallel job) stage 0 of a one-stage pipeline of its own.
	if !perStageRank {
		stage, pipe := trace.Stage(0), int32(0)
		switch {
		case physical >= 0:
			stage = trace.Stage(physical)
		case stageFromRank && compute:
			stage = trace.Stage(rank)
			p.warnf("the annotations carry no stage: rank %d taken as stage %d", rank, rank)
		default:
			pipe = int32(rank)
		}
		for i := range rows.t.Len() {
			rows.t.Stage[i], rows.t.Pipeline[i] = stage, pipe
		}
	}
	ruleSteps := false
	for _, x := range evs {
		ruleSteps = ruleSteps || x.a.m.hasStep
	}
	if len(s.steps) == 0 && !ruleSteps {
		if n := stepsByRepetition(&rows.t); n > 1 {
			p.warnf("no ProfilerStep annotations: %d steps told apart by micro-batch ids repeating", n)
		}
	}
}

// stepsByRepetition numbers steps, per rank in issue order, starting a new
// step whenever a (kind, chunk, micro-batch) of a compute op repeats. It
// returns the number of steps of the rank with the most.
func stepsByRepetition(t *trace.Trace) int {
	type key struct {
		k  trace.Kind
		c  int32
		mb trace.MicroBatch
	}
	byRank := map[trace.Rank][]int{}
	for i, r := range t.Rank {
		byRank[r] = append(byRank[r], i)
	}
	most := 0
	for _, idx := range byRank {
		sort.SliceStable(idx, func(a, b int) bool { return t.IssueNs[idx[a]] < t.IssueNs[idx[b]] })
		seen := map[key]bool{}
		step := int64(0)
		for _, i := range idx {
			if t.Kind[i].IsCompute() && t.MicroBatch[i] >= 0 {
				k := key{t.Kind[i], t.Chunk[i], t.MicroBatch[i]}
				if seen[k] {
					step++
					clear(seen)
				}
				seen[k] = true
			}
			t.Step[i] = step
		}
		most = max(most, int(step)+1)
	}
	return most
}

// describeKinds says how many rows of each kind t has, for debugging.
func describeKinds(t *trace.Trace) string {
	c := counter{}
	for _, k := range t.Kind {
		c[k.String()]++
	}
	return c.summary()
}

var _ = fmt.Sprintf
