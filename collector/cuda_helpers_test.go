package collector

import (
	"os"
	"unsafe"
)

// tempDirNoCleanup makes a directory that outlives one test: the fake CUDA
// library is loaded for the whole test binary.
func tempDirNoCleanup() (string, error) { return os.MkdirTemp("", "ppprof-fakecuda") }

func uintptrOf(p *[64]byte) uintptr { return uintptr(unsafe.Pointer(p)) }
