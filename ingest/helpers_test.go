package ingest

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// randomTrace returns a valid trace of nRanks ranks with up to perRank
// events each, ordered by (rank, seq), whose values reach the corners the
// codecs must keep exact: null times, int64 extremes, negative zero flops,
// strings with commas, quotes, newlines and non-ASCII.
func randomTrace(rng *rand.Rand, nRanks, perRank int) *trace.Trace {
	t := &trace.Trace{Meta: trace.Meta{Schema: trace.SchemaMajor}}
	kinds := []trace.Kind{trace.F, trace.B, trace.W, trace.SendF, trace.RecvF, trace.SendB, trace.RecvB, trace.Opt,
		trace.AllGather, trace.Barrier, trace.MustKind("DATA"), trace.MustKind("ckpt:save/v1.2")}
	strs := []string{"", "bf16", "4096x2x8192", "a,b", `say "hi"`, "two\nlines", " padded ", "µs-Ω", "\\", "tab\tx", "#hash", "cr\rx", "\r"}
	times := []int64{0, 1, -5, math.MaxInt64, math.MinInt64 + 1, 1 << 53, 1<<53 + 1}
	pick := func(vs []int64) int64 {
		if rng.IntN(3) == 0 {
			return vs[rng.IntN(len(vs))]
		}
		return rng.Int64N(1 << 40)
	}
	for r := 0; r < nRanks; r++ {
		stage := trace.Stage(rng.IntN(8))
		pipe := int32(rng.IntN(3))
		tp := int32(rng.IntN(2))
		seq := rng.Int64N(10) - 5
		n := 1 + rng.IntN(max(perRank, 1))
		for i := 0; i < n; i++ {
			seq += 1 + rng.Int64N(3)
			e := trace.Event{
				Rank: trace.Rank(r), Pipeline: pipe, Stage: stage, TPRank: tp,
				Chunk: int32(rng.IntN(3)), Step: rng.Int64N(1 << 40), MicroBatch: trace.MicroBatch(rng.IntN(20) - 1),
				Kind: kinds[rng.IntN(len(kinds))], Seq: seq, IssueNs: pick(times),
				StartNs: trace.NoTime, EndNs: trace.NoTime, Peer: trace.NoRank,
				Bytes: rng.Int64N(1 << 50), Shape: strs[rng.IntN(len(strs))], Dtype: strs[rng.IntN(len(strs))],
				Tokens: rng.Int64N(1 << 20), MemBytes: rng.Int64N(1 << 62),
				Group: strs[rng.IntN(len(strs))], GroupSeq: rng.Int64N(1<<40) - 1,
			}
			switch rng.IntN(5) {
			case 0: // never started
			case 1: // pending
				e.StartNs = pick(times)
			default:
				e.StartNs = pick(times)
				e.EndNs = e.StartNs
				if e.StartNs < math.MaxInt64-1<<41 {
					e.EndNs += rng.Int64N(1 << 40)
				}
			}
			switch rng.IntN(4) {
			case 0:
				e.Flops = math.Copysign(0, -1)
			case 1:
				e.Flops = rng.Float64() * 1e15
			case 2:
				e.Flops = math.SmallestNonzeroFloat64 * float64(rng.IntN(100))
			}
			if e.Kind.IsP2P() {
				if nRanks < 2 {
					e.Kind = trace.F
				} else {
					e.Peer = trace.Rank((r + 1 + rng.IntN(nRanks-1)) % nRanks)
				}
			} else if rng.IntN(4) == 0 {
				e.Peer = trace.Rank(rng.IntN(nRanks))
			}
			t.Append(e)
		}
	}
	if err := t.Validate(); err != nil {
		panic(err)
	}
	return t
}

// writeFile writes data to name under dir and returns its path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
