//go:build !linux

package hugepage

const supported = false

func advise(start, n uintptr) {}
