/*
 * cuda.h: the CUDA entry points the collector finds with dlsym
 * (cuda_cgo.go), shared with the C ABI's hot path (capi/hot.c), which
 * records events through them without entering Go.
 */
#ifndef PPPROF_CUDA_H
#define PPPROF_CUDA_H

// ppc_api holds the CUDA entry points found with dlsym. The runtime API
// (libcudart) and the driver API (libcuda) share these signatures.
typedef struct {
	void* lib;
	int driver;
	int device;
	void* ctx; // driver API: the device's primary context
	int (*eventCreate)(void**, unsigned);
	int (*eventDestroy)(void*);
	int (*eventRecord)(void*, void*);
	int (*eventQuery)(void*);
	int (*eventElapsed)(float*, void*, void*);
	int (*streamCreate)(void**, unsigned);
	int (*streamDestroy)(void*);
	int (*getDeviceCount)(int*);
	int (*setDevice)(int);
	int (*init)(unsigned);
	int (*deviceGet)(int*, int);
	int (*primaryCtxRetain)(void**, int);
	int (*primaryCtxRelease)(int);
	int (*ctxSetCurrent)(void*);
	const char* (*rtErrorString)(int);
	int (*drvErrorString)(int, const char**);
} ppc_api;

#endif
