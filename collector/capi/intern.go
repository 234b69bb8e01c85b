//go:build cgo

package main

import "C"

import (
	"sync"
	"unicode/utf8"
	"unsafe"
)

// Shapes and dtypes come from C as NUL-terminated strings on the hot path.
// They repeat (a handful per job), so they are interned: looking a C
// string up allocates nothing; only the first sight of one copies it.
var internTable = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

// Bounds: a longer string is cut, and past maxInterned distinct strings new
// ones are copied per call instead of kept.
const (
	maxInternLen = 256
	maxInterned  = 4096
)

// intern returns the Go string equal to the C string p ("" for NULL).
func intern(p *C.char) string {
	if p == nil {
		return ""
	}
	base := unsafe.Pointer(p)
	n := 0
	for n < maxInternLen && *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	if n == 0 {
		return ""
	}
	b := unsafe.Slice((*byte)(base), n)
	internTable.RLock()
	s, ok := internTable.m[string(b)]
	internTable.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	if !utf8.ValidString(s) {
		return s // refused by the recorder's check, with a message
	}
	internTable.Lock()
	if len(internTable.m) < maxInterned {
		internTable.m[s] = s
	}
	internTable.Unlock()
	return s
}
