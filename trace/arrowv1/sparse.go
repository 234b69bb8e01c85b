package arrowv1

import (
	"encoding/binary"
	"io"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/ppprof/ppprof/trace"
)

// Sparse reads: Rows and ReadHead of an IPC stream in a file, reading with
// pread(2) only the bytes they look at (each message's length prefix and
// metadata, the end of the file, and the few bodies a head decodes) into
// a recycled buffer of the file's size, instead of mapping the file.
//
// Why: counting the rows of the 302M-event fleet trace's 4096 rank files
// (2.2 MB each, ~37 messages) and reading their heads touched one page of
// each message through a mapping. On the virtual machine the benchmarks
// run on a page fault costs about 40 µs (shadow page tables), and the two
// passes took 6 s of CPU each, 3 s of the run's wall time each; one pread
// of a 4 KB window a message costs a fifth of that
// (docs/performance-history.md, "Before and after the nineteenth
// session").
//
// The buffer holds the file's bytes only where they were read; elsewhere
// it holds whatever it held before. The reads below frame it with the
// same code as a whole file (framesOfIn with a lightSpan, readFramesLight)
// and answer only when that succeeds: an input that fails (truncated
// inside a message header, corrupt, a long run of zero bytes at its end)
// gets ok false, and the caller reads the file the usual way, which says
// what is wrong with it. TestSparseMatchesWhole checks, on streams of
// every shape the readers take with the unread bytes poisoned, that the
// answers are the whole file's.

// sparseMax is the largest file read sparsely: the buffer is the file's
// size (one a core at most, and up to cap(sparseFree) kept). A larger
// file is mapped (MapFileSparse), whose faults are then fewer than its
// bytes by more (a fleet's rank files are 2.2 MB).
const sparseMax = 16 << 20

// sparseWindow is what one pread takes at a message's start: its prefix
// and metadata (1-2 KB for ppprof's 21 columns) in one system call.
const sparseWindow = 4 << 10

// sparseFree recycles the sparse readers' buffers, up to eight of them.
// Not a sync.Pool: every garbage collection empties one, and a fresh
// buffer's pages fault again where they are read into (counting the
// fleet trace's rows took 7 s instead of 1.5 so, 300 collections in the
// run).
var sparseFree = make(chan *[]byte, 8)

// sparseCfg is how a sparse read goes: real reads take sparseReal.
// Tests poison the buffer (fill it with a byte value, 0-255, first) so
// that a byte looked at without being read shows, and shrink the window
// so that it does not read whole messages of a small stream.
type sparseCfg struct {
	poison int // -1: none
	window int
}

var sparseReal = sparseCfg{poison: -1, window: sparseWindow}

// sparseFrame is where one message lies in a sparsely read stream.
type sparseFrame struct {
	bodyStart, end int
	header         byte
}

// sparse is a stream being read sparsely: data is the file's size.
type sparse struct {
	r      io.ReaderAt
	data   []byte
	bp     *[]byte
	window int
	lo, hi int // the bytes read by the last fill, [lo, hi)
	frames []sparseFrame
}

// fill reads data[lo:hi], and up to a window of bytes from lo, unless
// the last fill read them.
func (s *sparse) fill(lo, hi int) bool {
	if lo >= s.lo && hi <= s.hi {
		return true
	}
	end := min(len(s.data), max(hi, lo+s.window))
	if !readFull(s.r, s.data[lo:end], lo) {
		return false
	}
	s.lo, s.hi = lo, end
	return true
}

// readFull reads exactly len(b) bytes at off.
func readFull(r io.ReaderAt, b []byte, off int) bool {
	n, err := r.ReadAt(b, int64(off))
	return n == len(b) && (err == nil || err == io.EOF)
}

// newSparse lays out the stream r holds (size bytes): it reads the
// messages' prefixes and metadata (stopping where the stream ends or
// stops making sense: the framing that follows finds that again, in the
// bytes read) and the end of the file. ok is false for a file that is not
// a stream, too large or too small, a failed read, or a run of zero bytes
// at the end longer than a window.
func newSparse(r io.ReaderAt, size int64, cfg sparseCfg) (s *sparse, ok bool) {
	if size < 8 || size > sparseMax {
		return nil, false
	}
	n := int(size)
	bp := sparseBuf(n, cfg)
	s = &sparse{r: r, data: (*bp)[:n], bp: bp, window: cfg.window}
	if !s.fill(0, 8) || Sniff(s.data[:s.hi]) != FormatStream {
		s.release()
		return nil, false
	}
	for pos := 0; ; {
		rem := n - pos
		if rem < 4 || !s.fill(pos, pos+min(rem, 8)) {
			break
		}
		w := binary.LittleEndian.Uint32(s.data[pos:])
		prefix, metaLen := 4, int64(int32(w))
		if w == continuation {
			if rem < 8 {
				break
			}
			prefix, metaLen = 8, int64(int32(binary.LittleEndian.Uint32(s.data[pos+4:])))
		}
		if metaLen <= 0 || metaLen > maxMetaLen || int64(rem) < int64(prefix)+metaLen {
			break // the end-of-stream marker, or what framing rejects or stops at
		}
		bodyStart := pos + prefix + int(metaLen)
		if !s.fill(pos, bodyStart) {
			s.release()
			return nil, false
		}
		info, err := verifyMessage(s.data[pos+prefix : bodyStart])
		if err != nil || int64(n-bodyStart) < info.bodyLen {
			break
		}
		end := bodyStart + int(info.bodyLen)
		s.frames = append(s.frames, sparseFrame{bodyStart: bodyStart, end: end, header: info.header})
		pos = end
	}
	// The end of the file, where framing looks for a zero tail, and the
	// bodies framing then checks in full: those reaching into it.
	tail := max(0, n-s.window)
	if !readFull(r, s.data[tail:], tail) {
		s.release()
		return nil, false
	}
	zeros := n // where the zero bytes ending the file start (n: none)
	for zeros > tail && s.data[zeros-1] == 0 {
		zeros--
	}
	if zeros == tail && tail > 0 {
		s.release() // a longer run of zeros: read whole
		return nil, false
	}
	for _, fr := range s.frames {
		if fr.end > zeros && !s.body(fr) {
			s.release()
			return nil, false
		}
	}
	return s, true
}

// sparseBuf returns a buffer of at least n bytes (from sparseFree when
// one there is large enough), filled with cfg's poison when it has one.
func sparseBuf(n int, cfg sparseCfg) *[]byte {
	var bp *[]byte
	select {
	case bp = <-sparseFree:
	default:
	}
	if bp == nil || cap(*bp) < n {
		b := make([]byte, n)
		bp = &b
	}
	if cfg.poison >= 0 {
		d := (*bp)[:n]
		for i := range d {
			d[i] = byte(cfg.poison)
		}
	}
	return bp
}

// putSparseBuf hands bp back to sparseFree (dropped when it is full).
func putSparseBuf(bp *[]byte) {
	select {
	case sparseFree <- bp:
	default:
	}
}

// body reads fr's body.
func (s *sparse) body(fr sparseFrame) bool {
	return readFull(s.r, s.data[fr.bodyStart:fr.end], fr.bodyStart)
}

func (s *sparse) release() {
	if s.bp != nil {
		putSparseBuf(s.bp)
	}
	s.bp = nil
}

// RowsAt is Rows of the Arrow IPC stream r holds (size bytes, a regular
// file), reading only the messages' headers (see sparseMax for the sizes
// it takes). ok is false when it cannot answer so: Rows of the whole file
// then does, or says what is wrong with it.
func RowsAt(r io.ReaderAt, size int64) (rows int64, ok bool) {
	return rowsAt(r, size, sparseReal)
}

func rowsAt(r io.ReaderAt, size int64, cfg sparseCfg) (rows int64, ok bool) {
	defer func() {
		// A panic (a bug) is no answer: the whole read recovers its own.
		if recover() != nil {
			rows, ok = 0, false
		}
	}()
	s, ok := newSparse(r, size, cfg)
	if !ok {
		return 0, false
	}
	defer s.release()
	frames, err := framesOfIn(s.data, lightSpan())
	if err != nil {
		return 0, false
	}
	for _, fr := range frames {
		if fr.info.header == headerRecordBatch {
			rows += fr.info.rows
		}
	}
	return rows, true
}

// ReadHeadAt is ReadHead of the Arrow IPC stream r holds (size bytes, a
// regular file), reading only the messages' headers and the bodies
// ReadHead decodes: the schema and dictionaries, the first and the last
// record batch. ok is false when it cannot answer so: ReadHead of the
// whole file then does, or says what is wrong with it.
func ReadHeadAt(r io.ReaderAt, size int64) (res *Result, rows int64, ok bool) {
	return readHeadAt(r, size, sparseReal)
}

func readHeadAt(r io.ReaderAt, size int64, cfg sparseCfg) (res *Result, rows int64, ok bool) {
	defer func() {
		if recover() != nil {
			res, rows, ok = nil, 0, false
		}
	}()
	s, ok := newSparse(r, size, cfg)
	if !ok {
		return nil, 0, false
	}
	defer s.release()
	first, last, batches := -1, -1, 0
	for i, fr := range s.frames {
		if fr.header == headerRecordBatch {
			if first < 0 {
				first = i
			}
			last = i
			batches++
		}
	}
	for i, fr := range s.frames {
		if (fr.header != headerRecordBatch || i == first || i == last) && !s.body(fr) {
			return nil, 0, false
		}
	}
	res, rows, err := readFramesLight(s.data, memory.DefaultAllocator, true, true, nil, nil, true)
	if err != nil {
		return nil, 0, false
	}
	if res.Batches != batches {
		// Framed with the bodies read, the stream ends elsewhere (a last
		// batch whose body fails the checks of a zero tail, for one):
		// the batch decoded as the last is not the one whose body was
		// read (FuzzRead: sparse-head-last-batch-refused).
		return nil, 0, false
	}
	return res, rows, true
}

// ReadRowsAt is ReadRows(data, ix, lo, hi) of the Arrow IPC stream r
// holds (size bytes, a regular file), reading with pread only the
// messages that read frames (the schema, every dictionary, the record
// batches holding rows [lo, hi)), each where ix places it, into a
// recycled buffer of the file's size, instead of mapping the file: a
// chunk cut between steps reads a few batches of each of thousands of
// files, and on the benchmarks' host each page fault on a file mapping
// costs about 40 µs and each unmapping more. ok is false when it cannot
// answer so (no index, a file of another size than indexed or larger than
// sparseMax, not a stream, a failed read, a message reaching past its
// place, a row that never started whose issue time lies in an earlier
// batch, any error): the caller then reads the file mapped, which gives
// the rows or says what is wrong.
func ReadRowsAt(r io.ReaderAt, size int64, ix *Index, lo, hi int64) (res *Result, ok bool) {
	return readRowsAt(r, size, ix, lo, hi, sparseReal, nil)
}

// ReadRowsAtInto is ReadRowsAt with rows [lo, hi) copied into rows
// [off, off+hi-lo) of dst's columns instead of columns of their own: a
// chunk cut between steps reads each of thousands of files' rows into
// its own rows of the chunk, as ReadInto does for whole files. When ok,
// Result.Trace's columns are those rows of dst (IsRows). No other
// goroutine may use those rows meanwhile, and ReadRowsAtInto touches no
// row of dst outside them; when ok is false it may have written them.
// A dst whose columns do not all hold off+hi-lo rows, or a negative
// off, make it ReadRowsAt.
func ReadRowsAtInto(r io.ReaderAt, size int64, ix *Index, lo, hi int64, dst *trace.Trace, off int) (res *Result, ok bool) {
	return readRowsAt(r, size, ix, lo, hi, sparseReal, intoRows(dst, off, hi-lo))
}

func readRowsAt(r io.ReaderAt, size int64, ix *Index, lo, hi int64, cfg sparseCfg, into *rowRange) (res *Result, ok bool) {
	defer func() {
		// A panic (a bug) is no answer: the mapped read recovers its own.
		if recover() != nil {
			res, ok = nil, false
		}
	}()
	if ix == nil || size != int64(ix.size) || size < 8 || size > sparseMax || lo < 0 || lo >= hi || hi > ix.rows() {
		return nil, false
	}
	n := int(size)
	bp := sparseBuf(n, cfg)
	defer putSparseBuf(bp)
	data := (*bp)[:n]
	// The byte ranges to read, in order, adjacent places merged: from
	// the file's start (sniffed) through the schema, then the messages
	// framesIn frames, in the same walk.
	type span struct{ lo, hi int }
	_, schemaEnd := ix.place(-1)
	spans := []span{{0, schemaEnd}}
	add := func(i int) {
		a, b := ix.place(i)
		if last := &spans[len(spans)-1]; last.hi == a {
			last.hi = b
		} else {
			spans = append(spans, span{a, b})
		}
	}
	var row int64
	for i, m := range ix.msgs {
		if !m.dict {
			row += m.rows
			if row <= lo {
				continue
			}
			if row-m.rows >= hi {
				break
			}
		}
		add(i)
	}
	for _, s := range spans {
		if s.lo < 0 || s.lo > s.hi || s.hi > n || !readFull(r, data[s.lo:s.hi], s.lo) {
			return nil, false
		}
	}
	if Sniff(data[:schemaEnd]) != FormatStream {
		return nil, false
	}
	res, _, err := readFramesLight(data, memory.DefaultAllocator, true, false, nil, &spanRead{lo: lo, hi: hi, ix: ix, read: true, into: into}, false)
	if err != nil {
		return nil, false
	}
	return res, true
}
