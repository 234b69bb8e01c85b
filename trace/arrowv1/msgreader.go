package arrowv1

import (
	"io"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// frameReader hands verified frames to arrow-go as ipc.Messages. It
// implements ipc.MessageReader: each message is valid until the next call.
type frameReader struct {
	frames []frame
	next   int
	mem    memory.Allocator
	cur    *ipc.Message
	refs   atomic.Int64
}

// Message returns the next frame as a message, or io.EOF after the last.
func (r *frameReader) Message() (*ipc.Message, error) {
	r.releaseCur()
	if r.next == len(r.frames) {
		return nil, io.EOF
	}
	fr := r.frames[r.next]
	r.next++
	meta := memory.NewBufferBytes(fr.meta)
	var body *memory.Buffer
	if len(fr.body) > 0 && uintptr(unsafe.Pointer(&fr.body[0]))%8 != 0 {
		// Arrow buffers are read in place as []int64 and the like; copy a
		// body that does not start 8-byte aligned.
		body = memory.NewResizableBuffer(r.mem)
		body.Resize(len(fr.body))
		copy(body.Bytes(), fr.body)
	} else {
		body = memory.NewBufferBytes(fr.body)
	}
	r.cur = ipc.NewMessage(meta, body)
	meta.Release()
	body.Release()
	return r.cur, nil
}

func (r *frameReader) releaseCur() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

// Retain adds a reference.
func (r *frameReader) Retain() { r.refs.Add(1) }

// Release drops a reference, freeing the current message with the last.
func (r *frameReader) Release() {
	if r.refs.Add(-1) <= 0 {
		r.releaseCur()
	}
}
