package arrowv1

import (
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// StreamWriter appends record batches to an Arrow IPC stream as a job runs:
// what a collector writes. Every batch is handed to the underlying writer
// before Write returns, so a process killed between two Writes leaves a
// stream that Read recovers up to the last batch.
//
// Kinds that first appear in a later batch are sent as a dictionary delta
// before that batch. A StreamWriter is not safe for concurrent use.
type StreamWriter struct {
	w      io.Writer
	mem    memory.Allocator
	schema *arrow.Schema
	rows   int // rows per batch
	iw     *ipc.Writer
	dict   kindDict
	closed bool
	err    error // first write error: the stream is unusable after it
}

// NewStreamWriter starts a stream on w with the schema for meta and writes
// the schema message at once, so that even a job that dies before its first
// batch leaves a readable (empty) stream.
func NewStreamWriter(w io.Writer, meta trace.Meta, opt Options) (*StreamWriter, error) {
	return newStreamWriter(w, meta, opt, memory.DefaultAllocator)
}

func newStreamWriter(w io.Writer, meta trace.Meta, opt Options, mem memory.Allocator) (*StreamWriter, error) {
	opts, err := opt.ipcOptions()
	if err != nil {
		return nil, err
	}
	schema := Schema(meta)
	// arrow-go writes the schema on the first Write or Close. Write it now
	// and have the payload writer drop the copy arrow-go emits later.
	sp := ipc.GetSchemaPayload(schema, mem)
	defer sp.Release()
	if _, err := sp.WritePayload(w); err != nil {
		return nil, fmt.Errorf("writing arrow stream schema: %w", err)
	}
	pw := &payloadWriter{w: w, skip: 1}
	opts = append(opts, ipc.WithSchema(schema), ipc.WithAllocator(mem), ipc.WithDictionaryDeltas(true))
	return &StreamWriter{
		w:      w,
		mem:    mem,
		schema: schema,
		rows:   opt.batchRows(),
		iw:     ipc.NewWriterWithPayloadWriter(pw, opts...),
	}, nil
}

// Write appends rows as one record batch, or several when rows holds more
// than Options.BatchRows rows. rows.Meta is ignored: the metadata is the
// one given to NewStreamWriter. Writing no rows writes nothing. Rows that
// cannot be encoded (an invalid kind) are an error and nothing is written;
// after an error from w the stream is unusable and every later Write
// returns that error.
func (sw *StreamWriter) Write(rows *trace.Trace) error {
	switch {
	case sw.closed:
		return errors.New("arrow stream: write after close")
	case sw.err != nil:
		return sw.err
	}
	if err := sw.dict.addAll(rows.Kind); err != nil {
		return fmt.Errorf("writing arrow stream: %w", err)
	}
	for from := 0; from < rows.Len(); from += sw.rows {
		to := min(from+sw.rows, rows.Len())
		rec, err := buildRecord(sw.mem, sw.schema, rows, from, to, &sw.dict)
		if err != nil {
			return fmt.Errorf("writing arrow stream: %w", err)
		}
		err = sw.iw.Write(rec)
		rec.Release()
		if err != nil {
			sw.err = fmt.Errorf("writing arrow stream: %w", err)
			return sw.err
		}
	}
	return nil
}

// Close writes the end-of-stream marker, telling readers the job finished
// writing. It does not close the underlying writer. Closing twice is a no-op.
func (sw *StreamWriter) Close() error {
	if sw.closed {
		return nil
	}
	sw.closed = true
	defer sw.dict.release()
	err := sw.iw.Close()
	if sw.err != nil {
		return sw.err
	}
	if err != nil {
		return fmt.Errorf("closing arrow stream: %w", err)
	}
	return nil
}

// payloadWriter writes IPC payloads straight to w, with no buffering, after
// dropping the first skip payloads.
type payloadWriter struct {
	w    io.Writer
	skip int
}

// eos is the end-of-stream marker: a continuation token and a zero length.
var eos = [8]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// Start does nothing: a stream has no header before its schema.
func (p *payloadWriter) Start() error { return nil }

// WritePayload writes one message (metadata and body) to w.
func (p *payloadWriter) WritePayload(pl ipc.Payload) error {
	if p.skip > 0 {
		p.skip--
		return nil
	}
	_, err := pl.WritePayload(p.w)
	return err
}

// Close writes the end-of-stream marker.
func (p *payloadWriter) Close() error {
	_, err := p.w.Write(eos[:])
	return err
}
