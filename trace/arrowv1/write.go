package arrowv1

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
)

// WriteFile writes t to w in the Arrow IPC file format (random access): the
// magic, the schema, one kind dictionary built from the whole trace (the
// file format allows no replacement), record batches of opt.BatchRows rows,
// and the footer, written last. A trace with no rows gives a valid file with
// no batches.
func WriteFile(w io.Writer, t *trace.Trace, opt Options) error {
	return writeFile(w, t, opt, memory.DefaultAllocator)
}

func writeFile(w io.Writer, t *trace.Trace, opt Options, mem memory.Allocator) (err error) {
	opts, err := opt.ipcOptions()
	if err != nil {
		return err
	}
	var dict kindDict
	defer dict.release()
	if err := dict.addAll(t.Kind); err != nil {
		return err
	}
	schema := Schema(t.Meta)
	fw, err := ipc.NewFileWriter(w, append(opts, ipc.WithSchema(schema), ipc.WithAllocator(mem))...)
	if err != nil {
		return fmt.Errorf("writing arrow file: %w", err)
	}
	defer func() {
		if cerr := fw.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("writing arrow file footer: %w", cerr)
		}
	}()
	step := opt.batchRows()
	for from := 0; from < t.Len(); from += step {
		to := min(from+step, t.Len())
		if err := writeBatch(fw.Write, mem, schema, t, from, to, &dict); err != nil {
			return fmt.Errorf("writing arrow file: %w", err)
		}
		if opt.Progress != nil {
			opt.Progress(to, t.Len())
		}
	}
	return nil
}

// WriteStream writes t to w in the Arrow IPC stream format: the schema, one
// kind dictionary built from the whole trace, record batches of
// opt.BatchRows rows, and the end-of-stream marker.
func WriteStream(w io.Writer, t *trace.Trace, opt Options) error {
	return writeStream(w, t, opt, memory.DefaultAllocator)
}

func writeStream(w io.Writer, t *trace.Trace, opt Options, mem memory.Allocator) (err error) {
	sw, err := newStreamWriter(w, t.Meta, opt, mem)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sw.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := sw.dict.addAll(t.Kind); err != nil {
		return err
	}
	return sw.Write(t)
}

// writeBatch encodes rows [from, to) of t and hands the record to write.
func writeBatch(write func(arrow.RecordBatch) error, mem memory.Allocator, schema *arrow.Schema, t *trace.Trace, from, to int, dict *kindDict) error {
	rec, err := buildRecord(mem, schema, t, from, to, dict)
	if err != nil {
		return err
	}
	defer rec.Release()
	return write(rec)
}
