package collector

import (
	"os"
	"unsafe"
)

// tempDirNoCleanup makes a directory that outlives one test: the fake CUDA
// library is loaded for the whole test binary.
// TestMain removes it (removeFakeDir).
func tempDirNoCleanup() (string, error) {
	d, err := os.MkdirTemp("", "ppprof-fakecuda")
	fakeDir = d
	return d, err
}

var fakeDir string

func removeFakeDir() {
	if fakeDir != "" {
		os.RemoveAll(fakeDir)
	}
}

func uintptrOf(p *[64]byte) uintptr { return uintptr(unsafe.Pointer(p)) }
