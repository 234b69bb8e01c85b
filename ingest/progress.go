package ingest

// Progress is how far Open has got, for a progress bar. Open reports it
// through Options.Progress: once when it knows what it will read, after
// each file is read, and once per later phase.
type Progress struct {
	Phase      string // "reading", then "merging", then "aligning clocks" (unless Options.NoAlign)
	Files      int    // files read so far
	FilesTotal int    // files to read
	Bytes      int64  // bytes of the files read so far (as stored, compressed or not)
	BytesTotal int64  // bytes of all the files to read
}

// progressReporter sends Progress to a callback; with no callback it does
// nothing.
type progressReporter struct {
	fn  func(Progress)
	p   Progress
	per []int64 // size of each input
}

// newProgressReporter sizes the inputs (a stat each) and reports the start.
func newProgressReporter(fn func(Progress), inputs []input) *progressReporter {
	r := &progressReporter{fn: fn}
	if fn == nil {
		return r
	}
	r.per = make([]int64, len(inputs))
	for i, in := range inputs {
		if st, err := statPath(in.path); err == nil {
			r.per[i] = st.Size()
			r.p.BytesTotal += st.Size()
		}
	}
	r.p.Phase, r.p.FilesTotal = "reading", len(inputs)
	fn(r.p)
	return r
}

// read reports that input i has been read.
func (r *progressReporter) read(i int) {
	if r.fn == nil {
		return
	}
	r.p.Files++
	r.p.Bytes += r.per[i]
	r.fn(r.p)
}

// phase reports the start of a later phase.
func (r *progressReporter) phase(name string) {
	if r.fn == nil {
		return
	}
	r.p.Phase = name
	r.fn(r.p)
}
