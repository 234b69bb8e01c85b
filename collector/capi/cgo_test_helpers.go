//go:build cgo

package main

// Go-callable wrappers of the exported functions, for capi_test.go (test
// files cannot use cgo). The linker drops them from the library.

/*
#define PPPROF_NO_PROTOTYPES
#include <stdlib.h>
#include <stdint.h>
#include "ppprof.h"
const char* ppprof_last_error(void);
int64_t ppprof_begin(int h, int kind, int64_t step, int32_t microbatch, int32_t chunk, uint64_t stream);
int ppprof_end(int h, int64_t span, uint64_t stream, int64_t mem_bytes);
int ppprof_set_time(int h, int64_t ns);
*/
import "C"

import "unsafe"

func initGo(config string) int {
	c := C.CString(config)
	defer C.free(unsafe.Pointer(c))
	return int(ppprof_init(c))
}

func lastError() string { return C.GoString(C.ppprof_last_error()) }

func beginGo(h, kind int, step int64, mb int32) int64 {
	return int64(C.ppprof_begin(C.int(h), C.int(kind), C.int64_t(step), C.int32_t(mb), 0, 0))
}

func beginOnGo(h, kind int, step int64, mb int32, stream uint64) int64 {
	return int64(C.ppprof_begin(C.int(h), C.int(kind), C.int64_t(step), C.int32_t(mb), 0, C.uint64_t(stream)))
}

func endGo(h int, span int64) int {
	return int(C.ppprof_end(C.int(h), C.int64_t(span), C.PPPROF_SAME_STREAM, 0))
}

func setTimeGo(h int, ns int64) int { return int(C.ppprof_set_time(C.int(h), C.int64_t(ns))) }

func closeGo(h int) int { return int(ppprof_close(C.int(h))) }
