//go:build !unix

package hang

func cpuTime() int64 { return -1 }
