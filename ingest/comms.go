package ingest

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"github.com/ppprof/ppprof/trace"
)

// GroupInfo is one process group as a trace describes it.
type GroupInfo struct {
	Name  string       // the group's id as c10d names it ("0", "43"); the value of the Group column
	Desc  string       // its description ("default_pg", "PIPELINE_MODEL_PARALLEL_GROUP")
	Ranks []trace.Rank // global ranks, in group-rank order; nil when unknown
}

// Comms is what ingest learnt about communicators besides the rows: every
// process group named by a Kineto trace or a Flight Recorder dump, and the
// Flight Recorder's per-rank view. It is what hang analysis on collectives
// needs beyond the Group, GroupSeq, Kind, Bytes, Dtype and Shape columns.
type Comms struct {
	Groups map[string]GroupInfo // by GroupInfo.Name
	// FlightRecorder holds one entry per Flight Recorder dump read, by rank.
	FlightRecorder map[trace.Rank]FRRank
}

// FRRank is one rank's Flight Recorder dump, beyond its rows.
type FRRank struct {
	Path    string
	Version string // the dump's format version ("2.9")
	NCCL    string // NCCL version
	Entries int    // entries in the dump (0: the rank recorded nothing, e.g. it hung holding the GIL)
	// PGStatus is the dump's pg_status as written: the last enqueued,
	// started and completed collective sequence numbers (-1: none), keyed
	// by the dump's own keys. PyTorch keys it by the rank-local pg_id (the
	// group's creation index on that rank), not by the group's name;
	// analyze/hang resolves the keys against the rows' groups.
	PGStatus map[string]FRGroupStatus
	// Stage, Pipeline and TPRank say how the rank's place in the pipeline
	// was derived: "pipeline group 43" or "unknown".
	StageFrom string
}

// FRGroupStatus is a Flight Recorder pg_status entry.
type FRGroupStatus struct {
	LastEnqueued, LastStarted, LastCompleted int64
}

// addGroup records g, keeping ranks already known when g has none.
func (c *Comms) addGroup(g GroupInfo) {
	if c.Groups == nil {
		c.Groups = map[string]GroupInfo{}
	}
	old, ok := c.Groups[g.Name]
	if ok && len(g.Ranks) == 0 {
		return
	}
	if ok && g.Desc == "" {
		g.Desc = old.Desc
	}
	c.Groups[g.Name] = g
}

// merge adds o's groups and dumps to c.
func (c *Comms) merge(o *Comms) {
	if o == nil {
		return
	}
	for _, g := range o.Groups {
		c.addGroup(g)
	}
	for r, f := range o.FlightRecorder {
		if c.FlightRecorder == nil {
			c.FlightRecorder = map[trace.Rank]FRRank{}
		}
		c.FlightRecorder[r] = f
	}
}

// rankLists parses each rank list once: every rank's Flight Recorder dump
// lists the groups it is in, the job-wide one with every rank, so the
// dumps of a job of n ranks hold n lists of n ranks (16384 dumps of a
// 16384-rank job: 1 GB of parsed lists, each parsed again). The lists it
// returns are shared: read-only. Safe for concurrent use; nil parses
// every list.
type rankLists struct {
	mu   sync.Mutex
	seen map[string][]trace.Rank
}

// parse is parseRankList(s), once per distinct s (lists of a few ranks are
// parsed each time: cheaper than the lookup).
func (l *rankLists) parse(s string) []trace.Rank {
	if l == nil || len(s) < 256 {
		return parseRankList(s)
	}
	l.mu.Lock()
	r, ok := l.seen[s]
	l.mu.Unlock()
	if ok {
		return r
	}
	r = parseRankList(s)
	l.mu.Lock()
	if l.seen == nil {
		l.seen = map[string][]trace.Rank{}
	}
	l.seen[strings.Clone(s)] = r // not the dump's memory
	l.mu.Unlock()
	return r
}

// parseRankList reads "[0, 1, 2]" (as Kineto and the Flight Recorder
// write group ranks) or a JSON array. A list cut short by the profiler
// ("[0, 1, ...]") or anything else malformed gives nil.
func parseRankList(s string) []trace.Rank {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") || strings.Contains(s, "...") {
		return nil
	}
	body := strings.TrimSpace(s[1 : len(s)-1])
	if body == "" {
		return []trace.Rank{}
	}
	parts := strings.Split(body, ",")
	out := make([]trace.Rank, 0, len(parts))
	for _, p := range parts {
		v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil || v < 0 {
			return nil
		}
		out = append(out, trace.Rank(v))
	}
	return out
}

// rawRankList reads a rank list given as a JSON array or as a string
// holding "[0, 1]".
func rawRankList(raw json.RawMessage) []trace.Rank {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return parseRankList(s)
	}
	var xs []int64
	if json.Unmarshal(raw, &xs) != nil {
		return nil
	}
	out := make([]trace.Rank, 0, len(xs))
	for _, x := range xs {
		if x < 0 || x > 1<<31-1 {
			return nil
		}
		out = append(out, trace.Rank(x))
	}
	return out
}

// collectiveKind maps a c10d / NCCL operation name ("allreduce",
// "nccl:all_reduce", "_allgather_base", "all_gather_into_tensor_coalesced",
// "send"...) to a kind. p2p is set for send and recv, which return
// KindInvalid (their direction in the pipeline is decided elsewhere); skip
// is set for names that are not operations ("wait"). Unknown names give
// trace.Collective and known false.
func collectiveKind(name string) (k trace.Kind, p2p, skip, known bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	if i := strings.IndexByte(n, ':'); i >= 0 {
		n = n[i+1:]
	}
	if i := strings.IndexByte(n, ' '); i >= 0 {
		n = n[:i]
	}
	n = strings.TrimLeft(n, "_")
	for _, suffix := range []string{"_coalesced", "_base", "_oop", "_into_tensor", "_tensor", "_single"} {
		n = strings.TrimSuffix(n, suffix)
	}
	n = strings.ReplaceAll(n, "_", "")
	switch n {
	case "send", "isend":
		return trace.KindInvalid, true, false, true
	case "recv", "irecv", "recvanysource":
		return trace.KindInvalid, true, false, true
	case "wait", "init", "":
		return trace.KindInvalid, false, true, true
	case "allreduce":
		return trace.AllReduce, false, false, true
	case "allgather", "allgatherinto":
		return trace.AllGather, false, false, true
	case "reducescatter":
		return trace.ReduceScatter, false, false, true
	case "alltoall", "alltoallv":
		return trace.AllToAll, false, false, true
	case "broadcast":
		return trace.Broadcast, false, false, true
	case "barrier":
		return trace.Barrier, false, false, true
	case "reduce":
		return trace.Reduce, false, false, true
	case "gather":
		return trace.Gather, false, false, true
	case "scatter":
		return trace.Scatter, false, false, true
	}
	return trace.Collective, false, false, false
}

// isSendName reports whether a P2P op name is a send (else a receive).
func isSendName(name string) bool {
	n := strings.ToLower(name)
	if i := strings.IndexByte(n, ':'); i >= 0 {
		n = n[i+1:]
	}
	return strings.HasPrefix(n, "send") || strings.HasPrefix(n, "isend") || strings.HasPrefix(n, "_send")
}

// p2pPeersFromName reads the group-local ranks of a profiling name such as
// "nccl:send 0->3" or "nccl:recv 3<-0": self and peer, ok false when the
// name carries none.
func p2pPeersFromName(name string) (self, peer int64, ok bool) {
	_, rest, found := strings.Cut(name, " ")
	if !found {
		return 0, 0, false
	}
	rest = strings.TrimSpace(rest)
	var a, b string
	if x, y, found := strings.Cut(rest, "->"); found {
		a, b = x, y
	} else if x, y, found := strings.Cut(rest, "<-"); found {
		a, b = x, y
	} else {
		return 0, 0, false
	}
	s, err1 := strconv.ParseInt(strings.TrimSpace(a), 10, 32)
	p, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
	if err1 != nil || err2 != nil || s < 0 || p < 0 {
		return 0, 0, false
	}
	return s, p, true
}

// dtypeInfo maps the dtype names PyTorch writes (c10 ScalarType names in
// Kineto args and Flight Recorder dumps, C++ type names in Kineto's "Input
// type") to ppprof's short names and element sizes in bytes.
var dtypeInfo = map[string]struct {
	short string
	size  int64
}{
	"float": {"fp32", 4}, "float32": {"fp32", 4}, "double": {"fp64", 8}, "float64": {"fp64", 8},
	"half": {"fp16", 2}, "float16": {"fp16", 2}, "c10::half": {"fp16", 2},
	"bfloat16": {"bf16", 2}, "c10::bfloat16": {"bf16", 2},
	"long": {"i64", 8}, "long int": {"i64", 8}, "int64": {"i64", 8}, "long long": {"i64", 8},
	"int": {"i32", 4}, "int32": {"i32", 4}, "short": {"i16", 2}, "int16": {"i16", 2},
	"char": {"i8", 1}, "signed char": {"i8", 1}, "int8": {"i8", 1},
	"byte": {"u8", 1}, "unsigned char": {"u8", 1}, "uint8": {"u8", 1},
	"bool":          {"bool", 1},
	"float8_e4m3fn": {"fp8_e4m3", 1}, "float8_e5m2": {"fp8_e5m2", 1},
	"complexfloat": {"c64", 8}, "complexdouble": {"c128", 16},
}

// normDtype returns the short name and element size of a PyTorch dtype
// name; an unknown name is returned lower-cased with size 0.
func normDtype(s string) (string, int64) {
	k := strings.ToLower(strings.TrimSpace(s))
	k = strings.TrimPrefix(k, "torch.")
	if d, ok := dtypeInfo[k]; ok {
		return d.short, d.size
	}
	if len(k) > 32 {
		k = k[:32]
	}
	return k, 0
}

// shapeString joins dims as "4096x1x5120"; "" for none.
func shapeString(dims []int64) string {
	if len(dims) == 0 {
		return ""
	}
	var b strings.Builder
	for i, d := range dims {
		if i > 0 {
			b.WriteByte('x')
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	return b.String()
}

// elems multiplies dims; -1 on overflow or a negative dim.
func elems(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		if d < 0 || d > 0 && n > (1<<62)/d {
			return -1
		}
		n *= d
	}
	return n
}
