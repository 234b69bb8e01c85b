package collector

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// droppedWidth is the width of the dropped_events value in the schema
// metadata: 19 decimal digits hold any int64. The value is written zero
// padded ("0000000000000000000", which strconv.ParseInt reads as 0) and
// patched in place as events are dropped, so a reader of the file at any
// moment, even after a SIGKILL, sees the count as of the last batch.
const droppedWidth = 19

var droppedPlaceholder = bytes.Repeat([]byte{'0'}, droppedWidth)

// sink is one rank's Arrow stream file. Its layout at any moment:
//
//	schema | committed messages ... | [pending tail]
//
// Committed messages are record batches (and the dictionary deltas before
// them) of final rows, appended by the main stream writer. The pending tail,
// present only after the watchdog or a dump request, is a replacement kind
// dictionary and one record batch from a throwaway stream writer, holding
// the rows not yet committed: pending ops with a null end, and completed
// ops queued behind them. The tail is truncated away before the next
// committed write, so a reader sees every op exactly once: final rows, plus
// the tail's rows only while the job is stuck (or after it was killed
// stuck). The file always parses with the plain stream reader.
//
// A sink is used by one goroutine (the Recorder's writer).
type sink struct {
	f    *os.File
	path string
	meta trace.Meta
	opt  arrowv1.Options
	sync bool // fsync after every write

	out       fileWriter // what the main stream writer writes through
	sw        *arrowv1.StreamWriter
	committed int64 // end of the committed messages
	tail      bool  // a pending tail lies after committed

	droppedAt int64 // file offset of the dropped_events value; -1 when it could not be placed
	dropped   int64 // the value on disk
}

// fileWriter appends at the file's write offset and counts what it wrote.
// While discard is set it only counts (to swallow a second schema message).
type fileWriter struct {
	f       *os.File
	capture *bytes.Buffer // when set, bytes go here instead of f
	discard bool
	off     int64
}

func (w *fileWriter) Write(p []byte) (int, error) {
	if w.discard {
		return len(p), nil
	}
	if w.capture != nil {
		w.off += int64(len(p))
		return w.capture.Write(p)
	}
	n, err := w.f.Write(p)
	w.off += int64(n)
	return n, err
}

// rankFile names rank r's stream file: rank-NNNNN.arrows.
func rankFile(r trace.Rank) string { return fmt.Sprintf("rank-%05d.arrows", r) }

// openSink creates (or truncates) path and writes the schema at once, so a
// rank that dies before its first batch still leaves a readable stream.
func openSink(path string, meta trace.Meta, opt arrowv1.Options, fsync bool) (*sink, error) {
	// The dropped count starts as a zero-padded placeholder in Extra: Map
	// writes DroppedEvents only when it is non-zero, so the padded value
	// survives into the schema.
	meta.DroppedEvents = 0
	extra := make(map[string]string, len(meta.Extra)+1)
	for k, v := range meta.Extra {
		extra[k] = v
	}
	extra[trace.KeyDroppedEvents] = string(droppedPlaceholder)
	meta.Extra = extra

	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s := &sink{f: f, path: path, meta: meta, opt: opt, sync: fsync, droppedAt: -1}
	var schema bytes.Buffer
	s.out = fileWriter{f: f, capture: &schema}
	s.sw, err = arrowv1.NewStreamWriter(&s.out, meta, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	if i := bytes.Index(schema.Bytes(), droppedPlaceholder); i >= 0 &&
		bytes.Count(schema.Bytes(), droppedPlaceholder) == 1 {
		s.droppedAt = int64(i)
	}
	s.out.capture = nil
	if _, err := f.Write(schema.Bytes()); err != nil {
		f.Close()
		return nil, err
	}
	s.committed = s.out.off
	if err := s.syncMaybe(); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// dropTail removes a pending tail, if any, so the next committed write goes
// where the tail began.
func (s *sink) dropTail() error {
	if !s.tail {
		return nil
	}
	if err := s.f.Truncate(s.committed); err != nil {
		return err
	}
	if _, err := s.f.Seek(s.committed, io.SeekStart); err != nil {
		return err
	}
	s.out.off = s.committed
	s.tail = false
	return nil
}

// commit appends rows as final rows (one or more record batches).
func (s *sink) commit(rows *trace.Trace) error {
	if rows.Len() == 0 {
		return nil
	}
	if err := s.dropTail(); err != nil {
		return err
	}
	if err := s.sw.Write(rows); err != nil {
		return err
	}
	s.committed = s.out.off
	return nil
}

// writeTail replaces the pending tail with rows (or removes it when rows is
// empty). The rows go through a throwaway stream writer whose schema is
// swallowed: its first batch carries a full replacement dictionary, so the
// main writer's dictionary state, all of it in committed bytes, stays right
// once the tail is truncated.
func (s *sink) writeTail(rows *trace.Trace) error {
	if err := s.dropTail(); err != nil {
		return err
	}
	if rows.Len() == 0 {
		return nil
	}
	tw := &fileWriter{f: s.f, discard: true, off: s.committed}
	sw, err := arrowv1.NewStreamWriter(tw, s.meta, s.opt)
	if err != nil {
		return err
	}
	tw.discard = false
	s.tail = true // from here on the bytes after committed are a tail
	werr := sw.Write(rows)
	tw.discard = true
	cerr := sw.Close() // releases the dictionary; its end-of-stream marker is swallowed
	s.out.off = tw.off
	if werr != nil {
		return werr
	}
	return cerr
}

// setDropped patches the dropped_events value in the schema when n changed.
func (s *sink) setDropped(n int64) error {
	if n == s.dropped || s.droppedAt < 0 {
		return nil
	}
	v := strconv.FormatInt(n, 10)
	if len(v) > droppedWidth {
		return nil
	}
	buf := append(bytes.Repeat([]byte{'0'}, droppedWidth-len(v)), v...)
	if _, err := s.f.WriteAt(buf, s.droppedAt); err != nil {
		return err
	}
	s.dropped = n
	return nil
}

func (s *sink) syncMaybe() error {
	if !s.sync {
		return nil
	}
	return s.f.Sync()
}

// close writes rows as final rows, the end-of-stream marker and the final
// dropped count, and closes the file.
func (s *sink) close(rows *trace.Trace, dropped int64) error {
	err := s.commit(rows)
	if err == nil {
		err = s.dropTail()
	}
	if err == nil {
		err = s.sw.Close()
	}
	if err == nil {
		err = s.setDropped(dropped)
	}
	if err == nil {
		err = s.syncMaybe()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
