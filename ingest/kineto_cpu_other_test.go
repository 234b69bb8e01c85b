//go:build !unix

package ingest

// benchCPUSeconds is unknown here: the benchmark leaves MB/cpu-s out.
func benchCPUSeconds() float64 { return 0 }
