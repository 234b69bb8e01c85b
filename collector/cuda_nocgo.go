//go:build !cgo

package collector

import "fmt"

// openCUDAAPI without cgo: dlopen needs cgo, so there is no CUDA clock. The
// host and virtual clocks work as usual.
func openCUDAAPI(CUDAOptions) (cudaAPI, error) {
	return nil, fmt.Errorf("%w: this binary was built without cgo (CGO_ENABLED=0)", ErrNoCUDA)
}
