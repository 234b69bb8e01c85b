package arrowv1

import (
	"sync"

	"github.com/ppprof/ppprof/trace"
)

// Recycling: a reader that merges many files' traces into one (ingest's
// chunks of a streamed job) is done with each file's columns once they are
// copied. Handed to Recycle, they are the columns of later Reads instead
// of fresh memory: no zeroing, no page faults on memory the runtime gave
// back to the system, less for the collector. At most recycleMax bytes of
// columns wait for a Read.

// recycleMax is the most column bytes Recycle keeps.
const recycleMax = 256 << 20

var recycled struct {
	mu    sync.Mutex
	sets  []*trace.Trace // columns of length 0; strings cleared
	bytes int64
}

// Recycle gives the columns of t to later Reads: the caller must not use
// them again (nor anything sliced from them). t is left without rows, its
// metadata kept. Columns beyond what Recycle keeps are left to the
// garbage collector.
func Recycle(t *trace.Trace) {
	u := &trace.Trace{
		Rank: t.Rank[:0], Pipeline: t.Pipeline[:0], Stage: t.Stage[:0], TPRank: t.TPRank[:0], Chunk: t.Chunk[:0],
		Step: t.Step[:0], MicroBatch: t.MicroBatch[:0], Kind: t.Kind[:0], Seq: t.Seq[:0],
		IssueNs: t.IssueNs[:0], StartNs: t.StartNs[:0], EndNs: t.EndNs[:0], Peer: t.Peer[:0], Bytes: t.Bytes[:0],
		Shape: t.Shape[:0], Dtype: t.Dtype[:0], Tokens: t.Tokens[:0], Flops: t.Flops[:0], MemBytes: t.MemBytes[:0],
		Group: t.Group[:0], GroupSeq: t.GroupSeq[:0],
	}
	*t = trace.Trace{Meta: t.Meta}
	size := colBytes(u)
	if size == 0 {
		return
	}
	recycled.mu.Lock()
	keep := recycled.bytes+size <= recycleMax
	if keep {
		recycled.bytes += size
	}
	recycled.mu.Unlock()
	if !keep {
		return
	}
	// newTrace hands these out with "" in every string row, as fresh
	// columns have (the decoders write every row since the strings became
	// ids, but the promise is cheap: 12 bytes a row).
	clear(u.Shape[:cap(u.Shape)])
	clear(u.Dtype[:cap(u.Dtype)])
	clear(u.Group[:cap(u.Group)])
	recycled.mu.Lock()
	recycled.sets = append(recycled.sets, u)
	recycled.mu.Unlock()
}

// colBytes is the capacity of t's columns in bytes.
func colBytes(t *trace.Trace) int64 {
	n := 8*(cap(t.Step)+cap(t.Seq)+cap(t.IssueNs)+cap(t.StartNs)+cap(t.EndNs)+cap(t.Bytes)+cap(t.Tokens)+cap(t.Flops)+cap(t.MemBytes)+cap(t.GroupSeq)) +
		4*(cap(t.Rank)+cap(t.Pipeline)+cap(t.Stage)+cap(t.TPRank)+cap(t.Chunk)+cap(t.MicroBatch)+cap(t.Peer)+
			cap(t.Shape)+cap(t.Dtype)+cap(t.Group)) +
		2*cap(t.Kind)
	return int64(n)
}

// newTrace returns a trace with meta and n rows of every column: recycled
// columns where some fit (holding anything but "" in the strings), else
// fresh ones. Columns fit n rows when they hold n to 2n+4096: a small
// trace does not hold on to a large one's memory.
func newTrace(meta trace.Meta, n int) *trace.Trace {
	var t *trace.Trace
	recycled.mu.Lock()
	for k := len(recycled.sets) - 1; k >= max(0, len(recycled.sets)-8); k-- {
		u := recycled.sets[k]
		if c := cap(u.Rank); c < n || c > 2*n+4096 {
			continue
		}
		t = u
		last := len(recycled.sets) - 1
		recycled.sets[k] = recycled.sets[last]
		recycled.sets[last] = nil
		recycled.sets = recycled.sets[:last]
		recycled.bytes -= colBytes(t)
		break
	}
	recycled.mu.Unlock()
	room := n
	if t == nil {
		t = &trace.Trace{}
		// Fresh columns hold a whole number of KiB-rows: traces of
		// nearly the same length (the heads of rank files, which end in
		// batches of different sizes) then fit in each other's.
		room = (n + 1023) &^ 1023
	}
	t.Meta = meta
	t.Grow(room)
	setLen(t, n)
	return t
}
