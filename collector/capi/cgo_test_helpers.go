package main

// Go-callable wrappers of the exported functions, for capi_test.go (test
// files cannot use cgo). The linker drops them from the library.

/*
#define PPPROF_NO_PROTOTYPES
#include <stdlib.h>
#include <stdint.h>
#include "ppprof.h"
const char* ppprof_last_error(void);
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
	return int64(ppprof_begin(C.int(h), C.int(kind), C.int64_t(step), C.int32_t(mb), 0, 0))
}

func endGo(h int, span int64) int {
	return int(ppprof_end(C.int(h), C.ppprof_span(span), C.PPPROF_SAME_STREAM, 0))
}

func setTimeGo(h int, ns int64) int { return int(ppprof_set_time(C.int(h), C.int64_t(ns))) }

func closeGo(h int) int { return int(ppprof_close(C.int(h))) }
