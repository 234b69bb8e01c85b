//go:build cgo

package collector

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

static void* ppc_sym(void* lib, const char* a, const char* b) {
	void* p = dlsym(lib, a);
	if (!p && b) p = dlsym(lib, b);
	return p;
}

// ppc_open loads path and resolves the entry points of the requested API
// (0 auto, 1 runtime, 2 driver). It returns 0, or: 1 the library did not
// load, 2 it lacks the API's symbols. dlerror's text goes to err.
static int ppc_open(ppc_api* a, const char* path, int want, char* err, size_t errlen) {
	memset(a, 0, sizeof *a);
	a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!a->lib) {
		const char* e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return 1;
	}
	if (want != 2 && dlsym(a->lib, "cudaEventCreateWithFlags")) {
		a->eventCreate = ppc_sym(a->lib, "cudaEventCreateWithFlags", 0);
		a->eventDestroy = ppc_sym(a->lib, "cudaEventDestroy", 0);
		a->eventRecord = ppc_sym(a->lib, "cudaEventRecord", 0);
		a->eventQuery = ppc_sym(a->lib, "cudaEventQuery", 0);
		a->eventElapsed = ppc_sym(a->lib, "cudaEventElapsedTime", 0);
		a->streamCreate = ppc_sym(a->lib, "cudaStreamCreateWithFlags", 0);
		a->streamDestroy = ppc_sym(a->lib, "cudaStreamDestroy", 0);
		a->getDeviceCount = ppc_sym(a->lib, "cudaGetDeviceCount", 0);
		a->setDevice = ppc_sym(a->lib, "cudaSetDevice", 0);
		a->rtErrorString = ppc_sym(a->lib, "cudaGetErrorString", 0);
		if (a->eventCreate && a->eventDestroy && a->eventRecord && a->eventQuery && a->eventElapsed &&
		    a->streamCreate && a->streamDestroy && a->getDeviceCount && a->setDevice) {
			return 0;
		}
	}
	if (want != 1 && dlsym(a->lib, "cuEventCreate")) {
		a->driver = 1;
		a->eventCreate = ppc_sym(a->lib, "cuEventCreate", 0);
		a->eventDestroy = ppc_sym(a->lib, "cuEventDestroy_v2", "cuEventDestroy");
		a->eventRecord = ppc_sym(a->lib, "cuEventRecord", 0);
		a->eventQuery = ppc_sym(a->lib, "cuEventQuery", 0);
		a->eventElapsed = ppc_sym(a->lib, "cuEventElapsedTime_v2", "cuEventElapsedTime");
		a->streamCreate = ppc_sym(a->lib, "cuStreamCreate", 0);
		a->streamDestroy = ppc_sym(a->lib, "cuStreamDestroy_v2", "cuStreamDestroy");
		a->init = ppc_sym(a->lib, "cuInit", 0);
		a->getDeviceCount = ppc_sym(a->lib, "cuDeviceGetCount", 0);
		a->deviceGet = ppc_sym(a->lib, "cuDeviceGet", 0);
		a->primaryCtxRetain = ppc_sym(a->lib, "cuDevicePrimaryCtxRetain", 0);
		a->primaryCtxRelease = ppc_sym(a->lib, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
		a->ctxSetCurrent = ppc_sym(a->lib, "cuCtxSetCurrent", 0);
		a->drvErrorString = ppc_sym(a->lib, "cuGetErrorString", 0);
		if (a->eventCreate && a->eventDestroy && a->eventRecord && a->eventQuery && a->eventElapsed &&
		    a->streamCreate && a->streamDestroy && a->init && a->getDeviceCount && a->deviceGet &&
		    a->primaryCtxRetain && a->ctxSetCurrent) {
			return 0;
		}
	}
	dlclose(a->lib);
	a->lib = 0;
	strncpy(err, "no CUDA event functions in the library", errlen - 1);
	err[errlen - 1] = 0;
	return 2;
}

static int ppc_device_count(ppc_api* a, int* n) {
	if (a->driver) {
		int rc = a->init(0);
		if (rc) return rc;
	}
	return a->getDeviceCount(n);
}

static int ppc_setup(ppc_api* a, int device) {
	a->device = device;
	if (!a->driver) return 0;
	int dev = 0;
	int rc = a->deviceGet(&dev, device);
	if (rc) return rc;
	return a->primaryCtxRetain(&a->ctx, dev);
}

static int ppc_bind(ppc_api* a) {
	return a->driver ? a->ctxSetCurrent(a->ctx) : a->setDevice(a->device);
}

static int ppc_event_create(ppc_api* a, uintptr_t* ev) {
	void* e = 0;
	int rc = a->eventCreate(&e, 0); // default flags: timing enabled, no blocking sync
	*ev = (uintptr_t)e;
	return rc;
}
static int ppc_event_destroy(ppc_api* a, uintptr_t ev) { return a->eventDestroy((void*)ev); }
static int ppc_event_record(ppc_api* a, uintptr_t ev, uintptr_t s) { return a->eventRecord((void*)ev, (void*)s); }
static int ppc_event_query(ppc_api* a, uintptr_t ev) { return a->eventQuery((void*)ev); }
static int ppc_elapsed(ppc_api* a, uintptr_t start, uintptr_t end, float* ms) {
	return a->eventElapsed(ms, (void*)start, (void*)end);
}
static int ppc_stream_create(ppc_api* a, uintptr_t* s) {
	void* p = 0;
	int rc = a->streamCreate(&p, 1); // cudaStreamNonBlocking / CU_STREAM_NON_BLOCKING
	*s = (uintptr_t)p;
	return rc;
}
static int ppc_stream_destroy(ppc_api* a, uintptr_t s) { return a->streamDestroy((void*)s); }

static const char* ppc_error_string(ppc_api* a, int code) {
	if (a->driver) {
		const char* s = 0;
		if (a->drvErrorString && a->drvErrorString(code, &s) == 0) return s;
		return 0;
	}
	return a->rtErrorString ? a->rtErrorString(code) : 0;
}

static void ppc_close(ppc_api* a) {
	if (a->driver && a->ctx && a->primaryCtxRelease) {
		int dev = 0;
		if (a->deviceGet(&dev, a->device) == 0) a->primaryCtxRelease(dev);
	}
	// The library stays loaded: another user in the process (PyTorch) may
	// hold it, and unloading CUDA at run time is not supported anyway.
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// cudaNotReady is cudaErrorNotReady and CUDA_ERROR_NOT_READY: the event has
// not completed yet.
const cudaNotReady = 600

// dlAPI is cudaAPI over function pointers found with dlopen and dlsym.
type dlAPI struct {
	a    *C.ppc_api // C memory: passed to C freely
	desc string
}

// defaultCUDALibraries are tried in order when CUDAOptions.Library is "".
var defaultCUDALibraries = []string{"libcudart.so", "libcudart.so.12", "libcudart.so.11.0", "libcuda.so.1", "libcuda.so"}

func openCUDAAPI(opt CUDAOptions) (cudaAPI, error) {
	want := C.int(0)
	switch opt.API {
	case "":
	case "runtime":
		want = 1
	case "driver":
		want = 2
	default:
		return nil, fmt.Errorf("cuda api %q: want runtime, driver or empty", opt.API)
	}
	libs := defaultCUDALibraries
	if opt.Library != "" {
		libs = []string{opt.Library}
	}
	var errs []string
	for _, lib := range libs {
		api, err := openDL(lib, want, opt.Device)
		if err == nil {
			return api, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, fmt.Errorf("%w: %v", ErrNoCUDA, errs)
}

func openDL(lib string, want C.int, device int) (*dlAPI, error) {
	a := (*C.ppc_api)(C.calloc(1, C.sizeof_ppc_api))
	cpath := C.CString(lib)
	defer C.free(unsafe.Pointer(cpath))
	var msg [512]C.char
	if rc := C.ppc_open(a, cpath, want, &msg[0], C.size_t(len(msg))); rc != 0 {
		C.free(unsafe.Pointer(a))
		return nil, fmt.Errorf("%s: %s", lib, C.GoString(&msg[0]))
	}
	d := &dlAPI{a: a}
	fail := func(err error) (*dlAPI, error) {
		C.free(unsafe.Pointer(a))
		return nil, fmt.Errorf("%s: %w", lib, err)
	}
	var n C.int
	if err := d.check("device count", C.ppc_device_count(a, &n)); err != nil {
		return fail(err)
	}
	if device < 0 || device >= int(n) {
		return fail(fmt.Errorf("device %d: the library sees %d CUDA devices", device, int(n)))
	}
	if err := d.check("device setup", C.ppc_setup(a, C.int(device))); err != nil {
		return fail(err)
	}
	api := "runtime"
	if a.driver != 0 {
		api = "driver"
	}
	d.desc = fmt.Sprintf("%s (%s API, device %d)", lib, api, device)
	return d, nil
}

func (d *dlAPI) check(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	e := &cudaError{call: call, code: int(rc)}
	if s := C.ppc_error_string(d.a, rc); s != nil {
		e.msg = C.GoString(s)
	}
	return e
}

func (d *dlAPI) bindThread() error { return d.check("bind device", C.ppc_bind(d.a)) }

func (d *dlAPI) eventCreate() (uintptr, error) {
	var ev C.uintptr_t
	if err := d.check("event create", C.ppc_event_create(d.a, &ev)); err != nil {
		return 0, err
	}
	return uintptr(ev), nil
}

func (d *dlAPI) eventDestroy(ev uintptr) { C.ppc_event_destroy(d.a, C.uintptr_t(ev)) }

func (d *dlAPI) eventRecord(ev uintptr, s Stream) error {
	if rc := C.ppc_event_record(d.a, C.uintptr_t(ev), C.uintptr_t(s)); rc != 0 {
		return d.check("event record", rc)
	}
	return nil
}

func (d *dlAPI) eventQuery(ev uintptr) (bool, error) {
	switch rc := C.ppc_event_query(d.a, C.uintptr_t(ev)); rc {
	case 0:
		return true, nil
	case cudaNotReady:
		return false, nil
	default:
		return false, d.check("event query", rc)
	}
}

func (d *dlAPI) elapsedMs(start, end uintptr) (float32, error) {
	var ms C.float
	if err := d.check("event elapsed time", C.ppc_elapsed(d.a, C.uintptr_t(start), C.uintptr_t(end), &ms)); err != nil {
		return 0, err
	}
	return float32(ms), nil
}

func (d *dlAPI) streamCreate() (Stream, error) {
	var s C.uintptr_t
	if err := d.check("stream create", C.ppc_stream_create(d.a, &s)); err != nil {
		return 0, err
	}
	return Stream(s), nil
}

func (d *dlAPI) streamDestroy(s Stream) { C.ppc_stream_destroy(d.a, C.uintptr_t(s)) }

func (d *dlAPI) describe() string { return d.desc }

func (d *dlAPI) table() uintptr { return uintptr(unsafe.Pointer(d.a)) }

func (d *dlAPI) close() {
	C.ppc_close(d.a)
	C.free(unsafe.Pointer(d.a))
	d.a = nil
}
