package ingest

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ppprof/ppprof/trace/arrowv1"
)

// CutSteps cuts every chunk of more than limit rows (a pipeline replica
// larger than limit: its files make a chunk of their own) between steps,
// into chunks of at most maxRows rows each (a step of more rows is a chunk
// of its own; but at least four record batches of each file, so that the
// batches across cuts, which both chunks decode, stay a small part of
// what is read), so that a replica too large for memory is read a few
// steps at a time. A chunk is cut only when every one of its files is an Arrow
// file (not gzip-compressed) whose rows' steps never decrease, in file
// order (a rank file as a collector writes it): finding out decodes each
// such file's step column once (arrowv1.StepRuns). Other chunks stay
// whole. It returns the number of chunks cut (limit <= 0: none).
// progress, when not nil, is called with the files indexed so far and the
// files to index, from the calling goroutine's callees (serialised).
//
// Chunk(c) of a cut chunk reads, of each of its files, only the record
// batches holding the rows of its steps (arrowv1.ReadRows), and returns
// exactly those rows, as Open would give them: every (step, pipeline
// replica) window is in one chunk. A replica's P2P channels are not, so
// cut chunks are for analyses of such windows (analyze), not for hang,
// which matches a replica's P2P ops over its whole history.
func (c *Chunks) CutSteps(limit, maxRows int, progress func(done, total int)) int {
	return c.CutStepsBatches(limit, maxRows, 4, progress)
}

// CutStepsBatches is CutSteps with chunks of at least batches record
// batches of each file (CutSteps: 4), at least 1: for a reader that needs
// each chunk's rows at once more than it minds the batches across cuts
// decoded twice (the what-if of every step, whose chunk is unpacked
// whole while its steps are re-timed).
func (c *Chunks) CutStepsBatches(limit, maxRows, batches int, progress func(done, total int)) int {
	if limit <= 0 {
		return 0
	}
	total := 0
	for i, g := range c.groups {
		if c.rows[i] > limit {
			total += len(g)
		}
	}
	var mu sync.Mutex
	done := 0
	indexed := func() {
		if progress == nil {
			return
		}
		mu.Lock()
		done++
		progress(done, total)
		mu.Unlock()
	}
	cut := 0
	var groups [][]int
	var rows []int
	var spans [][]*rowsRead
	var steps [][2]int64
	for i, g := range c.groups {
		if c.rows[i] > limit {
			if parts := c.cutGroup(g, maxRows, max(batches, 1), indexed); parts != nil {
				for _, p := range parts {
					groups, rows = append(groups, g), append(rows, p.rows)
					spans, steps = append(spans, p.spans), append(steps, p.steps)
				}
				cut++
				continue
			}
		}
		groups, rows = append(groups, g), append(rows, c.rows[i])
		spans, steps = append(spans, nil), append(steps, [2]int64{})
	}
	c.groups, c.rows, c.spans, c.steps = groups, rows, spans, steps
	return cut
}

// stepCut is one chunk of a group cut between steps: its rows, what is
// read of each file (nil: none of its rows), its steps [first, last].
type stepCut struct {
	rows  int
	spans []*rowsRead
	steps [2]int64
}

// rowsRead is the rows [lo, hi) of an Arrow file to read, in file order,
// and the file's index (arrowv1.ReadRows).
type rowsRead struct {
	lo, hi int64
	ix     *arrowv1.Index
}

// cutGroup cuts the group of files into chunks of whole steps, at most
// maxRows rows each where a step is not larger; nil when a file cannot be
// cut (see CutSteps) or the group makes one chunk anyway.
func (c *Chunks) cutGroup(files []int, maxRows, batches int, indexed func()) []stepCut {
	runs := make([][]arrowv1.StepRun, len(files))
	ixs := make([]*arrowv1.Index, len(files))
	var failed atomic.Bool
	eachParallel(len(files), func(k int) {
		if failed.Load() {
			return
		}
		r, ix, ok := fileStepRuns(c.paths[files[k]], c.Files[files[k]])
		if !ok {
			failed.Store(true)
		}
		runs[k], ixs[k] = r, ix
		indexed()
	})
	if failed.Load() {
		return nil
	}
	// The group's steps and their rows.
	perStep := map[int64]int{}
	for _, rs := range runs {
		for _, r := range rs {
			perStep[r.Step] += int(r.Rows)
		}
	}
	all := make([]int64, 0, len(perStep))
	for s := range perStep {
		all = append(all, s)
	}
	slices.Sort(all)
	// Ranges of whole steps, greedily up to maxRows rows, but at least
	// batches record batches of each file (CutSteps: four): a batch
	// across a cut is decoded by both chunks, which must not be most of
	// what they decode.
	least := 0
	for k, rs := range runs {
		var n int64
		for _, r := range rs {
			n += r.Rows
		}
		if b := ixs[k].Batches(); b > 0 {
			least += batches * int(n/int64(b))
		}
	}
	maxRows = max(maxRows, least)
	var ranges [][2]int64
	acc := 0
	for i, s := range all {
		if i > 0 && acc > 0 && acc+perStep[s] > maxRows {
			ranges[len(ranges)-1][1] = all[i-1]
			acc = 0
		}
		if acc == 0 {
			ranges = append(ranges, [2]int64{s, s})
		}
		acc += perStep[s]
	}
	if len(ranges) < 2 {
		return nil
	}
	ranges[len(ranges)-1][1] = all[len(all)-1]
	out := make([]stepCut, len(ranges))
	for j, rg := range ranges {
		out[j] = stepCut{spans: make([]*rowsRead, len(files)), steps: rg}
		for k, rs := range runs {
			var lo, hi int64 // rows before step rg[0], and up to step rg[1]
			for _, r := range rs {
				if r.Step < rg[0] {
					lo += r.Rows
				}
				if r.Step <= rg[1] {
					hi += r.Rows
				}
			}
			if hi > lo {
				out[j].spans[k] = &rowsRead{lo: lo, hi: hi, ix: ixs[k]}
			}
			out[j].rows += int(hi - lo)
		}
	}
	return out
}

// fileStepRuns returns the step runs of the file at path (as OpenChunks
// found it: info); ok is false when it cannot be cut between steps: not
// an Arrow file, gzip-compressed, steps that decrease somewhere in file
// order, or rows other than OpenChunks counted.
func fileStepRuns(path string, info FileInfo) ([]arrowv1.StepRun, *arrowv1.Index, bool) {
	if info.Format != FormatArrowFile && info.Format != FormatArrowStream || info.Compressed {
		return nil, nil, false
	}
	f, err := openRead(path)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	data, release, err := arrowv1.MapFile(f)
	if err != nil {
		return nil, nil, false
	}
	defer release()
	runs, ix, ok := stepRuns(data)
	if !ok {
		return nil, nil, false
	}
	var n int64
	for i, r := range runs {
		if i > 0 && r.Step <= runs[i-1].Step {
			return nil, nil, false
		}
		n += r.Rows
	}
	return runs, ix, n == int64(info.Events)
}

// stepRuns is arrowv1.StepRuns, a fault (a file truncated while mapped)
// answering "cannot".
func stepRuns(data []byte) (runs []arrowv1.StepRun, ix *arrowv1.Index, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			runs, ix, ok = nil, nil, false
		}
	}()
	return arrowv1.StepRuns(data)
}
