// Package frdump writes PyTorch Flight Recorder dumps of a simulated
// pipeline-parallel job: one pickle per rank ("_dump_N"), laid out as
// ProcessGroupNCCL writes them on a timeout (protocol 2, strings memoized
// by value, the keys and value types of dump version 2.9). It exists to
// measure and test `ppprof hang` on the dumps of a fleet-sized job (4096
// ranks), which no public data set holds.
//
// The job is sim.Run's: each rank's P2P ops become nccl:send / nccl:recv
// entries of its pipeline group, each compute op Layers collectives of its
// tensor-parallel group (nccl:_all_gather_base, then
// nccl:_reduce_scatter_base), each optimizer step an all-reduce of its
// data-parallel group. An entry's state follows its op: completed when the
// op ended, started when it started and never ended, scheduled when it
// never started. Each rank keeps only its last Entries entries (the ring
// buffer). Process groups are named as Megatron's are, one name per group
// ("0" is the default group of every rank).
package frdump

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// Config is the job whose dumps Write writes.
type Config struct {
	Sim     sim.Config // the job (1f1b, stages, TP, DP, micro-batches, steps, faults)
	Layers  int        // TP collectives of each kind per compute op; 0 means 2
	Entries int        // ring buffer: entries kept per rank; 0 means 2000
	// SkewNs offsets each node's clock (8 ranks a node) by a multiple of
	// it, as hosts' clocks differ; 0: one clock.
	SkewNs int64
}

// epochNs puts the simulated times (from 0) in 2025, as CLOCK_REALTIME.
const epochNs = 1_758_610_505_000_000_000

// Write simulates the job and writes its dumps into dir (which must
// exist), returning the number of dumps and of entries written.
func Write(dir string, c Config) (dumps, entries int, err error) {
	t, err := sim.Run(c.Sim)
	if err != nil {
		return 0, 0, err
	}
	t.SortByRankSeq()
	layers, keep := c.Layers, c.Entries
	if layers <= 0 {
		layers = 2
	}
	if keep <= 0 {
		keep = 2000
	}
	sc := c.Sim.WithDefaults()
	p, tp, dp := sc.Stages, sc.TP, sc.DP
	world := p * tp * dp
	ranks := make([]int, world)
	for i := range ranks {
		ranks[i] = i
	}
	worldList := rankList(ranks)
	w := &writer{}
	for lo := 0; lo < t.Len(); {
		r := t.Rank[lo]
		hi := lo + 1
		for hi < t.Len() && t.Rank[hi] == r {
			hi++
		}
		d := dumpOf(t, lo, hi, int(r), p, tp, dp, layers, keep, c.SkewNs*int64(int(r)/8%7))
		d.world = worldList
		if err := w.write(filepath.Join(dir, "_dump_"+strconv.Itoa(int(r))), d); err != nil {
			return dumps, entries, err
		}
		dumps++
		entries += len(d.entries)
		lo = hi
	}
	return dumps, entries, nil
}

// coords is the place of global rank r in a job of TP tp and DP dp, as
// sim numbers ranks (sim.Config.Rank: (stage*DP + pipeline)*TP + tp).
func coords(r, tp, dp int) (pipe, stage, tpr int) { return r / tp % dp, r / (tp * dp), r % tp }

// rankOf is sim.Config.Rank.
func rankOf(stage, pipe, tpr, tp, dp int) int { return (stage*dp+pipe)*tp + tpr }

// group is one process group of a dump's pg_config.
type group struct {
	name, desc string
	ranks      []int
	seq        int64 // collectives (or P2P ops) issued so far
}

type entry struct {
	record             int64
	g                  *group
	pgID               int
	name               string
	p2p                bool
	seq                int64 // collective_seq_id or p2p_seq_id
	created            int64
	started, completed int64 // trace.NoTime: none
	state              string
}

type dump struct {
	world   string
	groups  []*group // default, pipeline, tensor, data
	entries []entry
}

func dumpOf(t *trace.Trace, lo, hi, r, p, tp, dp, layers, keep int, skew int64) *dump {
	pipe, stage, tpr := coords(r, tp, dp)
	pp := make([]int, p)
	for s := range pp {
		pp[s] = rankOf(s, pipe, tpr, tp, dp)
	}
	tps := make([]int, tp)
	for i := range tps {
		tps[i] = rankOf(stage, pipe, i, tp, dp)
	}
	dps := make([]int, dp)
	for i := range dps {
		dps[i] = rankOf(stage, i, tpr, tp, dp)
	}
	// Group names as Megatron numbers them: unique per group.
	def := &group{name: "0", desc: "default_pg"}
	ppg := &group{name: fmt.Sprintf("pp%d_%d", pipe, tpr), desc: "PIPELINE_MODEL_PARALLEL_GROUP", ranks: pp}
	tpg := &group{name: fmt.Sprintf("tp%d_%d", pipe, stage), desc: "TENSOR_MODEL_PARALLEL_GROUP", ranks: tps}
	dpg := &group{name: fmt.Sprintf("dp%d_%d", stage, tpr), desc: "DATA_PARALLEL_GROUP", ranks: dps}
	d := &dump{groups: []*group{def, ppg, tpg, dpg}}
	var rec int64
	add := func(g *group, pgID int, name string, p2p bool, issue, start, end int64) {
		e := entry{record: rec, g: g, pgID: pgID, name: name, p2p: p2p, seq: g.seq, created: issue + skew,
			started: trace.NoTime, completed: trace.NoTime, state: "scheduled"}
		g.seq++
		rec++
		if start != trace.NoTime {
			e.started, e.state = start+skew, "started"
			if end != trace.NoTime {
				e.completed, e.state = end+skew, "completed"
			}
		}
		d.entries = append(d.entries, e)
	}
	for i := lo; i < hi; i++ {
		k := t.Kind[i]
		is, st, en := t.IssueNs[i], t.StartNs[i], t.EndNs[i]
		if is == trace.NoTime {
			is = st
		}
		is += epochNs
		if st != trace.NoTime {
			st += epochNs
		}
		if en != trace.NoTime {
			en += epochNs
		}
		switch {
		case k.IsP2P():
			_, peerStage, _ := coords(int(t.Peer[i]), tp, dp)
			name := fmt.Sprintf("nccl:send %d->%d", stage, peerStage)
			if k == trace.RecvF || k == trace.RecvB {
				name = fmt.Sprintf("nccl:recv %d<-%d", stage, peerStage)
			}
			add(ppg, 1, name, true, is, st, en)
		case k.IsCompute():
			if tp < 2 {
				continue
			}
			// Layers all-gathers as the op starts, layers reduce-scatters
			// as it ends: started and completed with it.
			for range layers {
				add(tpg, 2, "nccl:_all_gather_base", false, is, st, ifEnded(st, en))
			}
			for range layers {
				add(tpg, 2, "nccl:_reduce_scatter_base", false, is, st, en)
			}
		case k == trace.Opt:
			add(dpg, 3, "nccl:all_reduce", false, is, st, en)
		}
	}
	if len(d.entries) > keep {
		d.entries = d.entries[len(d.entries)-keep:]
	}
	return d
}

// ifEnded is start when the op ended (the first collectives of an op end
// as it runs), else no time.
func ifEnded(start, end int64) int64 {
	if end == trace.NoTime {
		return trace.NoTime
	}
	return start
}

// rankList is a group's ranks as pg_config spells them: "[0, 1, 2]".
func rankList(rs []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r))
	}
	b.WriteByte(']')
	return b.String()
}

// writer writes pickles (protocol 2) of plain data, memoizing strings by
// value as torch's pickler does.
type writer struct {
	b    []byte
	memo map[string]int
}

const (
	opProto      = 0x80
	opEmptyDict  = '}'
	opEmptyList  = ']'
	opMark       = '('
	opSetItems   = 'u'
	opAppends    = 'e'
	opBinUnicode = 'X'
	opBinPut     = 'q'
	opLongBinPut = 'r'
	opBinGet     = 'h'
	opLongBinGet = 'j'
	opBinInt1    = 'K'
	opBinInt2    = 'M'
	opBinInt     = 'J'
	opLong1      = 0x8a
	opNone       = 'N'
	opTrue       = 0x88
	opFalse      = 0x89
	opTuple2     = 0x86
	opStop       = '.'
)

func (w *writer) str(s string) {
	if i, ok := w.memo[s]; ok {
		if i < 256 {
			w.b = append(w.b, opBinGet, byte(i))
		} else {
			w.b = append(w.b, opLongBinGet)
			w.b = binary.LittleEndian.AppendUint32(w.b, uint32(i))
		}
		return
	}
	w.b = append(w.b, opBinUnicode)
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(len(s)))
	w.b = append(w.b, s...)
	i := len(w.memo)
	w.memo[s] = i
	if i < 256 {
		w.b = append(w.b, opBinPut, byte(i))
	} else {
		w.b = append(w.b, opLongBinPut)
		w.b = binary.LittleEndian.AppendUint32(w.b, uint32(i))
	}
}

func (w *writer) int(v int64) {
	switch {
	case v >= 0 && v < 256:
		w.b = append(w.b, opBinInt1, byte(v))
	case v >= 0 && v < 65536:
		w.b = append(w.b, opBinInt2, byte(v), byte(v>>8))
	case v >= -1<<31 && v < 1<<31:
		w.b = append(w.b, opBinInt)
		w.b = binary.LittleEndian.AppendUint32(w.b, uint32(int32(v)))
	default:
		// LONG1: little-endian two's complement, 8 bytes (the real
		// dumps' times take 8).
		w.b = append(w.b, opLong1, 8)
		w.b = binary.LittleEndian.AppendUint64(w.b, uint64(v))
	}
}

func (w *writer) time(v int64) {
	if v == trace.NoTime {
		w.b = append(w.b, opNone)
		return
	}
	w.int(v)
}

func (w *writer) bool(v bool) {
	if v {
		w.b = append(w.b, opTrue)
	} else {
		w.b = append(w.b, opFalse)
	}
}

// sizes writes [[4096, 1, 5120]] (one input, as the real dumps').
func (w *writer) sizes() {
	w.b = append(w.b, opEmptyList, opMark, opEmptyList, opMark)
	w.int(4096)
	w.int(1)
	w.int(5120)
	w.b = append(w.b, opAppends, opAppends)
}

func (w *writer) dtypes() {
	w.b = append(w.b, opEmptyList, opMark)
	w.str("BFloat16")
	w.b = append(w.b, opAppends)
}

func (w *writer) write(path string, d *dump) error {
	w.b, w.memo = w.b[:0], map[string]int{}
	w.b = append(w.b, opProto, 2, opEmptyDict, opMark)
	w.str("version")
	w.str("2.9")
	w.str("pg_config")
	w.b = append(w.b, opEmptyDict, opMark)
	for _, g := range d.groups {
		w.str(g.name)
		w.b = append(w.b, opEmptyDict, opMark)
		w.str("name")
		w.str(g.name)
		w.str("desc")
		w.str(g.desc)
		w.str("ranks")
		if g.ranks == nil {
			w.str(d.world)
		} else {
			w.str(rankList(g.ranks))
		}
		w.b = append(w.b, opSetItems)
	}
	w.b = append(w.b, opSetItems)
	w.str("nccl_version")
	w.str("2.27.3")
	w.str("pg_status")
	w.b = append(w.b, opEmptyDict, opMark)
	for _, g := range d.groups {
		w.str(g.name)
		w.b = append(w.b, opEmptyDict, opMark)
		w.str("last_enqueued_collective")
		w.int(g.seq - 1)
		w.str("last_started_collective")
		w.int(-1)
		w.str("last_completed_collective")
		w.int(-1)
		w.b = append(w.b, opSetItems)
	}
	w.b = append(w.b, opSetItems)
	w.str("entries")
	w.b = append(w.b, opEmptyList, opMark)
	for _, e := range d.entries {
		w.b = append(w.b, opEmptyDict, opMark)
		w.str("record_id")
		w.int(e.record)
		w.str("pg_id")
		w.int(int64(e.pgID))
		w.str("process_group")
		w.str(e.g.name)
		w.str(e.g.desc)
		w.b = append(w.b, opTuple2)
		w.str("thread_name")
		w.str("python3")
		w.str("thread_id")
		w.str("23456244340032")
		w.str("collective_seq_id")
		if e.p2p {
			w.int(0)
		} else {
			w.int(e.seq)
		}
		w.str("p2p_seq_id")
		if e.p2p {
			w.int(e.seq)
		} else {
			w.int(0)
		}
		w.str("op_id")
		w.int(e.record)
		w.str("profiling_name")
		w.str(e.name)
		w.str("time_created_ns")
		w.int(e.created)
		w.str("input_sizes")
		w.sizes()
		w.str("input_dtypes")
		w.dtypes()
		w.str("output_sizes")
		w.sizes()
		w.str("output_dtypes")
		w.dtypes()
		w.str("state")
		w.str(e.state)
		w.str("time_discovered_started_ns")
		w.time(e.started)
		w.str("time_discovered_completed_ns")
		w.time(e.completed)
		w.str("retired")
		w.bool(e.state == "completed")
		w.str("timeout_ms")
		w.int(180000)
		w.str("is_p2p")
		w.bool(e.p2p)
		w.b = append(w.b, opSetItems)
	}
	w.b = append(w.b, opAppends, opSetItems, opStop)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	bw.Write(w.b)
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
