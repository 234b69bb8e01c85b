// Command capi is the C ABI of the collector, built as a shared library:
//
//	go build -buildmode=c-shared -o libppprof.so ./collector/capi
//
// ppprof.h declares it; docs/collector.md shows it in use.
package main

/*
#define PPPROF_NO_PROTOTYPES
#include <stdint.h>
#include <stdlib.h>
#include "ppprof.h"

void ppprofSetLastError(const char* msg);
void ppprofRegisterAtexit(void);
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ppprof/ppprof/collector"
	"github.com/ppprof/ppprof/trace"
)

func main() {}

// maxHandles bounds the recorders open at once in a process.
const maxHandles = 64

// handle is one open recorder and the CUDA clock it owns, if any.
type handle struct {
	r       *collector.Recorder
	cuda    *collector.CUDAClock
	virtual *collector.VirtualClock
}

// handles[h-1] is handle h; nil when free.
var (
	handles  [maxHandles]atomic.Pointer[handle]
	handleMu sync.Mutex // serialises init and close
)

// get returns open handle h, or nil (setting the last error).
func get(h C.int) *handle {
	if h < 1 || h > maxHandles {
		setError(fmt.Sprintf("handle %d: no such recorder", int(h)))
		return nil
	}
	p := handles[h-1].Load()
	if p == nil {
		setError(fmt.Sprintf("handle %d: no open recorder (closed, or never opened)", int(h)))
	}
	return p
}

func setError(msg string) {
	c := C.CString(msg)
	C.ppprofSetLastError(c)
	C.free(unsafe.Pointer(c))
}

// fail sets the last error and returns code.
func fail(code C.int, err error) C.int {
	setError(err.Error())
	return code
}

//export ppprof_abi_version
func ppprof_abi_version() C.int { return C.PPPROF_ABI_VERSION }

//export ppprof_init
func ppprof_init(config *C.char) C.int {
	if config == nil {
		return fail(C.PPPROF_EINVAL, errors.New("config is NULL"))
	}
	cfg, spec, err := parseConfig(C.GoString(config))
	if err != nil {
		return fail(C.PPPROF_EINVAL, fmt.Errorf("config: %w", err))
	}
	hd := &handle{}
	switch spec.clock {
	case "host":
		cfg.Clock = collector.HostClock()
	case "virtual":
		hd.virtual = collector.NewVirtualClock(spec.virtualStart)
		cfg.Clock = hd.virtual
	case "cuda", "auto":
		c, err := collector.OpenCUDA(spec.cuda)
		switch {
		case err == nil:
			hd.cuda = c
			cfg.Clock = c
		case spec.clock == "auto" && errors.Is(err, collector.ErrNoCUDA):
			cfg.Clock = collector.HostClock()
		case errors.Is(err, collector.ErrNoCUDA):
			return fail(C.PPPROF_ENOCUDA, err)
		default:
			return fail(C.PPPROF_EINVAL, err)
		}
	}
	handleMu.Lock()
	defer handleMu.Unlock()
	slot := -1
	for i := range handles {
		if handles[i].Load() == nil {
			slot = i
			break
		}
	}
	if slot < 0 {
		hd.closeClock()
		return fail(C.PPPROF_EINVAL, fmt.Errorf("%d recorders already open", maxHandles))
	}
	r, err := collector.New(cfg)
	if err != nil {
		hd.closeClock()
		return fail(C.PPPROF_EIO, err)
	}
	hd.r = r
	handles[slot].Store(hd)
	C.ppprofRegisterAtexit()
	return C.int(slot + 1)
}

func (hd *handle) closeClock() {
	if hd.cuda != nil {
		hd.cuda.Close()
	}
}

//export ppprof_kind
func ppprof_kind(name *C.char) C.int {
	if name == nil {
		return fail(C.PPPROF_EINVAL, errors.New("kind name is NULL"))
	}
	k, err := trace.ParseKind(C.GoString(name))
	if err != nil {
		return fail(C.PPPROF_EINVAL, err)
	}
	return C.int(k)
}

// spanResult turns a Begin or Issue result into a C span: a span, 0 when
// the op was valid but not recorded, or -EINVAL with the reason.
func spanResult(s collector.Span, op *collector.Op, rank trace.Rank, p2p bool) C.ppprof_span {
	if s != collector.NoSpan {
		return C.ppprof_span(s)
	}
	if err := collector.CheckOp(*op, rank, p2p); err != nil {
		setError(err.Error())
		return C.PPPROF_EINVAL
	}
	return 0
}

//export ppprof_begin
func ppprof_begin(h C.int, kind C.int, step C.int64_t, mb C.int32_t, chunk C.int32_t, stream C.uint64_t) C.ppprof_span {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	op := collector.Op{Kind: trace.Kind(kind), Step: int64(step), MicroBatch: trace.MicroBatch(mb),
		Chunk: int32(chunk), Stream: collector.Stream(stream)}
	if kind <= 0 || kind > 0xffff {
		op.Kind = trace.KindInvalid
	}
	return spanResult(hd.r.Begin(op), &op, hd.r.Rank(), false)
}

//export ppprof_end
func ppprof_end(h C.int, span C.ppprof_span, stream C.uint64_t, memBytes C.int64_t) C.int {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	if span < 0 {
		return fail(C.PPPROF_EINVAL, fmt.Errorf("span %d: an error code, not a span", int64(span)))
	}
	hd.r.EndOn(collector.Span(span), collector.Stream(stream), int64(memBytes))
	return C.PPPROF_OK
}

//export ppprof_p2p_issue
func ppprof_p2p_issue(h C.int, kind C.int, peer C.int32_t, step C.int64_t, mb C.int32_t, chunk C.int32_t,
	bytes C.int64_t, shape *C.char, dtype *C.char, stream C.uint64_t) C.ppprof_span {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	op := collector.Op{Kind: trace.Kind(kind), Peer: trace.Rank(peer), Step: int64(step),
		MicroBatch: trace.MicroBatch(mb), Chunk: int32(chunk), Bytes: int64(bytes),
		Shape: intern(shape), Dtype: intern(dtype), Stream: collector.Stream(stream)}
	if kind <= 0 || kind > 0xffff {
		op.Kind = trace.KindInvalid
	}
	return spanResult(hd.r.Issue(op), &op, hd.r.Rank(), true)
}

//export ppprof_p2p_complete
func ppprof_p2p_complete(h C.int, span C.ppprof_span, stream C.uint64_t) C.int {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	if span < 0 {
		return fail(C.PPPROF_EINVAL, fmt.Errorf("span %d: an error code, not a span", int64(span)))
	}
	hd.r.CompleteOn(collector.Span(span), collector.Stream(stream))
	return C.PPPROF_OK
}

//export ppprof_opt_begin
func ppprof_opt_begin(h C.int, step C.int64_t, stream C.uint64_t) C.ppprof_span {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	s := hd.r.OptimizerBegin(int64(step), collector.Stream(stream))
	op := collector.Op{Kind: trace.Opt, Step: int64(step), MicroBatch: trace.NoMicroBatch}
	return spanResult(s, &op, hd.r.Rank(), false)
}

//export ppprof_opt_end
func ppprof_opt_end(h C.int, span C.ppprof_span, skipped C.int) C.int {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	if span < 0 {
		return fail(C.PPPROF_EINVAL, fmt.Errorf("span %d: an error code, not a span", int64(span)))
	}
	hd.r.OptimizerEnd(collector.Span(span), skipped != 0)
	return C.PPPROF_OK
}

//export ppprof_step
func ppprof_step(h C.int, step C.int64_t) C.int {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	if step < 0 {
		return fail(C.PPPROF_EINVAL, fmt.Errorf("step %d: want >= 0", int64(step)))
	}
	hd.r.Step(int64(step))
	return C.PPPROF_OK
}

//export ppprof_set_time
func ppprof_set_time(h C.int, ns C.int64_t) C.int {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	if hd.virtual == nil {
		return fail(C.PPPROF_EINVAL, errors.New("set_time needs clock=virtual"))
	}
	hd.virtual.Set(int64(ns))
	return C.PPPROF_OK
}

//export ppprof_flush
func ppprof_flush(h C.int) C.int {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	if err := hd.r.Flush(); err != nil {
		return fail(C.PPPROF_EIO, err)
	}
	return C.PPPROF_OK
}

//export ppprof_dump_pending
func ppprof_dump_pending(h C.int) C.int {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	if err := hd.r.DumpPending(); err != nil {
		return fail(C.PPPROF_EIO, err)
	}
	return C.PPPROF_OK
}

//export ppprof_stats_get
func ppprof_stats_get(h C.int, out *C.ppprof_stats) C.int {
	hd := get(h)
	if hd == nil {
		return C.PPPROF_EHANDLE
	}
	if out == nil {
		return fail(C.PPPROF_EINVAL, errors.New("stats pointer is NULL"))
	}
	st := hd.r.Stats()
	out.recorded = C.int64_t(st.Recorded)
	out.written = C.int64_t(st.Written)
	out.dropped = C.int64_t(st.Dropped)
	out.rejected = C.int64_t(st.Rejected)
	out.abandoned = C.int64_t(st.Abandoned)
	out.device_errors = C.int64_t(st.DeviceErrors)
	out.watchdog = C.int64_t(st.Watchdog)
	return C.PPPROF_OK
}

//export ppprof_close
func ppprof_close(h C.int) C.int {
	handleMu.Lock()
	hd := get(h)
	if hd == nil {
		handleMu.Unlock()
		return C.PPPROF_EHANDLE
	}
	handles[h-1].Store(nil)
	handleMu.Unlock()
	err := hd.r.Close()
	hd.closeClock()
	if err != nil {
		return fail(C.PPPROF_EIO, err)
	}
	return C.PPPROF_OK
}

// ppprofCloseAll closes every open recorder: the atexit hook.
//
//export ppprofCloseAll
func ppprofCloseAll() {
	for i := range handles {
		if handles[i].Load() != nil {
			ppprof_close(C.int(i + 1))
		}
	}
}
