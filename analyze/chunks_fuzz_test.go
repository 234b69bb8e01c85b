package analyze

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace"
)

// fuzzBase is one of a few small simulated jobs (DP 2, so chunks are real
// replicas), picked by sel.
func fuzzBase(t testing.TB, sel byte) *trace.Trace {
	scheds := []string{"gpipe", "1f1b", "interleaved", "zb-h1"}
	c := sim.Config{Schedule: scheds[sel%4], Stages: 2 + int(sel/4%2), MicroBatches: 4, Steps: 2, DP: 2,
		TP: 1 + int(sel/8%2), Jitter: 0.2, Seed: int64(sel), P2PLatencyUs: 20, P2PGbps: 100, OptMs: 1,
		PeakFlops: 1e15, VarSeqLen: sel%3 == 0}
	tr, err := sim.Run(c)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// mutate applies an edit script to tr: each 6-byte record picks a row
// (2 bytes), a column (1 byte) and a new value (3 bytes) for it. Rank and
// pipeline stay as they are, so the chunks stay whole replicas.
func mutate(tr *trace.Trace, script []byte) {
	n := tr.Len()
	for ; len(script) >= 6; script = script[6:] {
		i := int(binary.LittleEndian.Uint16(script)) % n
		v := int64(script[3]) | int64(script[4])<<8 | int64(int8(script[5]))<<16
		small := int64(int8(script[3]))
		switch script[2] % 17 {
		case 0:
			tr.Stage[i] = trace.Stage(small)
		case 1:
			tr.MicroBatch[i] = trace.MicroBatch(small)
		case 2:
			tr.Kind[i] = trace.Kind(1 + script[3]%16)
		case 3:
			tr.Step[i] = small
		case 4:
			tr.StartNs[i] += v * 1000
		case 5:
			tr.EndNs[i] += v * 1000
		case 6:
			tr.IssueNs[i] += v * 1000
		case 7:
			tr.StartNs[i] = trace.NoTime
		case 8:
			tr.EndNs[i] = trace.NoTime
		case 9:
			tr.Peer[i] = trace.Rank(small)
		case 10:
			tr.Bytes[i] = v
		case 11:
			tr.Tokens[i] = v
		case 12:
			tr.MemBytes[i] = v << 8
		case 13:
			tr.Shape[i] = trace.Intern([...]string{"", "4x8", "x", "1x1x1"}[script[3]%4])
		case 14:
			tr.Flops[i] = [...]float64{0, -1, math.NaN(), 1e12}[script[3]%4]
		case 15:
			tr.Chunk[i] = int32(small)
		case 16:
			tr.Seq[i] += small
		}
	}
}

// fuzzSeeds adds the fuzz targets' seeds (sel, an edit script for
// mutate) to f, and extra ones.
func fuzzSeeds(f *testing.F, extra ...[]byte) {
	f.Add(byte(0), []byte{})
	f.Add(byte(1), []byte{5, 0, 4, 200, 1, 0})
	f.Add(byte(6), []byte{9, 0, 8, 0, 0, 0, 30, 0, 9, 1, 0, 0})
	f.Add(byte(11), []byte{3, 0, 2, 3, 0, 0, 40, 0, 11, 0, 0, 128})
	for i, e := range extra {
		f.Add(byte(2+16*i), e)
	}
}

// fuzzTrace is the trace a fuzz input makes: fuzzBase(sel) edited by
// script (at most 64 edits); ok is false when it is not valid (ingest
// refuses it: the analyses never see it).
func fuzzTrace(t *testing.T, sel byte, script []byte) (tr *trace.Trace, ok bool) {
	if len(script) > 6*64 {
		script = script[:6*64]
	}
	tr = fuzzBase(t, sel)
	mutate(tr, script)
	return tr, tr.Validate() == nil
}

// FuzzRunChunks: whatever a (valid) trace holds, analysing it a replica
// at a time, with chunks read again or held packed (visits then unpack
// only the columns their passes read), for every step and for one, gives
// Run's report or Run's error, and neither panics.
func FuzzRunChunks(f *testing.F) {
	fuzzSeeds(f, []byte{1, 0, 13, 1, 0, 0, 2, 0, 10, 7, 7, 0, 17, 0, 0, 250, 0, 0})
	f.Fuzz(func(t *testing.T, sel byte, script []byte) {
		tr, ok := fuzzTrace(t, sel, script)
		if !ok {
			return
		}
		groups := [][]int32{{0}, {1}}
		// Every step, and one (its chunks cut to that step's rows when
		// packed).
		for _, step := range []int64{AllSteps, 1} {
			want, werr := Run(tr, Options{Step: step})
			for _, pack := range []int64{0, 1 << 40} {
				got, gerr := RunChunks(splitPipelines(tr, groups), Options{Step: step, PackBytes: pack})
				if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
					t.Fatalf("step %d, pack %d: Run error %v, RunChunks error %v", step, pack, werr, gerr)
				}
				if werr != nil {
					continue
				}
				if d := reportDiff(want, got); d != "" {
					t.Fatalf("step %d, pack %d: reports differ:\n%s", step, pack, d)
				}
			}
		}
	})
}
