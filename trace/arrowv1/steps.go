package arrowv1

import (
	"errors"
	"fmt"

	"github.com/ppprof/ppprof/trace"
)

// StepRun is a run of consecutive rows of one step.
type StepRun struct {
	Step int64
	Rows int64
}

// StepRuns returns the rows of the complete record batches of an Arrow IPC
// file or stream (the rows Read returns, in its order) as runs of
// consecutive rows of one step, decoding only the step column of each
// record batch (a few percent of Read). It is for cutting a large file
// between steps: ReadRows then reads the rows of a cut. Nothing else is
// decoded or checked. ok is false for input the fast decoder does not
// take, a batch whose step column does not decode, or a null step: Read
// says what is wrong with such input, if anything. ix locates the input's
// messages for ReadRows, which then frames only those it decodes.
func StepRuns(data []byte) (runs []StepRun, ix *Index, ok bool) {
	if !littleEndian {
		return nil, nil, false
	}
	defer func() {
		// As in fastReadInto: the checks are meant to make this
		// unreachable; a panic only answers "cannot".
		if p := recover(); p != nil {
			runs, ix, ok = nil, nil, false
		}
	}()
	frames, err := framesOf(data)
	if err != nil || len(frames) == 0 {
		return nil, nil, false
	}
	plan, ok := planFor(frames[0])
	if !ok {
		return nil, nil, false
	}
	ix = &Index{size: len(data), schema: frames[0].start}
	fi := plan.col[trace.ColStep]
	sc := getScratch()
	defer sc.put()
	var steps []int64
	for i := range frames[1:] {
		fr := &frames[1+i]
		switch fr.info.header {
		case headerDictionaryBatch:
			ix.msgs = append(ix.msgs, msgRef{pos: fr.start, dict: true})
			continue
		case headerRecordBatch:
			ix.msgs = append(ix.msgs, msgRef{pos: fr.start, rows: fr.info.rows})
		default:
			return nil, nil, false
		}
		n := int(fr.info.rows)
		if n == 0 {
			continue
		}
		if fi < 0 { // no step column: every row is step 0
			runs = appendRun(runs, 0, int64(n))
			continue
		}
		f, rb, _, _, ok := batchHeader(fr)
		if !ok {
			return nil, nil, false
		}
		ns, ok := nodesInto(f, rb, sc.nodes)
		if !ok || len(ns) != len(plan.fields) || len(fr.info.buffers) != plan.nbuf || ns[fi][0] != int64(n) || ns[fi][1] != 0 {
			return nil, nil, false
		}
		sc.nodes = ns
		if cap(steps) < n {
			steps = make([]int64, n)
		}
		steps = steps[:n]
		raw, ok := batchBufs{fr: fr}.read(plan.fields[fi].buf+1, bytesOf(steps), sc, 1)
		if !ok || len(raw) < 8*n {
			return nil, nil, false
		}
		if &raw[0] != &bytesOf(steps)[0] { // stored uncompressed
			copy(bytesOf(steps), raw[:8*n])
		}
		for lo := 0; lo < n; {
			hi := lo + 1
			for hi < n && steps[hi] == steps[lo] {
				hi++
			}
			runs = appendRun(runs, steps[lo], int64(hi-lo))
			lo = hi
		}
	}
	return runs, ix, true
}

// appendRun appends rows of step to runs, extending the last run when it
// is of the same step.
func appendRun(runs []StepRun, step, rows int64) []StepRun {
	if k := len(runs) - 1; k >= 0 && runs[k].Step == step {
		runs[k].Rows += rows
		return runs
	}
	return append(runs, StepRun{Step: step, Rows: rows})
}

// Index locates the messages of an Arrow IPC input (StepRuns makes it):
// ReadRows given it frames only the messages it decodes, where a read
// without it frames every message before them.
type Index struct {
	size   int      // of the input indexed
	schema int      // offset of the schema message
	msgs   []msgRef // dictionary and record batch messages, in order
}

// msgRef is where one message of an indexed input lies.
type msgRef struct {
	pos  int
	dict bool
	rows int64 // of a record batch
}

// errChanged says an input no longer holds the messages its Index says.
var errChanged = errors.New("changed since it was indexed")

// Batches is the number of the indexed input's record batches.
func (ix *Index) Batches() int {
	n := 0
	for _, m := range ix.msgs {
		n += b2i(!m.dict)
	}
	return n
}

// Size is the length in bytes of the indexed input.
func (ix *Index) Size() int64 { return int64(ix.size) }

// rows is the number of rows of the indexed input's record batches.
func (ix *Index) rows() int64 {
	var n int64
	for _, m := range ix.msgs {
		n += m.rows
	}
	return n
}

// frames frames the schema, the dictionaries and the record batches
// holding rows [lo, hi) of data, where ix says they are; from is the
// number of the first row of those batches.
func (ix *Index) frames(data []byte, lo, hi int64) (out []frame, from int64, err error) {
	return ix.framesIn(data, lo, hi, false)
}

// place is where message i of ix (-1: the schema) lies: from its
// position to the next message's (the input's end for the last).
func (ix *Index) place(i int) (lo, hi int) {
	lo = ix.schema
	if i >= 0 {
		lo = ix.msgs[i].pos
	}
	if i+1 < len(ix.msgs) {
		return lo, ix.msgs[i+1].pos
	}
	return lo, ix.size
}

// framesIn is frames; with read, data holds only the bytes of the
// messages it frames (ReadRowsAt): a message reaching past its place
// fails with errUnread, as its bytes there were not read.
func (ix *Index) framesIn(data []byte, lo, hi int64, read bool) (out []frame, from int64, err error) {
	if len(data) != ix.size {
		return nil, 0, fmt.Errorf("%w: %d bytes, then %d", errChanged, ix.size, len(data))
	}
	at := func(i int, header byte) (frame, error) {
		pos, end := ix.place(i)
		d := data
		if read {
			// Only the message's place was read: framing must not look
			// past it.
			d = data[:end]
		}
		fr, status, _, err := readFrame(d, pos, framingUnknown)
		if read && (err != nil || status != frameOK) {
			return fr, errUnread
		}
		if err != nil {
			return fr, fmt.Errorf("%w: message at byte %d: %v", errChanged, pos, err)
		}
		if status != frameOK || fr.info.header != header {
			return fr, fmt.Errorf("%w: no %s at byte %d", errChanged, headerName(header), pos)
		}
		return fr, nil
	}
	schema, err := at(-1, headerSchema)
	if err != nil {
		return nil, 0, err
	}
	out = []frame{schema}
	var row int64
	first := true
	for i, m := range ix.msgs {
		header := byte(headerDictionaryBatch)
		if !m.dict {
			header = headerRecordBatch
			row += m.rows
			if row <= lo {
				continue
			}
			if row-m.rows >= hi {
				break
			}
			if first {
				from, first = row-m.rows, false
			}
		}
		fr, err := at(i, header)
		if err != nil {
			return nil, 0, err
		}
		if !m.dict && fr.info.rows != m.rows {
			return nil, 0, fmt.Errorf("%w: %d rows in the batch at byte %d, then %d", errChanged, m.rows, m.pos, fr.info.rows)
		}
		out = append(out, fr)
	}
	return out, from, nil
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
