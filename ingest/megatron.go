package ingest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/trace"
)

// This file reads Megatron-style timer timelines: a Chrome trace whose
// events are the timers Megatron-LM, veScale's ndtimeline and the
// StragglerAnalysis study record (forward-compute, backward-compute,
// forward-send, forward-recv, backward-send, backward-recv, optimizer...),
// with args step, model_chunk, mb_id and seq_id. One file holds every rank:
// the thread names ("PP rank 3, TP rank 0, compute") give the stage and TP
// rank, the process names ("DP rank [1]") the pipeline, and a side file
// meta.yaml / meta-NAME.yaml beside the trace gives pp_size, dp_size,
// tp_size and vpp_size. Ranks are numbered as Megatron does by default:
// rank = (stage x DP + pipeline) x TP + tp_rank.

// megatronKinds maps timer names to kinds. Timers not named here are kept
// under their own name as free-form kinds (gc, params-all-gather...).
var megatronKinds = map[string]trace.Kind{
	"forward-compute": trace.F, "backward-compute": trace.B, "backward-weight-compute": trace.W,
	"forward-send": trace.SendF, "forward-recv": trace.RecvF, "backward-send": trace.SendB, "backward-recv": trace.RecvB,
	"optimizer": trace.Opt,
}

// megatronSniffNames are timer names that mark a Megatron-style timeline.
var megatronSniffNames = map[string]bool{
	"forward-compute": true, "backward-compute": true, "forward-send": true, "forward-recv": true,
	"backward-send": true, "backward-recv": true, "forward-backward": true,
	"forward-send-backward-recv": true, "backward-send-forward-recv": true,
}

// mEvent is one timer event, kept compactly.
type mEvent struct {
	kind    trace.Kind
	ts, end int64
	pid     int32
	tid     int32
	step    int64
	chunk   int64
	mb      int64
}

var (
	threadRe  = regexp.MustCompile(`PP rank (\d+),\s*TP rank (\d+)`)
	processRe = regexp.MustCompile(`DP rank \[?(\d+)\]?`)
)

// readMegatron reads a Megatron-style timeline from r (decompressed).
func readMegatron(path string, r io.Reader) (*part, error) {
	var evs []mEvent
	pids, tids := map[string]int32{}, map[string]int32{}
	intern := func(m map[string]int32, k string) int32 {
		if v, ok := m[k]; ok {
			return v
		}
		v := int32(len(m))
		m[k] = v
		return v
	}
	threadNames, procNames := map[int32]string{}, map[int32]string{}
	kinds := map[string]trace.Kind{}
	badKinds := counter{}
	var badTimes int
	h, err := decodeChrome(r, func(e *chromeEvent) error {
		pid := intern(pids, rawKey(e.Pid))
		tidOf := func() int32 { return intern(tids, rawKey(e.Pid)+"/"+rawKey(e.Tid)) }
		if e.Ph == "M" {
			var a struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(e.Args, &a)
			switch e.Name {
			case "thread_name":
				threadNames[tidOf()] = a.Name
			case "process_name":
				procNames[pid] = a.Name
			}
			return nil
		}
		if e.Ph != "X" {
			return nil
		}
		ts, ok1 := parseMicros(e.Ts)
		dur, ok2 := parseMicros(e.Dur)
		if !ok1 || !ok2 || dur < 0 {
			badTimes++
			return nil
		}
		k, ok := megatronKinds[e.Name]
		if !ok {
			if k, ok = kinds[e.Name]; !ok {
				var err error
				if k, err = trace.ParseKind(e.Name); err != nil {
					badKinds[e.Name]++
					return nil
				}
				kinds[e.Name] = k
			}
		}
		var a struct {
			Step  json.RawMessage `json:"step"`
			Chunk json.RawMessage `json:"model_chunk"`
			MB    json.RawMessage `json:"mb_id"`
		}
		_ = json.Unmarshal(e.Args, &a)
		me := mEvent{kind: k, ts: ts, end: ts + dur, pid: pid, tid: tidOf(), step: 0, chunk: -1, mb: -1}
		if v, ok := rawInt(a.Step); ok && v >= 0 {
			me.step = v
		}
		if v, ok := rawInt(a.Chunk); ok {
			me.chunk = v
		}
		if v, ok := rawInt(a.MB); ok {
			me.mb = v
		}
		evs = append(evs, me)
		return nil
	})
	if err != nil {
		return nil, err
	}
	p := &part{external: true}
	p.info.Path = path
	if h.truncated {
		p.info.Truncated = true
		p.warnf("truncated trace: the JSON ends inside %s; kept the %d events before the cut", h.lost, h.events)
	}
	if badTimes > 0 {
		p.warnf("%d events without a usable ts or dur ignored", badTimes)
	}
	if badKinds.total() > 0 {
		p.warnf("timers whose names cannot be kinds, not read: %s", badKinds.summary())
	}

	// 1. Where each thread sits: stage and TP rank from its name, the
	// pipeline from its process's name.
	type place struct{ stage, tp, pipe int64 }
	places := map[int32]place{}
	var unnamed int
	for name, tid := range tids {
		pl := place{stage: -1}
		if m := threadRe.FindStringSubmatch(threadNames[tid]); m != nil {
			pl.stage, _ = strconv.ParseInt(m[1], 10, 32)
			pl.tp, _ = strconv.ParseInt(m[2], 10, 32)
		}
		pidKey, _, _ := strings.Cut(name, "/")
		pid := pids[pidKey]
		if m := processRe.FindStringSubmatch(procNames[pid]); m != nil {
			pl.pipe, _ = strconv.ParseInt(m[1], 10, 32)
		} else {
			pl.pipe = int64(pid)
		}
		if pl.stage < 0 {
			unnamed++
			pl.stage = 0
		}
		places[tid] = pl
	}
	if unnamed > 0 {
		p.warnf("%s without a \"PP rank S, TP rank T\" thread name: taken as stage 0", plural(unnamed, "thread"))
	}

	// 2. The job's shape: the side file, else what the threads show.
	meta := trace.Meta{Schema: trace.SchemaMajor}
	side, sidePath := readMegatronMeta(path)
	maxStage, maxTP, maxPipe := int64(0), int64(0), int64(0)
	for _, pl := range places {
		maxStage, maxTP, maxPipe = max(maxStage, pl.stage), max(maxTP, pl.tp), max(maxPipe, pl.pipe)
	}
	pp, dp, tp := int(maxStage+1), int(maxPipe+1), int(maxTP+1)
	if side != nil {
		get := func(k string, def int) int {
			if v, err := strconv.Atoi(side[k]); err == nil && v > 0 {
				return v
			}
			return def
		}
		pp, dp, tp = get("pp_size", pp), get("dp_size", dp), get("tp_size", tp)
		meta.Virtual = get("vpp_size", 0)
		meta.WorldSize = get("world_size", 0)
		meta.CP = get("cp_size", 0)
		if n := side["trial_name"]; n != "" {
			meta.Job = n
		}
		if int(maxStage) >= pp || int(maxPipe) >= dp || int(maxTP) >= tp {
			p.warnf("side file %s says pp %d, dp %d, tp %d, but the trace has stage %d, pipeline %d, TP rank %d: using the trace's", sidePath, pp, dp, tp, maxStage, maxPipe, maxTP)
			pp, dp, tp = max(pp, int(maxStage+1)), max(dp, int(maxPipe+1)), max(tp, int(maxTP+1))
		}
	} else {
		p.warnf("no meta.yaml beside the trace: pp %d, dp %d, tp %d taken from the thread and process names", pp, dp, tp)
	}
	meta.PP, meta.DP, meta.TP = pp, dp, tp
	rankOf := func(pl place) trace.Rank { return trace.Rank((pl.stage*int64(dp)+pl.pipe)*int64(tp) + pl.tp) }

	// 3. Micro-batches of P2P timers (mb_id -1): the i-th send or receive
	// of a kind in a (rank, step) belongs to the i-th compute op it feeds
	// or follows (forward-* to F, backward-* to B), in time order.
	type rsKey struct {
		rank trace.Rank
		step int64
		kind trace.Kind
	}
	groups := map[rsKey][]int{}
	for i := range evs {
		k := rsKey{rankOf(places[evs[i].tid]), evs[i].step, evs[i].kind}
		groups[k] = append(groups[k], i)
	}
	for _, idx := range groups {
		sort.SliceStable(idx, func(a, b int) bool { return evs[idx[a]].ts < evs[idx[b]].ts })
	}
	var inferred, unmatched int
	for k, idx := range groups {
		if !k.kind.IsP2P() {
			continue
		}
		compute := trace.F
		if k.kind == trace.SendB || k.kind == trace.RecvB {
			compute = trace.B
		}
		ops := groups[rsKey{k.rank, k.step, compute}]
		for n, i := range idx {
			if evs[i].mb >= 0 {
				continue
			}
			if len(ops) != len(idx) {
				unmatched++
				continue
			}
			evs[i].mb, evs[i].chunk = evs[ops[n]].mb, evs[ops[n]].chunk
			inferred++
		}
	}
	if inferred > 0 {
		p.warnf("micro-batch of %s inferred from order (the trace says mb_id -1): the i-th send or receive of a step goes with the i-th forward or backward", plural(inferred, "P2P event"))
	}
	if unmatched > 0 {
		p.warnf("%s left without a micro-batch: their count differs from the compute ops'", plural(unmatched, "P2P event"))
	}

	// 4. Rows; P2P peers are the adjacent stage of the same pipeline and TP
	// rank, found once the rows are numbered (resolve.go).
	var rows rowSet
	mbs := map[trace.MicroBatch]bool{}
	for _, e := range evs {
		pl := places[e.tid]
		ev := trace.Event{Rank: rankOf(pl), Pipeline: int32(pl.pipe), Stage: trace.Stage(pl.stage), TPRank: int32(pl.tp),
			Step: e.step, MicroBatch: trace.NoMicroBatch, Kind: e.kind, IssueNs: e.ts, StartNs: e.ts, EndNs: e.end,
			Peer: trace.NoRank, GroupSeq: trace.NoGroupSeq}
		if e.chunk > 0 && e.chunk < 1<<31 {
			ev.Chunk = int32(e.chunk)
		}
		if e.mb >= 0 && e.mb < 1<<31 {
			ev.MicroBatch = trace.MicroBatch(e.mb)
			if e.kind == trace.F {
				mbs[ev.MicroBatch] = true
			}
		}
		if e.kind.IsP2P() {
			rows.addPending(ev, e.kind.IsSend())
			continue
		}
		rows.add(ev)
	}
	meta.MicroBatches = len(mbs)
	p.t, p.pending = rows.finish(meta)
	return p, nil
}

// readMegatronMeta finds and reads the side file of a timeline: for
// timeline-NAME.json(.gz), meta-NAME.yaml first, then meta.yaml, then the
// only meta-*.yaml of the directory. It returns nil when there is none.
func readMegatronMeta(path string) (map[string]string, string) {
	if isSpooled(path) {
		return nil, "" // standard input or a pipe: no directory beside it
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	var cands []string
	stem := strings.TrimSuffix(strings.TrimSuffix(base, ".gz"), ".json")
	if _, name, ok := strings.Cut(stem, "-"); ok {
		cands = append(cands, filepath.Join(dir, "meta-"+name+".yaml"), filepath.Join(dir, "meta-"+name+".yml"))
	}
	cands = append(cands, filepath.Join(dir, "meta.yaml"), filepath.Join(dir, "meta.yml"))
	if all, _ := filepath.Glob(filepath.Join(dir, "meta-*.yaml")); len(all) == 1 {
		cands = append(cands, all[0])
	}
	for _, c := range cands {
		f, err := openRead(c)
		if err != nil {
			continue
		}
		kv := parseFlatYAML(f)
		f.Close()
		if kv != nil {
			return kv, c
		}
	}
	return nil, ""
}

// parseFlatYAML reads "key: value" lines (the flat mappings these side files
// are), ignoring comments and anything indented.
func parseFlatYAML(r io.Reader) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kv[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	if len(kv) == 0 {
		return nil
	}
	return kv
}

// isMegatronMeta reports whether a file name is a timeline's side file.
func isMegatronMeta(path string) bool {
	b := filepath.Base(path)
	return (strings.HasPrefix(b, "meta-") || strings.HasPrefix(b, "meta.")) && (strings.HasSuffix(b, ".yaml") || strings.HasSuffix(b, ".yml"))
}

var _ = fmt.Sprint
