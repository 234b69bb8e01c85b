package report

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/klauspost/compress/gzip"
	"github.com/ppprof/ppprof/analyze"
	"github.com/ppprof/ppprof/trace"
)

// Frame names of the pprof profile. A busy sample's stack reads, root
// first, "pipeline P" > "stage S" > kind (F, B, W) > "mb M"; an idle
// sample's "pipeline P" > "stage S" > one of the idle frames.
const (
	FrameIdleWarmup   = "idle:warmup"
	FrameIdleCooldown = "idle:cooldown"
	FrameIdleP2PWait  = "idle:p2p-wait"
	FrameIdleOther    = "idle:other"
)

// idleFrame names the leaf frame of an idle segment.
var idleFrame = map[analyze.Cause]string{
	analyze.CauseWarmup:   FrameIdleWarmup,
	analyze.CauseCooldown: FrameIdleCooldown,
	analyze.CauseP2PWait:  FrameIdleP2PWait,
	analyze.CauseOther:    FrameIdleOther,
}

// WritePprof writes where t's pipeline time went as a pprof profile
// (gzipped protobuf) to w, for `go tool pprof -top` and flame graphs.
//
// The one sample type is wall time in nanoseconds. Every stage of every
// complete (step, pipeline) window opt selects contributes its whole
// window: busy time charged to the compute op that ran (the union over the
// stage's TP ranks, see analyze.StageTimes), idle time to warmup,
// cooldown, exposed P2P wait or other waits, exactly as the analysis
// splits it. So a stage frame's cumulative time is the summed window
// length, and a "pipeline P" frame's is the stages times that (so the
// profile's total is p x its duration: 400% for 4 stages). Windows with a
// pending op are left out. Samples carry labels step, pipeline, stage,
// rank (the rank that ran the op; for idle time the stage's lowest rank),
// and for busy time microbatch and chunk: strings, since pprof's encoding
// drops a numeric label of value 0 (filter with -tagfocus=step=3).
func WritePprof(w io.Writer, t *trace.Trace, opt analyze.Options) error {
	sts := analyze.StageTimes(t, opt)
	if len(sts) == 0 {
		return fmt.Errorf("pprof: no complete step window to profile")
	}
	if err := writeProfile(w, profileSamples(t, sts)); err != nil {
		return fmt.Errorf("writing pprof profile: %w", err)
	}
	return nil
}

func itoa(x int64) string { return strconv.FormatInt(x, 10) }

// sampleKey identifies one aggregated sample.
type sampleKey struct {
	pipeline int32
	stage    int
	step     int64
	rank     trace.Rank
	cause    analyze.Cause
	kind     trace.Kind // busy only
	mb       trace.MicroBatch
	chunk    int32
}

// labelKey and stackKey are what a sample's labels and its stack depend
// on (sharedKeys).
type labelKey struct {
	step     int64
	pipeline int32
	stage    int
	rank     trace.Rank
	busy     bool
	mb       trace.MicroBatch
	chunk    int32
}

type stackKey struct {
	pipeline int32
	stage    int
	cause    analyze.Cause
	kind     trace.Kind
	mb       trace.MicroBatch
}

// sharedKeys returns the keys of k's labels and stack: samples with the
// same share them (a profile of a fleet job has millions of samples).
func sharedKeys(k sampleKey) (labelKey, stackKey) {
	lk := labelKey{step: k.step, pipeline: k.pipeline, stage: k.stage, rank: k.rank, mb: trace.NoMicroBatch, chunk: -1}
	sk := stackKey{pipeline: k.pipeline, stage: k.stage, cause: k.cause, mb: trace.NoMicroBatch}
	if k.cause == analyze.CauseBusy {
		lk.busy, lk.mb, lk.chunk = true, k.mb, k.chunk
		sk.kind, sk.mb = k.kind, k.mb
	}
	return lk, sk
}

// labelsOf calls fn with each of k's labels: step, pipeline, stage and
// rank, and for busy time microbatch (when it has one) and chunk.
func labelsOf(k sampleKey, fn func(key string, v int64)) {
	fn("step", k.step)
	fn("pipeline", int64(k.pipeline))
	fn("stage", int64(k.stage))
	fn("rank", int64(k.rank))
	if k.cause == analyze.CauseBusy {
		if k.mb >= 0 {
			fn("microbatch", int64(k.mb))
		}
		fn("chunk", int64(k.chunk))
	}
}

// stackOf appends k's frames to dst, leaf first: its op kind (under its
// micro-batch frame, when it has one) or its idle cause, then its stage
// and its pipeline.
func stackOf(dst []string, k sampleKey) []string {
	if k.cause == analyze.CauseBusy {
		if k.mb >= 0 {
			dst = append(dst, "mb "+itoa(int64(k.mb)))
		}
		dst = append(dst, k.kind.String())
	} else {
		dst = append(dst, idleFrame[k.cause])
	}
	return append(dst, "stage "+itoa(int64(k.stage)), "pipeline "+itoa(int64(k.pipeline)))
}

// samples are a profile's samples: the summed wall time of each key, the
// keys in the order the profile lists them, and the profile's duration
// (the windows' summed length).
type samples struct {
	keys       []sampleKey
	sums       map[sampleKey]int64
	durationNs int64
	job        string
}

// profileSamples sums the stage times' segments per key.
func profileSamples(t *trace.Trace, sts []analyze.StageTime) samples {
	ps := samples{sums: map[sampleKey]int64{}, job: t.Meta.Job}
	seen := map[[2]int64]bool{}
	for _, st := range sts {
		if w := [2]int64{st.Step, int64(st.Pipeline)}; !seen[w] {
			seen[w] = true
			ps.durationNs += st.EndNs - st.StartNs
		}
		for _, sg := range st.Segments {
			k := sampleKey{pipeline: st.Pipeline, stage: st.Stage, step: st.Step, rank: st.Rank, cause: sg.Cause, mb: trace.NoMicroBatch, chunk: -1}
			if sg.Cause == analyze.CauseBusy {
				k.rank, k.kind, k.mb, k.chunk = t.Rank[sg.Row], t.Kind[sg.Row], t.MicroBatch[sg.Row], t.Chunk[sg.Row]
			}
			ps.sums[k] += sg.EndNs - sg.StartNs
		}
	}
	ps.keys = make([]sampleKey, 0, len(ps.sums))
	for k := range ps.sums {
		ps.keys = append(ps.keys, k)
	}
	slices.SortFunc(ps.keys, func(a, b sampleKey) int {
		return cmp.Or(cmp.Compare(a.pipeline, b.pipeline), cmp.Compare(a.stage, b.stage), cmp.Compare(a.step, b.step),
			cmp.Compare(a.cause, b.cause), cmp.Compare(a.kind, b.kind), cmp.Compare(a.mb, b.mb), cmp.Compare(a.chunk, b.chunk),
			cmp.Compare(a.rank, b.rank))
	})
	return ps
}

// profileComment is the profile's first comment.
const profileComment = "ppprof: wall time of every stage in every complete (step, pipeline) window: busy by op, idle by cause"

// writeProfile writes ps as a gzipped profile.proto message, encoded here
// field by field (github.com/google/pprof/profile builds a Profile of
// millions of samples, each with its label map, then converts and
// encodes them: a third of the time of exporting a fleet job's profile
// and most of its garbage). Each frame name (stackOf) is one function and
// one location of the same id, numbered from 1 as first used. The samples
// are written as made and the string table last (a parser resolves the
// indices after reading the message). The reference built with the
// library is in the tests (TestPprofMatchesLibrary).
func writeProfile(w io.Writer, ps samples) error {
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	e := &pbEncoder{w: zw, strs: map[string]int64{"": 0}, table: []string{""}}
	wall, ns := e.str("wall"), e.str("nanoseconds")
	valueType := pbInt(pbInt(nil, 1, wall), 2, ns)
	e.bytes(1, valueType) // sample_type

	// Frames: a location (and function) id per name, numbered as first
	// used.
	var names []string
	ids := map[string]uint64{}
	loc := func(name string) uint64 {
		id, ok := ids[name]
		if !ok {
			names = append(names, name)
			id = uint64(len(names))
			ids[name] = id
		}
		return id
	}
	// Samples of the same labels share their encoded labels, and those of
	// the same frames their encoded stack (a busy op's F and B, a rank's
	// idle causes).
	labels := map[labelKey][]byte{}
	stacks := map[stackKey][]byte{}
	var lb, sb []byte
	var frames []string
	for _, k := range ps.keys {
		lk, sk := sharedKeys(k)
		lab, ok := labels[lk]
		if !ok {
			lab = nil
			labelsOf(k, func(key string, v int64) {
				lab = pbBytes(lab, 3, pbInt(pbInt(nil, 1, e.str(key)), 2, e.str(itoa(v)))) // label: key, str
			})
			labels[lk] = lab
		}
		stack, ok := stacks[sk]
		if !ok {
			var packed []byte
			frames = stackOf(frames[:0], k)
			for _, name := range frames {
				packed = binary.AppendUvarint(packed, loc(name))
			}
			stack = pbBytes(nil, 1, packed) // location_id, packed
			stacks[sk] = stack
		}
		// Sample: location ids, the value (packed), the labels.
		sb = append(sb[:0], stack...)
		lb = binary.AppendUvarint(lb[:0], uint64(ps.sums[k]))
		sb = pbBytes(sb, 2, lb)
		sb = append(sb, lab...)
		e.bytes(2, sb)
	}
	for i := range names {
		id := int64(i + 1)
		e.bytes(4, pbBytes(pbInt(nil, 1, id), 4, pbInt(nil, 1, id))) // location: id, line{function_id}
	}
	for i, name := range names {
		id, x := int64(i+1), e.str(name)
		e.bytes(5, pbInt(pbInt(pbInt(nil, 1, id), 2, x), 3, x)) // function: id, name, system_name
	}
	comments := []int64{e.str(profileComment)}
	if ps.job != "" {
		comments = append(comments, e.str("job: "+ps.job))
	}
	for _, s := range e.table {
		e.bytes(6, []byte(s)) // string_table
	}
	e.int(10, ps.durationNs) // duration_nanos
	e.bytes(11, valueType)   // period_type
	e.int(12, 1)             // period
	for _, c := range comments {
		e.int(13, c) // comment
	}
	e.int(14, wall) // default_sample_type
	if err := e.flush(); err != nil {
		return err
	}
	return zw.Close()
}

// pbEncoder writes a protobuf message to w field by field, through a
// buffer, with a string table.
type pbEncoder struct {
	w     io.Writer
	buf   []byte
	err   error
	strs  map[string]int64
	table []string
}

// str returns s's index in the string table, adding it when new.
func (e *pbEncoder) str(s string) int64 {
	x, ok := e.strs[s]
	if !ok {
		x = int64(len(e.table))
		e.strs[s], e.table = x, append(e.table, s)
	}
	return x
}

// int writes field f, a varint, unless 0 (proto3's default).
func (e *pbEncoder) int(f int, x int64) { e.buf = pbInt(e.buf, f, x) }

// bytes writes field f, length-delimited.
func (e *pbEncoder) bytes(f int, b []byte) {
	e.buf = pbBytes(e.buf, f, b)
	if len(e.buf) >= 1<<20 {
		e.flush()
	}
}

// flush writes the buffer to w.
func (e *pbEncoder) flush() error {
	if e.err == nil && len(e.buf) > 0 {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
	return e.err
}

// pbInt appends field f as a varint, unless x is 0.
func pbInt(b []byte, f int, x int64) []byte {
	if x == 0 {
		return b
	}
	b = binary.AppendUvarint(b, uint64(f)<<3) // wire type 0
	return binary.AppendUvarint(b, uint64(x))
}

// pbBytes appends field f, length-delimited.
func pbBytes(b []byte, f int, x []byte) []byte {
	b = binary.AppendUvarint(b, uint64(f)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(x)))
	return append(b, x...)
}
