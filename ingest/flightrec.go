package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// This file reads PyTorch Flight Recorder dumps: the pickle ProcessGroupNCCL
// writes on a timeout (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, one file per rank,
// "_dump_N"), and the JSON form of the same dict. One entry becomes one row:
//
//	record_id                 -> seq (entries are in record order)
//	profiling_name            -> kind: nccl:send / nccl:recv are P2P, the
//	                             rest collectives (ALL_REDUCE ...)
//	process_group (name, desc) -> group (the name, as pg_config keys it)
//	collective_seq_id         -> group_seq of a collective
//	p2p_seq_id                -> group_seq of a P2P op
//	"nccl:send a->b"          -> peer: b is a rank inside the group, mapped to
//	                             a global rank through pg_config
//	input_sizes, input_dtypes -> shape and dtype of the first input; bytes of
//	                             all inputs
//	time_created_ns           -> issue_ns
//	state scheduled           -> start and end null (never started)
//	state started             -> start time_discovered_started_ns, end null
//	state completed           -> end time_discovered_completed_ns
//
// The dump knows nothing of stages: the stage is the rank's index in its
// pipeline group (pg_config's PIPELINE_MODEL_PARALLEL_GROUP, or the group
// its P2P ops use), the TP rank its index in TENSOR_MODEL_PARALLEL_GROUP;
// the pipeline replica is numbered once every rank's dump is read
// (resolve.go). Steps and micro-batches are unknown: step 0, micro-batch -1.

// frSide is what resolve.go needs of one dump.
type frSide struct {
	rank    trace.Rank
	ppGroup string // the pipeline group's name; "" when none was found
	tpGroup string
	groups  map[string]GroupInfo

	stage    trace.Stage
	tp       int32
	pipeline int32 // set by resolveParts
	// wrapped: the dump's first entry is not the rank's first record
	// (record_id > 0): its ring buffer dropped the oldest entries.
	wrapped bool
}

var dumpRankRe = regexp.MustCompile(`(?:_dump_|dump[-_]?|rank[-_]?)(\d+)(?:\.[a-z]+)?$`)

// frPickleMagic reports whether data starts like a pickle (protocol 2 to 5)
// of a dict that holds Flight Recorder keys.
func frPickleMagic(data []byte) bool {
	if len(data) < 3 || data[0] != 0x80 || data[1] < 2 || data[1] > 5 {
		return false
	}
	has := func(s string) bool { return bytes.Contains(data, []byte(s)) }
	// torch writes "version" and "pg_config" first, then "entries": the
	// groups' rank lists of a job of 10000 ranks or more fill the first
	// 64 KiB before "entries" comes.
	return has("entries") && (has("pg_config") || has("profiling_name")) || has("version") && has("pg_config")
}

// frJSONKeys reports whether a JSON object's top-level keys are a Flight
// Recorder dump's: "entries" beside "pg_config" or "version", or "version"
// and "pg_config" (a prefix of the dump of a large job ends inside
// pg_config, before "entries").
func frJSONKeys(keys map[string]bool) bool {
	return keys["entries"] && (keys["pg_config"] || keys["pg_status"] || keys["version"]) || keys["version"] && keys["pg_config"]
}

// readFlightRecorder reads one dump (pickle, or JSON when isJSON).
func readFlightRecorder(path string, data []byte, isJSON bool, lists *rankLists, arena *trace.ColumnArena) (*part, error) {
	var root map[string]any
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("flight recorder JSON: %s", jsonErrText(err))
		}
		root = asMap(v)
	} else {
		v, ed, err := decodeFR(data)
		if ed != nil {
			defer ed.release() // the entries are read by then
		}
		if err != nil {
			return nil, err
		}
		root = asMap(v)
	}
	if root == nil {
		return nil, errors.New("flight recorder dump: not a dict")
	}
	p := &part{external: true, comms: &Comms{}}
	p.info.Path = path

	// The rank: a "rank" key where the dump has one, else the file name.
	rank := trace.Rank(-1)
	if r, ok := asInt(root["rank"]); ok && r >= 0 && r < 1<<31 {
		rank = trace.Rank(r)
	} else if m := dumpRankRe.FindStringSubmatch(filepath.Base(path)); m != nil {
		if r, err := strconv.ParseInt(m[1], 10, 32); err == nil {
			rank = trace.Rank(r)
		}
	}
	if rank < 0 {
		return nil, errors.New("flight recorder dump: no rank (no \"rank\" key, and the file name does not end in _dump_N)")
	}
	side := &frSide{rank: rank, groups: map[string]GroupInfo{}}
	p.fr = side

	// 1. Groups.
	for name, v := range asMap(root["pg_config"]) {
		m := asMap(v)
		g := GroupInfo{Name: name, Desc: asString(m["desc"])}
		if n := asString(m["name"]); n != "" {
			g.Name = n
		}
		switch r := m["ranks"].(type) {
		case string:
			g.Ranks = lists.parse(r)
		case []any:
			for _, x := range r {
				if v, ok := asInt(x); ok && v >= 0 && v < 1<<31 {
					g.Ranks = append(g.Ranks, trace.Rank(v))
				}
			}
		}
		side.groups[g.Name] = g
		p.comms.addGroup(g)
	}
	status := map[string]FRGroupStatus{}
	for name, v := range asMap(root["pg_status"]) {
		m := asMap(v)
		st := FRGroupStatus{LastEnqueued: -1, LastStarted: -1, LastCompleted: -1}
		if x, ok := asInt(m["last_enqueued_collective"]); ok {
			st.LastEnqueued = x
		}
		if x, ok := asInt(m["last_started_collective"]); ok {
			st.LastStarted = x
		}
		if x, ok := asInt(m["last_completed_collective"]); ok {
			st.LastCompleted = x
		}
		status[name] = st
	}
	raw := asList(root["entries"])
	entries := make([]*frEntry, len(raw))
	for i, v := range raw {
		switch x := v.(type) {
		case *frEntry: // decoded straight into the fields read (loadFRPickle)
			entries[i] = x
		case map[string]any:
			e := entryOf(x)
			entries[i] = &e
		default:
			return nil, fmt.Errorf("entry %d: not a dict", i)
		}
	}

	if len(entries) > 0 {
		if r := entries[0].record; r.ok && r.v > 0 {
			side.wrapped = true
		}
	}

	// 2. The pipeline and TP groups.
	p2pUse := map[string]int{}
	var p2pName recent[bool] // whether a name says send or recv, per name
	for i := range entries {
		e := entries[i]
		if !e.isP2P && !p2pName.find(e.name, func(name string) bool {
			return strings.Contains(name, "send") || strings.Contains(name, "recv")
		}) {
			continue
		}
		g, _ := e.group()
		p2pUse[g]++
	}
	side.ppGroup = pickGroup(side.groups, rank, []string{"PIPELINE_MODEL_PARALLEL_GROUP", "pipeline_model_parallel_group", "pp"}, p2pUse)
	side.tpGroup = pickGroup(side.groups, rank, []string{"TENSOR_MODEL_PARALLEL_GROUP", "tensor_model_parallel_group", "tp"}, nil)
	stage, tp, pp := trace.Stage(0), int32(0), 0
	stageFrom := "unknown: no pipeline group in pg_config; stage 0 assumed"
	if g, ok := side.groups[side.ppGroup]; ok {
		stage, pp = trace.Stage(indexOf(g.Ranks, rank)), len(g.Ranks)
		stageFrom = fmt.Sprintf("index in pipeline group %s (%s)", g.Name, g.Desc)
	} else {
		p.warnf("no pipeline-parallel group in pg_config: stage 0 assumed")
	}
	if g, ok := side.groups[side.tpGroup]; ok {
		tp = int32(indexOf(g.Ranks, rank))
	}
	side.stage, side.tp = stage, tp
	meta := trace.Meta{Schema: trace.SchemaMajor, Clock: trace.ClockHost, PP: pp}
	if g, ok := side.groups[side.tpGroup]; ok {
		meta.TP = len(g.Ranks)
	}
	for _, g := range side.groups {
		if g.Desc == "default_pg" {
			meta.WorldSize = len(g.Ranks)
		}
	}
	p.comms.FlightRecorder = map[trace.Rank]FRRank{rank: {Path: path, Version: asString(root["version"]),
		NCCL: asString(root["nccl_version"]), Entries: len(entries), PGStatus: status, StageFrom: stageFrom}}

	// 3. Entries.
	rows := rowSet{arena: arena}
	rows.grow(len(entries))
	var noPeer, unknownTime int
	unknown := counter{}
	// What an entry's name, dtype and shape say, found once per distinct
	// value (a dump repeats a few of each).
	type nameKind struct {
		kind                           trace.Kind
		p2p, skip, known, send, peerOK bool
		peer                           int64
	}
	type dtypeSize struct {
		short string
		size  int64
	}
	var names recent[nameKind]
	var dtypeOf recent[dtypeSize]
	var groupRanks recent[[]trace.Rank]
	var lastDims []int64
	lastShape := ""
	for i := range entries {
		e := entries[i]
		name := e.name
		nk := names.find(name, func(name string) (nk nameKind) {
			nk.kind, nk.p2p, nk.skip, nk.known = collectiveKind(name)
			nk.send = isSendName(name)
			_, nk.peer, nk.peerOK = p2pPeersFromName(name)
			return nk
		})
		kind, p2p, skip, known := nk.kind, nk.p2p, nk.skip, nk.known
		if skip {
			unknown[name]++
			continue
		}
		if !known {
			unknown[name]++
		}
		group, _ := e.group()
		ev := trace.Event{Rank: rank, Stage: stage, TPRank: tp, Step: 0, MicroBatch: trace.NoMicroBatch,
			Peer: trace.NoRank, Group: group, GroupSeq: trace.NoGroupSeq, Kind: kind}
		created := e.created.v
		if !e.created.ok {
			unknownTime++
			continue
		}
		ev.IssueNs, ev.StartNs, ev.EndNs = created, trace.NoTime, trace.NoTime
		state := e.state
		started, hasStart := e.started.v, e.started.ok
		completed, hasEnd := e.completed.v, e.completed.ok
		switch state {
		case "started":
			ev.StartNs = created
			if hasStart {
				ev.StartNs = started
			}
		case "completed":
			ev.StartNs = created
			if hasStart {
				ev.StartNs = started
			}
			ev.EndNs = ev.StartNs
			if hasEnd && completed >= ev.StartNs {
				ev.EndNs = completed
			}
		}
		for j := range e.nsizes {
			if j == 0 {
				// Entries mostly repeat the last shape.
				if dims := e.dims0; !slices.Equal(dims, lastDims) {
					lastDims, lastShape = dims, shapeString(dims)
				}
				ev.Shape = lastShape
			}
			if j < len(e.dtypes) {
				ds := e.dtypes[j]
				dt := dtypeOf.find(ds, func(ds string) (dt dtypeSize) {
					dt.short, dt.size = normDtype(ds)
					return dt
				})
				short, size := dt.short, dt.size
				if j == 0 {
					ev.Dtype = short
				}
				if n := e.nelems[j]; n >= 0 && size > 0 {
					ev.Bytes += n * size
				}
			}
		}
		if !p2p {
			if s := e.cseq; s.ok && s.v >= 0 {
				ev.GroupSeq = s.v
			}
			rows.add(ev)
			continue
		}
		if s := e.pseq; s.ok && s.v >= 0 {
			ev.GroupSeq = s.v
		}
		send := nk.send
		if peer, ok := nk.peer, nk.peerOK; ok {
			ranks := groupRanks.find(group, func(group string) []trace.Rank {
				return side.groups[group].Ranks // none for a group not in pg_config
			})
			if peer < int64(len(ranks)) {
				ev.Peer = ranks[peer]
			}
		}
		if ev.Peer == trace.NoRank || ev.Peer == rank {
			noPeer++
			continue
		}
		rows.addPending(ev, send)
	}
	if unknown.total() > 0 {
		p.warnf("entries of unknown or non-operation type (kept as COLLECTIVE when not 'wait'): %s", unknown.summary())
	}
	if noPeer > 0 {
		p.warnf("%s whose peer could not be mapped to a global rank (group not in pg_config, or no a->b in the name): not read", plural(noPeer, "P2P entry"))
	}
	if unknownTime > 0 {
		p.warnf("%s without time_created_ns: not read", plural(unknownTime, "entry"))
	}
	if len(entries) == 0 {
		p.warnf("the dump has no entries: rank %d recorded no collective (it may be the one that hung)", rank)
	}
	p.t, p.pending = rows.finish(meta)
	p.info.Ranks = []trace.Rank{rank}
	return p, nil
}

// recent holds what was found for the last few distinct strings looked up
// (a dump's entries repeat a few names, dtypes and groups, mostly the
// same bytes of the decoder's memory, which compare at once): a linear
// look among them costs less than hashing each.
type recent[V any] struct {
	k    [8]string
	v    [8]V
	n    int // slots used
	next int // the slot to replace
}

// find returns what was found for s, finding it (of) when s is not among
// the last few strings looked up.
func (r *recent[V]) find(s string, of func(string) V) V {
	for i := range r.k[:r.n] {
		if r.k[i] == s {
			return r.v[i]
		}
	}
	v := of(s)
	r.k[r.next], r.v[r.next] = s, v
	r.next = (r.next + 1) % len(r.k)
	r.n = min(r.n+1, len(r.k))
	return v
}

// frEntry is what readFlightRecorder reads of an entry, converted as it
// reads the plain values (asString, asInt, asList): the same fields
// whether the entry was decoded straight into them (loadFRPickle's entry
// decoder) or from a dict (entryOf).
type frEntry struct {
	name, state string // profiling_name, state (asString)
	// process_group as a list (tuple): its length and its first two items
	// (asString); pg_id (asString).
	pgN      int
	pg0, pg1 string
	pgID     string
	isP2P    bool // is_p2p, when a bool
	// time_created_ns, time_discovered_started_ns,
	// time_discovered_completed_ns, collective_seq_id, p2p_seq_id,
	// record_id (asInt).
	created, started, completed, cseq, pseq, record frInt
	// input_sizes: how many items (asList), the integers of the first
	// (intList), and elems of each item's integers; input_dtypes: asString
	// of each item. nil when empty.
	nsizes int
	dims0  []int64
	nelems []int64
	dtypes []string
}

// frInt is what asInt makes of a value.
type frInt struct {
	v  int64
	ok bool
}

func toFRInt(v any) frInt {
	n, ok := asInt(v)
	return frInt{n, ok}
}

// set sets the field of key k from the plain value v; other keys are not
// read.
func (e *frEntry) set(k string, v any) {
	switch k {
	case "profiling_name":
		e.name = asString(v)
	case "process_group":
		l := asList(v)
		e.pgN, e.pg0, e.pg1 = len(l), "", ""
		if len(l) > 0 {
			e.pg0 = asString(l[0])
		}
		if len(l) > 1 {
			e.pg1 = asString(l[1])
		}
	case "pg_id":
		e.pgID = asString(v)
	case "is_p2p":
		e.isP2P, _ = v.(bool)
	case "time_created_ns":
		e.created = toFRInt(v)
	case "state":
		e.state = asString(v)
	case "time_discovered_started_ns":
		e.started = toFRInt(v)
	case "time_discovered_completed_ns":
		e.completed = toFRInt(v)
	case "input_sizes":
		l := asList(v)
		e.nsizes, e.dims0, e.nelems = len(l), nil, nil
		for j, x := range l {
			dims := intList(x)
			if j == 0 {
				e.dims0 = dims
			}
			e.nelems = append(e.nelems, elems(dims))
		}
	case "input_dtypes":
		e.dtypes = nil
		for _, x := range asList(v) {
			e.dtypes = append(e.dtypes, asString(x))
		}
	case "collective_seq_id":
		e.cseq = toFRInt(v)
	case "p2p_seq_id":
		e.pseq = toFRInt(v)
	case "record_id":
		e.record = toFRInt(v)
	}
}

// frEntryKey reports whether set keeps the value of key k.
func frEntryKey(k string) bool { return fieldOf(k) > 0 }

// The fields of frEntry, as fieldOf numbers them.
const (
	fName int8 = 1 + iota
	fPG
	fPGID
	fP2P
	fCreated
	fState
	fStarted
	fCompleted
	fSizes
	fDtypes
	fCSeq
	fPSeq
	fRecord
)

// fieldOf returns the field set sets for key k, -1 for a key it does not
// read.
func fieldOf(k string) int8 {
	switch k {
	case "profiling_name":
		return fName
	case "process_group":
		return fPG
	case "pg_id":
		return fPGID
	case "is_p2p":
		return fP2P
	case "time_created_ns":
		return fCreated
	case "state":
		return fState
	case "time_discovered_started_ns":
		return fStarted
	case "time_discovered_completed_ns":
		return fCompleted
	case "input_sizes":
		return fSizes
	case "input_dtypes":
		return fDtypes
	case "collective_seq_id":
		return fCSeq
	case "p2p_seq_id":
		return fPSeq
	case "record_id":
		return fRecord
	}
	return -1
}

// entryOf is the frEntry of a decoded entry dict.
func entryOf(m map[string]any) frEntry {
	var e frEntry
	for k, v := range m {
		e.set(k, v)
	}
	return e
}

// group returns an entry's group name and description.
func (e *frEntry) group() (string, string) {
	switch {
	case e.pgN >= 2:
		return e.pg0, e.pg1
	case e.pgN == 1:
		return e.pg0, ""
	}
	return e.pgID, ""
}

// pickGroup returns the name of the group (holding rank) whose description
// is one of descs, else the group most of the rank's P2P ops use (when use
// is given), else "".
func pickGroup(groups map[string]GroupInfo, rank trace.Rank, descs []string, use map[string]int) string {
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, d := range descs {
		for _, n := range names {
			if groups[n].Desc == d && indexOf(groups[n].Ranks, rank) >= 0 {
				return n
			}
		}
	}
	best, bestN := "", 0
	for _, n := range names {
		g := groups[n]
		if use[n] > bestN && g.Desc != "default_pg" && len(g.Ranks) > 1 && indexOf(g.Ranks, rank) >= 0 {
			best, bestN = n, use[n]
		}
	}
	return best
}

// indexOf returns the position of r in rs, or -1.
func indexOf(rs []trace.Rank, r trace.Rank) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

// intList reads a list of integers, skipping anything else.
func intList(v any) []int64 {
	var out []int64
	for _, x := range asList(v) {
		if n, ok := asInt(x); ok {
			out = append(out, n)
		}
	}
	return out
}
