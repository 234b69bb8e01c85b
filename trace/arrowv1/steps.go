package arrowv1

import "github.com/ppprof/ppprof/trace"

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
// says what is wrong with such input, if anything.
func StepRuns(data []byte) (runs []StepRun, ok bool) {
	if !littleEndian {
		return nil, false
	}
	defer func() {
		// As in fastReadInto: the checks are meant to make this
		// unreachable; a panic only answers "cannot".
		if p := recover(); p != nil {
			runs, ok = nil, false
		}
	}()
	frames, err := framesOf(data)
	if err != nil || len(frames) == 0 {
		return nil, false
	}
	plan, ok := planFor(frames[0])
	if !ok {
		return nil, false
	}
	fi := plan.col[trace.ColStep]
	var sc fastScratch
	defer sc.release()
	var steps []int64
	for i := range frames[1:] {
		fr := &frames[1+i]
		if fr.info.header != headerRecordBatch {
			continue
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
			return nil, false
		}
		ns, ok := nodes(f, rb)
		if !ok || len(ns) != len(plan.fields) || len(fr.info.buffers) != plan.nbuf || ns[fi][0] != int64(n) || ns[fi][1] != 0 {
			return nil, false
		}
		if cap(steps) < n {
			steps = make([]int64, n)
		}
		steps = steps[:n]
		raw, ok := batchBufs{fr: fr}.read(plan.fields[fi].buf+1, bytesOf(steps), &sc, 1)
		if !ok || len(raw) < 8*n {
			return nil, false
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
	return runs, true
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
