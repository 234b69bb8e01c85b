//go:build cgo

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
void ppc_set_handle(int h, uintptr_t ctl);
void ppc_allow_kind(int k);
void ppc_set_opt_skip(int k);
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ppprof/ppprof/collector"
	"github.com/ppprof/ppprof/collector/internal/ringapi"
	"github.com/ppprof/ppprof/trace"
)

func main() {}

// init runs when the library is loaded: recorders keep their rings in C
// memory, which hot.c writes, and hot.c learns the kinds there are.
func init() {
	ringapi.CMemory.Store(true)
	for k := 1; k < 1<<13; k++ {
		if trace.Kind(k).Valid() {
			C.ppc_allow_kind(C.int(k))
		}
	}
	C.ppc_set_opt_skip(C.int(collector.KindOptSkip))
}

// maxHandles bounds the recorders open at once in a process.
const maxHandles = 64

// handle is one open recorder and the CUDA clock it owns, if any.
type handle struct {
	r    *collector.Recorder
	cuda *collector.CUDAClock
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
		cfg.Clock = collector.NewVirtualClock(spec.virtualStart)
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
	C.ppc_set_handle(C.int(slot+1), C.uintptr_t(ringapi.Ctl(r)))
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
	C.ppc_allow_kind(C.int(k))
	return C.int(k)
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
	C.ppc_set_handle(h, 0)
	handleMu.Unlock()
	err := hd.r.Close()
	hd.closeClock()
	if err != nil {
		return fail(C.PPPROF_EIO, err)
	}
	return C.PPPROF_OK
}

// ppprofLabelID interns a shape or dtype label for hot.c, which caches it.
//
//export ppprofLabelID
func ppprofLabelID(s *C.char) C.uint32_t { return C.uint32_t(ringapi.LabelID(C.GoString(s))) }

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
