//go:build cgo

// Package fakecuda builds and drives a fake CUDA library, so the collector's
// CUDA clock can be tested on machines without a GPU. Tests only.
package fakecuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef void (*fn_manual)(int, int64_t);
typedef void (*fn_i64)(int64_t);
typedef void (*fn_clock)(double, int64_t);
typedef void (*fn_int)(int);
typedef void (*fn_launch)(uintptr_t, int64_t);
typedef int64_t (*fn_evts)(uintptr_t);
typedef long (*fn_count)(const char*);
typedef long (*fn_long)(void);
typedef void (*fn_void)(void);
typedef int (*fn_stream_create)(void**, unsigned);

static void call_manual(void* f, int on, int64_t now) { ((fn_manual)f)(on, now); }
static void call_i64(void* f, int64_t v) { ((fn_i64)f)(v); }
static void call_clock(void* f, double ppm, int64_t off) { ((fn_clock)f)(ppm, off); }
static void call_int(void* f, int v) { ((fn_int)f)(v); }
static void call_launch(void* f, uintptr_t s, int64_t d) { ((fn_launch)f)(s, d); }
static int64_t call_evts(void* f, uintptr_t ev) { return ((fn_evts)f)(ev); }
static long call_count(void* f, const char* n) { return ((fn_count)f)(n); }
static long call_long(void* f) { return ((fn_long)f)(); }
static void call_void(void* f) { ((fn_void)f)(); }
static uintptr_t call_stream_create(void* f) {
	void* s = 0;
	((fn_stream_create)f)(&s, 1);
	return (uintptr_t)s;
}
*/
import "C"

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"unsafe"
)

//go:embed testdata/fakecudart.c
var source []byte

// Build compiles the fake library into dir with the C compiler (gcc, or
// $CC) and returns its path. It fails when there is no compiler.
func Build(dir string) (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("no C compiler: %w", err)
	}
	src := filepath.Join(dir, "fakecudart.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libfakecudart.so")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", lib, src, "-lpthread").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("compiling the fake CUDA library: %v\n%s", err, out)
	}
	return lib, nil
}

// Lib is the fake library loaded into this process (the same copy the
// collector dlopens by the same path).
type Lib struct {
	h   unsafe.Pointer
	sym map[string]unsafe.Pointer
}

// Open dlopens the fake library at path.
func Open(path string) (*Lib, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	h := C.dlopen(cpath, C.RTLD_NOW|C.RTLD_LOCAL)
	if h == nil {
		return nil, fmt.Errorf("dlopen %s: %s", path, C.GoString(C.dlerror()))
	}
	l := &Lib{h: h, sym: map[string]unsafe.Pointer{}}
	for _, name := range []string{"fake_set_manual", "fake_advance", "fake_set_clock", "fake_set_visible_delay",
		"fake_set_devices", "fake_launch", "fake_event_device_ns", "fake_count", "fake_thread_count",
		"fake_live_events", "fake_reset_counts", "cudaStreamCreateWithFlags"} {
		cname := C.CString(name)
		p := C.dlsym(h, cname)
		C.free(unsafe.Pointer(cname))
		if p == nil {
			return nil, fmt.Errorf("%s: no symbol %s", path, name)
		}
		l.sym[name] = p
	}
	return l, nil
}

// SetManual switches to manual time (true), starting at now ns, or back
// to CLOCK_MONOTONIC.
func (l *Lib) SetManual(on bool, now int64) {
	v := 0
	if on {
		v = 1
	}
	C.call_manual(l.sym["fake_set_manual"], C.int(v), C.int64_t(now))
}

// Advance moves manual time forward by ns.
func (l *Lib) Advance(ns int64) { C.call_i64(l.sym["fake_advance"], C.int64_t(ns)) }

// SetClock sets the device clock: device = host + offset + host*ppm/1e6.
func (l *Lib) SetClock(ppm float64, offset int64) {
	C.call_clock(l.sym["fake_set_clock"], C.double(ppm), C.int64_t(offset))
}

// SetVisibleDelay sets how long after it executes an event reads complete.
func (l *Lib) SetVisibleDelay(ns int64) { C.call_i64(l.sym["fake_set_visible_delay"], C.int64_t(ns)) }

// SetDevices sets the number of devices the library reports.
func (l *Lib) SetDevices(n int) { C.call_int(l.sym["fake_set_devices"], C.int(n)) }

// Launch enqueues a kernel of dur ns on stream (0: the default stream).
func (l *Lib) Launch(stream uintptr, dur int64) {
	C.call_launch(l.sym["fake_launch"], C.uintptr_t(stream), C.int64_t(dur))
}

// StreamCreate creates a stream.
func (l *Lib) StreamCreate() uintptr {
	return uintptr(C.call_stream_create(l.sym["cudaStreamCreateWithFlags"]))
}

// Count returns how many calls of a kind were made in the process:
// event_create, event_destroy, event_record, event_query, elapsed_time,
// stream_create, stream_destroy, set_device, bad_handle.
func (l *Lib) Count(name string) int64 {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return int64(C.call_count(l.sym["fake_count"], c))
}

// ThreadCount is Count for calls made on the calling OS thread (lock it).
func (l *Lib) ThreadCount(name string) int64 {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return int64(C.call_count(l.sym["fake_thread_count"], c))
}

// LiveEvents returns how many events exist (created, not destroyed).
func (l *Lib) LiveEvents() int64 { return int64(C.call_long(l.sym["fake_live_events"])) }

// ResetCounts zeroes the process counts and the calling thread's.
func (l *Lib) ResetCounts() { C.call_void(l.sym["fake_reset_counts"]) }
